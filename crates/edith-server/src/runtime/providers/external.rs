//! The `external` provider: a Hermes-compatible runtime someone else runs, reached at its URL
//! with its token. The control plane never starts, stops or deletes anything on it, and does not
//! write its configuration: that is its owner's.

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::config::HermesConfig;

use super::{ProviderError, RunningNow, RuntimeEndpoint, RuntimeProvider};

pub struct ExternalProvider {
    /// The hosts (`host` for any port, or `host:port`) instances may be attached at; `None`
    /// lets an admin attach any.
    allowed_hosts: Option<Vec<String>>,
}

impl ExternalProvider {
    pub fn new(allowed_hosts: Option<Vec<String>>) -> Self {
        Self { allowed_hosts }
    }

    /// Whether the operator lets runtimes at `base` (`http://host:port`) be attached.
    pub fn allows(&self, base: &str) -> bool {
        let Some(allowed) = &self.allowed_hosts else {
            return true;
        };
        let Some(authority) = authority(base) else {
            return false;
        };
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host);
        allowed
            .iter()
            .any(|entry| entry == authority || entry == host)
    }
}

/// `host:port` of `http://host:port[/]`.
fn authority(base: &str) -> Option<&str> {
    edith_types::rules::external_authority(base)
}

/// The gateway URL of a runtime at `base` (`http://host:port` → `ws://host:port/api/ws`).
pub fn gateway_url(base: &str) -> Option<String> {
    authority(base).map(|authority| format!("ws://{authority}/api/ws"))
}

#[async_trait]
impl RuntimeProvider for ExternalProvider {
    async fn provision(&self, _: &InstanceRecord) -> Result<(), ProviderError> {
        Ok(())
    }

    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let base = instance.instance.url.as_deref().unwrap_or_default();
        let ws_url = gateway_url(base)
            .ok_or_else(|| ProviderError(format!("`{base}` is not a runtime URL")))?;
        Ok(RuntimeEndpoint {
            ws_url,
            token: instance.runtime_token.clone(),
            in_process: None,
        })
    }

    /// Someone else runs it: as far as the control plane knows, it runs.
    async fn running_now(&self, instance: &InstanceRecord) -> RunningNow {
        match self.start(instance).await {
            Ok(endpoint) => RunningNow::Running {
                endpoint,
                since: None,
            },
            Err(_) => RunningNow::Stopped,
        }
    }

    async fn stop(&self, _: &InstanceId) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Forgetting is all: the runtime is someone else's.
    async fn destroy(&self, _: &InstanceId) -> Result<(), ProviderError> {
        Ok(())
    }

    fn configures_profiles(&self) -> bool {
        false
    }

    async fn configure_profile(
        &self,
        _: &InstanceId,
        _: &str,
        _: &HermesConfig,
    ) -> Result<(), ProviderError> {
        Err(ProviderError(
            "an external runtime's configuration is its owner's".to_owned(),
        ))
    }

    async fn shutdown(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_urls_become_gateway_urls() {
        assert_eq!(
            gateway_url("http://127.0.0.1:9119/").as_deref(),
            Some("ws://127.0.0.1:9119/api/ws")
        );
        for bad in ["https://h:1", "http://", "http://h:1/x", "ftp://h", "h:1"] {
            assert_eq!(gateway_url(bad), None, "{bad}");
        }
    }
}
