//! Child processes that lead their own process group, so a stop reaches whatever they started.
//! A group is only signalled while its leader has not been reaped: a zombie leader keeps the
//! group id reserved, so the signal cannot reach an unrelated group given the same id later.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use tokio::process::Child;

/// The group a child leads (spawned with `process_group(0)`).
pub fn group_of(child: &Child) -> Option<Pid> {
    child.id().and_then(|pid| Pid::from_raw(pid as i32))
}

/// Whether the leader has exited, without reaping it.
pub fn leader_exited(group: Pid) -> bool {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    matches!(
        rustix::process::waitid(WaitId::Pid(group), options),
        Ok(Some(_))
    )
}

/// SIGKILL to the group (whose leader must not have been reaped).
pub fn kill_group(group: Pid) {
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
}

/// SIGTERM to the group, up to `grace` for the leader to exit, then SIGKILL to what is left;
/// reaps the leader. Returns whether it exited within the grace period.
pub async fn stop(child: &mut Child, group: Pid, grace: Duration) -> bool {
    let _ = rustix::process::kill_process_group(group, Signal::TERM);
    let deadline = Instant::now() + grace;
    let mut exited = leader_exited(group);
    while !exited && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        exited = leader_exited(group);
    }
    kill_group(group);
    let _ = child.wait().await;
    exited
}

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`, field 22); `None` when
/// no such process lives (an unreaped zombie counts as gone). With the pid it names one process
/// for good: a pid reused later has another start time.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // `state` was field 3; the start time is field 22.
    fields.nth(18)?.parse().ok()
}

/// Stops a group whose leader is not our child (a runtime an earlier control-plane process
/// started): SIGTERM, up to `grace` for the leader to go, then SIGKILL to what is left. Nothing
/// is signalled unless the leader is still the process that started at `started`.
pub async fn stop_adopted(leader: i32, started: u64, grace: Duration) {
    let alive = || start_time(leader) == Some(started);
    let Some(group) = Pid::from_raw(leader).filter(|_| alive()) else {
        return;
    };
    let _ = rustix::process::kill_process_group(group, Signal::TERM);
    let deadline = Instant::now() + grace;
    while alive() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Members left behind keep the group id reserved, so it still names that group (and pids
    // are handed out in turn, so an id freed a moment ago is not another group's yet).
    kill_group(group);
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::AsyncBufReadExt;

    /// `script` run by `sh` leading a group of its own; the first line it prints.
    async fn group_leader(script: &str) -> (Child, Pid, String) {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh runs");
        let group = group_of(&child).expect("a pid");
        let stdout = child.stdout.take().expect("piped");
        let mut reader = tokio::io::BufReader::new(stdout);
        let mut line = String::new();
        let read = reader.read_line(&mut line);
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the script prints a line in time")
            .expect("a line");
        (child, group, line.trim().to_owned())
    }

    /// Whether process `pid` is gone within 10 s.
    async fn gone(pid: i32) -> bool {
        for _ in 0..500 {
            if start_time(pid).is_none() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn a_leader_that_ignores_sigterm_is_killed_after_the_grace_with_its_whole_group() {
        // The ignored SIGTERM is inherited by the `sleep` it starts in the background.
        let script = "trap '' TERM; sleep 300 & echo $!; wait";
        let (mut child, group, sleeper) = group_leader(script).await;
        let sleeper: i32 = sleeper.parse().expect("the sleeper's pid");
        let leader = group.as_raw_nonzero().get();
        assert!(
            !stop(&mut child, group, Duration::from_millis(300)).await,
            "it did not exit within the grace"
        );
        assert!(gone(leader).await, "the leader is killed");
        assert!(gone(sleeper).await, "so is what it started in its group");
    }

    #[tokio::test]
    async fn a_leader_that_ends_on_sigterm_ends_within_the_grace() {
        let (mut child, group, _) = group_leader("echo started; sleep 300").await;
        assert!(stop(&mut child, group, Duration::from_secs(10)).await);
        assert!(gone(group.as_raw_nonzero().get()).await);
    }

    #[test]
    fn a_live_process_has_a_start_time_and_a_missing_one_has_none() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
        assert_eq!(start_time(i32::MAX), None);
    }
}
