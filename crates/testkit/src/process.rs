//! A child process a test starts: it is waited on until it prints its ready line, and it is
//! always stopped — by `stop()` (SIGTERM, then SIGKILL after a grace period) or, if the test
//! fails first, by drop (SIGKILL). The child leads its own process group and signals go to the
//! whole group, so whatever it started (the real Hermes runs helpers) goes with it.
//!
//! A group is only ever signalled while its leader has not been reaped: a zombie leader keeps
//! the group id reserved, so a signal can never reach an unrelated group that was given the
//! same number later (this machine wraps around at pid 32768, and a CI run spawns thousands).
//!
//! When the child does not get ready, the panic says what happened: whether it exited (and
//! with which status) or still runs, the last lines it wrote to stderr and stdout, and the tail
//! of the log files the caller named (a runtime's own log often holds the real cause).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

/// How many recent lines of each output stream a failure report shows.
const REPORTED_LINES: usize = 40;
/// How many lines of stderr are kept for [`ReadyProcess::stderr`] (the oldest go first).
const KEPT_LINES: usize = 20_000;

pub struct ReadyProcess {
    child: Child,
    /// What the process wrote to stderr so far.
    stderr: Tail,
    /// The child's pid, which is also its process group id.
    group: Pid,
    /// Set once the leader is reaped: from then on its group id may be reused, so nothing
    /// signals it any more.
    reaped: bool,
    /// The line that said the process was ready.
    pub ready_line: String,
}

/// The last lines of one output stream, shared with the task that reads it.
type Tail = Arc<Mutex<VecDeque<String>>>;

fn remember(tail: &Tail, line: String) {
    let mut lines = tail.lock().expect("not poisoned");
    if lines.len() == KEPT_LINES {
        lines.pop_front();
    }
    lines.push_back(line);
}

/// Sends `signal` to every process of the group (whose leader must not have been reaped).
fn signal_group(group: Pid, signal: Signal) {
    let _ = rustix::process::kill_process_group(group, signal);
}

/// Whether the leader has exited, without reaping it (it stays a zombie, holding its ids).
fn leader_exited(group: Pid) -> bool {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    matches!(
        rustix::process::waitid(WaitId::Pid(group), options),
        Ok(Some(_))
    )
}

/// Polls [`leader_exited`] for up to `limit`.
async fn leader_exits_within(group: Pid, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if leader_exited(group) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Copies the child's stderr to ours (the test runner shows it with a failing test) and keeps
/// its last lines for a failure report.
fn relay_stderr(stderr: impl AsyncRead + Unpin + Send + 'static, tail: Tail) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
            remember(&tail, line);
        }
    });
}

impl ReadyProcess {
    /// Spawns `command` and waits up to `timeout` for a stdout line starting with `ready`.
    /// Panics (after killing the child) if it exits or stays silent.
    pub async fn spawn(command: Command, ready: &str, timeout: Duration) -> Self {
        Self::spawn_with_logs(command, ready, timeout, &[]).await
    }

    /// Like [`ReadyProcess::spawn`]; a failure report also shows the tail of each `*.log` file
    /// in `log_dirs` (or of each file named there).
    pub async fn spawn_with_logs(
        mut command: Command,
        ready: &str,
        timeout: Duration,
        log_dirs: &[PathBuf],
    ) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = command.spawn().expect("the process starts");
        let group = child
            .id()
            .and_then(|pid| Pid::from_raw(pid as i32))
            .expect("a pid");
        let stderr_tail = Tail::default();
        relay_stderr(
            child.stderr.take().expect("stderr is piped"),
            stderr_tail.clone(),
        );
        let stdout_tail = Tail::default();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(timeout, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with(ready) {
                    return Some(line);
                }
                remember(&stdout_tail, line);
            }
            None
        })
        .await;
        let Ok(Some(ready_line)) = found else {
            // stdout closed (the process is exiting) or the time ran out: say which.
            let exited = leader_exits_within(group, Duration::from_secs(5)).await;
            signal_group(group, Signal::KILL);
            let status = child.wait().await;
            // Let the stderr relay catch the last lines the process wrote.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let what = match status {
                Ok(status) if exited => format!("exited ({status})"),
                _ => "was still running and has been killed".to_owned(),
            };
            panic!(
                "the process did not print `{ready}…`: it {what} after {:.1?} (limit {timeout:?})\n{}{}{}",
                started.elapsed(),
                report("stderr", &stderr_tail),
                report("stdout", &stdout_tail),
                log_report(log_dirs),
            );
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            stderr: stderr_tail,
            group,
            reaped: false,
            ready_line,
        }
    }

    /// The value of `key=` in the ready line (`port=9119` → `9119`).
    pub fn ready_value(&self, key: &str) -> String {
        let prefix = format!("{key}=");
        self.ready_line
            .split_whitespace()
            .find_map(|word| word.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no `{key}=` in `{}`", self.ready_line))
            .to_owned()
    }

    /// The lines the process wrote to stderr so far (they are also copied to the test's).
    pub fn stderr(&self) -> Vec<String> {
        self.stderr
            .lock()
            .expect("not poisoned")
            .iter()
            .cloned()
            .collect()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("the process runs")
    }

    /// SIGTERM to the group, then waits up to `grace` for the process to exit (SIGKILL after
    /// that); whatever it left running in its group is killed.
    pub async fn stop(mut self, grace: Duration) -> ExitStatus {
        signal_group(self.group, Signal::TERM);
        let exited = leader_exits_within(self.group, grace).await;
        signal_group(self.group, Signal::KILL);
        let status = self.child.wait().await.expect("wait for the process");
        self.reaped = true;
        assert!(exited, "the process ignored SIGTERM for {grace:?}");
        status
    }
}

impl ReadyProcess {
    /// SIGKILL to the group, as a crash would; reaps the leader.
    pub async fn kill(mut self) -> ExitStatus {
        signal_group(self.group, Signal::KILL);
        let status = self.child.wait().await.expect("wait for the process");
        self.reaped = true;
        status
    }
}

/// Kills every process of this user whose environment has `variable` set to a value under
/// `dir`: what a test's processes started in their own groups (a runtime a killed control
/// plane left behind) goes too, also when the test fails. Returns how many it found.
pub fn kill_processes_with_env_under(variable: &str, dir: &Path) -> usize {
    let found = processes_with_env_under(variable, dir);
    for pid in &found {
        if let Some(pid) = Pid::from_raw(*pid as i32) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
    found.len()
}

/// The processes of this user (this one aside) whose environment has `variable` set to a value
/// under `dir`.
pub fn processes_with_env_under(variable: &str, dir: &Path) -> Vec<u32> {
    let prefix = format!("{variable}={}/", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|pair| pair.starts_with(prefix.as_bytes()))
        {
            found.push(pid);
        }
    }
    found
}

impl Drop for ReadyProcess {
    fn drop(&mut self) {
        if !self.reaped {
            signal_group(self.group, Signal::KILL);
        }
    }
}

fn report(name: &str, tail: &Tail) -> String {
    let lines = tail.lock().expect("not poisoned");
    if lines.is_empty() {
        return format!("--- {name}: nothing\n");
    }
    let start = lines.len().saturating_sub(REPORTED_LINES);
    let text: Vec<&str> = lines.iter().skip(start).map(String::as_str).collect();
    format!(
        "--- last {} lines of {name}:\n{}\n",
        text.len(),
        text.join("\n")
    )
}

/// The tail of each log file in (or named by) `paths`.
fn log_report(paths: &[PathBuf]) -> String {
    let mut files: Vec<PathBuf> = Vec::new();
    for path in paths {
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            let mut logs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect();
            logs.sort();
            files.extend(logs);
        } else if path.is_file() {
            files.push(path.clone());
        }
    }
    files.iter().map(|file| tail_of_file(file)).collect()
}

fn tail_of_file(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(REPORTED_LINES);
    format!(
        "--- last {} lines of {}:\n{}\n",
        lines.len() - start,
        file.display(),
        lines[start..].join("\n")
    )
}

/// Runs a benchmark's `work` until it ends or the benchmark is interrupted (SIGINT, SIGTERM, as
/// `timeout` sends): then `work` is dropped, which stops every [`ReadyProcess`] it holds (their
/// groups leave the terminal's signals to us), and the process exits as interrupted. Without
/// it, a signal ends the process before any drop, and its runtimes run on.
pub async fn stopping_on_signals<T>(work: impl std::future::Future<Output = T>) -> T {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    let mut terminate = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let code = tokio::select! {
        done = work => return done,
        _ = interrupt.recv() => 130,
        _ = terminate.recv() => 143,
    };
    eprintln!("interrupted: the processes it started are stopped");
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_process_that_dies_at_start_is_reported_with_its_status_output_and_logs() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().to_path_buf();
        std::fs::write(
            logs.join("agent.log"),
            "boot\nERROR: cannot bind the lock\n",
        )
        .unwrap();
        let mut command = Command::new("sh");
        command.args(["-c", "echo starting; echo 'Traceback: boom' >&2; exit 3"]);
        let outcome = tokio::spawn(async move {
            ReadyProcess::spawn_with_logs(command, "READY", Duration::from_secs(20), &[logs]).await
        })
        .await;
        let Err(panic) = outcome else {
            panic!("the process never got ready, yet spawn returned");
        };
        let message = panic
            .into_panic()
            .downcast::<String>()
            .map(|m| *m)
            .unwrap_or_default();
        assert!(message.contains("exited (exit status: 3)"), "{message}");
        assert!(message.contains("Traceback: boom"), "{message}");
        assert!(message.contains("starting"), "{message}");
        assert!(message.contains("ERROR: cannot bind the lock"), "{message}");
    }
}
