//! The runtime's shared state: its home, its live sessions, open databases and MCP connections.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hermes_native::LiveSessionId;
use hermes_native::config::HermesConfig;
use hermes_native::profile::{DEFAULT_PROFILE, normalize_profile_name, valid_profile_name};

use crate::dotenv::DotEnv;
use crate::prompts::Prompts;
use crate::session::LiveSession;
use crate::store::StateDb;
use crate::tools::McpPool;
use tokio_util::task::TaskTracker;

/// Idle connections kept per host by the runtime's HTTP client (model endpoints, MCP servers).
const IDLE_CONNECTIONS_PER_HOST: usize = 16;

/// When live sessions whose client went away are closed, as Hermes 0.19 closes them: one left
/// by a dropped connection once a grace period has passed, unless a client resumed it or it
/// runs a turn then; and, in a scan every few minutes, any with no client that has been idle
/// for hours (those a running turn kept from the first end up there).
#[derive(Clone, Copy, Debug)]
pub struct Reaping {
    /// `HERMES_TUI_WS_ORPHAN_REAP_GRACE_S` (20 s); zero (or `Duration::MAX`, for ever) leaves
    /// them to the scan.
    pub orphan_grace: std::time::Duration,
    /// `HERMES_TUI_SESSION_TTL_S` (6 h): how long a session with no client stays idle before
    /// the scan closes it.
    pub idle_ttl: std::time::Duration,
    /// How often the scan runs (5 minutes, as in Hermes).
    pub scan_every: std::time::Duration,
}

impl Default for Reaping {
    fn default() -> Self {
        Self {
            orphan_grace: std::time::Duration::from_secs(20),
            idle_ttl: std::time::Duration::from_secs(6 * 3600),
            scan_every: std::time::Duration::from_secs(300),
        }
    }
}

pub struct Runtime {
    /// `HERMES_HOME`: the default profile's home, and the root of `profiles/`.
    pub root: PathBuf,
    /// `HERMES_DASHBOARD_SESSION_TOKEN`: required on the WebSocket and REST routes.
    pub token: String,
    pub sessions: Mutex<HashMap<LiveSessionId, Arc<LiveSession>>>,
    /// One `state.db` pool per home, opened on first use.
    dbs: tokio::sync::Mutex<HashMap<PathBuf, StateDb>>,
    pub mcp: McpPool,
    /// For model endpoints: one pool, so connections are reused across turns.
    pub http: reqwest::Client,
    /// Approvals and questions waiting for a client's answer.
    pub prompts: Prompts,
    /// Each home's `.env` (the root's, and a profile's own), read on first use.
    dotenvs: Mutex<HashMap<PathBuf, Arc<DotEnv>>>,
    /// The skills `skills.reload` saw last, by name (with their descriptions).
    pub known_skills: Mutex<std::collections::BTreeMap<String, String>>,
    /// When live sessions whose client went away are closed.
    pub reaping: Reaping,
    /// The gateway connections open now, by number: a session on another has no client.
    pub open_connections: Mutex<std::collections::HashSet<u64>>,
    /// The directory the Desktop file routes may reach (canonical).
    pub workspace: PathBuf,
    /// Held while a profile's `cron/jobs.json` is read and rewritten.
    pub cron_lock: tokio::sync::Mutex<()>,
    /// Held while a profile's `config.yaml` is read and rewritten, so that no change is lost.
    pub config_lock: tokio::sync::Mutex<()>,
    /// Becomes `true` when the runtime stops; connections end on it.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// What `config.set yolo` without a session last set. Hermes keeps it in its process
    /// environment, which its approval guard reads only at start, so it changes nothing for
    /// the running runtime's sessions; here too it is only reported back.
    pub yolo: std::sync::atomic::AtomicBool,
    /// Work no live session holds (background prompts, titles), waited for when the runtime
    /// stops. A tracker, not a list of handles: a task that ended is forgotten at once rather
    /// than keeping its memory (about two kilobytes) until the next one starts.
    background: TaskTracker,
}

impl Runtime {
    pub fn new(
        root: PathBuf,
        token: String,
        reaping: Reaping,
        workspace: PathBuf,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        // A burst of turns opens as many connections to the model and the MCP servers as run
        // at once; only a few are kept idle afterwards (each costs buffers on both ends, and
        // an idle session needs none).
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self {
            dotenvs: Mutex::default(),
            root,
            token,
            sessions: Mutex::new(HashMap::new()),
            dbs: tokio::sync::Mutex::new(HashMap::new()),
            mcp: McpPool::new(http.clone()),
            http,
            prompts: Prompts::default(),
            known_skills: Mutex::default(),
            reaping,
            open_connections: Mutex::default(),
            workspace,
            cron_lock: tokio::sync::Mutex::new(()),
            config_lock: tokio::sync::Mutex::new(()),
            stopping,
            yolo: Default::default(),
            background: TaskTracker::new(),
        }
    }

    /// The `.env` of a home (read when first asked for; `reload.env` reads the root's again).
    pub fn dotenv(&self, home: &Path) -> Arc<DotEnv> {
        let mut dotenvs = self.dotenvs.lock().expect("not poisoned");
        dotenvs
            .entry(home.to_path_buf())
            .or_insert_with(|| Arc::new(DotEnv::load(home)))
            .clone()
    }

    /// A variable as a session of `home` sees it: its home's `.env`, the root's, then the
    /// process environment.
    pub fn env_var(&self, home: &Path, key: &str) -> Option<String> {
        self.dotenv(home)
            .value(key)
            .or_else(|| self.dotenv(&self.root).value(key))
            .or_else(|| std::env::var(key).ok())
    }

    /// The environment of an agent's command in a session of `home`: the process's, the root's
    /// `.env` and the home's own over it — without credentials (see
    /// [`crate::dotenv::is_credential`]) unless the session was given them (`passthrough`:
    /// what a skill it read declared).
    pub fn command_env(
        &self,
        home: &Path,
        passthrough: &std::collections::BTreeSet<String>,
    ) -> Vec<(String, String)> {
        let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        env.extend(self.dotenv(&self.root).vars());
        if home != self.root {
            env.extend(self.dotenv(home).vars());
        }
        env.into_iter()
            .filter(|(name, _)| !crate::dotenv::is_credential(name) || passthrough.contains(name))
            .collect()
    }

    /// Runs `work` in the background; the runtime waits for it (bounded) when it stops.
    pub fn spawn_background(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.background.spawn(work);
    }

    /// Counts as background work until dropped: a connection's, so that a stop waits for what
    /// it has queued to be written.
    pub fn background_token(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.background.token()
    }

    /// Waits until the background work running, and any started meanwhile, has ended.
    pub async fn background_ended(&self) {
        self.background.close();
        self.background.wait().await;
    }

    /// Every live session, in no order.
    pub fn live_sessions(&self) -> Vec<Arc<LiveSession>> {
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions.values().cloned().collect()
    }

    /// The home of `profile` (`None` or `default` is the root). Errors name what is wrong.
    pub fn profile_home(&self, profile: Option<&str>) -> Result<PathBuf, String> {
        let Some(raw) = profile.map(str::trim).filter(|p| !p.is_empty()) else {
            return Ok(self.root.clone());
        };
        // As Hermes's gateway reads a name: case does not matter. Unlike it, a profile that does
        // not exist is refused rather than the root used in its place.
        let name = normalize_profile_name(raw).map_err(|e| e.to_string())?;
        let home = self.home_of_profile(&name);
        if home.is_dir() {
            Ok(home)
        } else {
            Err(format!("profile `{name}` does not exist"))
        }
    }

    /// Where the profile called `name` (a valid name) lives: the root for `default`, else
    /// `profiles/<name>`.
    pub fn home_of_profile(&self, name: &str) -> PathBuf {
        if name == DEFAULT_PROFILE {
            self.root.clone()
        } else {
            self.root.join("profiles").join(name)
        }
    }

    pub async fn db(&self, home: &Path) -> Result<StateDb, sqlx::Error> {
        let mut dbs = self.dbs.lock().await;
        if let Some(db) = dbs.get(home) {
            return Ok(db.clone());
        }
        let db = StateDb::open(home).await?;
        dbs.insert(home.to_path_buf(), db.clone());
        Ok(db)
    }

    /// Every profile with its home: `default` (the root), then the named ones by name.
    pub fn profile_homes(&self) -> Vec<(String, PathBuf)> {
        let mut named: Vec<String> = std::fs::read_dir(self.root.join("profiles"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| valid_profile_name(name))
            .collect();
        named.sort();
        let mut homes = vec![(DEFAULT_PROFILE.to_owned(), self.root.clone())];
        homes.extend(named.into_iter().map(|name| {
            let home = self.root.join("profiles").join(&name);
            (name, home)
        }));
        homes
    }

    /// Closes and forgets the database of `home`, and the configs parsed there (before the
    /// home is moved or removed).
    pub async fn forget_home(&self, home: &Path) {
        HermesConfig::forget_under(home);
        let db = self.dbs.lock().await.remove(home);
        if let Some(db) = db {
            db.close().await;
        }
    }

    pub fn session(&self, sid: &str) -> Option<Arc<LiveSession>> {
        self.sessions
            .lock()
            .expect("not poisoned")
            .get(&LiveSessionId::new(sid))
            .cloned()
    }

    /// Interrupts every running turn; returns what to wait on for each to end.
    pub fn interrupt_all(&self) -> Vec<tokio::sync::watch::Receiver<()>> {
        let sessions = self.sessions.lock().expect("not poisoned");
        sessions
            .values()
            .filter_map(|session| {
                let state = session.state.lock().expect("not poisoned");
                state.running.as_ref().map(|running| {
                    running.interrupt.notify_one();
                    running.done.clone()
                })
            })
            .collect()
    }

    /// Closes every database (after the turns have ended).
    pub async fn close_dbs(&self) {
        for db in self.dbs.lock().await.values() {
            db.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    fn runtime(home: &Path) -> Runtime {
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        Runtime::new(
            home.to_path_buf(),
            "token".to_owned(),
            Reaping::default(),
            home.to_path_buf(),
            stopping,
        )
    }

    #[tokio::test]
    async fn background_work_that_ended_is_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime(dir.path());
        let (done, finished) = tokio::sync::oneshot::channel();
        runtime.spawn_background(async move {
            let _ = done.send(());
        });
        finished.await.unwrap();
        // Bounded: at most five seconds.
        for _ in 0..500 {
            if runtime.background.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a background task that ended is still held");
    }

    #[tokio::test]
    async fn a_stop_waits_for_background_work_started_before_and_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Arc::new(runtime(dir.path()));
        let (release_first, first) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn_background(async move {
            let _ = first.await;
        });
        let mut stopping = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.background_ended().await }
        });
        // Started while the stop waits: waited for too.
        let (release_second, second) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn_background(async move {
            let _ = second.await;
        });
        release_first.send(()).unwrap();
        let early = tokio::time::timeout(Duration::from_millis(100), &mut stopping).await;
        assert!(early.is_err(), "the stop waits for the second task");
        release_second.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), stopping)
            .await
            .expect("the stop ends once the work has")
            .unwrap();
    }
}
