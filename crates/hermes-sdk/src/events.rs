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
use crate::transport::TransportFailure;

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
    BoxStream<'static, std::result::Result<Bytes, TransportFailure>>,
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
                        Ok(body) => s.body = Some(sse(body)),
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
                    Some(Ok(message)) => match decode_message::<E>(message) {
                        None => {}
                        Some(Ok(event)) if event.seq() <= s.last => {}
                        Some(Ok(event)) => {
                            s.last = event.seq();
                            s.reconnects = 0;
                            s.done = event.is_final();
                            s.pending.push_back(event);
                        }
                        Some(Err(error)) => {
                            s.done = true;
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

/// An open response body as SSE messages.
fn sse(body: BoxStream<'static, std::result::Result<Bytes, TransportFailure>>) -> SseBody {
    without_bom(body).boxed().eventsource()
}

/// The body with one leading byte order mark taken off, and an empty line (which dispatches
/// nothing) put first. The SSE format allows a BOM first; eventsource-stream 0.2.3, the latest,
/// panics on one (it cuts a single byte off the three-byte character, upstream PR
/// jpopesculian/eventsource-stream#10). After the empty line it never sees a BOM first, even
/// when the body starts with two.
fn without_bom<E>(
    body: impl Stream<Item = std::result::Result<Bytes, E>>,
) -> impl Stream<Item = std::result::Result<Bytes, E>> {
    const BOM: &[u8] = "\u{feff}".as_bytes();
    // The first bytes, held while they may still be a BOM; `None` once passed on.
    let held: Option<Vec<u8>> = Some(Vec::new());
    let rest = stream::unfold(
        (Box::pin(body.fuse()), held),
        |(mut body, mut held)| async move {
            loop {
                let Some(head) = held.as_mut() else {
                    let item = body.next().await?;
                    return Some((item, (body, None)));
                };
                match body.next().await {
                    Some(Ok(chunk)) => {
                        head.extend_from_slice(&chunk);
                        if head.len() < BOM.len() && BOM.starts_with(head) {
                            continue;
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (body, held))),
                    None if head.is_empty() => return None,
                    None => {}
                }
                let head = held.take().unwrap_or_default();
                let head = head.strip_prefix(BOM).unwrap_or(&head);
                return Some((Ok(Bytes::copy_from_slice(head)), (body, None)));
            }
        },
    );
    stream::once(async { Ok(Bytes::from_static(b"\n")) }).chain(rest)
}

/// The event one SSE message carries; `None` for a message without data (a keep-alive).
fn decode_message<E: DeserializeOwned>(message: eventsource_stream::Event) -> Option<Result<E>> {
    if message.data.is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<E>(&message.data) {
        Ok(event) => Ok(event),
        Err(e) => Err(Error::Decode {
            detail: format!("event: {e}"),
            body: message.data,
        }),
    })
}

/// For the fuzz targets in `fuzz/` only, not part of the API: decodes a whole SSE body, given
/// as the chunks it arrived in, the way [`EventStream`] reads one (the same SSE framing and the
/// same decoding of each message), without reconnecting or skipping by `seq`. Keep-alives are left
/// out; an undecodable message is its [`Error::Decode`]; a body that breaks (bad UTF-8) ends
/// with an [`Error::StreamEnded`].
#[doc(hidden)]
pub fn decode_sse_body<E: LogEvent>(chunks: Vec<Vec<u8>>) -> Vec<Result<E>> {
    use futures_util::FutureExt;
    let chunks = chunks
        .into_iter()
        .map(|chunk| Ok::<_, TransportFailure>(Bytes::from(chunk)));
    let mut body = sse(stream::iter(chunks).boxed());
    let mut decoded = Vec::new();
    // The chunks are all there: every poll is ready.
    while let Some(Some(message)) = body.next().now_or_never() {
        match message {
            Ok(message) => decoded.extend(decode_message(message)),
            Err(e) => {
                decoded.push(Err(Error::StreamEnded(e.to_string())));
                break;
            }
        }
    }
    decoded
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

    fn job_event(seq: u64) -> String {
        serde_json::json!({"seq": seq, "job_id": "job_abc", "at": "2026-11-29T08:35:32.123Z",
            "type": "step.started", "step": "s", "index": 1, "of": 2})
        .to_string()
    }

    #[test]
    fn a_body_read_at_once_keeps_its_events_errors_and_end() {
        let body = format!(
            ":\n\nid: 1\ndata: {}\n\ndata: {{\"seq\": \"x\"}}\n\nid: 2\ndata: {}\n\n",
            job_event(1),
            job_event(2)
        );
        let read = decode_sse_body::<JobEvent>(vec![body.into_bytes()]);
        assert_eq!(read.len(), 3, "{read:?}");
        assert_eq!(read[0].as_ref().unwrap().seq, 1);
        assert!(matches!(&read[1], Err(Error::Decode { body, .. }) if body == "{\"seq\": \"x\"}"));
        assert_eq!(read[2].as_ref().unwrap().seq, 2);
        // Bytes that are not UTF-8 end the body.
        let broken = decode_sse_body::<JobEvent>(vec![b"data: \xff\n\n".to_vec()]);
        assert!(
            matches!(broken.as_slice(), [Err(Error::StreamEnded(_))]),
            "{broken:?}"
        );
    }

    /// Found by `fuzz/` (target `sse_events`): eventsource-stream 0.2.3 panicked on a body that
    /// starts with a byte order mark.
    #[test]
    fn a_leading_byte_order_mark_is_dropped_not_a_panic() {
        let event = format!("data: {}\n\n", job_event(1));
        let with_bom = [b"\xef\xbb\xbf".as_slice(), event.as_bytes()].concat();
        for cut in 0..=4 {
            let (first, rest) = with_bom.split_at(cut);
            let read = decode_sse_body::<JobEvent>(vec![first.to_vec(), rest.to_vec()]);
            assert_eq!(read.len(), 1, "cut at {cut}: {read:?}");
            assert_eq!(read[0].as_ref().unwrap().seq, 1);
        }
        // Only one is the format's: a second is the start of a field name, so the line is
        // not a `data` line.
        let two = [b"\xef\xbb\xbf\xef\xbb\xbf".as_slice(), event.as_bytes()].concat();
        assert!(decode_sse_body::<JobEvent>(vec![two]).is_empty());
        assert!(decode_sse_body::<JobEvent>(vec![b"\xef\xbb\xbf".to_vec()]).is_empty());
        // Part of one, and the body ends: not UTF-8.
        let part = decode_sse_body::<JobEvent>(vec![b"\xef\xbb".to_vec()]);
        assert!(
            matches!(part.as_slice(), [Err(Error::StreamEnded(_))]),
            "{part:?}"
        );
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
