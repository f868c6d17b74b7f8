//! RFC 9457 problem details: the one error body every control-plane endpoint returns.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Stable, machine-readable error codes. Clients match on these, never on messages.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    /// The resource does not exist (or no longer does).
    NotFound,
    /// A path or body id is malformed or of the wrong kind.
    InvalidId,
    /// The request body is not valid JSON or does not match the operation's schema.
    InvalidBody,
    /// The request is well formed but its values are not acceptable.
    InvalidRequest,
    /// The resource's state does not allow the operation (e.g. a turn while another runs).
    Conflict,
    /// The instance is not `ready` for this operation.
    InstanceNotReady,
    /// The server or runtime does not implement the operation.
    Unsupported,
    /// The runtime behind an instance could not be reached or failed.
    RuntimeUnavailable,
    /// The runtime answered a native call with an error (its code is in `native_code`).
    NativeError,
    /// Missing or wrong credentials.
    Unauthorized,
    /// The credentials are good but do not allow this operation (a scope or instance is missing).
    Forbidden,
    /// No route matches the path.
    RouteNotFound,
    /// The method is not allowed on this path.
    MethodNotAllowed,
    /// The request body is larger than the server takes.
    PayloadTooLarge,
    /// The request body did not arrive in time; the connection is closed.
    RequestTimeout,
    /// The key sent more requests, or holds more streams, than it may; retry after
    /// `Retry-After` seconds.
    TooManyRequests,
    /// A bug or an unexpected failure on the server side; details are in the server log.
    Internal,
}

impl ErrorCode {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The HTTP status this code is sent with.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::NotFound | ErrorCode::RouteNotFound => 404,
            ErrorCode::InvalidId | ErrorCode::InvalidBody | ErrorCode::InvalidRequest => 400,
            ErrorCode::Conflict | ErrorCode::InstanceNotReady => 409,
            ErrorCode::Unsupported => 501,
            ErrorCode::RuntimeUnavailable => 503,
            ErrorCode::NativeError => 422,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::Internal => 500,
        }
    }

    /// Whether the same request may succeed if simply tried again later.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::RuntimeUnavailable | ErrorCode::Internal | ErrorCode::TooManyRequests
        )
    }
}

/// `application/problem+json` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// A URI naming the problem type: `urn:edith:problem:<code>`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request, for a human.
    pub detail: String,
    /// The stable machine-readable code.
    pub code: ErrorCode,
    /// Whether retrying the same request later may succeed.
    pub retryable: bool,
    /// For `native_error`: the JSON-RPC error code the runtime answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_code: Option<i64>,
}

impl Problem {
    /// A problem of `code` (its type, title and status follow from it), saying `detail`.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            type_uri: format!("urn:edith:problem:{}", code.as_str()),
            title: code.as_str().replace('_', " "),
            status: code.status(),
            detail: detail.into(),
            code,
            retryable: code.retryable(),
            native_code: None,
        }
    }
}
