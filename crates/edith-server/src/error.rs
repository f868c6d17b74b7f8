//! The one domain error of the control plane. Every lower-level error (store, ids, providers,
//! runtime gateways) converts into it here, once; it becomes `application/problem+json` in one
//! place (`IntoResponse`). Internal failures are logged with their cause and answered without it.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use edith_types::{ErrorCode, IdError, Problem};
use hermes_native::{GatewayError, codes};

use crate::runtime::ProviderError;

#[derive(Debug, Clone)]
pub struct AppError {
    pub code: ErrorCode,
    /// What the client is told.
    pub detail: String,
    /// The runtime's JSON-RPC code, for `native_error`.
    pub native_code: Option<i64>,
    /// Seconds after which a retry may succeed (`Retry-After`), for `too_many_requests`.
    pub retry_after: Option<u64>,
}

pub type AppResult<T> = Result<T, AppError>;

impl AppError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
            native_code: None,
            retry_after: None,
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
            ended @ edith_store::StoreError::TurnEnded(_) => {
                AppError::new(ErrorCode::Conflict, ended.to_string())
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

impl From<ProviderError> for AppError {
    fn from(e: ProviderError) -> Self {
        AppError::new(ErrorCode::RuntimeUnavailable, e.0)
    }
}

/// A runtime's answer keeps its meaning: a method it lacks is `unsupported`, a refusal is a
/// `native_error` carrying the runtime's code; a runtime that does not answer is unavailable.
impl From<GatewayError> for AppError {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::Rpc { code, method, .. } if code == codes::METHOD_NOT_FOUND => {
                AppError::new(
                    ErrorCode::Unsupported,
                    format!("`{method}` is not supported by this instance's runtime"),
                )
            }
            GatewayError::Rpc {
                code,
                method,
                message,
            } => AppError {
                native_code: Some(code),
                ..AppError::new(ErrorCode::NativeError, format!("`{method}`: {message}"))
            },
            other => AppError::new(
                ErrorCode::RuntimeUnavailable,
                format!("runtime gateway: {other}"),
            ),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            serde_json::to_string(&problem).unwrap_or_default(),
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}
