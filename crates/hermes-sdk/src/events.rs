//! Event streams over SSE that resume by themselves: when the connection drops before the final
//! event, the stream reconnects with `Last-Event-ID` and carries on where it was, with no
//! duplicates and no gaps (the server keeps the whole log).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edith_types::{JobEvent, TurnEvent};
use eventsource_stream::Eventsource;
use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use serde::de::DeserializeOwned;

use crate::client::EdithHermes;
use crate::error::{Error, Result};

/// How often a dropped stream is re-opened in a row before it gives up.
const MAX_RECONNECTS: u32 = 5;

/// An entry of an event log the SDK can follow.
pub trait LogEvent: DeserializeOwned + Send + 'static {
    /// Its position in the log, from 1.
    fn seq(&self) -> u64;
    /// The last event of its log.
    fn is_final(&self) -> bool;
}

impl LogEvent for TurnEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn is_final(&self) -> bool {
        self.kind.is_final()
    }
}

impl LogEvent for JobEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn is_final(&self) -> bool {
        self.kind.is_final()
    }
}

/// A live, resumable stream of a turn's or a job's events. Ends after the final event.
pub struct EventStream<E> {
    inner: BoxStream<'static, Result<E>>,
}

impl<E> Stream for EventStream<E> {
    type Item = Result<E>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl<E> std::fmt::Debug for EventStream<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

/// The decoded events of one open response body (SSE framing and UTF-8 by `eventsource-stream`,
/// so a character split across network chunks arrives whole).
type SseBody = eventsource_stream::EventStream<
    BoxStream<'static, std::result::Result<Bytes, crate::transport::TransportFailure>>,
>;

struct Follow<E> {
    client: EdithHermes,
    path: String,
    last: u64,
    body: Option<SseBody>,
    pending: VecDeque<E>,
    reconnects: u32,
    done: bool,
}

impl<E: LogEvent> EventStream<E> {
    /// Follows `path` from after `after` (0: from the start).
    pub(crate) fn follow(client: EdithHermes, path: String, after: u64) -> Self {
        let state = Follow {
            client,
            path,
            last: after,
            body: None,
            pending: VecDeque::new(),
            reconnects: 0,
            done: false,
        };
        let inner = stream::unfold(state, |mut s| async move {
            loop {
                if let Some(event) = s.pending.pop_front() {
                    return Some((Ok(event), s));
                }
                if s.done {
                    return None;
                }
                let Some(body) = s.body.as_mut() else {
                    match s.client.open_stream(&s.path, s.last).await {
                        Ok(body) => s.body = Some(body.eventsource()),
                        Err(e) if e.is_retryable() && s.reconnects < MAX_RECONNECTS => {
                            s.reconnects += 1;
                            tokio::time::sleep(backoff(s.reconnects)).await;
                        }
                        Err(e) => {
                            s.done = true;
                            return Some((Err(e), s));
                        }
                    }
                    continue;
                };
                match body.next().await {
                    Some(Ok(message)) if message.data.is_empty() => {}
                    Some(Ok(message)) => match serde_json::from_str::<E>(&message.data) {
                        Ok(event) if event.seq() <= s.last => {}
                        Ok(event) => {
                            s.last = event.seq();
                            s.reconnects = 0;
                            s.done = event.is_final();
                            s.pending.push_back(event);
                        }
                        Err(e) => {
                            s.done = true;
                            let error = Error::Decode {
                                detail: format!("event: {e}"),
                                body: message.data,
                            };
                            return Some((Err(error), s));
                        }
                    },
                    // The connection ended or broke before the final event: resume.
                    Some(Err(_)) | None => {
                        s.body = None;
                        if s.reconnects >= MAX_RECONNECTS {
                            s.done = true;
                            let error = Error::StreamEnded(format!(
                                "{} dropped {MAX_RECONNECTS} times after event {}",
                                s.path, s.last
                            ));
                            return Some((Err(error), s));
                        }
                        s.reconnects += 1;
                        tokio::time::sleep(backoff(s.reconnects)).await;
                    }
                }
            }
        });
        Self {
            inner: inner.boxed(),
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 * 2u64.pow(attempt.min(5)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use edith_types::TurnEventKind;

    /// A server that sends a turn's log with every multi-byte character cut in two across
    /// network writes.
    async fn serve_split_log(events: Vec<TurnEvent>) -> String {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        for event in &events {
            let frame = format!(
                "id: {}\nevent: x\ndata: {}\n\n",
                event.seq,
                serde_json::to_string(event).unwrap()
            )
            .into_bytes();
            let cut = frame
                .iter()
                .position(|b| *b >= 0x80)
                .map_or(frame.len(), |i| i + 1);
            chunks.push(frame[..cut].to_vec());
            chunks.push(frame[cut..].to_vec());
        }
        let app = axum::Router::new().route(
            "/log",
            axum::routing::get(move || {
                let chunks = chunks.clone();
                async move {
                    let body = stream::iter(chunks).then(|chunk| async move {
                        // Separate writes, so the client sees separate chunks.
                        tokio::time::sleep(Duration::from_millis(15)).await;
                        Ok::<_, std::convert::Infallible>(chunk)
                    });
                    axum::body::Body::from_stream(body)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_arrives_whole() {
        let turn = edith_types::TurnId::generate();
        let event = |seq, kind| TurnEvent {
            seq,
            turn_id: turn.clone(),
            at: edith_types::Timestamp::now(),
            kind,
        };
        let text = "héllo wörld ✓ 🦀".to_owned();
        let sent = vec![
            event(1, TurnEventKind::MessageDelta { text: text.clone() }),
            event(
                2,
                TurnEventKind::TurnFinished {
                    state: edith_types::TurnState::Completed,
                    output: Some(text.clone()),
                    error: None,
                },
            ),
        ];
        let url = serve_split_log(sent.clone()).await;
        let client = EdithHermes::remote(&url, None);
        let received: Vec<TurnEvent> = tokio::time::timeout(
            Duration::from_secs(20),
            EventStream::follow(client, "/log".to_owned(), 0)
                .map(|e| e.unwrap())
                .collect(),
        )
        .await
        .expect("the stream ends after the final event");
        assert_eq!(received, sent);
    }
}
