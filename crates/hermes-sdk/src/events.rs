//! Event streams over SSE that resume by themselves: when the connection drops before the final
//! event, the stream reconnects with `Last-Event-ID` and carries on where it was, with no
//! duplicates and no gaps (the server keeps the whole log). A stream a POST started (a turn's,
//! from `turn_create_stream`) resumes the same way from the log's `Location`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edith_types::{JobEvent, TurnEvent};
use eventsource_stream::Eventsource;
use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use serde::de::DeserializeOwned;

use crate::client::{EdithHermes, Opened};
use crate::error::{Error, Result};
use crate::transport::{HttpRequest, TransportFailure};

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

/// Where a stream is (re)opened.
enum Source {
    /// The log's own stream, opened after the last event seen.
    Path(String),
    /// The POST that started the log, sent again (with its `Idempotency-Key`) to learn where the
    /// log is, when its first reply did not say.
    Post(HttpRequest),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Path(path) => f.write_str(path),
            Source::Post(request) => write!(f, "POST {}", request.url),
        }
    }
}

struct Follow<E> {
    client: EdithHermes,
    source: Source,
    last: u64,
    body: Option<SseBody>,
    pending: VecDeque<E>,
    reconnects: u32,
    done: bool,
}

impl<E: LogEvent> EventStream<E> {
    /// Follows `path` from after `after` (0: from the start).
    pub(crate) fn follow(client: EdithHermes, path: String, after: u64) -> Self {
        Self::from(Follow {
            client,
            source: Source::Path(path),
            last: after,
            body: None,
            pending: VecDeque::new(),
            reconnects: 0,
            done: false,
        })
    }

    /// Follows the log that `request`, a POST, started and `opened` answered.
    pub(crate) fn started(client: EdithHermes, request: HttpRequest, opened: Opened) -> Self {
        let mut state = Follow {
            client,
            source: Source::Post(request),
            last: 0,
            body: None,
            pending: VecDeque::new(),
            reconnects: 0,
            done: false,
        };
        state.opened(opened);
        Self::from(state)
    }

    fn from(state: Follow<E>) -> Self {
        let inner = stream::unfold(state, |mut s| async move {
            loop {
                if let Some(event) = s.pending.pop_front() {
                    return Some((Ok(event), s));
                }
                if s.done {
                    return None;
                }
                let Some(body) = s.body.as_mut() else {
                    let opened = match &s.source {
                        Source::Path(path) => {
                            (s.client.open_stream(path, s.last).await).map(|body| Opened::Stream {
                                body,
                                location: None,
                            })
                        }
                        Source::Post(request) => s.client.post_stream(request).await,
                    };
                    match opened {
                        Ok(opened) => s.opened(opened),
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
                                s.source, s.last
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

impl<E> Follow<E> {
    /// Takes what opening the stream gave: a body to read, and where to open it next time.
    fn opened(&mut self, opened: Opened) {
        match opened {
            Opened::Stream { body, location } => {
                if let Some(path) = location {
                    self.source = Source::Path(path);
                }
                self.body = Some(sse(body));
            }
            // Opened at the next turn of the loop, after the last event seen.
            Opened::SeeOther(path) => self.source = Source::Path(path),
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

    /// What the server of `a_started_stream_*` saw: each request's method, path,
    /// `Last-Event-ID` and `Idempotency-Key`.
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String, String, String)>>>;

    /// A server whose `POST /start` starts a three-event log and sends its first event, then
    /// drops the connection; with `location`, it names the log (`/log`) as the control plane
    /// does, without, as through a proxy that drops the header. A retry of the POST is a `303`
    /// to `/log`; `GET /log` sends what follows `Last-Event-ID`.
    async fn serve_started_log(location: bool) -> (String, Seen) {
        use axum::http::{HeaderMap, Method, StatusCode, Uri};
        let turn = edith_types::TurnId::generate();
        let frame = move |seq: u64| {
            let kind = if seq == 3 {
                TurnEventKind::TurnFinished {
                    state: edith_types::TurnState::Completed,
                    output: None,
                    error: None,
                }
            } else {
                TurnEventKind::MessageDelta {
                    text: format!("{seq} "),
                }
            };
            let event = TurnEvent {
                seq,
                turn_id: turn.clone(),
                at: edith_types::Timestamp::now(),
                kind,
            };
            format!(
                "id: {seq}\ndata: {}\n\n",
                serde_json::to_string(&event).unwrap()
            )
        };
        let seen = Seen::default();
        let record = seen.clone();
        let handler = move |method: Method, uri: Uri, headers: HeaderMap| {
            let header = |name: &str| {
                let value = headers.get(name).map(|v| v.to_str().unwrap().to_owned());
                value.unwrap_or_default()
            };
            let after: u64 = header("last-event-id").parse().unwrap_or(0);
            let mut requests = record.lock().unwrap();
            requests.push((
                method.to_string(),
                uri.path().to_owned(),
                header("last-event-id"),
                header("idempotency-key"),
            ));
            let first_post = requests.iter().filter(|r| r.0 == "POST").count() == 1;
            let sse = [("content-type", "text/event-stream")];
            let response = match (method.as_str(), uri.path()) {
                ("POST", "/start") if first_post => {
                    // The first event, then the connection breaks.
                    let body = stream::iter([
                        Ok(frame(1)),
                        Err(std::io::Error::other("the connection drops")),
                    ])
                    .then(|chunk| async move {
                        // Separate writes: the first event leaves before the break.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        chunk
                    });
                    let body = axum::body::Body::from_stream(body);
                    let mut response = (StatusCode::CREATED, sse, body).into_response();
                    if location {
                        let log = axum::http::HeaderValue::from_static("/log");
                        response.headers_mut().insert("location", log);
                    }
                    response
                }
                ("POST", "/start") => {
                    (StatusCode::SEE_OTHER, [("location", "/log")]).into_response()
                }
                ("GET", "/log") => {
                    let rest: String = (after + 1..=3).map(&frame).collect();
                    (StatusCode::OK, sse, rest).into_response()
                }
                _ => StatusCode::NOT_FOUND.into_response(),
            };
            async move { response }
        };
        use axum::response::IntoResponse;
        let app = axum::Router::new().fallback(handler);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    async fn follow_started(client: EdithHermes) -> Vec<u64> {
        let events = client
            .start_stream::<_, TurnEvent>("/start", &serde_json::json!({"input": "x"}))
            .await
            .expect("started");
        tokio::time::timeout(
            Duration::from_secs(20),
            events.map(|e| e.unwrap().seq).collect(),
        )
        .await
        .expect("the stream ends after the final event")
    }

    #[tokio::test]
    async fn a_started_stream_resumes_at_its_location() {
        let (url, seen) = serve_started_log(true).await;
        assert_eq!(
            follow_started(EdithHermes::remote(&url, None)).await,
            [1, 2, 3]
        );
        let seen = seen.lock().unwrap().clone();
        let routes: Vec<_> = seen.iter().map(|r| (&*r.0, &*r.1, &*r.2)).collect();
        assert_eq!(routes, [("POST", "/start", ""), ("GET", "/log", "1")]);
        assert!(!seen[0].3.is_empty(), "the POST carries an Idempotency-Key");
    }

    /// Without a `Location`, the POST is sent again with its key. The SDK's own client follows
    /// the `303` itself, after the last event; a caller's client that follows redirects lands
    /// on the whole log, and what was seen is skipped.
    #[tokio::test]
    async fn a_started_stream_without_its_location_asks_the_post_again() {
        let (url, seen) = serve_started_log(false).await;
        assert_eq!(
            follow_started(EdithHermes::remote(&url, None)).await,
            [1, 2, 3]
        );
        let seen = seen.lock().unwrap().clone();
        let routes: Vec<_> = seen.iter().map(|r| (&*r.0, &*r.1, &*r.2)).collect();
        let again = [("POST", "/start", ""), ("POST", "/start", "")];
        assert_eq!(routes, [again.as_slice(), &[("GET", "/log", "1")]].concat());
        assert_eq!(seen[0].3, seen[1].3, "the retry has the first one's key");

        let (url, seen) = serve_started_log(false).await;
        let follows = EdithHermes::with_http_client(&url, None, reqwest::Client::new());
        assert_eq!(follow_started(follows).await, [1, 2, 3]);
        let seen = seen.lock().unwrap().clone();
        let routes: Vec<_> = seen.iter().map(|r| (&*r.0, &*r.1, &*r.2)).collect();
        assert_eq!(routes, [again.as_slice(), &[("GET", "/log", "")]].concat());
    }
}
