//! Runtime providers: how an instance's Hermes runtime is made, started, stopped and destroyed.

mod embedded;

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::config::HermesConfig;

pub use embedded::EmbeddedProvider;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

/// How to reach a started runtime's native gateway.
#[derive(Clone)]
pub struct RuntimeEndpoint {
    /// `ws://host:port/api/ws`
    pub ws_url: String,
    pub token: String,
}

#[async_trait]
pub trait RuntimeProvider: Send + Sync {
    /// Prepares what the runtime needs. Idempotent.
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError>;
    /// Starts the runtime, or returns the running one's endpoint. Idempotent.
    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError>;
    /// Stops the runtime if it runs; in-flight turns end as interrupted. Idempotent.
    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError>;
    /// Removes everything `provision` made. Idempotent.
    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError>;
    /// Creates or rewrites a native profile's home and `config.yaml`; on failure, a home it
    /// created is removed again.
    async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError>;
    /// Stops every runtime this provider runs (the control plane is shutting down).
    async fn shutdown(&self);
}
