//! What every handler and background task shares.

use std::ops::Deref;
use std::sync::Arc;

use edith_store::{InstanceRecord, Store};
use edith_types::{JobEvent, ProviderKind, TurnEvent};

use crate::app::Hub;
use crate::error::AppResult;
use crate::runtime::{GatewayPool, Link, Providers, RuntimeEndpoint, RuntimeProvider};
use crate::tools::ToolHosts;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub store: Store,
    /// The runtime providers this build has.
    pub providers: Providers,
    /// Open native gateway connections, one per running instance.
    pub gateways: GatewayPool,
    pub turn_events: Hub<TurnEvent>,
    pub job_events: Hub<JobEvent>,
    /// Relayed WebSocket connections to profiles' gateways.
    pub relays: crate::app::relay::Relays,
    /// MCP connections to tool hosts.
    pub tool_hosts: ToolHosts,
    /// The runtimes that keep a profile's tool list, told when it changes.
    pub tool_lists: Arc<crate::tools::ToolLists>,
    /// Held while the reconciler looks at runtimes (see `app::reconciler::check`).
    pub reconciling: tokio::sync::Mutex<()>,
    /// The `external` runtimes this replica connects to at once as it takes their instances
    /// (see `app::reconciler::watch_external`).
    pub external_watches: crate::app::reconciler::ExternalWatches,
    /// Per-key request rates and open streams, and the size limits.
    pub gate: crate::http::limits::Gate,
    /// What `/metrics` shows.
    pub metrics: crate::metrics::Metrics,
    /// When each API key's last use was last written.
    pub last_use: crate::auth::LastUse,
    /// API keys found by their secret's hash, kept for a while.
    pub known_keys: crate::auth::KnownKeys,
    /// For each turn driven here, held while an answer or a cancel is given to its runtime, and
    /// while its driver writes to its log (see `app::turns::gates`); it notes a cancel too.
    pub turn_gates: crate::app::TurnGates,
    /// Held by a change to a profile's row and native config, and shared by turns being stored
    /// on a runtime that such a change restarts (see `app::ProfileLocks`).
    pub profile_changes: crate::app::ProfileLocks,
    /// The spans of the turns driven here, which their tool calls belong to.
    pub running_turns: crate::telemetry::RunningTurns,
    /// This replica among those sharing the database: its name (in leases), and the instances
    /// it owns.
    pub replica: crate::app::replicas::Replica,
    /// The jobs running in this process.
    pub jobs_running: std::sync::Mutex<std::collections::HashSet<edith_types::JobId>>,
    /// For requests the control plane forwards to runtimes (their Desktop routes).
    pub http: reqwest::Client,
    /// This server's own base URL, which runtimes use to reach its MCP endpoints.
    pub public_url: String,
    /// Flips to `true` when the server stops; streams and background work end on it.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }

    pub fn provider(&self, kind: ProviderKind) -> AppResult<&dyn RuntimeProvider> {
        self.providers.get(kind)
    }

    /// The instance's gateway connection, starting its runtime if needed.
    pub async fn gateway(&self, record: &InstanceRecord) -> AppResult<Arc<Link>> {
        let provider = self.provider(record.instance.provider)?;
        self.gateways.connect(provider, record).await
    }

    /// Where the instance's runtime listens, starting it if needed.
    pub async fn endpoint(&self, record: &InstanceRecord) -> AppResult<RuntimeEndpoint> {
        let provider = self.provider(record.instance.provider)?;
        Ok(provider.start(record).await?)
    }
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// Returns once the server is stopping. (Waiting on the flag this way holds no borrow of it
/// across an await, so the futures that use it stay `Send`.)
pub async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}
