//! `profile.connect()`: a persistent connection to a profile's native gateway, through the
//! control plane's relay (`profile_gateway`; the protocol is in `edith_types::relay`).
//!
//! Native requests go out typed ([`GatewayConnection::request`], or the generated namespaces
//! with [`GatewayConnection::api`]); replies are matched by id; native events arrive in order
//! from [`GatewayConnection::next_event`]. When the socket drops, the connection reconnects by
//! itself and resumes after the last frame it had: what arrived in between is delivered, none
//! twice. If the relay could no longer keep all of it, a [`GatewayEvent::Missed`] says which
//! frames were lost. A request written just before a drop may be lost with the socket; it then
//! fails after the request timeout rather than hanging.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edith_types::relay::RelayResume;
use edith_types::{GatewayConnectionId, RelayMessage};
use futures_util::{SinkExt, StreamExt};
use hermes_native::codes;
use hermes_native::protocol::Incoming;
use hermes_native::{EventFrame, Method, Native, NativeError, NativeTransport};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::error::{Error, Result};

/// How long a request waits for its reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long opening the socket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Reconnection attempts after a drop, with pauses from 50 ms doubling to 2 s: about 30 s in
/// all, well within the relay's 60 s resume window.
const RECONNECT_ATTEMPTS: u32 = 20;
/// The relay pings every 15 s: a socket silent this long is dead, and is replaced.
const SILENCE: Duration = Duration::from_secs(45);
/// Events waiting for the application; beyond this, the oldest new ones are dropped and a
/// [`GatewayEvent::Missed`] says which.
const QUEUED_EVENTS: usize = 4096;

/// Something that happened on a [`GatewayConnection`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// Nearly every value is `Native`: boxing it would cost an allocation per event to save space
// on the rare `Missed`.
#[allow(clippy::large_enum_variant)]
pub enum GatewayEvent {
    /// A native event of the runtime.
    Native(EventFrame),
    /// After a reconnection, the frames the relay no longer had (first and last sequence
    /// numbers): events among them are lost.
    Missed {
        /// The first frame lost.
        first: u64,
        /// The last frame lost.
        last: u64,
    },
}

type Outcome = std::result::Result<Value, (i64, String)>;

struct Shared {
    pending: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    connection: Mutex<Option<GatewayConnectionId>>,
    reconnects: AtomicU64,
    /// Why the connection ended, once it has.
    ended: Mutex<Option<String>>,
}

/// Where the relay is, to connect again.
#[derive(Clone)]
pub(crate) struct RelayTarget {
    /// `ws://host:port/v1/instances/…/gateway`
    pub url: String,
    pub api_key: Option<String>,
}

enum Outgoing {
    Request(String),
    Close,
}

/// A persistent, self-resuming connection to one profile's native gateway. Dropping it, or
/// [`GatewayConnection::close`], ends it and tells the control plane.
///
/// ```no_run
/// # async fn demo(profile: hermes::ProfileHandle) -> hermes::Result<()> {
/// use hermes::GatewayEvent;
/// use hermes::native::{NativeEvent, PromptSubmit, PromptSubmitParams, SessionCreateParams};
/// let connection = profile.connect().await?;
/// let created = connection
///     .api()
///     .session()
///     .create(&SessionCreateParams::default())
///     .await?;
/// let prompt = PromptSubmitParams {
///     session_id: Some(created.session_id),
///     text: Some("hello".to_owned()),
///     ..Default::default()
/// };
/// connection.request::<PromptSubmit>(&prompt).await?;
/// while let Some(event) = connection.next_event().await {
///     match event {
///         GatewayEvent::Native(frame) => match frame.event {
///             NativeEvent::MessageDelta(delta) => print!("{}", delta.text),
///             NativeEvent::MessageComplete(_) => break,
///             _ => {}
///         },
///         GatewayEvent::Missed { first, last } => eprintln!("lost frames {first}..={last}"),
///         _ => {}
///     }
/// }
/// connection.close().await;
/// # Ok(()) }
/// ```
pub struct GatewayConnection {
    shared: Arc<Shared>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    events: tokio::sync::Mutex<mpsc::Receiver<GatewayEvent>>,
    next_id: AtomicU64,
    /// The task following the relay; taken by the first `close()`.
    driver: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for GatewayConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConnection")
            .field("id", &self.id())
            .field("reconnects", &self.reconnects())
            .finish_non_exhaustive()
    }
}

/// Why a socket of the connection ended.
enum SocketEnd {
    /// The relay said the connection ended.
    Ended(String),
    /// It broke: resume on a new socket.
    Dropped,
    /// We closed it.
    Closed,
}

impl GatewayConnection {
    /// Opens the relay at `target` and starts following it.
    pub(crate) async fn open(
        target: RelayTarget,
        closing: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Self> {
        let socket = connect(&target, &RelayResume::default()).await?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            connection: Mutex::new(None),
            reconnects: AtomicU64::new(0),
            ended: Mutex::new(None),
        });
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::channel(QUEUED_EVENTS);
        let mut driver = Driver {
            target,
            shared: shared.clone(),
            outgoing: outgoing_rx,
            events: events_tx,
            last_seq: 0,
            dropped: None,
            closing,
        };
        let driver = tokio::spawn(async move { driver.run(socket).await });
        Ok(Self {
            shared,
            outgoing,
            events: tokio::sync::Mutex::new(events),
            next_id: AtomicU64::new(1),
            driver: Mutex::new(Some(driver)),
        })
    }

    /// The connection's id on the control plane, once the relay has said it.
    pub fn id(&self) -> Option<GatewayConnectionId> {
        self.shared.connection.lock().expect("not poisoned").clone()
    }

    /// How many times the socket was replaced after a drop.
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::SeqCst)
    }

    /// The next event, in order; `None` once the connection has ended and every event was
    /// taken (then [`GatewayConnection::ended`] says why).
    pub async fn next_event(&self) -> Option<GatewayEvent> {
        self.events.lock().await.recv().await
    }

    /// Why the connection ended, once it has.
    pub fn ended(&self) -> Option<String> {
        self.shared.ended.lock().expect("not poisoned").clone()
    }

    /// Calls the typed native method `M`.
    pub async fn request<M: Method>(&self, params: &M::Params) -> Result<M::Result> {
        let params = serde_json::to_value(params).expect("params serialise");
        let value = self.native_call(M::NAME, params).await?;
        serde_json::from_value(value.clone()).map_err(|e| Error::Decode {
            detail: format!("`{}`: {e}", M::NAME),
            body: value.to_string(),
        })
    }

    /// The generated native namespaces over this connection: `api().session().create(..)`.
    pub fn api(&self) -> Native<'_, Self> {
        Native::new(self)
    }

    /// Calls the native method `method` with `params`; the reply's result or its error.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, NativeError> {
        let transport = |message: String| NativeError::Transport {
            method: method.to_owned(),
            message,
        };
        if let Some(why) = self.ended() {
            return Err(transport(format!("the gateway connection ended: {why}")));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (reply_tx, reply) = oneshot::channel();
        let key = id.to_string();
        self.shared
            .pending
            .lock()
            .expect("not poisoned")
            .insert(key.clone(), reply_tx);
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self
            .outgoing
            .send(Outgoing::Request(request.to_string()))
            .is_err()
        {
            self.shared
                .pending
                .lock()
                .expect("not poisoned")
                .remove(&key);
            return Err(transport("the gateway connection ended".to_owned()));
        }
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, reply).await;
        self.shared
            .pending
            .lock()
            .expect("not poisoned")
            .remove(&key);
        match outcome {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err((code, _)))) if code == codes::METHOD_NOT_FOUND => {
                Err(NativeError::Unsupported {
                    method: method.to_owned(),
                })
            }
            Ok(Ok(Err((code, message)))) => Err(NativeError::Rpc {
                method: method.to_owned(),
                code,
                message,
            }),
            Ok(Err(_)) => Err(transport(format!(
                "the gateway connection ended: {}",
                self.ended().unwrap_or_default()
            ))),
            Err(_) => Err(transport(format!("no reply within {REQUEST_TIMEOUT:?}"))),
        }
    }

    /// Ends the connection: the control plane closes its side at once. Later requests fail;
    /// closing twice is a no-op.
    pub async fn close(&self) {
        let _ = self.outgoing.send(Outgoing::Close);
        let driver = self.driver.lock().expect("not poisoned").take();
        if let Some(mut driver) = driver {
            let _ = tokio::time::timeout(CONNECT_TIMEOUT, &mut driver).await;
        }
    }
}

impl NativeTransport for GatewayConnection {
    async fn native_call(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, NativeError> {
        self.call(method, params).await
    }
}

/// Owns the socket: reads frames into replies and events, writes requests, and resumes on a
/// new socket when one drops.
struct Driver {
    target: RelayTarget,
    shared: Arc<Shared>,
    outgoing: mpsc::UnboundedReceiver<Outgoing>,
    events: mpsc::Sender<GatewayEvent>,
    /// The last frame delivered: a resume starts after it, and nothing at or before it is
    /// delivered again.
    last_seq: u64,
    /// Frames whose events the application's full queue could not take (first, last), to be
    /// reported before the next event.
    dropped: Option<(u64, u64)>,
    /// Flips when the client that opened the connection closes.
    closing: tokio::sync::watch::Receiver<bool>,
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Driver {
    async fn run(&mut self, first: Socket) {
        let mut socket = first;
        let why = loop {
            match self.follow(&mut socket).await {
                SocketEnd::Ended(reason) => break reason,
                SocketEnd::Closed => break "closed by this client".to_owned(),
                SocketEnd::Dropped => match self.reconnect().await {
                    Ok(next) => {
                        socket = next;
                        self.shared.reconnects.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(why) => break why,
                },
            }
        };
        *self.shared.ended.lock().expect("not poisoned") = Some(why);
        // Whoever waits for a reply hears that the connection ended.
        self.shared.pending.lock().expect("not poisoned").clear();
    }

    async fn follow(&mut self, socket: &mut Socket) -> SocketEnd {
        loop {
            tokio::select! {
                message = tokio::time::timeout(SILENCE, socket.next()) => {
                    // Silence past the relay's pings means the socket is dead.
                    let Ok(Some(Ok(message))) = message else {
                        return SocketEnd::Dropped;
                    };
                    match message {
                        Message::Text(text) => {
                            if let Some(end) = self.receive(&text) {
                                return end;
                            }
                        }
                        Message::Close(_) => return SocketEnd::Dropped,
                        _ => {}
                    }
                }
                () = closed(&mut self.closing) => {
                    let _ = socket.close(None).await;
                    return SocketEnd::Closed;
                }
                outgoing = self.outgoing.recv() => match outgoing {
                    Some(Outgoing::Request(text)) => {
                        if socket.send(Message::Text(text.into())).await.is_err() {
                            return SocketEnd::Dropped;
                        }
                    }
                    Some(Outgoing::Close) | None => {
                        let _ = socket.close(None).await;
                        return SocketEnd::Closed;
                    }
                },
            }
        }
    }

    /// Handles one relay message; `Some` when it ends the connection.
    fn receive(&mut self, text: &str) -> Option<SocketEnd> {
        let Ok(message) = serde_json::from_str::<RelayMessage>(text) else {
            tracing::warn!("unreadable relay message");
            return None;
        };
        match message {
            RelayMessage::Attached {
                connection, missed, ..
            } => {
                *self.shared.connection.lock().expect("not poisoned") = Some(connection);
                if let Some((first, last)) = missed {
                    self.last_seq = self.last_seq.max(last);
                    self.deliver(last, GatewayEvent::Missed { first, last });
                }
            }
            RelayMessage::Frame { seq, frame } => {
                if seq <= self.last_seq {
                    return None;
                }
                self.last_seq = seq;
                match Incoming::from_value(frame) {
                    Some(Incoming::Reply { id, outcome }) => {
                        let key = match id {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        let waiter = self
                            .shared
                            .pending
                            .lock()
                            .expect("not poisoned")
                            .remove(&key);
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(outcome);
                        }
                    }
                    Some(Incoming::Event(frame)) => {
                        self.deliver(seq, GatewayEvent::Native(frame));
                    }
                    Some(Incoming::Other(_) | Incoming::Unread) | None => {}
                }
            }
            RelayMessage::Closed { reason } => return Some(SocketEnd::Ended(reason)),
        }
        None
    }

    /// Queues an event (of frame `seq`) for the application without waiting: replies must
    /// keep flowing when the application does not read events. What a full queue cannot take
    /// is reported as missed once there is room.
    fn deliver(&mut self, seq: u64, event: GatewayEvent) {
        if let Some((first, last)) = self.dropped {
            match self.events.try_send(GatewayEvent::Missed { first, last }) {
                Ok(()) => self.dropped = None,
                Err(_) => {
                    self.dropped = Some((first, seq));
                    return;
                }
            }
        }
        if self.events.try_send(event).is_err() {
            self.dropped = Some((seq, seq));
        }
    }

    /// A new socket resuming after the last frame; the reason it could not be had otherwise.
    async fn reconnect(&mut self) -> std::result::Result<Socket, String> {
        let Some(connection) = self.shared.connection.lock().expect("not poisoned").clone() else {
            return Err("the socket dropped before the relay named the connection".to_owned());
        };
        let resume = RelayResume {
            connection: Some(connection),
            after: Some(self.last_seq),
        };
        let mut last_error = String::new();
        for attempt in 0..RECONNECT_ATTEMPTS {
            let pause = Duration::from_millis(50 << attempt.min(5)).min(Duration::from_secs(2));
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = closed(&mut self.closing) => return Err("closed by this client".to_owned()),
            }
            match connect(&self.target, &resume).await {
                Ok(socket) => return Ok(socket),
                // The relay forgot it, or refuses: trying again will not help.
                Err(Error::Api { status, detail, .. }) if status < 500 && status != 429 => {
                    return Err(format!("could not resume: {detail}"));
                }
                Err(e) => last_error = e.to_string(),
            }
        }
        Err(format!(
            "could not reconnect after {RECONNECT_ATTEMPTS} attempts: {last_error}"
        ))
    }
}

/// Opens a socket to the relay, resuming as `resume` says; a refusal is the problem the
/// control plane answered with.
async fn connect(target: &RelayTarget, resume: &RelayResume) -> Result<Socket> {
    let mut url = reqwest::Url::parse(&target.url).map_err(|e| Error::Socket(e.to_string()))?;
    let pairs = crate::client::query_of(resume);
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs);
    }
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| Error::Socket(e.to_string()))?;
    if let Some(key) = &target.api_key {
        let value = format!("Bearer {key}")
            .parse()
            .map_err(|_| Error::Socket("the API key cannot be sent as a header".to_owned()))?;
        request.headers_mut().insert("authorization", value);
    }
    let connecting = tokio_tungstenite::connect_async_with_config(request, None, true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Err(_) => Err(Error::Socket(format!(
            "no WebSocket handshake within {CONNECT_TIMEOUT:?}"
        ))),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let body = response.body().clone().unwrap_or_default();
            Err(crate::client::problem_of(status, &body))
        }
        Ok(Err(e)) => Err(Error::Socket(e.to_string())),
    }
}

/// Returns once the client that opened the connection was closed with `close()` (a client that
/// is merely dropped leaves its connections to their holders).
async fn closed(closing: &mut tokio::sync::watch::Receiver<bool>) {
    if closing.wait_for(|closed| *closed).await.is_err() {
        std::future::pending::<()>().await;
    }
}
