//! The EDITH control plane.
//!
//! Applications manage instances, profiles, sessions, turns, tools and provisioning jobs over
//! REST + SSE under `/v1`; the control plane routes each instance to its runtime provider and
//! talks to the runtime only through the native Hermes gateway protocol.

mod app;
mod auth;
mod error;
mod http;
mod metrics;
mod runtime;
mod state;
mod telemetry;
mod tools;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use edith_store::Store;

pub use auth::ADMIN_KEY_FILE;
pub use edith_store::Synchronous as SqliteSynchronous;
pub use error::AppError;
pub use http::limits::Limits;
pub use http::{openapi, unlisted_routes};
pub use runtime::{ADMIN_KEY_VARIABLE, DATABASE_URL_VARIABLE, RUNTIME_STARTED, RuntimeCommand};
pub use telemetry::export_spans;

/// The environment variable `edith serve` reads its `--sqlite-sync` from.
pub const SQLITE_SYNC_VARIABLE: &str = "EDITH_SQLITE_SYNC";

use state::{AppState, Inner};

/// How to run a control plane.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen; port 0 lets the OS pick.
    pub listen: SocketAddr,
    /// Holds `edith.db` (unless `database_url` names another database) and the runtimes'
    /// homes.
    pub data_dir: PathBuf,
    /// The database: `postgres://…` for PostgreSQL, or `None` for the SQLite file
    /// `<data_dir>/edith.db`. It may hold a password: it is never logged or shown.
    pub database_url: Option<String>,
    /// What a commit to a SQLite database waits for: `Normal` (the default) loses nothing to a
    /// crash of the process, `Full` nothing to a power cut either, at one sync of the disk per
    /// commit. Only for SQLite (PostgreSQL's is the server's `synchronous_commit`).
    pub sqlite_synchronous: SqliteSynchronous,
    /// This replica's name among the replicas sharing the database; `None` for the one kept in
    /// `<data_dir>/replica.id` (made on first start). Replicas sharing a data dir need one each.
    pub replica: Option<String>,
    /// How long a replica that stops renewing keeps what it owns (instances, the turns it
    /// drives, jobs) before another replica takes it over.
    pub lease: std::time::Duration,
    /// Where runtimes (their callback tools) and the other replicas reach this one, e.g.
    /// `https://replica-1.internal:8443`; `None` for `http://<listen address>`.
    pub advertise_url: Option<String>,
    /// The first admin API key (`EDITH_API_KEY`). Without it, one is made on a store that has
    /// none and written to `<data_dir>/admin.key` (mode 0600).
    pub admin_key: Option<String>,
    /// Listening beyond loopback is refused unless TLS terminates in front of this server and
    /// this says so.
    pub behind_tls_proxy: bool,
    /// The runtime commands `process` instances may run, by name (the operator's choice; callers
    /// only name one).
    pub runtimes: BTreeMap<String, RuntimeCommand>,
    /// What one caller may ask of the server.
    pub limits: Limits,
    /// Offer the `sim` provider (fault injection, for testing the control plane).
    pub sim_provider: bool,
    /// Where `external` runtimes may be attached: `host` (any port) or `host:port` entries;
    /// `None` lets an admin attach any.
    pub external_hosts: Option<Vec<String>>,
}

impl ServerConfig {
    /// A loopback control plane keeping its data in `data_dir`, port chosen by the OS.
    pub fn local(data_dir: PathBuf) -> Self {
        Self {
            listen: ([127, 0, 0, 1], 0).into(),
            data_dir,
            database_url: None,
            sqlite_synchronous: SqliteSynchronous::Normal,
            replica: None,
            lease: std::time::Duration::from_secs(15),
            advertise_url: None,
            admin_key: None,
            behind_tls_proxy: false,
            runtimes: builtin_runtimes(),
            limits: Limits::default(),
            sim_provider: false,
            external_hosts: None,
        }
    }
}

/// The name of our own runtime among the `process` runtimes.
pub const BUILTIN_RUNTIME: &str = "hermes-runtime";

/// Our `hermes-runtime` binary, when it sits beside the running executable (as an install and
/// `cargo build` put it; one level up for cargo's test and example executables), as the
/// runtime `hermes-runtime`.
pub fn builtin_runtimes() -> BTreeMap<String, RuntimeCommand> {
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(std::path::Path::parent);
    let beside = [dir, dir.and_then(std::path::Path::parent)]
        .into_iter()
        .flatten()
        .map(|dir| dir.join(BUILTIN_RUNTIME))
        .find(|path| path.is_file());
    beside
        .map(|program| {
            let command = RuntimeCommand {
                program,
                args: Vec::new(),
            };
            BTreeMap::from([(BUILTIN_RUNTIME.to_owned(), command)])
        })
        .unwrap_or_default()
}

/// A control plane serving on a socket.
pub struct RunningServer {
    url: String,
    state: AppState,
    /// The tasks that keep this replica alive among the others (stopped before the store
    /// closes: one holds a connection of its pool).
    background: Vec<tokio::task::JoinHandle<()>>,
    stop: tokio::sync::watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot use the data dir {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open the store: {0}")]
    Store(#[from] edith_store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot recover unfinished work: {0}")]
    Recover(String),
    #[error("{0}")]
    Replica(String),
    #[error("admin API key: {0}")]
    AdminKey(String),
    #[error(
        "refusing to listen on {0}, beyond this machine, without TLS in front: API keys would \
         cross the network in clear. Listen on 127.0.0.1 behind a TLS proxy and say so with \
         --behind-tls-proxy"
    )]
    Insecure(SocketAddr),
}

/// Opens the store, binds, recovers unfinished work and starts serving.
pub async fn start(config: ServerConfig) -> Result<RunningServer, StartError> {
    let data_dir = &config.data_dir;
    if !config.listen.ip().is_loopback() && !config.behind_tls_proxy {
        return Err(StartError::Insecure(config.listen));
    }
    tokio::fs::create_dir_all(data_dir)
        .await
        .map_err(|source| StartError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
    let url = match &config.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite:{}", data_dir.join("edith.db").display()),
    };
    let replica = match &config.replica {
        Some(name) if app::replicas::valid_name(name) => name.clone(),
        Some(name) => {
            return Err(StartError::Replica(format!(
                "`{name}` is not a replica name: use 1 to 64 letters, digits, `.`, `_` or `-`"
            )));
        }
        None => replica_id(data_dir).await?,
    };
    let store = Store::open_with(&url, config.sqlite_synchronous)
        .await?
        .named(&replica);
    let sqlite_sync = (store.backend() == "sqlite").then(|| config.sqlite_synchronous.as_str());
    tracing::info!(
        backend = store.backend(),
        sqlite_sync,
        replica,
        "store opened"
    );
    auth::bootstrap(&store, data_dir, config.admin_key.as_deref()).await?;
    let listener = http::listener::bind(config.listen).map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let url = format!("http://{addr}");
    let public_url = match &config.advertise_url {
        Some(advertised) => advertised_url(advertised)?,
        None => url.clone(),
    };
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let metrics = metrics::Metrics::default();
    let state = AppState::new(Inner {
        store,
        providers: runtime::Providers::new(&config),
        gateways: Default::default(),
        turn_events: Default::default(),
        job_events: Default::default(),
        tool_hosts: Default::default(),
        tool_lists: Default::default(),
        relays: Default::default(),
        replica: app::replicas::Replica::new(replica, config.lease),
        jobs_running: Default::default(),
        turn_gates: Default::default(),
        profile_changes: Default::default(),
        running_turns: Default::default(),
        last_use: Default::default(),
        known_keys: Default::default(),
        gate: http::limits::Gate::new(config.limits.clone(), metrics.streams_open()),
        metrics,
        reconciling: Default::default(),
        external_watches: Default::default(),
        // After a burst, only a few idle connections per runtime or tool host are kept. No
        // redirect is followed: what is forwarded (to another replica, a runtime's Desktop
        // routes) goes back as it was answered (a retried streamed POST's 303 included), and a
        // runtime or tool host cannot send the control plane's requests elsewhere.
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(10))
            .pool_max_idle_per_host(16)
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap_or_default(),
        public_url,
        shutdown: stopping.clone(),
    });
    app::replicas::announce(&state, state.store.backend() == "sqlite")
        .await
        .map_err(StartError::Replica)?;
    recover(&state).await?;
    app::reconciler::spawn(state.clone());
    let mut background = Vec::from(app::replicas::spawn(state.clone()));
    background.extend(
        app::announcements::spawn(state.clone())
            .await
            .map_err(|e| StartError::Replica(e.detail))?,
    );
    // Each runtime's version is asked once, now, so that listing them later is quick.
    let warming = state.clone();
    tokio::spawn(async move {
        for name in warming.providers.process.runtimes().keys() {
            warming.providers.process.version(name).await;
        }
    });

    let (router, _, _) = http::build();
    // Each layer wraps those above it, so a request meets them from the bottom up: logged,
    // its key checked, its body read whole (bounded in size and time), forwarded to the
    // replica owning its instance if that is another, its `Idempotency-Key` looked at, then
    // the handler.
    let app = router
        .layer(axum::extract::DefaultBodyLimit::max(
            config.limits.max_body_bytes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::idempotency::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::forward::to_owner,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::body::read_whole,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::count_request,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::forward::name_replica,
        ))
        .layer(http::request_log())
        .with_state(state.clone());
    let server = tokio::spawn(http::listener::serve(
        listener,
        app,
        config.limits.clone(),
        stopping,
    ));
    Ok(RunningServer {
        url,
        state,
        background,
        stop,
        server: Some(server),
    })
}

/// Work an earlier run of this replica, or a replica that died, left unfinished: the instances
/// nobody live owns are taken (their runtimes left running are stopped and start again on next
/// use, their restarts resume), their jobs run again (their steps are idempotent), and the
/// turns nobody drives end as interrupted.
async fn recover(state: &AppState) -> Result<(), StartError> {
    let recover_error = |e: AppError| StartError::Recover(e.detail);
    app::replicas::take_up(state).await.map_err(recover_error)?;
    app::jobs::take_over(state).await.map_err(recover_error)?;
    Ok(())
}

/// An advertised URL as it is kept: `http(s)://host[:port]`, without a path or a trailing `/`.
fn advertised_url(raw: &str) -> Result<String, StartError> {
    let trimmed = raw.trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed).ok();
    match parsed {
        Some(url)
            if matches!(url.scheme(), "http" | "https")
                && url.host().is_some()
                && url.path() == "/"
                && url.query().is_none() =>
        {
            Ok(trimmed.to_owned())
        }
        _ => Err(StartError::Replica(format!(
            "--advertise-url must be http(s)://HOST[:PORT] with no path, got `{raw}`"
        ))),
    }
}

/// This replica's name, kept in `<data-dir>/replica.id` (made on first start, and again when
/// the file holds no valid name).
async fn replica_id(data_dir: &std::path::Path) -> Result<String, StartError> {
    let path = data_dir.join("replica.id");
    let data_dir_error = |source| StartError::DataDir {
        path: path.display().to_string(),
        source,
    };
    match tokio::fs::read_to_string(&path).await {
        Ok(id) if app::replicas::valid_name(id.trim()) => Ok(id.trim().to_owned()),
        Ok(_) | Err(_) => {
            let id = format!("replica_{}", uuid::Uuid::new_v4().simple());
            tokio::fs::write(&path, format!("{id}\n"))
                .await
                .map_err(data_dir_error)?;
            Ok(id)
        }
    }
}

impl RunningServer {
    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many runtimes the control plane runs now, all providers together.
    pub async fn runtimes_running(&self) -> usize {
        self.state.providers.running_count().await
    }

    /// This replica's name among those sharing the database.
    pub fn replica(&self) -> &str {
        self.state.replica.name()
    }

    /// Returns once another process has taken this replica's name (it had lost the database
    /// for longer than a lease): it must stop, as both would act as the owner of its
    /// instances.
    pub async fn displaced(&self) {
        self.state.replica.displaced().await
    }

    /// Stops serving, ends open streams, stops the embedded runtimes and closes the store.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.state.relays.end_all();
        self.state.gateways.forget_all().await;
        self.state.providers.shutdown().await;
        for task in self.background.drain(..) {
            task.abort();
            let _ = task.await;
        }
        // Bounded: a database that stopped answering does not hold the stop up.
        let closing = async {
            app::replicas::leave(&self.state).await;
            self.state.store.close().await;
        };
        if tokio::time::timeout(std::time::Duration::from_secs(10), closing)
            .await
            .is_err()
        {
            tracing::warn!("the database did not close within 10 s");
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for task in &self.background {
            task.abort();
        }
        // Not left to the provider's own drop: tasks that hold the state (a turn's driver, the
        // reconciler) may outlive this, or the process may end first (a benchmark interrupted).
        self.state.providers.process.kill_all();
    }
}
