//! Native gateway methods through the control plane: the generated namespaces of
//! [`hermes_native`] over the `native_call` operation.
//!
//! ```no_run
//! # async fn demo(profile: hermes::ProfileHandle) -> Result<(), hermes::native::NativeError> {
//! use hermes::native::SessionListParams;
//! let native = profile.native();
//! let sessions = native.api().session().list(&SessionListParams::default()).await?;
//! # Ok(()) }
//! ```

use edith_types::{ErrorCode, InstanceId, NativeCall, ProfileId};
use hermes_native::{Native, NativeError, NativeTransport};
use serde_json::Value;

use crate::error::Error;
use crate::hermes::Hermes;

/// Native calls on one instance, optionally on behalf of one of its profiles (which fills the
/// `profile` param of profile-scoped methods).
#[derive(Debug, Clone)]
pub struct NativeRoute {
    hermes: Hermes,
    instance: InstanceId,
    profile: Option<ProfileId>,
}

impl NativeRoute {
    pub(crate) fn new(hermes: Hermes, instance: InstanceId, profile: Option<ProfileId>) -> Self {
        Self {
            hermes,
            instance,
            profile,
        }
    }

    /// The generated namespaces: `api().session().list(..)`, `api().prompt().submit(..)`, ….
    pub fn api(&self) -> Native<'_, Self> {
        Native::new(self)
    }
}

impl NativeRoute {
    /// Calls native `method` with `params`, failing with the SDK's own error (a closed client,
    /// a refused key and a broken connection stay what they are; the runtime's refusal is
    /// `Error::Api` with code `native_error` and its `native_code`).
    pub async fn call(&self, method: &str, params: Value) -> crate::Result<Value> {
        let body = NativeCall {
            method: method.to_owned(),
            params,
            profile_id: self.profile.clone(),
        };
        let reply = self.hermes.sdk().native_call(&self.instance, &body).await?;
        Ok(reply.result)
    }
}

impl NativeTransport for NativeRoute {
    async fn native_call(&self, method: &str, params: Value) -> Result<Value, NativeError> {
        match self.call(method, params).await {
            Ok(result) => Ok(result),
            Err(Error::Unsupported { .. }) => Err(NativeError::Unsupported {
                method: method.to_owned(),
            }),
            Err(Error::Api {
                code: ErrorCode::NativeError,
                detail,
                native_code,
                ..
            }) => Err(NativeError::Rpc {
                method: method.to_owned(),
                code: native_code.unwrap_or_default(),
                message: detail,
            }),
            Err(other) => Err(NativeError::Transport {
                method: method.to_owned(),
                message: other.to_string(),
            }),
        }
    }
}
