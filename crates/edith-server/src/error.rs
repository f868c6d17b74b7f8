//! The one domain error of the control plane, turned into `application/problem+json` in one
//! place. Internal failures are logged with their cause and answered without it.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use edith_types::{ErrorCode, IdError, Problem};

#[derive(Debug, Clone)]
pub struct AppError {
    pub code: ErrorCode,
    /// What the client is told.
    pub detail: String,
    /// The runtime's JSON-RPC code, for `native_error`.
    pub native_code: Option<i64>,
}

pub type AppResult<T> = Result<T, AppError>;

impl AppError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
            native_code: None,
        }
    }

    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, detail)
    }

    /// A failure whose cause must not reach the client: logged here, answered as `internal`.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(
            ErrorCode::Internal,
            "internal error; the server log has the details",
        )
    }

    pub fn problem(&self) -> Problem {
        Problem {
            native_code: self.native_code,
            ..Problem::new(self.code, self.detail.clone())
        }
    }
}

impl From<edith_store::StoreError> for AppError {
    fn from(e: edith_store::StoreError) -> Self {
        match e {
            edith_store::StoreError::Duplicate(what) => {
                AppError::new(ErrorCode::Conflict, format!("{what} already exists"))
            }
            other => AppError::internal(other),
        }
    }
}

impl From<IdError> for AppError {
    fn from(e: IdError) -> Self {
        AppError::new(ErrorCode::InvalidId, e.to_string())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            serde_json::to_string(&problem).unwrap_or_default(),
        )
            .into_response()
    }
}
