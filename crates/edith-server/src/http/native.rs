//! `native_call`: one native gateway call on an instance's runtime.

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use edith_types::{NativeCall, NativeReply};

use super::extract::{ApiJson, Ids};
use super::spec::{Api, Op};
use crate::app::native;
use crate::auth::Principal;
use crate::error::AppResult;
use crate::state::AppState;

pub fn routes(api: &mut Api) {
    let op = Op::post("/v1/instances/{instance_id}/native/rpc", "native_call")
        .summary(
            "Call one native Hermes gateway method on the instance's runtime. Profile-scoped \
             methods get the profile's native name; methods the runtime lacks are `unsupported`.",
        )
        .body::<NativeCall>(api)
        .returns::<NativeReply>(api, 200, "The method's result.");
    api.add(op, post(native_call));
}

async fn native_call(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
    ApiJson(body): ApiJson<NativeCall>,
) -> AppResult<Json<NativeReply>> {
    let reply = native::call(&state, &caller, &ids.get("instance_id")?, body).await?;
    Ok(Json(reply))
}
