//! The HTTP surface: `/api/status` (public), `/api/ws` (the gateway), and token-guarded REST.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::gateway::serve_connection;
use crate::runtime::Runtime;

pub fn router(runtime: Arc<Runtime>) -> Router {
    Router::new()
        .route("/api/status", get(status))
        .route("/api/ws", get(websocket))
        .route("/api/sessions", get(list_sessions))
        .fallback(not_found)
        .with_state(runtime)
}

async fn status() -> Json<serde_json::Value> {
    Json(json!({
        "version": crate::HERMES_COMPAT_VERSION,
        "runtime": "hermes-runtime",
        "runtime_version": env!("CARGO_PKG_VERSION"),
        "gateway_running": true,
        "auth_required": false,
    }))
}

#[derive(Deserialize)]
struct WsQuery {
    token: Option<String>,
}

/// The token is checked before the upgrade: a wrong one never gets a WebSocket.
async fn websocket(
    State(runtime): State<Arc<Runtime>>,
    Query(query): Query<WsQuery>,
    upgrade: WebSocketUpgrade,
) -> Response {
    if !token_matches(query.token.as_deref(), &runtime.token) {
        return unauthorized();
    }
    upgrade
        .on_upgrade(move |socket| serve_connection(runtime, socket))
        .into_response()
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<u64>,
    profile: Option<String>,
}

async fn list_sessions(
    State(runtime): State<Arc<Runtime>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if !rest_authorized(&headers, &runtime.token) {
        return unauthorized();
    }
    let home = match runtime.profile_home(query.profile.as_deref()) {
        Ok(home) => home,
        Err(e) => return (StatusCode::NOT_FOUND, Json(json!({"detail": e}))).into_response(),
    };
    let listed = match runtime.db(&home).await {
        Ok(db) => db.list_sessions(query.limit.unwrap_or(50)).await,
        Err(e) => Err(e),
    };
    match listed {
        Ok(rows) => Json(json!({
            "sessions": rows.iter().map(|r| json!({
                "id": r.id, "title": r.title, "preview": r.preview,
                "started_at": r.started_at, "message_count": r.message_count, "source": r.source,
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "listing sessions");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"detail": "state.db unavailable"})),
            )
                .into_response()
        }
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))).into_response()
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"detail": "Unauthorized"})),
    )
        .into_response()
}

/// `X-Hermes-Session-Token: <t>`, or the legacy `Authorization: Bearer <t>`.
fn rest_authorized(headers: &HeaderMap, token: &str) -> bool {
    let header = headers
        .get("x-hermes-session-token")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        });
    token_matches(header, token)
}

/// Compares in time independent of where the first difference is.
fn token_matches(given: Option<&str>, expected: &str) -> bool {
    let Some(given) = given else { return false };
    given.as_bytes().ct_eq(expected.as_bytes()).into()
}
