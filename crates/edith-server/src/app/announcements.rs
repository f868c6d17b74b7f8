//! What other replicas announce (PostgreSQL's `LISTEN/NOTIFY`, see `edith_store::Listener`):
//! a turn's or a job's log grew, so the streams following it here read the new entries from the
//! store; a key was revoked, so it is no longer trusted here either; a tool host changed, so
//! the connection kept to it is dropped. An announcement carries
//! only an id: one that is lost costs a stream its liveness until the next, never an entry.

use std::time::Duration;

use edith_store::{Announcement, Channel};

use super::{Hub, LogEvent};
use crate::error::AppResult;
use crate::state::AppState;

/// How long to wait before listening again after the database could not be reached.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How many times a log another replica wrote is read before its announcement is given up
/// (its followers then wait for the next one), and the pause between tries.
const READ_ATTEMPTS: u32 = 3;
const READ_PAUSE: Duration = Duration::from_millis(200);

/// Listens until the server stops (the task is aborted then); `None` on SQLite, which has one
/// replica.
pub async fn spawn(state: AppState) -> AppResult<Option<tokio::task::JoinHandle<()>>> {
    let Some(mut listener) = state.store.listen().await? else {
        return Ok(None);
    };
    Ok(Some(tokio::spawn(async move {
        loop {
            match listener.next().await {
                Ok(Announcement::Changed { channel, id }) => heard(&state, channel, &id).await,
                Ok(Announcement::MayHaveMissed) => catch_up_everything(&state).await,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot hear the other replicas; trying again");
                    tokio::time::sleep(RETRY_AFTER).await;
                    catch_up_everything(&state).await;
                }
            }
        }
    })))
}

async fn heard(state: &AppState, channel: Channel, id: &str) {
    match channel {
        Channel::TurnEvents => catch_up_turn(state, id).await,
        Channel::JobEvents => catch_up_job(state, id).await,
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
}

/// Announcements may have been missed: every log followed here is read again, and every key
/// and tool host kept is read again on its next use.
async fn catch_up_everything(state: &AppState) {
    state.known_keys.forget_all();
    state.tool_hosts.forget_all().await;
    for id in state.turn_events.followed_logs() {
        catch_up_turn(state, &id).await;
    }
    for id in state.job_events.followed_logs() {
        catch_up_job(state, &id).await;
    }
}

async fn catch_up_turn(state: &AppState, id: &str) {
    let Ok(turn) = id.parse::<edith_types::TurnId>() else {
        return;
    };
    let (store, turn) = (&state.store, &turn);
    catch_up(&state.turn_events, id, |after| {
        store.turn_events_after(turn, after)
    })
    .await;
}

async fn catch_up_job(state: &AppState, id: &str) {
    let Ok(job) = id.parse::<edith_types::JobId>() else {
        return;
    };
    let (store, job) = (&state.store, &job);
    catch_up(&state.job_events, id, |after| {
        store.job_events_after(job, after)
    })
    .await;
}

/// Publishes here what `key`'s log holds past what was published, if anybody here follows it;
/// its final entry finishes it. A failed read is tried again a few times: its announcement
/// will not come again.
async fn catch_up<E, F>(hub: &Hub<E>, key: &str, read_after: impl Fn(u64) -> F)
where
    E: LogEvent,
    F: std::future::Future<Output = Result<Vec<E>, edith_store::StoreError>>,
{
    for attempt in 1..=READ_ATTEMPTS {
        let Some(after) = hub.last_published(key) else {
            return;
        };
        match read_after(after).await {
            Ok(entries) => {
                for entry in entries {
                    let last = entry.is_final();
                    hub.publish(key, entry);
                    if last {
                        hub.finish(key);
                    }
                }
                return;
            }
            Err(e) if attempt == READ_ATTEMPTS => {
                tracing::warn!(log = key, error = %e, "cannot read a log another replica wrote");
            }
            Err(_) => tokio::time::sleep(READ_PAUSE).await,
        }
    }
}
