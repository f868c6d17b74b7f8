//! `profile_gateway`: the WebSocket relay to a profile's native gateway (`app::relay`).

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::response::Response;
use axum::routing::get;
use edith_types::relay::RelayResume;
use edith_types::{ProfileId, RelayMessage, Scope};
use serde_json::json;

use super::extract::{ApiQuery, Ids};
use super::spec::{Api, Op};
use crate::app::relay;
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

const PROFILE_GATEWAY: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/gateway";

pub fn routes(api: &mut Api) {
    let op = Op::get(PROFILE_GATEWAY, "profile_gateway")
        .scope(Scope::Write)
        .on_owner()
        .summary(
            "A WebSocket to the profile's native Hermes gateway: send native JSON-RPC requests, \
             receive numbered frames (replies and events); resume a dropped connection within \
             60 s with `?connection=&after=` and get what was missed, none twice.",
        )
        .query(
            "connection",
            "The connection to resume (from its `attached` message).",
            json!({"type": "string"}),
        )
        .query(
            "after",
            "With `connection`: the last frame sequence number the client saw.",
            json!({"type": "integer", "minimum": 0}),
        )
        .upgrades::<RelayMessage>(api, "Switches to the WebSocket relay.");
    api.add(op, get(gateway));
}

async fn gateway(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
    ApiQuery(resume): ApiQuery<RelayResume>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> AppResult<Response> {
    let instance = ids.get("instance_id")?;
    let profile: ProfileId = ids.get("profile_id")?;
    let upgrade = upgrade.map_err(|e| {
        AppError::invalid(format!(
            "`profile_gateway` is a WebSocket upgrade ({})",
            e.body_text()
        ))
    })?;
    let (relay, after, resumed) = match (resume.connection, resume.after) {
        (Some(id), Some(after)) => {
            let relay = state.relays.resume(&caller, &id)?;
            if relay.instance != instance || relay.profile != profile {
                return Err(AppError::invalid(format!(
                    "gateway connection `{id}` leads to another profile"
                )));
            }
            relay.check_cursor(after)?;
            (relay, after, true)
        }
        (Some(_), None) => {
            return Err(AppError::invalid(
                "resuming a `connection` needs `after`: the last frame seen (0 for none)",
            ));
        }
        (None, Some(_)) => {
            return Err(AppError::invalid("`after` resumes a `connection`: name it"));
        }
        (None, None) => {
            // The stream slot first: no relay is opened for a key that may not stream. The
            // connection holds it until it ends, attached or waiting for a resume.
            let permit = state.gate.open_stream(&caller.0.id)?;
            let relay = relay::open(&state, &caller, &instance, &profile, permit).await?;
            (relay, 0, false)
        }
    };
    Ok(upgrade.on_upgrade(move |socket| relay.serve(state, socket, after, resumed)))
}
