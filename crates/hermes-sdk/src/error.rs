//! The SDK's one error type. "The server said no" ([`Error::Api`]) is kept apart from "the
//! transport broke" ([`Error::Transport`]); an unreadable reply keeps its raw body.

use edith_types::{ErrorCode, InstanceId, Problem};

/// Why an SDK call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The control plane answered with a problem.
    #[error("{status} {}: {detail}", code.as_str())]
    Api {
        /// The HTTP status.
        status: u16,
        /// The stable problem code: match on this, never on `detail`.
        code: ErrorCode,
        /// What went wrong, for people.
        detail: String,
        /// Whether the same request may succeed later.
        retryable: bool,
        /// For `native_error`: the runtime's JSON-RPC error code.
        native_code: Option<i64>,
    },
    /// The request did not get an answer (connection refused, reset, timed out …).
    #[error("transport error: {0}")]
    Transport(#[from] crate::transport::TransportFailure),
    /// The answer could not be read as the expected type.
    #[error("unreadable reply ({detail}); body: {body}")]
    Decode {
        /// What did not fit.
        detail: String,
        /// The reply as it came.
        body: String,
    },
    /// A runtime's Desktop route refused the request (the runtime's own error, not the control
    /// plane's).
    #[error("{route} answered {status}: {detail}")]
    Runtime {
        /// The route, as `METHOD /path`.
        route: String,
        /// The HTTP status.
        status: u16,
        /// What the runtime said (its `detail`).
        detail: String,
    },
    /// The server does not implement the operation.
    #[error("`{operation}` is not supported by this server")]
    Unsupported {
        /// The operation, as the server named it.
        operation: String,
    },
    /// An instance ended its provisioning somewhere other than `ready`.
    #[error("instance {instance} did not become ready: {reason}")]
    NotReady {
        /// The instance.
        instance: InstanceId,
        /// Its state and why.
        reason: String,
    },
    /// An event stream ended before its final event and could not be resumed.
    #[error("event stream ended early: {0}")]
    StreamEnded(String),
    /// A native method failed (the runtime refused it, lacks it, or did not answer).
    #[error(transparent)]
    Native(#[from] hermes_native::NativeError),
    /// A gateway WebSocket could not be opened or broke for good.
    #[error("gateway connection: {0}")]
    Socket(String),
    /// This client was closed.
    #[error("the client is closed")]
    Closed,
    /// The embedded control plane or tool host could not start.
    #[error("local context: {0}")]
    Local(String),
}

impl Error {
    /// The problem code, when the server answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api { retryable, .. } => *retryable,
            Error::Transport(e) => e.connect || e.timeout,
            Error::StreamEnded(_) => true,
            _ => false,
        }
    }

    pub(crate) fn from_problem(problem: Problem) -> Self {
        if problem.code == ErrorCode::Unsupported {
            return Error::Unsupported {
                operation: problem.detail,
            };
        }
        Error::Api {
            status: problem.status,
            code: problem.code,
            detail: problem.detail,
            retryable: problem.retryable,
            native_code: problem.native_code,
        }
    }
}

/// What SDK calls return.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        Error::Transport(e.into())
    }
}
