//! Event streams over SSE that resume by themselves: when the connection drops before the final
//! event, the stream reconnects with `Last-Event-ID` and carries on where it was, with no
//! duplicates and no gaps (the server keeps the whole log).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edith_types::{JobEvent, TurnEvent};
use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use serde::de::DeserializeOwned;

use crate::client::EdithHermes;
use crate::error::{Error, Result};

/// How often a dropped stream is re-opened in a row before it gives up.
const MAX_RECONNECTS: u32 = 5;

/// An entry of an event log the SDK can follow.
pub trait LogEvent: DeserializeOwned + Send + 'static {
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

struct Follow<E> {
    client: EdithHermes,
    path: String,
    last: u64,
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    parser: SseParser,
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
            parser: SseParser::default(),
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
                        Ok(body) => {
                            s.body = Some(body);
                            s.parser = SseParser::default();
                        }
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
                    Some(Ok(chunk)) => {
                        for message in s.parser.push(&chunk) {
                            match serde_json::from_str::<E>(&message.data) {
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
                            }
                        }
                    }
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

/// One parsed server-sent event.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SseMessage {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
}

/// Incremental SSE parser: feed it chunks, get the complete events.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buffer: String,
}

impl SseParser {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseMessage> {
        self.buffer
            .push_str(&String::from_utf8_lossy(chunk).replace("\r\n", "\n"));
        let mut messages = Vec::new();
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut message = SseMessage::default();
            let mut data = Vec::new();
            for line in block.lines() {
                if line.starts_with(':') {
                    continue; // a comment (keep-alive)
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "data" => data.push(value),
                    "event" => message.event = Some(value.to_owned()),
                    "id" => message.id = Some(value.to_owned()),
                    _ => {}
                }
            }
            if !data.is_empty() {
                message.data = data.join("\n");
                messages.push(message);
            }
        }
        messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let mut parser = SseParser::default();
        assert!(
            parser
                .push(b": keep-alive\n\nid: 1\nevent: x\ndata: {\"a\"")
                .is_empty()
        );
        let messages = parser.push(b":1}\n\nid: 2\ndata: two\ndata: lines\n\n");
        assert_eq!(
            messages,
            [
                SseMessage {
                    event: Some("x".into()),
                    id: Some("1".into()),
                    data: "{\"a\":1}".into()
                },
                SseMessage {
                    event: None,
                    id: Some("2".into()),
                    data: "two\nlines".into()
                },
            ]
        );
    }
}
