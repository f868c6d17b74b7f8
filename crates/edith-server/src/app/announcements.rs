//! What other replicas announce (PostgreSQL's `LISTEN/NOTIFY`, see `edith_store::Listener`):
//! a turn's or a job's log grew, so the streams following it here read the new entries from the
//! store; a key was revoked, so it is no longer trusted here either; a tool host changed, so
//! the connection kept to it is dropped; a profile's tools changed, so the runtimes that keep
//! its tool list here are told. An announcement carries
//! only an id: one that is lost costs a stream its liveness until the next, never an entry.

use std::collections::HashSet;
use std::time::Duration;

use edith_store::{Announcement, Channel};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{Hub, LogEvent};
use crate::error::AppResult;
use crate::state::AppState;
use crate::tools::Touched;

/// How long to wait before listening again after the database could not be reached, and
/// between tries at reading the logs that could not be read.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How many logs are read at once when every followed log is read again.
const READ_AT_ONCE: usize = 8;

/// A log followed here that another replica writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Log {
    Turn(String),
    Job(String),
}

/// Listens until the server stops (the task is aborted then); `None` on SQLite, which has one
/// replica. Listening and reading are apart, so a slow or failing read never keeps the next
/// announcement waiting (PostgreSQL queues them for a listener that does not take them, and
/// its queue is shared by every writer).
pub async fn spawn(state: AppState) -> AppResult<Option<tokio::task::JoinHandle<()>>> {
    let Some(mut listener) = state.store.listen().await? else {
        return Ok(None);
    };
    let (heard, mut to_read) = mpsc::unbounded_channel();
    let listening = async move {
        loop {
            let announcement = match listener.next().await {
                Ok(announcement) => announcement,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot hear the other replicas; trying again");
                    tokio::time::sleep(RETRY_AFTER).await;
                    Announcement::MayHaveMissed
                }
            };
            if heard.send(announcement).is_err() {
                return;
            }
        }
    };
    let reading = async move {
        // Logs whose read failed: tried again every second while anybody here follows them.
        let mut unread = HashSet::new();
        let mut retry = tokio::time::interval(RETRY_AFTER);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                first = to_read.recv() => {
                    let Some(first) = first else { return };
                    // What arrived meanwhile is done with it, each log read once.
                    let mut pending = Pending::default();
                    pending.add(first);
                    while let Ok(next) = to_read.try_recv() {
                        pending.add(next);
                    }
                    let failed = pending.act_on(&state).await;
                    for (log, e) in &failed {
                        tracing::warn!(log = ?log, error = %e, "cannot read a log another replica wrote; trying again every second");
                    }
                    if unread.is_empty() && !failed.is_empty() {
                        retry.reset();
                    }
                    unread.extend(failed.into_iter().map(|(log, _)| log));
                },
                _ = retry.tick(), if !unread.is_empty() => {
                    let logs = std::mem::take(&mut unread);
                    unread.extend(read_logs(&state, logs).await.into_iter().map(|(log, _)| log));
                }
            }
        }
    };
    Ok(Some(tokio::spawn(async move {
        tokio::join!(listening, reading);
    })))
}

/// What the announcements heard together ask for.
#[derive(Default)]
struct Pending {
    missed: bool,
    logs: HashSet<Log>,
    keys: Vec<String>,
    tool_hosts: Vec<String>,
    tool_lists: Vec<String>,
}

impl Pending {
    fn add(&mut self, announcement: Announcement) {
        match announcement {
            Announcement::MayHaveMissed => self.missed = true,
            Announcement::Changed { channel, id } => match channel {
                Channel::TurnEvents => drop(self.logs.insert(Log::Turn(id))),
                Channel::JobEvents => drop(self.logs.insert(Log::Job(id))),
                Channel::KeyRevoked => self.keys.push(id),
                Channel::ToolHostChanged => self.tool_hosts.push(id),
                Channel::ToolsChanged => self.tool_lists.push(id),
            },
        }
    }

    /// Does what was asked; the logs that could not be read, and why.
    async fn act_on(self, state: &AppState) -> Vec<(Log, edith_store::StoreError)> {
        for key in self.keys.iter().filter_map(|id| id.parse().ok()) {
            super::keys::forget(state, &key);
        }
        for host in self.tool_hosts.iter().filter_map(|id| id.parse().ok()) {
            state.tool_hosts.forget(&host).await;
        }
        for id in &self.tool_lists {
            let touched = match id.parse() {
                Ok(profile) => Touched::Profile(profile),
                Err(_) => Touched::All,
            };
            state.tool_lists.changed(&touched);
        }
        if self.missed {
            catch_up_everything(state).await
        } else {
            read_logs(state, self.logs).await
        }
    }
}

/// Announcements may have been missed: every log followed here is read again, and every key
/// and tool host kept is read again on its next use. Returns the logs that could not be read.
async fn catch_up_everything(state: &AppState) -> Vec<(Log, edith_store::StoreError)> {
    state.known_keys.forget_all();
    state.tool_hosts.forget_all().await;
    state.tool_lists.changed(&Touched::All);
    let turns = state.turn_events.followed_logs().into_iter().map(Log::Turn);
    let jobs = state.job_events.followed_logs().into_iter().map(Log::Job);
    read_logs(state, turns.chain(jobs)).await
}

/// Reads `logs`, a few at once; returns those that could not be read, and why.
async fn read_logs(
    state: &AppState,
    logs: impl IntoIterator<Item = Log>,
) -> Vec<(Log, edith_store::StoreError)> {
    futures_util::stream::iter(logs)
        .map(|log| async move {
            let read = read_log(state, &log).await;
            read.err().map(|e| (log, e))
        })
        .buffer_unordered(READ_AT_ONCE)
        .filter_map(std::future::ready)
        .collect()
        .await
}

/// Publishes here what the log holds past what was published, if anybody here follows it;
/// its final entry finishes it.
async fn read_log(state: &AppState, log: &Log) -> Result<(), edith_store::StoreError> {
    let store = &state.store;
    match log {
        Log::Turn(id) => {
            let Ok(turn) = id.parse::<edith_types::TurnId>() else {
                return Ok(());
            };
            catch_up(&state.turn_events, id, |after| {
                store.turn_events_after(&turn, after)
            })
            .await
        }
        Log::Job(id) => {
            let Ok(job) = id.parse::<edith_types::JobId>() else {
                return Ok(());
            };
            catch_up(&state.job_events, id, |after| {
                store.job_events_after(&job, after)
            })
            .await
        }
    }
}

/// Publishes what `key`'s log holds past what was published, if anybody here follows it.
async fn catch_up<E, F>(
    hub: &Hub<E>,
    key: &str,
    read_after: impl FnOnce(u64) -> F,
) -> Result<(), edith_store::StoreError>
where
    E: LogEvent,
    F: std::future::Future<Output = Result<Vec<E>, edith_store::StoreError>>,
{
    let Some(after) = hub.last_published(key) else {
        return Ok(());
    };
    for entry in read_after(after).await? {
        let last = entry.is_final();
        hub.publish(key, entry);
        if last {
            hub.finish(key);
        }
    }
    Ok(())
}
