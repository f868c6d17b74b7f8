//! What other replicas announce (PostgreSQL's `LISTEN/NOTIFY`, see `edith_store::Listener`):
//! a turn's or a job's log grew, so the streams following it here read the new entries from the
//! store; a key was revoked, so it is no longer trusted here either; a tool host changed, so
//! the connection kept to it is dropped. An announcement carries
//! only an id: one that is lost costs a stream its liveness until the next, never an entry.

use std::collections::HashSet;
use std::time::Duration;

use edith_store::{Announcement, Channel};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{Hub, LogEvent};
use crate::error::AppResult;
use crate::state::AppState;

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
        loop {
            tokio::select! {
                announcement = to_read.recv() => match announcement {
                    Some(Announcement::Changed { channel, id }) => {
                        unread.extend(act_on(&state, channel, id).await);
                    }
                    Some(Announcement::MayHaveMissed) => {
                        unread.extend(catch_up_everything(&state).await);
                    }
                    None => return,
                },
                _ = retry.tick(), if !unread.is_empty() => {
                    let logs = std::mem::take(&mut unread);
                    unread.extend(read_logs(&state, logs).await);
                }
            }
        }
    };
    Ok(Some(tokio::spawn(async move {
        tokio::join!(listening, reading);
    })))
}

/// Does what an announcement asks; the log it names if it could not be read.
async fn act_on(state: &AppState, channel: Channel, id: String) -> Option<Log> {
    match channel {
        Channel::TurnEvents => return read_log(state, Log::Turn(id)).await,
        Channel::JobEvents => return read_log(state, Log::Job(id)).await,
        Channel::KeyRevoked => {
            if let Ok(key) = id.parse() {
                super::keys::forget(state, &key);
            }
        }
        Channel::ToolHostChanged => {
            if let Ok(host) = id.parse() {
                state.tool_hosts.forget(&host).await;
            }
        }
    }
    None
}

/// Announcements may have been missed: every log followed here is read again, and every key
/// and tool host kept is read again on its next use. Returns the logs that could not be read.
async fn catch_up_everything(state: &AppState) -> Vec<Log> {
    state.known_keys.forget_all();
    state.tool_hosts.forget_all().await;
    let turns = state.turn_events.followed_logs().into_iter().map(Log::Turn);
    let jobs = state.job_events.followed_logs().into_iter().map(Log::Job);
    read_logs(state, turns.chain(jobs)).await
}

/// Reads `logs`, a few at once; returns those that could not be read.
async fn read_logs(state: &AppState, logs: impl IntoIterator<Item = Log>) -> Vec<Log> {
    futures_util::stream::iter(logs)
        .map(|log| read_log(state, log))
        .buffer_unordered(READ_AT_ONCE)
        .filter_map(std::future::ready)
        .collect()
        .await
}

/// Publishes here what the log holds past what was published, if anybody here follows it;
/// its final entry finishes it. Returns the log if it could not be read.
async fn read_log(state: &AppState, log: Log) -> Option<Log> {
    let store = &state.store;
    let read = match &log {
        Log::Turn(id) => {
            let Ok(turn) = id.parse::<edith_types::TurnId>() else {
                return None;
            };
            catch_up(&state.turn_events, id, |after| {
                store.turn_events_after(&turn, after)
            })
            .await
        }
        Log::Job(id) => {
            let Ok(job) = id.parse::<edith_types::JobId>() else {
                return None;
            };
            catch_up(&state.job_events, id, |after| {
                store.job_events_after(&job, after)
            })
            .await
        }
    };
    match read {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!(log = ?log, error = %e, "cannot read a log another replica wrote; trying again");
            Some(log)
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
