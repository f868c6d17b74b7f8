//! The `process` provider: a runtime command the operator configured (`hermes serve`, our
//! `hermes-runtime`, …), launched like `hermes serve --host 127.0.0.1 --port 0` in the instance's
//! own `HERMES_HOME` with `HERMES_DASHBOARD_SESSION_TOKEN`, ready when it prints
//! `HERMES_BACKEND_READY port=<n>`. What it writes goes to `runtime.log` in the instance's
//! directory.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ProviderError, RunningNow, RuntimeEndpoint, RuntimeProvider};
use crate::runtime::homes::{Homes, io_error};
use crate::runtime::process_group;
use crate::runtime::runtime_log::{self, RuntimeLog};
use crate::runtime::slots::Slots;
use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::config::HermesConfig;
use rustix::process::Pid;
use tokio::io::BufReader;
use tokio::process::{Child, Command};

/// How long a runtime may take to print its ready line (the real Hermes takes a few seconds).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a runtime may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The file, in the instance's directory, that a runtime's output goes to.
pub const LOG_FILE: &str = "runtime.log";
/// The line the runtime log gets when a runtime starts, before its pid.
pub const RUNTIME_STARTED: &str = "edith: started the runtime, pid";
/// The file, in the instance's directory, naming the running runtime (`<pid> <start time>`), so
/// a control plane that died without stopping it can find it when it starts again.
const PID_FILE: &str = "runtime.pid";
/// How long a runtime whose stdout closed before its ready line may take to be seen exited.
const EXIT_AFTER_STDOUT_CLOSED: Duration = Duration::from_secs(2);
/// The ready line every Hermes-compatible runtime prints.
const READY_PREFIX: &str = "HERMES_BACKEND_READY port=";

/// A command the operator allows `process` instances to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeCommand {
    pub program: PathBuf,
    /// Arguments before `serve --host 127.0.0.1 --port 0`.
    pub args: Vec<String>,
}

impl RuntimeCommand {
    /// The command, ready for arguments; it never inherits the control plane's credentials.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for variable in NOT_INHERITED {
            command.env_remove(variable);
        }
        command
    }
}

/// The environment variable the control plane's first admin key may come from.
pub const ADMIN_KEY_VARIABLE: &str = "EDITH_API_KEY";
/// The environment variable the control plane's database URL (with its password) may come from.
pub const DATABASE_URL_VARIABLE: &str = "EDITH_DATABASE_URL";

/// Variables of the control plane's environment that a runtime never inherits: credentials.
/// A runtime runs agents and the commands they choose, which could read its environment.
const NOT_INHERITED: &[&str] = &[
    ADMIN_KEY_VARIABLE,
    DATABASE_URL_VARIABLE,
    // libpq's own, should an operator have set them for the database.
    "PGPASSWORD",
    "PGPASSFILE",
];

struct Running {
    child: Child,
    group: Pid,
    port: u16,
    started: Instant,
}

pub struct ProcessProvider {
    homes: Homes,
    /// By name: what callers may ask for.
    runtimes: BTreeMap<String, RuntimeCommand>,
    /// How large a runtime's log grows before it is rotated.
    log_limit: u64,
    /// What each runtime's `--version` said, asked once (the real Hermes takes a second).
    versions: BTreeMap<String, tokio::sync::OnceCell<Option<String>>>,
    /// The runtimes running now (the reconciler's looks never wait for a launch or a stop).
    running: Slots<Running>,
    /// Instances whose runtime was lost: none is started for them but by `restart`. Read and
    /// written only by whoever holds the instance's slot in `running`.
    lost: std::sync::Mutex<HashSet<InstanceId>>,
}

impl ProcessProvider {
    pub fn new(homes: Homes, runtimes: BTreeMap<String, RuntimeCommand>, log_limit: u64) -> Self {
        let versions = runtimes
            .keys()
            .map(|name| (name.clone(), tokio::sync::OnceCell::new()))
            .collect();
        Self {
            homes,
            runtimes,
            log_limit,
            versions,
            running: Slots::default(),
            lost: Default::default(),
        }
    }

    pub fn runtimes(&self) -> &BTreeMap<String, RuntimeCommand> {
        &self.runtimes
    }

    /// The first line the runtime `name` prints for `--version` (asked once, then kept), if it
    /// answers within a few seconds.
    pub async fn version(&self, name: &str) -> Option<String> {
        let (command, cell) = (self.runtimes.get(name)?, self.versions.get(name)?);
        cell.get_or_init(|| version_of(command)).await.clone()
    }

    fn command_for(&self, instance: &InstanceRecord) -> Result<&RuntimeCommand, ProviderError> {
        let name = instance.instance.runtime.as_deref().unwrap_or_default();
        self.runtimes.get(name).ok_or_else(|| {
            ProviderError(format!(
                "the runtime `{name}` is not configured on this control plane any more"
            ))
        })
    }

    /// Stops the instance's runtime if an earlier control-plane process (this replica's
    /// earlier run, or a replica that died) started it and left it running: the instance
    /// starts a fresh one on next use, so there are never two for one instance. Called when
    /// this replica takes the instance, before it starts a runtime for it.
    pub async fn stop_orphan(&self, instance: &InstanceId) {
        // Held throughout, so that no start here races the stop.
        let slot = self.running.slot(instance);
        let current = slot.lock().await;
        // Taken now, its state is what the store says: a loss this replica saw when it owned it
        // before is not the instance's any more.
        self.set_lost(instance, false);
        if current.is_some() {
            // This process runs it: not an orphan.
            return;
        }
        let dir = self.homes.dir(instance);
        let record = dir.join(PID_FILE);
        let Ok(text) = tokio::fs::read_to_string(&record).await else {
            return;
        };
        if let Some((pid, started)) = pid_record(&text)
            && process_group::start_time(pid) == Some(started)
        {
            tracing::warn!(pid, dir = %dir.display(), "stopping a runtime left by an earlier control plane");
            process_group::stop_adopted(pid, started, STOP_GRACE).await;
        }
        let _ = tokio::fs::remove_file(&record).await;
    }

    /// The runtimes that exited on their own since the last look, each reaped and forgotten,
    /// with how it ended and how long it had run.
    pub async fn reap_exited(&self) -> Vec<Exited> {
        let mut reaped = Vec::new();
        for (id, slot) in self.running.all() {
            // A slot being launched or stopped is someone else's business right now.
            let Ok(mut current) = slot.try_lock() else {
                continue;
            };
            if !current
                .as_ref()
                .is_some_and(|r| process_group::leader_exited(r.group))
            {
                continue;
            }
            let mut dead = current.take().expect("checked");
            // What it left in its group goes before the leader is reaped (see process_group).
            process_group::kill_group(dead.group);
            let status = dead.child.wait().await.ok();
            self.forget_pid(&id, dead.group).await;
            let how = match status {
                Some(status) => format!("the runtime exited ({status})"),
                None => "the runtime exited".to_owned(),
            };
            reaped.push(Exited {
                ran_for: dead.started.elapsed(),
                instance: id,
                how,
            });
        }
        reaped
    }

    /// The last `lines` lines of the instance's runtime log.
    pub async fn log_tail(&self, instance: &InstanceId, lines: usize) -> Vec<String> {
        runtime_log::tail(&self.homes.dir(instance).join(LOG_FILE), lines).await
    }

    async fn launch(&self, instance: &InstanceRecord) -> Result<Running, ProviderError> {
        let id = &instance.instance.id;
        let home = self.homes.existing_home(id)?;
        let workspace = self.homes.workspace(id).await?;
        let command = self.command_for(instance)?;
        let log_path = self.homes.dir(id).join(LOG_FILE);
        let log = Arc::new(
            RuntimeLog::open(&log_path, self.log_limit)
                .map_err(|e| io_error("cannot open", &log_path, e))?,
        );
        let mut child = command
            .command()
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .env("HERMES_HOME", &home)
            .env("HERMES_DASHBOARD_SESSION_TOKEN", &instance.runtime_token)
            .current_dir(&workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                ProviderError(format!("cannot start {}: {e}", command.program.display()))
            })?;
        // Its stderr goes to the log from the start; stdout once the ready line is found.
        let stderr = child.stderr.take().expect("stderr is piped");
        copy_lines(BufReader::new(stderr), log.clone());
        let group = process_group::group_of(&child)
            .ok_or_else(|| ProviderError("the runtime exited at once".to_owned()))?;
        let pid = group.as_raw_pid();
        log.line(&format!("{RUNTIME_STARTED} {pid}")).await;
        if let Some(started) = process_group::start_time(pid) {
            let record = self.homes.dir(id).join(PID_FILE);
            if let Err(e) = tokio::fs::write(&record, format!("{pid} {started}\n")).await {
                process_group::stop(&mut child, group, Duration::ZERO).await;
                return Err(io_error("cannot write", &record, e));
            }
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout);
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Some(line) = next_line(&mut lines).await {
                log.line(&line).await;
                if let Some(port) = line.strip_prefix(READY_PREFIX) {
                    return port.trim().parse::<u16>().ok();
                }
            }
            None
        })
        .await;
        let Ok(Some(port)) = ready else {
            // Its stdout closes as it exits, a moment before it is seen to have exited.
            let stdout_closed = matches!(ready, Ok(None));
            let exited = if stdout_closed {
                leader_exits_within(group, EXIT_AFTER_STDOUT_CLOSED).await
            } else {
                process_group::leader_exited(group)
            };
            process_group::stop(&mut child, group, Duration::ZERO).await;
            self.forget_pid(id, group).await;
            let what = if exited {
                "exited before it was ready"
            } else {
                "did not get ready in time and was stopped"
            };
            let tail = self.log_tail(id, 10).await.join("\n");
            return Err(ProviderError(format!(
                "the runtime `{}` {what}; the end of {}:\n{tail}",
                instance.instance.runtime.as_deref().unwrap_or_default(),
                log_path.display()
            )));
        };
        // Keep copying its output to the log, so it never blocks on a full pipe.
        copy_lines(lines, log);
        Ok(Running {
            child,
            group,
            port,
            started: Instant::now(),
        })
    }

    /// Starts the runtime in the instance's slot, which the caller holds, unless one runs there.
    async fn start_in(
        &self,
        instance: &InstanceRecord,
        current: &mut Option<Running>,
    ) -> Result<RuntimeEndpoint, ProviderError> {
        if let Some(running) = current.as_ref() {
            if !process_group::leader_exited(running.group) {
                return Ok(endpoint(running.port, &instance.runtime_token));
            }
            // It died: the reconciler reaps it and marks the instance lost; no new one here.
            return Err(ProviderError("the runtime exited".to_owned()));
        }
        let started = self.launch(instance).await?;
        let endpoint = endpoint(started.port, &instance.runtime_token);
        *current = Some(started);
        Ok(endpoint)
    }

    fn is_lost(&self, instance: &InstanceId) -> bool {
        self.lost.lock().expect("not poisoned").contains(instance)
    }

    /// Marks the instance's runtime lost or not; an instance destroyed already is never marked
    /// (nothing would take the mark away again).
    fn set_lost(&self, instance: &InstanceId, lost: bool) {
        let mut set = self.lost.lock().expect("not poisoned");
        if lost && self.homes.existing_home(instance).is_ok() {
            set.insert(instance.clone());
        } else {
            set.remove(instance);
        }
    }

    /// Stops the runtime in the instance's slot, which the caller holds, if one runs there.
    async fn stop_in(&self, instance: &InstanceId, current: &mut Option<Running>) {
        if let Some(mut running) = current.take() {
            process_group::stop(&mut running.child, running.group, STOP_GRACE).await;
            self.forget_pid(instance, running.group).await;
        }
    }

    /// Forgets the pid of a runtime that was stopped or reaped — only if the file still names
    /// it (a runtime started since has written its own).
    async fn forget_pid(&self, instance: &InstanceId, pid: Pid) {
        let record = self.homes.dir(instance).join(PID_FILE);
        let names_it = tokio::fs::read_to_string(&record)
            .await
            .ok()
            .and_then(|text| pid_record(&text))
            .is_some_and(|(recorded, _)| recorded == pid.as_raw_pid());
        if names_it {
            let _ = tokio::fs::remove_file(&record).await;
        }
    }
}

/// The first line `COMMAND --version` prints, if it answers within 20 s.
async fn version_of(command: &RuntimeCommand) -> Option<String> {
    let output = command
        .command()
        .arg("--version")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(20), output)
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(str::to_owned)
}

/// The pid and start time `runtime.pid` holds.
fn pid_record(text: &str) -> Option<(i32, u64)> {
    let mut fields = text.split_whitespace();
    let pid = fields.next()?.parse().ok()?;
    let started = fields.next()?.parse().ok()?;
    Some((pid, started))
}

/// A runtime that exited on its own.
pub struct Exited {
    pub instance: InstanceId,
    /// How it ended, for people.
    pub how: String,
    /// How long it had run since it was started.
    pub ran_for: Duration,
}

#[async_trait]
impl RuntimeProvider for ProcessProvider {
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError> {
        self.command_for(instance)?;
        self.homes.provision(&instance.instance.id).await
    }

    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let slot = self.running.slot(&instance.instance.id);
        let mut current = slot.lock().await;
        if self.is_lost(&instance.instance.id) {
            return Err(ProviderError(
                "the runtime was lost; it is started again only by the instance's restart policy"
                    .to_owned(),
            ));
        }
        self.start_in(instance, &mut current).await
    }

    async fn stop_lost(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        let mut current = self.running.slot(instance).lock_owned().await;
        self.set_lost(instance, true);
        self.stop_in(instance, &mut current).await;
        if self.homes.existing_home(instance).is_err() {
            // Destroyed before: the slot this made again goes too.
            self.running.forget(instance);
        }
        Ok(())
    }

    async fn restart(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let slot = self.running.slot(&instance.instance.id);
        let mut current = slot.lock().await;
        let id = &instance.instance.id;
        self.set_lost(id, false);
        let started = self.start_in(instance, &mut current).await;
        // Still lost until a restart works.
        self.set_lost(id, started.is_err());
        started
    }

    async fn running_now(&self, instance: &InstanceRecord) -> RunningNow {
        let slot = self.running.slot(&instance.instance.id);
        let Ok(current) = slot.try_lock() else {
            return RunningNow::Changing;
        };
        match current.as_ref() {
            Some(running) if !process_group::leader_exited(running.group) => RunningNow::Running {
                endpoint: endpoint(running.port, &instance.runtime_token),
                since: Some(running.started),
            },
            _ => RunningNow::Stopped,
        }
    }

    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        // Held until the runtime is gone: a start meanwhile waits, then launches a fresh one.
        let mut current = self.running.slot(instance).lock_owned().await;
        self.stop_in(instance, &mut current).await;
        // Stopped on purpose (this replica lets the instance go, say): its next use starts it.
        self.set_lost(instance, false);
        Ok(())
    }

    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        // Held until the home is gone too: a start meanwhile finds no home to run in.
        let mut current = self.running.slot(instance).lock_owned().await;
        self.stop_in(instance, &mut current).await;
        self.homes.destroy(instance).await?;
        self.set_lost(instance, false);
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

fn endpoint(port: u16, token: &str) -> RuntimeEndpoint {
    RuntimeEndpoint {
        ws_url: format!("ws://127.0.0.1:{port}/api/ws"),
        token: token.to_owned(),
        in_process: None,
    }
}

impl ProcessProvider {
    /// Kills every runtime this provider runs, at once and waiting for nothing: the control
    /// plane goes away without `shutdown` (dropped, or its process about to end).
    pub fn kill_all(&self) {
        for (_, slot) in self.running.all() {
            // Taken out, so that nothing left running meanwhile (a turn's driver) reaps it as a
            // runtime that exited on its own.
            if let Ok(mut current) = slot.try_lock()
                && let Some(running) = current.take()
            {
                process_group::kill_group(running.group);
            }
        }
    }
}

impl Drop for ProcessProvider {
    /// A control plane dropped without `shutdown` leaves no runtime behind.
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Copies every line of `from` to the log, in the background, until it ends.
/// Polls until the group's leader has exited, for at most `limit`; returns whether it has.
async fn leader_exits_within(group: Pid, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !process_group::leader_exited(group) {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

fn copy_lines<R>(mut from: R, log: Arc<RuntimeLog>)
where
    R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        while let Some(line) = next_line(&mut from).await {
            log.line(&line).await;
        }
    });
}

/// The next line of a runtime's output, whatever its encoding (invalid UTF-8 is replaced, so
/// one odd byte never stops the copying); `None` at the end.
async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> Option<String> {
    use tokio::io::AsyncBufReadExt;
    let mut bytes = Vec::new();
    match reader.read_until(b'\n', &mut bytes).await {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            let line = String::from_utf8_lossy(&bytes);
            Some(line.trim_end_matches(['\n', '\r']).to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime that is ready at once and takes half a second to stop after SIGTERM.
    const SLOW_TO_STOP: &str = "trap 'sleep 0.5; exit 0' TERM; \
        echo 'HERMES_BACKEND_READY port=1'; while :; do sleep 0.05; done";

    fn provider(data_dir: &std::path::Path) -> ProcessProvider {
        let command = RuntimeCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".to_owned(), SLOW_TO_STOP.to_owned(), "sh".to_owned()],
        };
        let runtimes = BTreeMap::from([("slow".to_owned(), command)]);
        ProcessProvider::new(Homes::new(data_dir), runtimes, 1 << 20)
    }

    fn record() -> InstanceRecord {
        let instance = serde_json::json!({
            "id": InstanceId::generate(), "name": "i", "provider": "process", "runtime": "slow",
            "state": "ready", "state_reason": null, "created_at": "2026-12-07T00:00:00Z",
            "updated_at": "2026-12-07T00:00:00Z",
        });
        InstanceRecord {
            instance: serde_json::from_value(instance).expect("an instance"),
            runtime_token: "runtime-token".to_owned(),
            mcp_token: "mcp-token".to_owned(),
        }
    }

    /// When the runtime running now started (from which the reconciler tells how long a
    /// runtime whose gateway went away had run).
    async fn started_at(provider: &ProcessProvider, record: &InstanceRecord) -> Option<Instant> {
        match provider.running_now(record).await {
            RunningNow::Running { since, .. } => Some(since.expect("started here")),
            RunningNow::Stopped => None,
            RunningNow::Changing => panic!("nothing is being started or stopped"),
        }
    }

    /// A provider with a provisioned instance whose runtime runs, and the directory they are in.
    async fn running() -> (tempfile::TempDir, ProcessProvider, InstanceRecord) {
        let data = tempfile::tempdir().expect("a temporary directory");
        let provider = provider(data.path());
        let record = record();
        provider.provision(&record).await.expect("provisioned");
        provider.start(&record).await.expect("started");
        (data, provider, record)
    }

    /// Runs `stopping` (this runtime takes half a second to stop) and, 150 ms into it, a start
    /// of `record`'s runtime; both within 20 s. What the start gave.
    async fn with_a_late_start(
        provider: &ProcessProvider,
        record: &InstanceRecord,
        stopping: impl std::future::Future<Output = Result<(), ProviderError>>,
    ) -> Result<RuntimeEndpoint, ProviderError> {
        let late_start = async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            provider.start(record).await
        };
        let both = async { tokio::join!(stopping, late_start) };
        let limit = Duration::from_secs(20);
        let (stopped, started) = tokio::time::timeout(limit, both).await.expect("in time");
        stopped.expect("stopped");
        started
    }

    #[tokio::test]
    async fn a_running_runtime_is_reported_with_its_start() {
        let data = tempfile::tempdir().expect("a temporary directory");
        let provider = provider(data.path());
        let record = record();
        provider.provision(&record).await.expect("provisioned");
        assert!(
            started_at(&provider, &record).await.is_none(),
            "not started"
        );
        let before = Instant::now();
        provider.start(&record).await.expect("started");
        let first = started_at(&provider, &record).await.expect("running");
        assert!(before <= first && first <= Instant::now());
        // Asked again, or started again while it runs: the same start.
        provider.start(&record).await.expect("running");
        assert_eq!(started_at(&provider, &record).await, Some(first));
        provider.stop(&record.instance.id).await.expect("stopped");
        assert!(started_at(&provider, &record).await.is_none(), "stopped");
        provider.start(&record).await.expect("started again");
        let second = started_at(&provider, &record).await.expect("running");
        assert!(second > first, "a new runtime, a new start");
        provider
            .destroy(&record.instance.id)
            .await
            .expect("destroyed");
    }

    #[tokio::test]
    async fn a_lost_runtime_is_started_again_only_by_a_restart() {
        let (_data, provider, record) = running().await;
        let id = &record.instance.id;
        // A use that saw the instance ready asks for its runtime while the lost one is being
        // stopped: it waits for the stop, then launches nothing.
        let started = with_a_late_start(&provider, &record, provider.stop_lost(id)).await;
        let refused = started.err().expect("no start for a lost runtime");
        assert!(refused.0.contains("restart policy"), "{}", refused.0);
        assert_eq!(provider.running_count().await, 0, "no runtime runs");
        assert!(provider.start(&record).await.is_err(), "still none later");

        provider.restart(&record).await.expect("restarted");
        let restarted = started_at(&provider, &record).await.expect("running");
        // Lost no more: a use finds the runtime the restart started.
        provider.start(&record).await.expect("in use");
        assert_eq!(started_at(&provider, &record).await, Some(restarted));

        // Stopped on purpose, or taken again by this replica (the store then says what the
        // instance is), a runtime lost here before is started by the next use.
        provider.stop_lost(id).await.expect("lost again");
        provider.stop(id).await.expect("stopped on purpose");
        provider.start(&record).await.expect("started after a stop");
        provider.stop_lost(id).await.expect("lost again");
        provider.stop_orphan(id).await;
        provider
            .start(&record)
            .await
            .expect("started once taken again");

        // A loss seen after the instance was destroyed leaves nothing behind.
        provider.destroy(id).await.expect("destroyed");
        provider.stop_lost(id).await.expect("nothing to stop");
        assert!(!provider.is_lost(id));
        assert!(provider.running.all().is_empty(), "no slot left");
    }

    #[tokio::test]
    async fn a_start_that_waited_for_a_destruction_finds_no_home_and_runs_nothing() {
        let (_data, provider, record) = running().await;
        let id = &record.instance.id;
        let started = with_a_late_start(&provider, &record, provider.destroy(id)).await;
        let refused = started.err().expect("a start after the destruction fails");
        assert!(refused.0.contains("is missing"), "{}", refused.0);
        assert_eq!(provider.running_count().await, 0, "no runtime left running");
        assert!(
            !provider.homes.dir(id).exists(),
            "the instance's directory is gone"
        );
    }
}
