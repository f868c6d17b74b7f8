//! The `embedded` provider: the project's own runtime, served inside the control-plane process
//! on a loopback port. The control plane still talks to it only through the native protocol:
//! its gateway's frames go over channels rather than a loopback socket, and clients outside
//! the process (Desktop, Hermes's own terminal UI) reach the same runtime on its port.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::config::HermesConfig;
use hermes_runtime::{RunningRuntime, RuntimeConfig};

use super::{ProviderError, RunningNow, RuntimeEndpoint, RuntimeProvider};
use crate::runtime::homes::Homes;
use crate::runtime::slots::Slots;

/// A runtime running in this process.
struct Running {
    runtime: RunningRuntime,
    token: String,
    since: Instant,
}

pub struct EmbeddedProvider {
    homes: Homes,
    /// The runtimes running now.
    running: Slots<Running>,
}

impl EmbeddedProvider {
    pub fn new(homes: Homes) -> Self {
        Self {
            homes,
            running: Slots::default(),
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
        let mut current = self.running.slot(id).lock_owned().await;
        if let Some(running) = current.as_ref() {
            return Ok(endpoint(running));
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
        let running = Running {
            runtime,
            token: instance.runtime_token.clone(),
            since: Instant::now(),
        };
        let endpoint = endpoint(&running);
        *current = Some(running);
        Ok(endpoint)
    }

    async fn running_now(&self, instance: &InstanceRecord) -> RunningNow {
        let slot = self.running.slot(&instance.instance.id);
        let Ok(current) = slot.try_lock() else {
            return RunningNow::Changing;
        };
        match current.as_ref() {
            Some(running) => RunningNow::Running {
                endpoint: endpoint(running),
                since: Some(running.since),
            },
            None => RunningNow::Stopped,
        }
    }

    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        let mut current = self.running.slot(instance).lock_owned().await;
        stop_in(&mut current).await;
        Ok(())
    }

    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        // Held until the home is gone too: a start meanwhile finds no home to run in.
        let mut current = self.running.slot(instance).lock_owned().await;
        stop_in(&mut current).await;
        self.homes.destroy(instance).await?;
        self.running.forget(instance);
        Ok(())
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
        self.running.running_count().await
    }

    async fn shutdown(&self) {
        for (id, _) in self.running.all() {
            let _ = self.stop(&id).await;
        }
    }
}

/// Stops the runtime in an instance's slot, which the caller holds, if one runs there.
async fn stop_in(current: &mut Option<Running>) {
    if let Some(running) = current.take() {
        running.runtime.shutdown().await;
    }
}

fn endpoint(running: &Running) -> RuntimeEndpoint {
    RuntimeEndpoint {
        ws_url: running.runtime.ws_url(),
        token: running.token.clone(),
        in_process: Some({
            let gateway = running.runtime.in_process_gateway();
            std::sync::Arc::new(move || gateway.connect())
        }),
    }
}
