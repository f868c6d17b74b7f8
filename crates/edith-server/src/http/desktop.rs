//! `…/instances/{instance_id}/desktop/{path}`: the Desktop routes of the instance's runtime,
//! forwarded (see `app::desktop`). Reading needs `read`; changing anything on the runtime
//! (profiles, files, configuration) needs `admin`, and so does reading its files, git
//! repositories or configuration (`app::desktop` checks that per route).

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::Response;
use axum::routing::{MethodRouter, delete, get, patch, post, put};
use edith_types::{InstanceId, Scope};
use serde_json::Value;

use super::extract::Ids;
use super::spec::{Api, Op};
use crate::app::desktop::{self, Forward};
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

const PATH: &str = "/v1/instances/{instance_id}/desktop/{*path}";
const PASSES: &str = "contracts/hermes-desktop.routes.json";

pub fn routes(api: &mut Api) {
    let read = "Call a Desktop route (`GET /api/…`) of the instance's runtime, as the SDK's \
                `HermesDesktop` does; only the routes of the pinned Desktop contract pass. The \
                runtime's reply (status and body) comes back as it is. The file, git and config \
                routes need `admin` even to read.";
    let change = "Call a Desktop route that changes something (`POST`/`PUT`/`PATCH`/`DELETE \
                  /api/…`) on the instance's runtime; only the routes of the pinned Desktop \
                  contract pass. The runtime's reply comes back as it is.";
    let ops: [(Op, MethodRouter<AppState>); 5] = [
        (
            Op::get(PATH, "desktop_get").summary(read).on_owner(),
            get(forward),
        ),
        (
            Op::post(PATH, "desktop_post").summary(change),
            post(forward),
        ),
        (Op::put(PATH, "desktop_put").summary(change), put(forward)),
        (
            Op::patch(PATH, "desktop_patch").summary(change),
            patch(forward),
        ),
        (
            Op::delete(PATH, "desktop_delete").summary(change),
            delete(forward),
        ),
    ];
    for (op, handler) in ops {
        let op = if op.is_read() {
            op
        } else {
            op.scope(Scope::Admin)
        };
        let op = op
            .passthrough(PASSES)
            .returns::<Value>(api, 200, "The runtime's reply.");
        api.add(op, handler);
    }
}

async fn forward(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> AppResult<Response> {
    let instance: InstanceId = ids.get("instance_id")?;
    // The path as sent, still percent-encoded: decoding it would change what `%2F` means.
    let prefix = format!("/v1/instances/{instance}/desktop");
    let path = uri
        .path()
        .strip_prefix(&prefix)
        .ok_or_else(|| AppError::internal("a desktop route without its prefix"))?;
    let forward = Forward {
        method,
        path: path.to_owned(),
        query: uri.query().map(str::to_owned),
        content_type: headers.get(header::CONTENT_TYPE).cloned(),
        body,
    };
    desktop::forward(&state, &caller, &instance, forward).await
}
