//! Replies shaped as Hermes (FastAPI) shapes them: JSON bodies, errors as `{"detail": …}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error reply: `status` with `{"detail": detail}`.
pub fn refuse(status: StatusCode, detail: impl Into<String>) -> Response {
    (status, Json(json!({"detail": detail.into()}))).into_response()
}

/// A refusal on its way out: its status and detail (small to carry, unlike a built response).
pub struct Refusal {
    status: StatusCode,
    detail: String,
}

impl Refusal {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.status, self.detail)
    }
}

pub fn unauthorized() -> Response {
    refuse(StatusCode::UNAUTHORIZED, "Unauthorized")
}

pub async fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "Not Found")
}

pub async fn method_not_allowed() -> Response {
    refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// A store that failed: logged here, a bare 500 for the client.
pub fn internal(what: &str, error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "{what}");
    refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("{what} failed"))
}
