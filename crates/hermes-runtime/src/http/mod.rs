//! The HTTP surface: `/api/ws` (the gateway) and the Desktop REST routes under `/api`, all
//! behind the session token but the routes the contract marks public.

pub(crate) mod desktop;
mod extract;
mod reply;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hermes_native::desktop::{Route, TOKEN_HEADER};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::gateway::serve_connection;
use crate::runtime::Runtime;

/// The largest request body: a write of 8 MiB, escaped as JSON, with room to spare.
const MAX_BODY_BYTES: usize = 20 * 1024 * 1024;

pub fn router(runtime: Arc<Runtime>) -> Router {
    Router::new()
        .route("/api/ws", get(websocket))
        .merge(desktop::routes())
        .fallback(reply::not_found)
        .method_not_allowed_fallback(reply::method_not_allowed)
        // Room for the largest body a route takes (`fs/write-text`: 8 MiB of text, as JSON).
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            runtime.clone(),
            require_token,
        ))
        .with_state(runtime)
}

/// As Hermes does, before routing: every `/api/` path but the public ones needs the token, so
/// an unknown path without it is a 401, not a 404. The socket checks its own (`?token=`).
async fn require_token(
    State(runtime): State<Arc<Runtime>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let open = !path.starts_with("/api/")
        || path == "/api/ws"
        || Route::ALL.iter().any(|r| r.public() && r.path() == path);
    if open || rest_authorized(request.headers(), &runtime.token) {
        next.run(request).await
    } else {
        reply::unauthorized()
    }
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
        return reply::unauthorized();
    }
    upgrade
        .on_upgrade(move |socket| serve_connection(runtime, socket))
        .into_response()
}

/// `X-Hermes-Session-Token: <t>`, or the legacy `Authorization: Bearer <t>`.
fn rest_authorized(headers: &HeaderMap, token: &str) -> bool {
    let header = headers
        .get(TOKEN_HEADER)
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
