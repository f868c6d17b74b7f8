//! A multiplexed gateway client: one connection shared by every caller, replies matched by
//! id, events routed to subscribers by live session id. The connection is a WebSocket, or, to
//! a gateway in the same process, a pair of channels carrying the same frames.

use std::collections::{HashMap, VecDeque};
use std::future::ready;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
pub use tokio_tungstenite::tungstenite::Message;

use crate::events::{GatewayReady, NativeEvent, SessionInfo};
use crate::ids::LiveSessionId;
use crate::methods::Method;
use crate::protocol::Incoming;

/// Why a call on a gateway connection failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The WebSocket could not be opened, or the gateway sent no `gateway.ready`.
    #[error("could not connect to the gateway: {0}")]
    Connect(String),
    /// The connection is closed (by either side).
    #[error("the gateway connection is closed")]
    Closed,
    /// The gateway did not answer in time; the connection is left open.
    #[error("`{method}` got no reply within {timeout:?}")]
    Timeout {
        /// The method called.
        method: String,
        /// How long the call waited.
        timeout: Duration,
    },
    /// The gateway answered with a JSON-RPC error.
    #[error("`{method}` failed: {message} ({code})")]
    Rpc {
        /// The method called.
        method: String,
        /// The error code (see [`crate::protocol::codes`]).
        code: i64,
        /// The gateway's message.
        message: String,
    },
    /// The reply is not what the method returns.
    #[error("`{method}` answered something unexpected: {message}")]
    Decode {
        /// The method called.
        method: String,
        /// What did not fit.
        message: String,
    },
}

impl GatewayError {
    /// The JSON-RPC error code, when the gateway answered with one.
    pub fn code(&self) -> Option<i64> {
        match self {
            GatewayError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, (i64, String)>>>;

/// Events of a live session nobody has followed yet are kept (this many per session, for this
/// many sessions at most) and handed to its first subscriber: a runtime may send them between
/// the reply that names the session and the subscription. A session once followed and then
/// let go keeps nothing (its leftovers must not reach a later turn).
const UNCLAIMED_PER_SESSION: usize = 64;
const UNCLAIMED_SESSIONS: usize = 256;
/// How many let-go sessions are remembered as such.
const RETIRED_SESSIONS: usize = 4096;

/// Where events go.
#[derive(Default)]
struct Routes {
    /// Each followed live session's receiver.
    subscribers: HashMap<LiveSessionId, Subscriber>,
    /// Events of sessions nobody follows yet, oldest session first.
    unclaimed: VecDeque<Kept>,
    /// Sessions followed once and let go, each with the number of its last let-go, and the
    /// same in let-go order, oldest first (an entry is stale once the session is let go again).
    retired: HashMap<LiveSessionId, u64>,
    retired_order: VecDeque<(LiveSessionId, u64)>,
    let_go: u64,
}

/// Who follows a live session.
struct Subscriber {
    tx: mpsc::UnboundedSender<NativeEvent>,
    /// Whether it reads `session.info` (or has it dropped unread).
    reads_info: bool,
}

impl Subscriber {
    fn reads(&self, event: &NativeEvent) -> bool {
        self.reads_info || !matches!(event, NativeEvent::SessionInfo(_))
    }

    /// Sends `event` on, unless this subscriber does not read its kind.
    fn send(&self, event: NativeEvent) {
        if self.reads(&event) {
            let _ = self.tx.send(event);
        }
    }

    /// Reads a `session.info` frame's text and sends it on, when this subscriber reads info.
    fn send_info(&self, frame: &str) {
        if self.reads_info
            && let Some(Incoming::Event(frame)) = Incoming::parse(frame)
        {
            let _ = self.tx.send(frame.event);
        }
    }
}

/// What is kept of a live session nobody follows yet.
struct Kept {
    sid: LiveSessionId,
    events: VecDeque<Unclaimed>,
    /// When its last event came.
    heard: Instant,
}

/// An event kept for a live session nobody follows yet.
enum Unclaimed {
    Read(NativeEvent),
    /// A `session.info`, as its frame's text: read only if the session's first subscriber reads
    /// info. A runtime announces every session it opens, before its opener can follow it, and
    /// the control plane's subscribers drop the info unread.
    Info(String),
}

impl Routes {
    /// Whether an event of type `kind` of `sid` would go nowhere, so that it need not be read.
    fn unread(&self, sid: &LiveSessionId, kind: &str) -> bool {
        match self.subscribers.get(sid) {
            Some(subscriber) => !subscriber.reads_info && kind == SessionInfo::kind(),
            None => self.retired.contains_key(sid),
        }
    }

    /// Whether an event of type `kind` of `sid` is a `session.info` to keep unread for the
    /// session's first subscriber ([`Routes::keep_info`]).
    fn kept_unread(&self, sid: &LiveSessionId, kind: &str) -> bool {
        kind == SessionInfo::kind()
            && !self.subscribers.contains_key(sid)
            && !self.retired.contains_key(sid)
    }

    fn route(&mut self, sid: LiveSessionId, event: NativeEvent) {
        if let Some(subscriber) = self.subscribers.get(&sid) {
            subscriber.send(event);
        } else if !self.retired.contains_key(&sid) {
            self.keep(sid, Unclaimed::Read(event));
        }
    }

    /// Routes the text of a `session.info` frame of `sid` that was left unread: kept so for a
    /// session nobody follows yet, or read now if it has meanwhile been followed.
    fn keep_info(&mut self, sid: LiveSessionId, frame: &str) {
        if let Some(subscriber) = self.subscribers.get(&sid) {
            subscriber.send_info(frame);
        } else if !self.retired.contains_key(&sid) {
            self.keep(sid, Unclaimed::Info(frame.to_owned()));
        }
    }

    /// Subscribes to `sid`'s events from now on, unless someone follows them already
    /// ([`GatewayClient::subscribe_from_now`]).
    fn subscribe_from_now(
        &mut self,
        sid: &LiveSessionId,
    ) -> Option<mpsc::UnboundedReceiver<NativeEvent>> {
        if self.subscribers.contains_key(sid) {
            return None;
        }
        // What was kept for a first subscriber is from before.
        self.unclaimed.retain(|kept| kept.sid != *sid);
        Some(self.subscribe(sid, false))
    }

    /// Whether `sid`, followed by nobody, sent an event that was kept within `within`.
    fn heard_within(&self, sid: &LiveSessionId, within: Duration) -> bool {
        (self.unclaimed.iter()).any(|kept| kept.sid == *sid && kept.heard.elapsed() < within)
    }

    fn keep(&mut self, sid: LiveSessionId, event: Unclaimed) {
        match self.unclaimed.iter_mut().find(|kept| kept.sid == sid) {
            Some(kept) => {
                if kept.events.len() == UNCLAIMED_PER_SESSION {
                    kept.events.pop_front();
                }
                kept.events.push_back(event);
                kept.heard = Instant::now();
            }
            None => {
                if self.unclaimed.len() == UNCLAIMED_SESSIONS {
                    self.unclaimed.pop_front();
                }
                self.unclaimed.push_back(Kept {
                    sid,
                    events: VecDeque::from([event]),
                    heard: Instant::now(),
                });
            }
        }
    }

    fn subscribe(
        &mut self,
        sid: &LiveSessionId,
        reads_info: bool,
    ) -> mpsc::UnboundedReceiver<NativeEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let subscriber = Subscriber { tx, reads_info };
        if let Some(at) = self.unclaimed.iter().position(|kept| kept.sid == *sid) {
            let kept = self.unclaimed.remove(at).expect("present");
            for event in kept.events {
                match event {
                    Unclaimed::Read(event) => subscriber.send(event),
                    Unclaimed::Info(frame) => subscriber.send_info(&frame),
                }
            }
        }
        self.subscribers.insert(sid.clone(), subscriber);
        rx
    }

    fn unsubscribe(&mut self, sid: &LiveSessionId) {
        if self.subscribers.remove(sid).is_none() {
            return;
        }
        self.let_go += 1;
        self.retired.insert(sid.clone(), self.let_go);
        self.retired_order.push_back((sid.clone(), self.let_go));
        // Sessions let go again and again leave stale entries behind: dropped now and then.
        if self.retired_order.len() > 2 * RETIRED_SESSIONS {
            let retired = &self.retired;
            (self.retired_order).retain(|(sid, number)| retired.get(sid) == Some(number));
        }
        // The session let go longest ago is forgotten first.
        while self.retired.len() > RETIRED_SESSIONS {
            let Some((oldest, number)) = self.retired_order.pop_front() else {
                break;
            };
            if self.retired.get(&oldest) == Some(&number) {
                self.retired.remove(&oldest);
            }
        }
    }
}

/// State shared by the handle and the reader task.
struct Shared {
    /// Requests waiting for their reply, by id.
    pending: Mutex<Pending>,
    /// Where each live session's events go.
    routes: Mutex<Routes>,
    /// Set once the socket is gone; every later call fails fast.
    closed: AtomicBool,
}

/// How often a gateway's WebSocket is pinged: a runtime that hangs keeps its socket open but
/// answers nothing, pongs included. Both runtimes answer pings, also while a turn streams (in
/// under a millisecond: the conformance checks `framing::pings_are_answered*`); that they do
/// within [`SILENT_LIMIT`] in every busy moment is our reading of their designs.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// A WebSocket that has brought nothing for this long, pongs included, is closed as dead: its
/// calls fail, and whoever holds the connection sees it closed.
const SILENT_LIMIT: Duration = Duration::from_secs(20);

/// A connection to a Hermes gateway. Cheap to clone; the socket closes when the last clone drops.
#[derive(Clone)]
pub struct GatewayClient {
    shared: Arc<Shared>,
    /// Request frames, to whatever carries them to the gateway.
    outgoing: mpsc::UnboundedSender<String>,
    next_id: Arc<AtomicU64>,
    /// The `gateway.ready` payload.
    ready: Arc<GatewayReady>,
    request_timeout: Duration,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl GatewayClient {
    /// Connects to `ws_url` (e.g. `ws://127.0.0.1:9119/api/ws`) with `token`, and waits for the
    /// `gateway.ready` frame.
    pub async fn connect(
        ws_url: &str,
        token: &str,
        request_timeout: Duration,
    ) -> Result<Self, GatewayError> {
        // A runtime that does not take the connection for as long as a live one may stay
        // silent is as dead as one that stops answering on it.
        let socket = open_socket(ws_url, token, request_timeout.min(SILENT_LIMIT)).await?;
        let (mut sink, stream) = socket.split();
        let (outgoing, mut outgoing_rx) = mpsc::unbounded_channel::<String>();
        // When a frame last came, in milliseconds from `epoch`.
        let epoch = tokio::time::Instant::now();
        let heard = Arc::new(AtomicU64::new(0));
        let last_heard = heard.clone();
        let (silent, silenced) = oneshot::channel::<()>();
        // Writer and heartbeat: ends when every handle is dropped (the channel closes), the
        // socket fails, or the gateway has been silent too long; the reader ends with it.
        tokio::spawn(async move {
            let mut beat = tokio::time::interval_at(epoch + HEARTBEAT, HEARTBEAT);
            let dead = loop {
                let message = tokio::select! {
                    frame = outgoing_rx.recv() => match frame {
                        Some(frame) => Message::Text(frame.into()),
                        None => break false,
                    },
                    _ = beat.tick() => {
                        let at = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                        if (epoch + at).elapsed() > SILENT_LIMIT {
                            break true;
                        }
                        Message::Ping(Default::default())
                    }
                };
                match tokio::time::timeout(SILENT_LIMIT, sink.send(message)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break false,
                    // A peer that reads nothing fills the socket's buffers: as dead as one
                    // that says nothing.
                    Err(_) => break true,
                }
            };
            if dead {
                tracing::warn!(
                    "the gateway took or answered nothing, pings included, for {SILENT_LIMIT:?}: \
                     its connection is closed"
                );
                let _ = silent.send(());
            }
            // A peer that reads nothing may never take the close: it is not waited on long.
            let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
        });
        // The text frames, until the close, an error or the heartbeat's end; other frames are
        // the socket's own (a pong among them: every frame counts as heard).
        let incoming = stream
            .inspect(move |_| {
                let at = epoch.elapsed().as_millis() as u64;
                heard.store(at, Ordering::Relaxed);
            })
            .take_while(|message| ready(matches!(message, Ok(m) if !m.is_close())))
            .filter_map(|message| {
                ready(match message {
                    Ok(Message::Text(text)) => Some(text),
                    _ => None,
                })
            })
            .take_until(silenced);
        Self::over(Box::pin(incoming), outgoing, request_timeout).await
    }

    /// A client of a gateway in this process, whose connection is a pair of channels (see
    /// `hermes_runtime::RunningRuntime::in_process_gateway`): the same frames as over a
    /// WebSocket, without the socket. Waits for the `gateway.ready` frame.
    pub async fn in_process(
        requests: mpsc::UnboundedSender<String>,
        mut frames: mpsc::UnboundedReceiver<String>,
        request_timeout: Duration,
    ) -> Result<Self, GatewayError> {
        let incoming = futures_util::stream::poll_fn(move |cx| frames.poll_recv(cx));
        Self::over(incoming, requests, request_timeout).await
    }

    /// A client over a connection's frames however they are carried: the gateway's text frames
    /// from `incoming` (ending with the connection), and requests sent into `outgoing`.
    async fn over<I>(
        mut incoming: I,
        outgoing: mpsc::UnboundedSender<String>,
        request_timeout: Duration,
    ) -> Result<Self, GatewayError>
    where
        I: futures_util::Stream + Unpin + Send + 'static,
        I::Item: std::ops::Deref<Target = str>,
    {
        // Bounded as the handshake is: a runtime silent this long is taken for dead.
        let ready_within = request_timeout.min(SILENT_LIMIT);
        let ready = tokio::time::timeout(ready_within, async {
            while let Some(text) = incoming.next().await {
                if let Some(Incoming::Event(frame)) = Incoming::parse(&text)
                    && let NativeEvent::GatewayReady(ready) = frame.event
                {
                    return Ok(ready);
                }
            }
            Err(GatewayError::Connect(
                "closed before gateway.ready".to_owned(),
            ))
        })
        .await
        .map_err(|_| {
            GatewayError::Connect(format!("no gateway.ready within {ready_within:?}"))
        })??;

        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            routes: Mutex::new(Routes::default()),
            closed: AtomicBool::new(false),
        });

        // Reader: routes replies and events until the connection ends, then fails what waits.
        let reader_shared = shared.clone();
        tokio::spawn(async move {
            while let Some(text) = incoming.next().await {
                // An event that would go nowhere is not read beyond its session and type, nor
                // is a session's info kept for whoever follows it first.
                let mut info_of = None;
                let unread = |sid: &LiveSessionId, kind: &str| {
                    let routes = reader_shared.routes.lock().expect("not poisoned");
                    if routes.kept_unread(sid, kind) {
                        info_of = Some(sid.clone());
                        return true;
                    }
                    routes.unread(sid, kind)
                };
                match Incoming::parse_unless(&text, unread) {
                    Some(Incoming::Reply { id, outcome }) => {
                        let key = id_key(&id);
                        let waiter = reader_shared
                            .pending
                            .lock()
                            .expect("not poisoned")
                            .remove(&key);
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(outcome);
                        }
                    }
                    Some(Incoming::Event(frame)) => {
                        let Some(sid) = frame.session_id else {
                            continue;
                        };
                        let mut routes = reader_shared.routes.lock().expect("not poisoned");
                        routes.route(sid, frame.event);
                    }
                    Some(Incoming::Other(frame)) => {
                        tracing::debug!(%frame, "ignored gateway frame");
                    }
                    Some(Incoming::Unread) => {
                        if let Some(sid) = info_of {
                            let mut routes = reader_shared.routes.lock().expect("not poisoned");
                            routes.keep_info(sid, &text);
                        }
                    }
                    None => tracing::warn!("unparseable gateway frame"),
                }
            }
            reader_shared.closed.store(true, Ordering::SeqCst);
            reader_shared.pending.lock().expect("not poisoned").clear();
            *reader_shared.routes.lock().expect("not poisoned") = Routes::default();
        });

        Ok(Self {
            shared,
            outgoing,
            next_id: Arc::new(AtomicU64::new(1)),
            ready: Arc::new(ready),
            request_timeout,
        })
    }

    /// The payload of the `gateway.ready` frame.
    pub fn ready_payload(&self) -> &GatewayReady {
        &self.ready
    }

    /// How long a call waits for its reply.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Whether the connection is closed; every call on it fails with [`GatewayError::Closed`].
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Calls the typed method `M` and waits for its reply.
    pub async fn request<M: Method>(&self, params: &M::Params) -> Result<M::Result, GatewayError> {
        let params = serde_json::to_value(params).expect("params serialize");
        let result = self.call(M::NAME, params).await?;
        serde_json::from_value(result).map_err(|e| GatewayError::Decode {
            method: M::NAME.to_owned(),
            message: e.to_string(),
        })
    }

    /// Calls `method` and waits for its reply (in a span of its own, named for the method and
    /// marked as an error when the call fails).
    #[tracing::instrument(
        name = "gateway.call",
        skip_all,
        fields(
            rpc.method = method,
            otel.name = method,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
        )
    )]
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, GatewayError> {
        let answered = self.exchange(method, params).await;
        if answered.is_err() {
            tracing::Span::current().record("otel.status_code", "ERROR");
        }
        answered
    }

    async fn exchange(&self, method: &str, params: Value) -> Result<Value, GatewayError> {
        if self.is_closed() {
            return Err(GatewayError::Closed);
        }
        let id = format!("r{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.shared
            .pending
            .lock()
            .expect("not poisoned")
            .insert(id.clone(), tx);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.outgoing.send(frame.to_string()).is_err() {
            self.shared
                .pending
                .lock()
                .expect("not poisoned")
                .remove(&id);
            return Err(GatewayError::Closed);
        }
        match tokio::time::timeout(self.request_timeout, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err((code, message)))) => Err(GatewayError::Rpc {
                method: method.to_owned(),
                code,
                message,
            }),
            Ok(Err(_)) => Err(GatewayError::Closed),
            Err(_) => {
                self.shared
                    .pending
                    .lock()
                    .expect("not poisoned")
                    .remove(&id);
                Err(GatewayError::Timeout {
                    method: method.to_owned(),
                    timeout: self.request_timeout,
                })
            }
        }
    }

    /// Routes `session`'s events to the returned receiver (replacing an earlier subscriber),
    /// starting with those that arrived while nobody followed it (a bounded number).
    pub fn subscribe(&self, session: &LiveSessionId) -> mpsc::UnboundedReceiver<NativeEvent> {
        let mut routes = self.shared.routes.lock().expect("not poisoned");
        routes.subscribe(session, true)
    }

    /// Routes `session`'s events from now on to the returned receiver, for a subscriber that
    /// follows a turn it starts after subscribing: what the session sent while nobody followed
    /// it is dropped (an earlier turn's, which someone else started on the same live session),
    /// and so are its `session.info` events, unread (the largest a runtime sends: the real
    /// Hermes's is about 8 KB, twice a turn). `None`, and nothing changed, when someone follows
    /// the session already: a live session runs one turn at a time, and its events cannot be
    /// told apart by turn.
    pub fn subscribe_from_now(
        &self,
        session: &LiveSessionId,
    ) -> Option<mpsc::UnboundedReceiver<NativeEvent>> {
        let mut routes = self.shared.routes.lock().expect("not poisoned");
        routes.subscribe_from_now(session)
    }

    /// Whether someone follows the live session's events now.
    pub fn is_followed(&self, session: &LiveSessionId) -> bool {
        let routes = self.shared.routes.lock().expect("not poisoned");
        routes.subscribers.contains_key(session)
    }

    /// Whether the live session, which nobody follows, sent an event within `within` (a turn
    /// started by a native call runs on, say). Known of the last sessions that sent some only
    /// (their events are kept for a first subscriber, within bounds).
    pub fn heard_within(&self, session: &LiveSessionId, within: Duration) -> bool {
        let routes = self.shared.routes.lock().expect("not poisoned");
        routes.heard_within(session, within)
    }

    /// Stops routing the live session's events to its subscriber (the stream ends).
    pub fn unsubscribe(&self, session: &LiveSessionId) {
        self.shared
            .routes
            .lock()
            .expect("not poisoned")
            .unsubscribe(session);
    }
}

/// Reply ids are matched as text, whatever JSON type the server echoes them as.
fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Percent-encodes a token for a query string (tokens are usually URL-safe already).
/// A WebSocket to a runtime's gateway.
pub type GatewaySocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the WebSocket of the gateway at `ws_url` with `token` (as Hermes takes it: in the
/// query), within `timeout`; nothing is read from it yet.
pub async fn open_socket(
    ws_url: &str,
    token: &str,
    timeout: Duration,
) -> Result<GatewaySocket, GatewayError> {
    let url = format!("{ws_url}?token={}", encode_query(token));
    let (socket, _) = tokio::time::timeout(
        timeout,
        // No Nagle: replies and stream pieces are small and latency-bound.
        tokio_tungstenite::connect_async_with_config(url.as_str(), None, true),
    )
    .await
    .map_err(|_| GatewayError::Connect(format!("no handshake within {timeout:?}")))?
    .map_err(|e| GatewayError::Connect(e.to_string()))?;
    Ok(socket)
}

fn encode_query(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::TextPayload;

    fn delta(text: &str) -> NativeEvent {
        NativeEvent::MessageDelta(TextPayload {
            text: text.to_owned(),
        })
    }

    #[test]
    fn events_before_the_first_subscription_are_handed_over_and_leftovers_are_not() {
        let mut routes = Routes::default();
        let sid = LiveSessionId::new("ab12cd34");
        routes.route(sid.clone(), delta("early"));
        let mut rx = routes.subscribe(&sid, true);
        routes.route(sid.clone(), delta("live"));
        assert_eq!(rx.try_recv().unwrap(), delta("early"));
        assert_eq!(rx.try_recv().unwrap(), delta("live"));
        routes.unsubscribe(&sid);
        routes.route(sid.clone(), delta("leftover"));
        let mut again = routes.subscribe(&sid, true);
        assert!(
            again.try_recv().is_err(),
            "a later subscriber gets no leftovers"
        );
    }

    fn info() -> NativeEvent {
        NativeEvent::SessionInfo(SessionInfo::default())
    }

    #[test]
    fn a_subscriber_without_info_gets_every_other_event_and_its_info_is_left_unread() {
        let mut routes = Routes::default();
        let (quiet, all) = (LiveSessionId::new("q"), LiveSessionId::new("a"));
        routes.route(quiet.clone(), info());
        routes.route(quiet.clone(), delta("early"));
        let mut quiet_rx = routes.subscribe(&quiet, false);
        let mut all_rx = routes.subscribe(&all, true);
        let kind = SessionInfo::kind();
        assert!(routes.unread(&quiet, kind));
        assert!(!routes.unread(&quiet, "message.delta"));
        assert!(!routes.unread(&all, kind));
        for sid in [&quiet, &all] {
            routes.route(sid.clone(), info());
            routes.route(sid.clone(), delta("live"));
        }
        assert_eq!(quiet_rx.try_recv().unwrap(), delta("early"));
        assert_eq!(quiet_rx.try_recv().unwrap(), delta("live"));
        assert!(quiet_rx.try_recv().is_err());
        assert_eq!(all_rx.try_recv().unwrap(), info());
        assert_eq!(all_rx.try_recv().unwrap(), delta("live"));
        // Let go, a session's events go nowhere, so none is read; nor is one nobody followed
        // yet left unread (it is kept for its first subscriber).
        routes.unsubscribe(&quiet);
        assert!(routes.unread(&quiet, "message.delta"));
        assert!(!routes.unread(&LiveSessionId::new("new"), kind));
    }

    /// The text of a `session.info` frame of `sid`.
    fn info_frame(sid: &LiveSessionId) -> String {
        json!({"jsonrpc": "2.0", "method": "event", "params": {
            "type": "session.info", "session_id": sid, "payload": {"tools": {}},
        }})
        .to_string()
    }

    #[test]
    fn an_info_kept_unread_before_the_first_subscription_is_read_only_for_one_that_reads_it() {
        let mut routes = Routes::default();
        let (quiet, all, late) = (
            LiveSessionId::new("q"),
            LiveSessionId::new("a"),
            LiveSessionId::new("l"),
        );
        let kind = SessionInfo::kind();
        for sid in [&quiet, &all] {
            assert!(routes.kept_unread(sid, kind));
            assert!(!routes.kept_unread(sid, "message.delta"));
            routes.keep_info(sid.clone(), &info_frame(sid));
            routes.route(sid.clone(), delta("early"));
        }
        let mut quiet_rx = routes.subscribe(&quiet, false);
        let mut all_rx = routes.subscribe(&all, true);
        assert_eq!(quiet_rx.try_recv().unwrap(), delta("early"));
        assert!(quiet_rx.try_recv().is_err());
        assert!(matches!(all_rx.try_recv(), Ok(NativeEvent::SessionInfo(_))));
        assert_eq!(all_rx.try_recv().unwrap(), delta("early"));
        // Followed, a session's info is no longer kept unread; one followed between the check
        // and the keeping is read for its subscriber.
        assert!(!routes.kept_unread(&all, kind));
        let mut late_rx = routes.subscribe(&late, true);
        routes.keep_info(late.clone(), &info_frame(&late));
        assert!(matches!(
            late_rx.try_recv(),
            Ok(NativeEvent::SessionInfo(_))
        ));
        // Let go, a session keeps nothing.
        routes.unsubscribe(&late);
        assert!(!routes.kept_unread(&late, kind));
        routes.keep_info(late.clone(), &info_frame(&late));
        assert!(routes.unclaimed.is_empty());
    }

    #[test]
    fn let_go_sessions_are_remembered_up_to_a_bound_the_last_let_go_longest() {
        let mut routes = Routes::default();
        let follow_and_let_go = |routes: &mut Routes, sid: &LiveSessionId| {
            drop(routes.subscribe(sid, true));
            routes.unsubscribe(sid);
        };
        let busy = LiveSessionId::new("busy");
        for n in 0..RETIRED_SESSIONS + 10 {
            follow_and_let_go(&mut routes, &LiveSessionId::new(format!("s{n}")));
            // A session with a turn between every other session's: always among the last.
            follow_and_let_go(&mut routes, &busy);
        }
        assert_eq!(routes.retired.len(), RETIRED_SESSIONS);
        assert!(routes.retired_order.len() <= 2 * RETIRED_SESSIONS);
        assert!(routes.unread(&busy, "message.delta"));
        assert!(!routes.unread(&LiveSessionId::new("s0"), "message.delta"));
        let last = LiveSessionId::new(format!("s{}", RETIRED_SESSIONS + 9));
        assert!(routes.unread(&last, "message.delta"));
        // A remembered session's leftovers reach no later subscriber.
        routes.route(busy.clone(), delta("leftover"));
        assert!(routes.subscribe(&busy, true).try_recv().is_err());
    }

    #[test]
    fn a_subscriber_from_now_gets_nothing_sent_before() {
        let mut routes = Routes::default();
        let sid = LiveSessionId::new("shared");
        // An earlier turn's end, which someone else started on the live session.
        routes.route(sid.clone(), delta("earlier"));
        let mut rx = routes.subscribe_from_now(&sid).expect("nobody follows it");
        assert!(rx.try_recv().is_err(), "nothing from before");
        routes.route(sid.clone(), delta("now"));
        assert_eq!(rx.try_recv().unwrap(), delta("now"));
        // Followed already: the follower keeps it.
        assert!(routes.subscribe_from_now(&sid).is_none());
        routes.route(sid.clone(), delta("still"));
        assert_eq!(rx.try_recv().unwrap(), delta("still"));
        routes.unsubscribe(&sid);
        assert!(routes.subscribe_from_now(&sid).is_some(), "let go");
    }

    #[test]
    fn a_session_nobody_follows_is_heard_while_it_sends_events() {
        let mut routes = Routes::default();
        let (quiet, busy) = (LiveSessionId::new("quiet"), LiveSessionId::new("busy"));
        let (lately, long) = (Duration::from_millis(40), Duration::from_secs(600));
        routes.route(quiet.clone(), delta("once"));
        std::thread::sleep(lately);
        routes.route(busy.clone(), delta("now"));
        assert!(routes.heard_within(&busy, long));
        assert!(!routes.heard_within(&quiet, lately));
        assert!(routes.heard_within(&quiet, long));
        // Followed, then let go: no longer a session nobody follows that is heard.
        drop(routes.subscribe(&busy, true));
        routes.unsubscribe(&busy);
        routes.route(busy.clone(), delta("leftover"));
        assert!(!routes.heard_within(&busy, long));
    }

    #[test]
    fn unclaimed_events_are_bounded() {
        let mut routes = Routes::default();
        for s in 0..UNCLAIMED_SESSIONS + 10 {
            for n in 0..UNCLAIMED_PER_SESSION + 10 {
                routes.route(LiveSessionId::new(format!("s{s}")), delta(&n.to_string()));
            }
        }
        assert_eq!(routes.unclaimed.len(), UNCLAIMED_SESSIONS);
        assert!(
            routes
                .unclaimed
                .iter()
                .all(|kept| kept.events.len() == UNCLAIMED_PER_SESSION)
        );
    }
}
