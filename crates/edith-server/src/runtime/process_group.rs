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
