//! Calling native methods over any transport: a direct gateway connection, or the control
//! plane's native route. The generated namespaces (`generated.rs`) call through here.

use std::future::Future;

use serde::Serialize;
use serde_json::Value;

use crate::client::{GatewayClient, GatewayError};
use crate::methods::Method;
use crate::protocol::codes;

/// Why a native call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NativeError {
    /// The runtime does not implement the method (JSON-RPC -32601).
    #[error("`{method}` is not supported by this runtime")]
    Unsupported {
        /// The method called.
        method: String,
    },
    /// The runtime answered with an error.
    #[error("`{method}` failed: {message} ({code})")]
    Rpc {
        /// The method called.
        method: String,
        /// The error code (see [`crate::protocol::codes`]).
        code: i64,
        /// The runtime's message.
        message: String,
    },
    /// The call did not get an answer.
    #[error("`{method}`: {message}")]
    Transport {
        /// The method called.
        method: String,
        /// Why there was no answer.
        message: String,
    },
    /// The answer is not what the method returns.
    #[error("`{method}` answered something unexpected: {message}")]
    Decode {
        /// The method called.
        method: String,
        /// What did not fit.
        message: String,
    },
}

impl NativeError {
    /// The JSON-RPC error code: the runtime's, or -32601 for an unsupported method; none when there
    /// was no answer.
    pub fn code(&self) -> Option<i64> {
        match self {
            NativeError::Rpc { code, .. } => Some(*code),
            NativeError::Unsupported { .. } => Some(codes::METHOD_NOT_FOUND),
            NativeError::Transport { .. } | NativeError::Decode { .. } => None,
        }
    }
}

/// Something that can carry one native call.
pub trait NativeTransport: Sync {
    /// Calls `method` with `params` and gives back its `result`, or why there is none.
    fn native_call(
        &self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<Value, NativeError>> + Send;
}

impl NativeTransport for GatewayClient {
    async fn native_call(&self, method: &str, params: Value) -> Result<Value, NativeError> {
        self.call(method, params).await.map_err(|e| match e {
            GatewayError::Rpc { code, .. } if code == codes::METHOD_NOT_FOUND => {
                NativeError::Unsupported {
                    method: method.to_owned(),
                }
            }
            GatewayError::Rpc { code, message, .. } => NativeError::Rpc {
                method: method.to_owned(),
                code,
                message,
            },
            other => NativeError::Transport {
                method: method.to_owned(),
                message: other.to_string(),
            },
        })
    }
}

pub(crate) async fn call<T: NativeTransport + ?Sized, P: Serialize>(
    transport: &T,
    method: &str,
    params: &P,
) -> Result<Value, NativeError> {
    let params = serde_json::to_value(params).expect("params serialize");
    transport.native_call(method, params).await
}

/// Calls the typed method `M`.
pub(crate) async fn call_method<M: Method, T: NativeTransport + ?Sized>(
    transport: &T,
    params: &M::Params,
) -> Result<M::Result, NativeError> {
    let result = call(transport, M::NAME, params).await?;
    serde_json::from_value(result).map_err(|e| NativeError::Decode {
        method: M::NAME.to_owned(),
        message: e.to_string(),
    })
}
