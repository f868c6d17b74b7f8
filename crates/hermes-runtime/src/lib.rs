//! A Hermes-compatible agent runtime.
//!
//! It speaks the Hermes Agent 0.19 gateway protocol on `/api/ws` and a subset of its REST routes,
//! keeps sessions in `state.db` per profile home, and runs an agent loop over a model and MCP
//! tools. It is launched like `hermes serve` (`serve --host H --port P`, `HERMES_HOME`,
//! `HERMES_DASHBOARD_SESSION_TOKEN`) and prints the same ready line, so a control plane can use
//! either without knowing which one it got.

mod agent;
mod checkpoints;
mod config_view;
mod cron;
mod dotenv;
mod gateway;
mod http;
mod mcp_catalog;
pub mod model;
mod prompts;
mod pyjson;
mod retry;
mod runtime;
mod session;
mod skills;
mod store;
mod title;
mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use gateway::IMPLEMENTED_METHODS;

use axum::serve::ListenerExt;
pub use runtime::Reaping;
use runtime::Runtime;

/// The Hermes Agent release whose protocol this runtime speaks.
pub const HERMES_COMPAT_VERSION: &str = "0.19.0";

/// How to launch a runtime.
#[derive(Clone)]
pub struct RuntimeConfig {
    /// `HERMES_HOME`.
    pub home: PathBuf,
    /// `HERMES_DASHBOARD_SESSION_TOKEN`.
    pub token: String,
    /// Where to listen; port 0 lets the OS pick.
    pub listen: SocketAddr,
    /// When live sessions whose client went away are closed.
    pub reaping: Reaping,
    /// The directory the Desktop file routes (`/api/fs/*`, `/api/git/*`) may reach: relative
    /// paths start there, and nothing outside it is read or written. The current directory
    /// unless set (`hermes-runtime serve --workspace DIR`).
    pub workspace: PathBuf,
    /// How often the scheduler looks for due cron jobs.
    pub cron_tick: Duration,
}

impl std::fmt::Debug for RuntimeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeConfig")
            .field("home", &self.home)
            .field("token", &"<redacted>")
            .field("listen", &self.listen)
            .field("reaping", &self.reaping)
            .field("workspace", &self.workspace)
            .field("cron_tick", &self.cron_tick)
            .finish()
    }
}

impl RuntimeConfig {
    pub fn new(home: PathBuf, token: String, listen: SocketAddr) -> Self {
        Self {
            home,
            token,
            listen,
            reaping: Reaping::default(),
            // Resolved when serving starts: a current directory that cannot be read fails the
            // start rather than opening the whole machine.
            workspace: PathBuf::from("."),
            cron_tick: Duration::from_secs(5),
        }
    }
}

/// A runtime serving on a socket. Stop it with [`RunningRuntime::shutdown`]; dropping it
/// stops it too, without waiting for turns to wind down.
pub struct RunningRuntime {
    addr: SocketAddr,
    runtime: Arc<Runtime>,
    stop: tokio::sync::watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for RunningRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningRuntime")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Binds and starts serving; returns once the socket accepts connections.
pub async fn serve(config: RuntimeConfig) -> std::io::Result<RunningRuntime> {
    tokio::fs::create_dir_all(&config.home).await?;
    // Canonical, so that a resolved path inside it starts with it.
    let workspace = tokio::fs::canonicalize(&config.workspace)
        .await
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("the workspace {}: {e}", config.workspace.display()),
            )
        })?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let runtime = Arc::new(Runtime::new(
        config.home,
        config.token,
        config.reaping,
        workspace,
        stopped.clone(),
    ));
    cron::runner::spawn(runtime.clone(), config.cron_tick);
    gateway::reaper::spawn(runtime.clone());
    let app = http::router(runtime.clone());
    let mut stopped_server = stopped;
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped_server.wait_for(|stop| *stop).await;
        };
        if let Err(e) = axum::serve(listener.tap_io(no_delay), app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, "runtime server failed");
        }
    });
    Ok(RunningRuntime {
        addr,
        runtime,
        stop,
        server: Some(server),
    })
}

impl RunningRuntime {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://host:port/api/ws` (add `?token=`).
    pub fn ws_url(&self) -> String {
        format!("ws://{}/api/ws", self.addr)
    }

    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Opens gateway connections without a socket, for a client in this process.
    pub fn in_process_gateway(&self) -> InProcessGateway {
        InProcessGateway(self.runtime.clone())
    }

    /// Ends in-flight turns as interrupted, closes every connection and `state.db`, and stops.
    pub async fn shutdown(mut self) {
        let turns = self.runtime.interrupt_all();
        for mut done in turns {
            let _ = tokio::time::timeout(Duration::from_secs(10), done.changed()).await;
        }
        let _ = self.stop.send(true);
        // Background prompts see the stop and wind down (each within its own bound).
        let background = self.runtime.background_ended();
        let _ = tokio::time::timeout(Duration::from_secs(15), background).await;
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.runtime.close_dbs().await;
    }
}

/// Opens gateway connections to a runtime from inside its process.
#[derive(Clone)]
pub struct InProcessGateway(Arc<Runtime>);

impl InProcessGateway {
    /// A new connection: what is sent into the first channel is read as what a WebSocket
    /// client sends, and the second gives what the gateway sends back, ending with the
    /// connection. No token is asked for: the caller holds the runtime itself.
    pub fn connect(
        &self,
    ) -> (
        tokio::sync::mpsc::UnboundedSender<String>,
        tokio::sync::mpsc::UnboundedReceiver<String>,
    ) {
        gateway::in_process(self.0.clone())
    }
}

impl std::fmt::Debug for InProcessGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessGateway").finish_non_exhaustive()
    }
}

impl Drop for RunningRuntime {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Small frames (stream pieces) go out at once instead of waiting on Nagle's algorithm.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
