//! Server-sent event streams over a durable event log: replay from the store after the client's
//! cursor (`Last-Event-ID` or `?after=`), then follow live, then end after the final event.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use edith_types::rules;
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::broadcast;

use super::limits::StreamPermit;
use crate::app::{LogEvent, Shared};
use crate::error::{AppError, AppResult};

/// What a stream knows of its log when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log {
    /// Nothing is logged yet, and the stream subscribed before anything could be: every entry
    /// comes live, so nothing is read from the store first (a gap still is, from the store).
    New,
    /// The log's owner (turn, job) is still running.
    Open,
    /// The log's owner had finished when the stream was asked for.
    Ended,
}

/// Serves a log to `caller` from the request's cursor: counts the stream against the caller's
/// key, subscribes to live entries before replaying stored ones (`replay(after)`), and ends after
/// the final entry.
pub fn serve_log<E, R, F>(
    state: &crate::state::AppState,
    caller: &crate::auth::Principal,
    headers: &HeaderMap,
    after: Option<u64>,
    live: crate::app::Follower<E>,
    replay: R,
    log: Log,
) -> AppResult<Sse<impl Stream<Item = Result<Event, Infallible>> + use<E, R, F>>>
where
    E: LogEvent,
    R: Fn(u64) -> F + Send + Sync + 'static,
    F: Future<Output = AppResult<Vec<E>>> + Send,
{
    let after = resume_cursor(headers, after)?;
    let permit = state.gate.open_stream(&caller.0.id)?;
    Ok(follow(
        live,
        replay,
        after,
        log,
        permit,
        state.shutdown.clone(),
    ))
}

/// The cursor a client resumes from: `Last-Event-ID` wins over `?after=`; 0 means the start.
/// Either must be a sequence number a log can hold.
pub fn resume_cursor(headers: &HeaderMap, after: Option<u64>) -> AppResult<u64> {
    if let Some(after) = after.filter(|&after| after > rules::SEQ_MAX) {
        return Err(AppError::invalid(format!(
            "`after` must be at most {}, got {after}",
            rules::SEQ_MAX
        )));
    }
    let (cursor, name) = match headers.get("last-event-id") {
        Some(value) => {
            let seq = value
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|v| rules::is_last_event_id(v))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    AppError::invalid(
                        "`Last-Event-ID` must be an event sequence number (1 to 18 digits)",
                    )
                })?;
            (seq, "`Last-Event-ID`")
        }
        None => (after.unwrap_or(0), "`after`"),
    };
    if cursor > rules::SEQ_MAX {
        return Err(AppError::invalid(format!(
            "{name} must be at most {}, got {cursor}",
            rules::SEQ_MAX
        )));
    }
    Ok(cursor)
}

struct Follow<E, R> {
    last: u64,
    buffer: VecDeque<Shared<E>>,
    live: crate::app::Follower<E>,
    replay: R,
    done: bool,
}

/// Streams the log: `replay(after)` reads stored events after a seq; `live` must have been
/// subscribed before the first replay. When the log had ended, a final event stored at or
/// before the cursor too ends the stream at once instead of waiting for events that will never
/// come.
pub fn follow<E, R, F>(
    live: crate::app::Follower<E>,
    replay: R,
    after: u64,
    log: Log,
    permit: StreamPermit,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    E: LogEvent,
    R: Fn(u64) -> F + Send + Sync + 'static,
    F: Future<Output = AppResult<Vec<E>>> + Send,
{
    let state = Follow {
        last: after,
        buffer: VecDeque::new(),
        live,
        replay,
        done: false,
    };
    let events = stream::unfold((state, true), move |(mut s, first)| async move {
        if first {
            match log {
                Log::New => {}
                Log::Open => s.buffer.extend(load(&s.replay, s.last).await),
                Log::Ended => {
                    let whole = load(&s.replay, 0).await;
                    if whole.iter().any(|event| event.is_final()) {
                        s.done = true;
                    }
                    s.buffer.extend(whole);
                }
            }
        }
        loop {
            if let Some(event) = s.buffer.pop_front() {
                if event.seq() <= s.last {
                    continue;
                }
                s.last = event.seq();
                s.done = s.done || event.is_final();
                return Some((to_sse(&*event), (s, false)));
            }
            if s.done {
                return None;
            }
            match s.live.recv().await {
                Ok(event) if event.seq() <= s.last => {}
                Ok(event) if event.seq() == s.last + 1 => s.buffer.push_back(event),
                // A gap or a lag: the store has everything, in order.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    s.buffer.extend(load(&s.replay, s.last).await)
                }
                Err(broadcast::error::RecvError::Closed) => {
                    s.buffer.extend(load(&s.replay, s.last).await);
                    if s.buffer.is_empty() {
                        return None;
                    }
                }
            }
        }
    });
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    // The permit lives as long as the stream: the place is given back when it ends.
    let events = events.map(move |event| {
        let _held = &permit;
        event
    });
    Sse::new(events.take_until(Box::pin(stopping)).map(Ok))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

async fn load<E, R, F>(replay: &R, after: u64) -> Vec<Shared<E>>
where
    R: Fn(u64) -> F + Sync,
    F: Future<Output = AppResult<Vec<E>>>,
{
    match replay(after).await {
        Ok(events) => events.into_iter().map(Shared::new).collect(),
        Err(e) => {
            tracing::error!(detail = %e.detail, "reading an event log");
            Vec::new()
        }
    }
}

/// The SSE event: its `id` is the seq, its `event` name the entry's `type` (declared once, by the
/// entry's serde tag), its `data` the entry.
fn to_sse<E: LogEvent>(event: &E) -> Event {
    /// An entry's `type`, read back from its text (the rest is skipped, not built).
    #[derive(serde::Deserialize)]
    struct Tag<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    let data = serde_json::to_string(event).expect("events serialize");
    let event_name = serde_json::from_str::<Tag>(&data).map(|tag| tag.kind.into_owned());
    Event::default()
        .id(event.seq().to_string())
        .event(event_name.unwrap_or_else(|_| "message".to_owned()))
        .data(data)
}
