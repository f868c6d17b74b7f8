//! A request's body is read whole, within a deadline, before any handler sees it: a client that
//! sends a head and then trickles (or withholds) its body is answered `408 request_timeout` and
//! disconnected, instead of holding a connection and a task for as long as it likes. The
//! bodies of this API are small JSON documents, so nothing is lost by not streaming them.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use edith_types::ErrorCode;

use crate::error::AppError;
use crate::state::AppState;

pub async fn read_whole(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limits = state.gate.limits();
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(limits.body_timeout, to_bytes(body, limits.max_body_bytes));
    match read.await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) if is_over_the_limit(&e) => AppError::new(
            ErrorCode::PayloadTooLarge,
            "the body is larger than this server takes",
        )
        .into_response(),
        // Malformed chunks, or a client that went away half-way.
        Ok(Err(_)) => AppError::invalid("the request body could not be read").into_response(),
        Err(_) => {
            let mut refused = AppError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    limits.body_timeout.as_secs_f64()
                ),
            )
            .into_response();
            // The rest of the body may still be on its way: this connection is done.
            refused
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            refused
        }
    }
}

fn is_over_the_limit(error: &axum::Error) -> bool {
    std::error::Error::source(error).is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
}
