//! Runtime homes on this machine (`<data-dir>/instances/<id>/home`, a `HERMES_HOME`), for the
//! providers whose runtimes run here: making them, writing a native profile's `config.yaml`,
//! removing them.

use std::path::{Path, PathBuf};

use edith_types::InstanceId;
use hermes_native::config::{CONFIG_FILE, HermesConfig};
use hermes_native::profile::DEFAULT_PROFILE;

use super::ProviderError;

/// Where a provider keeps its instances' directories.
#[derive(Debug, Clone)]
pub struct Homes {
    /// `<data-dir>/instances`
    root: PathBuf,
}

impl Homes {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("instances"),
        }
    }

    /// The instance's directory: its home, and whatever else the provider keeps (logs).
    pub fn dir(&self, instance: &InstanceId) -> PathBuf {
        self.root.join(instance.as_str())
    }

    /// The runtime's `HERMES_HOME`.
    pub fn home(&self, instance: &InstanceId) -> PathBuf {
        self.dir(instance).join("home")
    }

    /// Makes the home (and its `profiles/`). Idempotent.
    pub async fn provision(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        let home = self.home(instance);
        tokio::fs::create_dir_all(home.join("profiles"))
            .await
            .map_err(|e| io_error("cannot create", &home, e))
    }

    /// The runtime's working directory: what its agent's commands and its Desktop file routes
    /// see, apart from the home's configuration and secrets. Made if missing.
    pub async fn workspace(&self, instance: &InstanceId) -> Result<PathBuf, ProviderError> {
        let workspace = self.existing_home(instance)?.join("workspace");
        tokio::fs::create_dir_all(&workspace)
            .await
            .map_err(|e| io_error("cannot create", &workspace, e))?;
        Ok(workspace)
    }

    /// Fails unless `provision` made the home.
    pub fn existing_home(&self, instance: &InstanceId) -> Result<PathBuf, ProviderError> {
        let home = self.home(instance);
        if home.is_dir() {
            Ok(home)
        } else {
            Err(ProviderError(format!(
                "the runtime home {} is missing; the instance was not provisioned",
                home.display()
            )))
        }
    }

    /// Removes the instance's directory. Idempotent.
    pub async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        let dir = self.dir(instance);
        let removed = tokio::fs::remove_dir_all(&dir).await;
        // An embedded runtime parses its homes' configs in this process.
        HermesConfig::forget_under(&dir);
        match removed {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("cannot remove", &dir, e)),
        }
    }

    /// Removes a named native profile's home; for the root profile (the runtime's own home,
    /// which stays), the `config.yaml` the control plane wrote — its model key and tool relay
    /// go with it. Idempotent.
    pub async fn remove_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
    ) -> Result<(), ProviderError> {
        if native_name == DEFAULT_PROFILE {
            let config = self.home(instance).join(CONFIG_FILE);
            let removed = tokio::fs::remove_file(&config).await;
            HermesConfig::forget_under(&config);
            return match removed {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_error("cannot remove", &config, e)),
            };
        }
        let home = self.home(instance).join("profiles").join(native_name);
        let removed = tokio::fs::remove_dir_all(&home).await;
        HermesConfig::forget_under(&home);
        match removed {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("cannot remove", &home, e)),
        }
    }

    /// Points a native profile's MCP server `server` at `url` when its `config.yaml` names
    /// another address; whether it did. A profile without a config or without that server is
    /// left as it is.
    pub async fn retarget_mcp_server(
        &self,
        instance: &InstanceId,
        native_name: &str,
        server: &str,
        url: &str,
    ) -> Result<bool, ProviderError> {
        let home = self.profile_home(instance, native_name);
        let mut config = HermesConfig::load(&home).await.map_err(|e| {
            ProviderError(format!(
                "cannot read {}: {e}",
                home.join(CONFIG_FILE).display()
            ))
        })?;
        match config.mcp_servers.get_mut(server) {
            Some(entry) if entry.url != url => entry.url = url.to_owned(),
            _ => return Ok(false),
        }
        write_config(&home, &config).await?;
        Ok(true)
    }

    /// A native profile's home: the runtime's own for the root profile.
    fn profile_home(&self, instance: &InstanceId, native_name: &str) -> PathBuf {
        let root = self.home(instance);
        if native_name == DEFAULT_PROFILE {
            root
        } else {
            root.join("profiles").join(native_name)
        }
    }

    /// Creates or rewrites a native profile's home and `config.yaml`; a home it had to create
    /// is removed again when writing fails.
    pub async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError> {
        let home = self.profile_home(instance, native_name);
        let existed = tokio::fs::try_exists(&home).await.unwrap_or(true);
        let written = write_config(&home, config).await;
        if written.is_err() && !existed {
            let _ = tokio::fs::remove_dir_all(&home).await;
        }
        written
    }
}

pub fn io_error(what: &str, path: &Path, e: std::io::Error) -> ProviderError {
    ProviderError(format!("{what} {}: {e}", path.display()))
}

/// Creates `home` if needed and replaces its `config.yaml` atomically (owner-only: it holds
/// credentials).
async fn write_config(home: &Path, config: &HermesConfig) -> Result<(), ProviderError> {
    let (dir, config) = (home.to_path_buf(), config.clone());
    tokio::task::spawn_blocking(move || config.save(&dir))
        .await
        .map_err(|e| ProviderError(format!("cannot write {}: {e}", home.display())))?
        .map_err(|e| io_error("cannot write", &home.join(CONFIG_FILE), e))
}
