//! A child process a test starts: it is waited on until it prints its ready line, and it is
//! always stopped — by `stop()` (SIGTERM, then SIGKILL after a grace period) or, if the test
//! fails first, by drop (SIGKILL). The child leads its own process group and signals go to the
//! whole group, so whatever it started (the real Hermes runs helpers) goes with it.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub struct ReadyProcess {
    child: Child,
    /// The child's pid, which is also its process group id.
    group: u32,
    /// Set by `stop()`: the group is gone and its id may be reused, so drop leaves it alone.
    stopped: bool,
    /// The line that said the process was ready.
    pub ready_line: String,
}

/// Sends `signal` to every process of the group.
fn signal_group(group: u32, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([signal, "--", &format!("-{group}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl ReadyProcess {
    /// Spawns `command` and waits up to `timeout` for a stdout line starting with `ready`.
    /// Panics (after killing the child) if it exits or stays silent.
    pub async fn spawn(mut command: Command, ready: &str, timeout: Duration) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the process starts");
        let group = child.id().expect("a pid");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(timeout, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with(ready) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        let Ok(Some(ready_line)) = found else {
            signal_group(group, "-KILL");
            let _ = child.kill().await;
            panic!("the process did not print `{ready}…` within {timeout:?}");
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            group,
            stopped: false,
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

    pub fn pid(&self) -> u32 {
        self.child.id().expect("the process runs")
    }

    /// SIGTERM, then waits up to `grace` for it to exit (SIGKILL after that).
    pub async fn stop(mut self, grace: Duration) -> ExitStatus {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status().await;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.expect("wait for the process"),
            Err(_) => {
                let _ = self.child.kill().await;
                panic!("the process ignored SIGTERM for {grace:?}");
            }
        }
    }
}

impl Drop for ReadyProcess {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.group, "-KILL");
        }
    }
}
