//! The `embedded` provider: the project's own runtime, served inside the control-plane process
//! on a loopback port. The control plane still talks to it only through the native protocol:
//! its gateway's frames go over channels rather than a loopback socket, and clients outside
//! the process (Desktop, Hermes's own terminal UI) reach the same runtime on its port.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::config::HermesConfig;
use hermes_runtime::{RunningRuntime, RuntimeConfig};
use tokio::sync::Mutex;

use super::{ProviderError, RuntimeEndpoint, RuntimeProvider};
use crate::runtime::homes::Homes;

pub struct EmbeddedProvider {
    homes: Homes,
    /// The runtimes running now, by instance, with their tokens.
    running: Mutex<HashMap<InstanceId, (RunningRuntime, String)>>,
}

impl EmbeddedProvider {
    pub fn new(homes: Homes) -> Self {
        Self {
            homes,
            running: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl RuntimeProvider for EmbeddedProvider {
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError> {
        self.homes.provision(&instance.instance.id).await
    }

    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let id = &instance.instance.id;
        let mut running = self.running.lock().await;
        if let Some((runtime, token)) = running.get(id) {
            return Ok(endpoint(runtime, token));
        }
        let config = RuntimeConfig {
            workspace: self.homes.workspace(id).await?,
            ..RuntimeConfig::new(
                self.homes.existing_home(id)?,
                instance.runtime_token.clone(),
                SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            )
        };
        let runtime = hermes_runtime::serve(config)
            .await
            .map_err(|e| ProviderError(format!("cannot start the embedded runtime: {e}")))?;
        let endpoint = endpoint(&runtime, &instance.runtime_token);
        running.insert(id.clone(), (runtime, instance.runtime_token.clone()));
        Ok(endpoint)
    }

    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        let runtime = self.running.lock().await.remove(instance);
        if let Some((runtime, _)) = runtime {
            runtime.shutdown().await;
        }
        Ok(())
    }

    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        self.stop(instance).await?;
        self.homes.destroy(instance).await
    }

    async fn retarget_mcp_server(
        &self,
        instance: &InstanceId,
        native_name: &str,
        server: &str,
        url: &str,
    ) -> Result<bool, ProviderError> {
        self.homes
            .retarget_mcp_server(instance, native_name, server, url)
            .await
    }

    async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError> {
        self.homes
            .configure_profile(instance, native_name, config)
            .await
    }

    async fn remove_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
    ) -> Result<(), ProviderError> {
        self.homes.remove_profile(instance, native_name).await
    }

    async fn running_count(&self) -> usize {
        self.running.lock().await.len()
    }

    async fn shutdown(&self) {
        let running: Vec<_> = self.running.lock().await.drain().collect();
        for (_, (runtime, _)) in running {
            runtime.shutdown().await;
        }
    }
}

fn endpoint(runtime: &RunningRuntime, token: &str) -> RuntimeEndpoint {
    RuntimeEndpoint {
        ws_url: runtime.ws_url(),
        token: token.to_owned(),
        in_process: Some({
            let gateway = runtime.in_process_gateway();
            std::sync::Arc::new(move || gateway.connect())
        }),
    }
}
