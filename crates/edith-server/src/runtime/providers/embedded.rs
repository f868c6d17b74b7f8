//! The `embedded` provider: the project's own runtime, served inside the control-plane process
//! on a loopback port. The control plane still talks to it only through the native protocol.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_runtime::{RunningRuntime, RuntimeConfig};
use tokio::sync::Mutex;

use hermes_native::config::{CONFIG_FILE, HermesConfig};
use hermes_native::profile::DEFAULT_PROFILE;

use super::{ProviderError, RuntimeEndpoint, RuntimeProvider};

pub struct EmbeddedProvider {
    /// `<data-dir>/instances`: one `<instance id>/home` (the runtime's HERMES_HOME) each.
    root: PathBuf,
    /// The runtimes running now, by instance.
    running: Mutex<HashMap<InstanceId, (RunningRuntime, String)>>,
}

impl EmbeddedProvider {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("instances"),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn home(&self, instance: &InstanceId) -> PathBuf {
        self.root.join(instance.as_str()).join("home")
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> ProviderError {
    ProviderError(format!("{what} {}: {e}", path.display()))
}

#[async_trait]
impl RuntimeProvider for EmbeddedProvider {
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError> {
        let home = self.home(&instance.instance.id);
        tokio::fs::create_dir_all(home.join("profiles"))
            .await
            .map_err(|e| io_error("cannot create", &home, e))
    }

    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let id = &instance.instance.id;
        let mut running = self.running.lock().await;
        if let Some((runtime, token)) = running.get(id) {
            return Ok(endpoint(runtime, token));
        }
        let home = self.home(id);
        if !home.is_dir() {
            return Err(ProviderError(format!(
                "the runtime home {} is missing; the instance was not provisioned",
                home.display()
            )));
        }
        let config = RuntimeConfig::new(
            home,
            instance.runtime_token.clone(),
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        );
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
        let dir = self.root.join(instance.as_str());
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("cannot remove", &dir, e)),
        }
    }

    async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError> {
        let root = self.home(instance);
        let home = if native_name == DEFAULT_PROFILE {
            root
        } else {
            root.join("profiles").join(native_name)
        };
        let existed = tokio::fs::try_exists(&home).await.unwrap_or(true);
        let written = write_config(&home, config).await;
        if written.is_err() && !existed {
            // Undo: a profile whose configuration failed leaves no home behind.
            let _ = tokio::fs::remove_dir_all(&home).await;
        }
        written
    }

    async fn shutdown(&self) {
        let running: Vec<_> = self.running.lock().await.drain().collect();
        for (_, (runtime, _)) in running {
            runtime.shutdown().await;
        }
    }
}

/// Creates `home` if needed and replaces its `config.yaml` atomically. The file holds
/// credentials (the MCP token, a model API key), so it is the owner's only from its first byte.
async fn write_config(home: &Path, config: &HermesConfig) -> Result<(), ProviderError> {
    use tokio::io::AsyncWriteExt;
    tokio::fs::create_dir_all(home)
        .await
        .map_err(|e| io_error("cannot create", home, e))?;
    let path = home.join(CONFIG_FILE);
    let partial = home.join(format!("{CONFIG_FILE}.partial"));
    let write = async {
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)
            .await?;
        file.write_all(config.to_yaml().as_bytes()).await?;
        file.sync_all().await
    };
    write
        .await
        .map_err(|e| io_error("cannot write", &partial, e))?;
    tokio::fs::rename(&partial, &path)
        .await
        .map_err(|e| io_error("cannot write", &path, e))
}

fn endpoint(runtime: &RunningRuntime, token: &str) -> RuntimeEndpoint {
    RuntimeEndpoint {
        ws_url: runtime.ws_url(),
        token: token.to_owned(),
    }
}
