//! `Idempotency-Key` on every POST: the first request with a key is handled and its reply kept;
//! a retry with the same key and the same request gets that reply again (with
//! `Idempotent-Replayed: true`) instead of doing the work twice. The same key with another
//! request is a 409; a retry while the first is still being handled is a 409 as well.
//! Server errors (5xx) and refusals that say to try again later (429) are not kept, so a
//! retry after one runs again.
//!
//! A reply that is an event stream is not kept whole (it lasts as long as its log): what is
//! kept is where the log is read (its `Location`), and a retry is `303 See Other` to there.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use edith_store::Idempotency;
use edith_types::ErrorCode;

use crate::auth::Principal;
use crate::error::AppError;
use crate::state::AppState;

pub const HEADER: &str = "idempotency-key";
/// The largest reply kept for replay.
const REPLY_LIMIT: usize = 4 * 1024 * 1024;
const REPLAYED: &str = "idempotent-replayed";

pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let key = match request.headers().get(HEADER).map(|v| v.to_str()) {
        None => return next.run(request).await,
        Some(Ok(key)) if !key.is_empty() && key.len() <= 255 => key.to_owned(),
        Some(_) => {
            return AppError::invalid("`Idempotency-Key` must be 1 to 255 visible characters")
                .into_response();
        }
    };
    // Keys are the caller's own: another caller's same key is another key, and never gets
    // this caller's replies. Requests without an API key (the MCP endpoint, which checks its own
    // token) are not kept at all: nobody unauthenticated may fill the store.
    let key = match request.extensions().get::<Principal>() {
        Some(Principal(caller)) => format!("{}:{key}", caller.id),
        None => return next.run(request).await,
    };
    let (parts, body) = request.into_parts();
    // Request and reply bodies of this API are small; anything bigger is refused, not kept.
    let max_body = state.gate.limits().max_body_bytes;
    let Ok(body) = to_bytes(body, max_body).await else {
        return AppError::new(
            ErrorCode::PayloadTooLarge,
            "the body is larger than this server takes",
        )
        .into_response();
    };
    let path = parts.uri.path().to_owned();
    let claimed = state
        .store
        .claim_idempotent(&key, parts.method.as_str(), &path, &body)
        .await;
    match claimed {
        Err(e) => AppError::from(e).into_response(),
        Ok(Idempotency::Mismatch) => AppError::new(
            ErrorCode::Conflict,
            "this `Idempotency-Key` was used for a different request",
        )
        .into_response(),
        Ok(Idempotency::InProgress) => AppError::new(
            ErrorCode::Conflict,
            "the first request with this `Idempotency-Key` is still being handled; retry later",
        )
        .into_response(),
        Ok(Idempotency::Replay {
            status,
            body,
            content_type,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut response = if status == StatusCode::SEE_OTHER {
                see_other(&body)
            } else {
                (status, body).into_response()
            };
            let headers = response.headers_mut();
            if let Some(value) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                headers.insert(header::CONTENT_TYPE, value);
            }
            headers.insert(REPLAYED, HeaderValue::from_static("true"));
            response
        }
        Ok(Idempotency::New) => {
            let response = next.run(Request::from_parts(parts, Body::from(body))).await;
            if is_event_stream(&response) {
                let location = response
                    .headers()
                    .get(header::LOCATION)
                    .filter(|_| response.status().is_success())
                    .cloned();
                keep_stream_location(&state, &key, location).await;
                return response;
            }
            let (parts, body) = response.into_parts();
            let Ok(body) = to_bytes(body, max_body.max(REPLY_LIMIT)).await else {
                let _ = state.store.release_idempotent(&key).await;
                return AppError::internal("a reply too large to keep").into_response();
            };
            let kept = if parts.status.is_server_error()
                || parts.status == StatusCode::TOO_MANY_REQUESTS
            {
                state.store.release_idempotent(&key).await
            } else {
                let content_type = parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok());
                state
                    .store
                    .finish_idempotent(&key, parts.status.as_u16(), &body, content_type)
                    .await
            };
            if let Err(e) = kept {
                tracing::error!(error = %e, "could not keep an idempotent reply");
            }
            Response::from_parts(parts, Body::from(body))
        }
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Keeps a streamed reply as a `303 See Other` to its `Location`; one without (which a retry
/// could not be sent to) is not kept, so a retry runs again.
async fn keep_stream_location(state: &AppState, key: &str, location: Option<HeaderValue>) {
    let kept = match location {
        Some(location) => {
            let status = StatusCode::SEE_OTHER.as_u16();
            (state.store)
                .finish_idempotent(key, status, location.as_bytes(), None)
                .await
        }
        None => state.store.release_idempotent(key).await,
    };
    if let Err(e) = kept {
        tracing::error!(error = %e, "could not keep an idempotent reply");
    }
}

/// A retry of a request whose reply was a stream: where that stream is read.
fn see_other(location: &[u8]) -> Response {
    match HeaderValue::from_bytes(location) {
        Ok(location) => (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response(),
        Err(_) => {
            AppError::internal("a kept `Location` that is not a header value").into_response()
        }
    }
}
