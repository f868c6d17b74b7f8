//! Runtime providers: how an instance's Hermes runtime is made, started, stopped and destroyed.

#[cfg(feature = "embedded")]
mod embedded;
mod external;
mod process;
#[cfg(feature = "embedded")]
mod sim;

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::{InstanceId, ProviderKind};

use crate::error::AppResult;
use hermes_native::config::HermesConfig;

#[cfg(feature = "embedded")]
pub use embedded::EmbeddedProvider;
pub use external::{ExternalProvider, gateway_url};
pub use process::{
    ADMIN_KEY_VARIABLE, DATABASE_URL_VARIABLE, Exited, ProcessProvider, RUNTIME_STARTED,
    RuntimeCommand,
};
#[cfg(feature = "embedded")]
pub use sim::SimProvider;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

/// How to reach a started runtime's native gateway.
#[derive(Clone)]
pub struct RuntimeEndpoint {
    /// `ws://host:port/api/ws`
    pub ws_url: String,
    pub token: String,
    /// For a runtime in this process: its gateway without the socket (the same frames over
    /// channels), which the control plane uses instead of `ws_url`.
    pub in_process: Option<InProcessGateway>,
}

/// Whether an instance's runtime runs now ([`RuntimeProvider::running_now`]).
pub enum RunningNow {
    /// It runs, at this endpoint, started by this control plane at `since` (`None`: it is not
    /// this control plane's to start).
    Running {
        endpoint: RuntimeEndpoint,
        since: Option<std::time::Instant>,
    },
    /// It does not run (stopped, or exited and not yet reaped).
    Stopped,
    /// It is being started or stopped: to be asked again later.
    Changing,
}

/// Opens a gateway connection to a runtime in this process: the sender takes what the client
/// sends, the receiver gives what the gateway sends back (and ends with the connection).
pub type InProcessGateway = std::sync::Arc<
    dyn Fn() -> (
            tokio::sync::mpsc::UnboundedSender<String>,
            tokio::sync::mpsc::UnboundedReceiver<String>,
        ) + Send
        + Sync,
>;

impl RuntimeEndpoint {
    /// The runtime's HTTP base (`http://host:port`), where its Desktop routes are.
    pub fn http_url(&self) -> String {
        let base = self.ws_url.trim_end_matches("/api/ws");
        match base.split_once("://") {
            Some(("wss", rest)) => format!("https://{rest}"),
            Some((_, rest)) => format!("http://{rest}"),
            None => base.to_owned(),
        }
    }
}

#[async_trait]
pub trait RuntimeProvider: Send + Sync {
    /// Prepares what the runtime needs. Idempotent.
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError>;
    /// Starts the runtime, or returns the running one's endpoint. Idempotent.
    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError>;
    /// Whether the runtime runs now, and where; never waits for a start or a stop under way
    /// (`Changing`), and starts nothing. The reconciler reconnects through it to a runtime whose
    /// connection closed; a runtime stopped on purpose stays stopped until its next use.
    async fn running_now(&self, instance: &InstanceRecord) -> RunningNow;
    /// Stops the runtime if it runs; in-flight turns end as interrupted. Idempotent.
    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError>;
    /// Stops the runtime of an instance the reconciler marked `lost`, and starts none for it
    /// until [`Self::restart`]: a use that saw the instance `ready` just before cannot launch a
    /// runtime nobody watches for it.
    async fn stop_lost(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        self.stop(instance).await
    }
    /// Starts the runtime of a `lost` instance again (its restart policy's restart).
    async fn restart(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        self.start(instance).await
    }
    /// Removes everything `provision` made. Idempotent.
    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError>;
    /// Whether the control plane writes native profiles' configuration on this provider's
    /// runtimes (not on a runtime someone else runs).
    fn configures_profiles(&self) -> bool {
        true
    }
    /// Creates or rewrites a native profile's home and `config.yaml`; on failure, a home it
    /// created is removed again.
    async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError>;
    /// Points a native profile's MCP server `server` at `url` if its configuration names
    /// another address (the control plane came back on another one); whether it did.
    async fn retarget_mcp_server(
        &self,
        instance: &InstanceId,
        native_name: &str,
        server: &str,
        url: &str,
    ) -> Result<bool, ProviderError> {
        let _ = (instance, native_name, server, url);
        Ok(false)
    }
    /// Removes a native profile's home (not the root's). Idempotent.
    async fn remove_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
    ) -> Result<(), ProviderError> {
        let _ = (instance, native_name);
        Ok(())
    }
    /// How many runtimes this provider runs now.
    async fn running_count(&self) -> usize {
        0
    }
    /// Stops every runtime this provider runs (the control plane is shutting down).
    async fn shutdown(&self);
}

/// The providers this control plane was built with, by kind.
pub struct Providers {
    #[cfg(feature = "embedded")]
    embedded: EmbeddedProvider,
    /// Also knows the runtimes the operator allows.
    pub process: ProcessProvider,
    /// Also knows the hosts the operator allows.
    pub external: ExternalProvider,
    /// Offered only when the operator enabled it.
    #[cfg(feature = "embedded")]
    pub sim: Option<SimProvider>,
}

impl Providers {
    /// The providers `config` asks for, keeping what they make under its data dir.
    pub fn new(config: &crate::ServerConfig) -> Self {
        let homes = super::homes::Homes::new(&config.data_dir);
        let log_limit = config.limits.runtime_log_bytes;
        Self {
            #[cfg(feature = "embedded")]
            embedded: EmbeddedProvider::new(homes.clone()),
            #[cfg(feature = "embedded")]
            sim: config.sim_provider.then(|| SimProvider::new(homes.clone())),
            process: ProcessProvider::new(homes, config.runtimes.clone(), log_limit),
            external: ExternalProvider::new(config.external_hosts.clone()),
        }
    }

    /// The kinds this build can create instances with.
    pub fn kinds(&self) -> Vec<ProviderKind> {
        <ProviderKind as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .filter(|kind| self.get(*kind).is_ok())
            .collect()
    }

    /// The provider of `kind`; one this build lacks is the caller's mistake, said clearly.
    pub fn get(&self, kind: ProviderKind) -> AppResult<&dyn RuntimeProvider> {
        match kind {
            #[cfg(feature = "embedded")]
            ProviderKind::Embedded => Ok(&self.embedded),
            #[cfg(not(feature = "embedded"))]
            ProviderKind::Embedded => Err(crate::error::AppError::invalid(
                "this control plane was built without the `embedded` provider (feature `embedded`)",
            )),
            ProviderKind::Process => Ok(&self.process),
            ProviderKind::External => Ok(&self.external),
            #[cfg(feature = "embedded")]
            ProviderKind::Sim if self.sim.is_some() => Ok(self.sim.as_ref().expect("checked")),
            ProviderKind::Sim => Err(crate::error::AppError::invalid(
                "the `sim` provider is for testing the control plane; this one was not started \
                 with it (`edith serve --sim-provider`)",
            )),
        }
    }

    /// How many runtimes run now, all providers together.
    pub async fn running_count(&self) -> usize {
        let process = self.process.running_count().await;
        #[cfg(feature = "embedded")]
        {
            let sim = match &self.sim {
                Some(sim) => sim.running_count().await,
                None => 0,
            };
            process + self.embedded.running_count().await + sim
        }
        #[cfg(not(feature = "embedded"))]
        process
    }

    /// Stops every runtime the providers run (the control plane is shutting down).
    pub async fn shutdown(&self) {
        #[cfg(feature = "embedded")]
        {
            self.embedded.shutdown().await;
            if let Some(sim) = &self.sim {
                sim.shutdown().await;
            }
        }
        self.process.shutdown().await;
    }

    /// The runtimes that exited on their own since the last look (reaped and forgotten).
    pub async fn reap_exited(&self) -> Vec<Exited> {
        #[allow(unused_mut)]
        let mut exited = self.process.reap_exited().await;
        #[cfg(feature = "embedded")]
        if let Some(sim) = &self.sim {
            exited.extend(sim.reap_exited().await);
        }
        exited
    }
}
