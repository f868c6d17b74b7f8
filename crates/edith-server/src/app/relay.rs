//! The gateway relay: an application's WebSocket to one profile's native gateway, through the
//! control plane (`profile_gateway`; the protocol is in `edith_types::relay`).
//!
//! Each relayed connection has a gateway connection of its own to the runtime (Hermes sends a
//! session's events to the connection that opened it), authenticated with the runtime's token,
//! which never leaves the control plane. Requests are checked as `native_call` checks them: a
//! method outside the pinned catalog or one that administers the runtime without `admin` is
//! answered by the relay and never reaches the runtime; profile-scoped methods get the
//! profile's native name. Every frame sent to the client is numbered and kept in a bounded
//! log, so a client whose socket drops can come back within [`RESUME_WINDOW`] and get what it
//! missed, none twice; if the gap was too long to keep, `attached` says which frames were lost.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message as ClientMessage, WebSocket};
use edith_types::relay::{FORBIDDEN, HELD_BY_THE_CONTROL_PLANE};
use edith_types::{
    ApiKeyId, ErrorCode, GatewayConnectionId, InstanceId, InstanceState, NativeSessionId,
    ProfileId, RelayMessage, Scope,
};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use hermes_native::catalog::{Scope as MethodScope, catalog};
use hermes_native::client::{GatewaySocket, Message, open_socket};
use hermes_native::codes;
use hermes_native::methods::{Method, SessionList, SessionListParams, SessionResume};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

use super::{instances, native, profiles};
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::http::limits::StreamPermit;
use crate::state::{AppState, stopped};

/// How long a connection whose client dropped is kept for the client to resume it.
pub const RESUME_WINDOW: Duration = Duration::from_secs(60);
/// How long one message to the client, or one request to the runtime, may take to send.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long opening the runtime's gateway may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests waiting to be written to the runtime, per connection.
const QUEUED_REQUESTS: usize = 256;

/// The relayed connections alive now.
#[derive(Default)]
pub struct Relays(Mutex<HashMap<GatewayConnectionId, Arc<Relay>>>);

impl Relays {
    fn insert(&self, relay: Arc<Relay>) {
        let mut relays = self.0.lock().expect("not poisoned");
        relays.insert(relay.id.clone(), relay);
    }

    fn remove(&self, id: &GatewayConnectionId) {
        self.0.lock().expect("not poisoned").remove(id);
    }

    /// The connection `id` if `caller`'s key opened it (another key is told it does not exist).
    pub fn resume(&self, caller: &Principal, id: &GatewayConnectionId) -> AppResult<Arc<Relay>> {
        let relays = self.0.lock().expect("not poisoned");
        relays
            .get(id)
            .filter(|relay| relay.owner == caller.0.id)
            .cloned()
            .ok_or_else(|| {
                AppError::not_found(format!(
                    "gateway connection `{id}` (it ended, or its client was away longer than {}s)",
                    RESUME_WINDOW.as_secs()
                ))
            })
    }

    /// Ends the connections `key` opened (it was revoked).
    pub fn end_for_key(&self, key: &ApiKeyId) {
        self.end_where(|relay| &relay.owner == key, "the API key was revoked");
    }

    /// Ends the connections to `instance` (it is being deleted).
    pub fn end_for_instance(&self, instance: &InstanceId) {
        self.end_where(
            |relay| &relay.instance == instance,
            "the instance is being deleted",
        );
    }

    fn end_where(&self, which: impl Fn(&Relay) -> bool, reason: &str) {
        let ending: Vec<Arc<Relay>> = {
            let mut relays = self.0.lock().expect("not poisoned");
            let ids: Vec<_> = relays
                .values()
                .filter(|relay| which(relay))
                .map(|relay| relay.id.clone())
                .collect();
            ids.iter().filter_map(|id| relays.remove(id)).collect()
        };
        for relay in ending {
            relay.end(reason);
        }
    }

    /// Ends every connection (the server stops).
    pub fn end_all(&self) {
        let relays: Vec<_> = self.0.lock().expect("not poisoned").drain().collect();
        for (_, relay) in relays {
            relay.end("the control plane is stopping");
        }
    }
}

pub struct Relay {
    pub id: GatewayConnectionId,
    /// Where it leads (a resume must name the same).
    pub instance: InstanceId,
    pub profile: ProfileId,
    owner: ApiKeyId,
    caller: Principal,
    native_profile: String,
    /// How many frames, and how many bytes of them, are kept for a resume.
    kept_frames: usize,
    kept_bytes: usize,
    /// How long the client may stay silent before its socket counts as dropped.
    silence: Duration,
    to_runtime: mpsc::Sender<Message>,
    log: Mutex<Log>,
    /// Bumped whenever the log changes, a client attaches or the connection ends.
    changed: watch::Sender<u64>,
    runtime_tasks: Mutex<Vec<AbortHandle>>,
    /// Counts the connection against its key's streams until it ends, attached or not.
    permit: Mutex<Option<StreamPermit>>,
}

/// The numbered frames kept for the client, and who is attached.
struct Log {
    frames: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    next_seq: u64,
    /// Why the connection ended, once it has.
    ended: Option<String>,
    /// Counts attaching sockets; the latest one is the client.
    generation: u64,
    attached: bool,
}

impl Log {
    fn first_kept(&self) -> u64 {
        self.frames.front().map_or(self.next_seq, |(seq, _)| *seq)
    }
}

/// Opens a relayed connection to the profile's gateway for `caller`.
pub async fn open(
    state: &AppState,
    caller: &Principal,
    instance: &InstanceId,
    profile: &ProfileId,
    permit: StreamPermit,
) -> AppResult<Arc<Relay>> {
    let record = instances::load_ready(state, instance).await?;
    let profile = profiles::load(state, instance, profile).await?;
    let endpoint = state
        .provider(record.instance.provider)?
        .start(&record)
        .await?;
    let socket = open_socket(&endpoint.ws_url, &endpoint.token, CONNECT_TIMEOUT).await?;
    let (to_runtime, queued) = mpsc::channel(QUEUED_REQUESTS);
    let relay = Arc::new(Relay {
        id: GatewayConnectionId::generate(),
        instance: instance.clone(),
        profile: profile.id.clone(),
        owner: caller.0.id.clone(),
        caller: caller.clone(),
        native_profile: profile.native_name,
        kept_frames: state.gate.limits().relay_kept_frames.max(1),
        kept_bytes: state.gate.limits().relay_kept_bytes,
        silence: state.gate.limits().relay_silence,
        to_runtime,
        log: Mutex::new(Log {
            frames: VecDeque::new(),
            bytes: 0,
            next_seq: 1,
            ended: None,
            generation: 0,
            attached: false,
        }),
        changed: watch::Sender::new(0),
        runtime_tasks: Mutex::new(Vec::new()),
        permit: Mutex::new(Some(permit)),
    });
    relay.run_runtime_side(socket, queued);
    state.relays.insert(relay.clone());
    // Ends it unless a socket attaches (the upgrade can still fail).
    relay.clone().wait_for_resume(state.clone(), 0);
    still_allowed(state, &relay).await?;
    Ok(relay)
}

/// Whether the relay's key and instance are still what let it open, read after it was
/// registered: a key revoked, or an instance deleted, while it connected (which can take
/// seconds) was swept before it was there to be found; what comes after sees it registered.
/// Ends it when they are not.
async fn still_allowed(state: &AppState, relay: &Relay) -> AppResult<()> {
    let key = state.store.api_key(&relay.owner).await?;
    if key.is_some_and(|key| key.revoked_at.is_some()) {
        state.relays.end_for_key(&relay.owner);
        return Err(AppError::new(
            ErrorCode::Unauthorized,
            "the API key was revoked",
        ));
    }
    let deleting = state
        .store
        .instance(&relay.instance)
        .await?
        .is_none_or(|record| {
            matches!(
                record.instance.state,
                InstanceState::Deleting | InstanceState::Deleted
            )
        });
    if deleting {
        state.relays.end_for_instance(&relay.instance);
        return Err(AppError::new(
            ErrorCode::InstanceNotReady,
            format!("instance `{}` is being deleted", relay.instance),
        ));
    }
    Ok(())
}

/// How a client's socket ended.
enum ClientEnd {
    /// It said goodbye: the connection ends.
    Closed,
    /// It went away without a word: the connection waits for it to resume.
    Dropped,
    /// The connection ended, or another socket resumed it.
    Done,
}

impl Relay {
    /// Copies the runtime's frames into the log, and queued requests to the runtime.
    fn run_runtime_side(
        self: &Arc<Self>,
        socket: GatewaySocket,
        mut queued: mpsc::Receiver<Message>,
    ) {
        let (mut sink, mut stream) = socket.split();
        // A runtime that stops reading (a hung Hermes) ends the connection within the send
        // bound, rather than filling the queue and stalling the client's side behind it.
        // Weak: the writer ends when the connection goes (its queue closes with it).
        let relay = Arc::downgrade(self);
        let writer = tokio::spawn(async move {
            while let Some(message) = queued.recv().await {
                let sent = tokio::time::timeout(SEND_TIMEOUT, sink.send(message)).await;
                if !matches!(sent, Ok(Ok(()))) {
                    if let Some(relay) = relay.upgrade() {
                        relay.end(
                            "the runtime did not take a request (it closed, or stopped reading)",
                        );
                    }
                    return;
                }
            }
            let _ = tokio::time::timeout(SEND_TIMEOUT, sink.close()).await;
        });
        let relay = self.clone();
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                match message {
                    Message::Text(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(frame) => relay.push(frame),
                        Err(_) => {
                            tracing::warn!(connection = %relay.id, "unparseable runtime frame")
                        }
                    },
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            // Kept until its client has heard the end (or the resume window passes).
            relay.end("the runtime closed the gateway connection");
        });
        let mut tasks = self.runtime_tasks.lock().expect("not poisoned");
        tasks.extend([writer.abort_handle(), reader.abort_handle()]);
    }

    /// Numbers a frame for the client and keeps it, forgetting the oldest beyond the bounds.
    fn push(&self, frame: Value) {
        let mut log = self.log.lock().expect("not poisoned");
        let seq = log.next_seq;
        log.next_seq += 1;
        let text: Arc<str> = serde_json::to_string(&RelayMessage::Frame { seq, frame })
            .expect("JSON values serialise")
            .into();
        log.bytes += text.len();
        log.frames.push_back((seq, text));
        // The newest frame stays, however large: dropping it would cut off a client that is
        // not behind at all.
        while log.frames.len() > 1
            && (log.frames.len() > self.kept_frames || log.bytes > self.kept_bytes)
        {
            let (_, oldest) = log.frames.pop_front().expect("not empty");
            log.bytes -= oldest.len();
        }
        drop(log);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Ends the connection: the runtime side is closed, the client is told `reason`.
    fn end(&self, reason: &str) {
        for task in self.runtime_tasks.lock().expect("not poisoned").drain(..) {
            task.abort();
        }
        self.permit.lock().expect("not poisoned").take();
        let mut log = self.log.lock().expect("not poisoned");
        if log.ended.is_none() {
            log.ended = Some(reason.to_owned());
        }
        drop(log);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Checks `after` against what was sent: a client cannot have seen frames not sent yet.
    pub fn check_cursor(&self, after: u64) -> AppResult<()> {
        let sent = self.log.lock().expect("not poisoned").next_seq - 1;
        if after > sent {
            return Err(AppError::invalid(format!(
                "`after` is {after}, but only {sent} frames were sent on this connection"
            )));
        }
        Ok(())
    }

    /// Serves `socket` as this connection's client, sending the frames after `after` first.
    /// Returns when the socket ends; a dropped socket (closed without a word, or silent for
    /// `Limits::relay_silence`) leaves the connection waiting for a resume, for [`RESUME_WINDOW`].
    pub async fn serve(
        self: Arc<Self>,
        state: AppState,
        socket: WebSocket,
        after: u64,
        resumed: bool,
    ) {
        let generation = {
            let mut log = self.log.lock().expect("not poisoned");
            log.generation += 1;
            log.attached = true;
            log.generation
        };
        self.changed.send_modify(|n| *n += 1);
        let (mut sink, mut stream) = socket.split();
        let since = Instant::now();
        // When the client was last heard from, in milliseconds since `since`.
        let heard = AtomicU64::new(0);
        let writer =
            self.write_to_client(&mut sink, generation, after, resumed, &state, since, &heard);
        let reader = async {
            while let Some(Ok(message)) = stream.next().await {
                heard.store(since.elapsed().as_millis() as u64, Ordering::Relaxed);
                match message {
                    ClientMessage::Text(text) => self.request(&state, text.as_str()).await,
                    ClientMessage::Close(_) => return ClientEnd::Closed,
                    _ => {}
                }
            }
            ClientEnd::Dropped
        };
        let end = tokio::select! {
            end = reader => end,
            end = writer => end,
        };
        let _ = tokio::time::timeout(SEND_TIMEOUT, sink.close()).await;
        let current = self.log.lock().expect("not poisoned").generation == generation;
        match end {
            // Only the socket attached now may end the connection.
            ClientEnd::Closed if current => {
                state.relays.remove(&self.id);
                self.end("the client closed the connection");
            }
            ClientEnd::Dropped if current => self.wait_for_resume(state, generation),
            _ => {}
        }
    }

    /// Sends `attached`, then every frame after `after` as it comes, pinging the client now and
    /// then, until the connection ends, another socket takes over, the client goes silent, or
    /// it falls so far behind that frames it has not had were forgotten (it then resumes and
    /// is told what it missed).
    #[allow(clippy::too_many_arguments)]
    async fn write_to_client(
        &self,
        sink: &mut SplitSink<WebSocket, ClientMessage>,
        generation: u64,
        after: u64,
        resumed: bool,
        state: &AppState,
        since: Instant,
        heard: &AtomicU64,
    ) -> ClientEnd {
        let mut changes = self.changed.subscribe();
        let mut stopping = state.shutdown.clone();
        let mut ping = tokio::time::interval((self.silence / 3).max(Duration::from_millis(10)));
        ping.tick().await;
        let missed = {
            let log = self.log.lock().expect("not poisoned");
            let first = log.first_kept();
            (after + 1 < first).then_some((after + 1, first - 1))
        };
        let attached = RelayMessage::Attached {
            connection: self.id.clone(),
            resumed,
            missed,
        };
        if !send_within(sink, &attached).await {
            return ClientEnd::Dropped;
        }
        let mut cursor = after.max(missed.map_or(0, |(_, last)| last));
        loop {
            let (batch, ended, current) = {
                let log = self.log.lock().expect("not poisoned");
                if log.first_kept() > cursor + 1 {
                    // Fell behind what is kept: a resume says what was lost.
                    return ClientEnd::Dropped;
                }
                let batch: Vec<(u64, Arc<str>)> = log
                    .frames
                    .iter()
                    .filter(|(seq, _)| *seq > cursor)
                    .cloned()
                    .collect();
                (batch, log.ended.clone(), log.generation == generation)
            };
            if !current {
                return ClientEnd::Done;
            }
            for (seq, text) in batch {
                let sent = tokio::time::timeout(
                    SEND_TIMEOUT,
                    sink.send(ClientMessage::Text((*text).into())),
                )
                .await;
                if !matches!(sent, Ok(Ok(()))) {
                    return ClientEnd::Dropped;
                }
                cursor = seq;
            }
            if let Some(reason) = ended {
                // Heard once, it is forgotten: a later resume is told it is gone.
                state.relays.remove(&self.id);
                send_within(sink, &RelayMessage::Closed { reason }).await;
                return ClientEnd::Done;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return ClientEnd::Done },
                _ = ping.tick() => {
                    let silent_ms = since.elapsed().as_millis() as u64 - heard.load(Ordering::Relaxed);
                    if Duration::from_millis(silent_ms) > self.silence {
                        return ClientEnd::Dropped;
                    }
                    let pinged = tokio::time::timeout(SEND_TIMEOUT, sink.send(ClientMessage::Ping(Default::default()))).await;
                    if !matches!(pinged, Ok(Ok(()))) {
                        return ClientEnd::Dropped;
                    }
                }
                () = stopped(&mut stopping) => self.end("the control plane is stopping"),
            }
        }
    }

    /// After the client dropped: the connection ends unless it is resumed in time.
    fn wait_for_resume(self: Arc<Self>, state: AppState, generation: u64) {
        {
            let mut log = self.log.lock().expect("not poisoned");
            if log.generation != generation {
                return;
            }
            log.attached = false;
        }
        tokio::spawn(async move {
            tokio::time::sleep(RESUME_WINDOW).await;
            let abandoned = {
                let log = self.log.lock().expect("not poisoned");
                log.generation == generation && !log.attached
            };
            if abandoned {
                state.relays.remove(&self.id);
                self.end("the client did not come back");
            }
        });
    }

    /// One request from the client: checked, then written to the runtime; a refusal is
    /// answered in the log like any reply. `session.list` is answered here: Hermes 0.19's
    /// gateway lists the root profile's stored sessions whatever the profile, and this
    /// connection is a profile's (as `native_call` does, from the runtime's Desktop route).
    async fn request(&self, state: &AppState, text: &str) {
        match self.checked(text) {
            // Answered in line (bounded by the route's 60 s): a client's requests are read one
            // after the other, so it cannot pile these up.
            Ok(request) if request["method"] == SessionList::NAME => {
                self.list_sessions(state, request).await
            }
            Ok(request) if request["method"] == SessionResume::NAME => {
                self.resume(state, request).await
            }
            Ok(request) => self.send_on(request).await,
            Err((id, code, message)) => self.refuse(id, code, &message),
        }
    }

    async fn send_on(&self, request: Value) {
        let text = serde_json::to_string(&request).expect("serialises");
        // A runtime that is gone ends the connection; the client hears it then.
        let _ = self.to_runtime.send(Message::Text(text.into())).await;
    }

    /// Sends `session.resume` on, unless a control-plane session of this profile continues the
    /// stored session it names: a runtime gives the live session of a stored session that is
    /// live already to whoever resumes it, and sends its events to that connection from then
    /// on, so this one would take them from that session's turns. (By title, it is not caught.)
    async fn resume(&self, state: &AppState, request: Value) {
        let id = request["id"].clone();
        if let Some(stored) = request["params"]["session_id"].as_str() {
            let stored = NativeSessionId::new(stored);
            match state.store.session_continuing(&self.profile, &stored).await {
                Ok(Some(session)) => {
                    let message = format!(
                        "stored session `{stored}` is continued by the control plane's session \
                         `{}`: send its turns there (`turn_create`); resuming it here would take \
                         its live session's events from them",
                        session.id
                    );
                    return self.refuse(id, HELD_BY_THE_CONTROL_PLANE, &message);
                }
                Ok(None) => {}
                Err(e) => {
                    let message = format!("the control plane could not look at its sessions: {e}");
                    return self.refuse(id, codes::HANDLER_ERROR, &message);
                }
            }
        }
        self.send_on(request).await
    }

    fn refuse(&self, id: Value, code: i64, message: &str) {
        self.push(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        }));
    }

    /// Answers `session.list` with this profile's stored sessions.
    async fn list_sessions(&self, state: &AppState, request: Value) {
        let id = request["id"].clone();
        let params: SessionListParams = match serde_json::from_value(request["params"].clone()) {
            Ok(params) => params,
            Err(e) => {
                let message = format!("`params` of `session.list`: {e}");
                return self.refuse(id, codes::INVALID_PARAMS, &message);
            }
        };
        let listed = match instances::load_ready(state, &self.instance).await {
            Ok(record) => {
                native::profile_sessions(state, &record, &self.native_profile, params.limit).await
            }
            Err(e) => Err(e),
        };
        match listed {
            Ok(result) => self.push(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(e) => self.refuse(id, codes::HANDLER_ERROR, &e.detail),
        }
    }

    /// The request to send on, or the error to answer (id, code, message).
    fn checked(&self, text: &str) -> Result<Value, (Value, i64, String)> {
        let Ok(mut request) = serde_json::from_str::<Value>(text) else {
            return Err((Value::Null, codes::PARSE_ERROR, "not JSON".to_owned()));
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            let message = "a request needs a `method`".to_owned();
            return Err((id, codes::INVALID_REQUEST, message));
        };
        let Some(info) = catalog().method(method) else {
            let message = format!("`{method}` is not a method of the pinned Hermes 0.19 catalog");
            return Err((id, codes::METHOD_NOT_FOUND, message));
        };
        if info.administers(request.get("params").unwrap_or(&Value::Null))
            && let Err(e) = self.caller.require(
                Scope::Admin,
                &format!("`{method}` administers the runtime: it"),
            )
        {
            return Err((id, FORBIDDEN, e.detail));
        }
        let params = request
            .as_object_mut()
            .expect("has a method, so an object")
            .entry("params")
            .or_insert_with(|| json!({}));
        if params.is_null() {
            *params = json!({});
        }
        let Value::Object(params) = params else {
            let message = "`params` must be an object".to_owned();
            return Err((id, codes::INVALID_PARAMS, message));
        };
        if info.scope == MethodScope::Profile {
            // The connection is the profile's: a profile named by the client does not count.
            params.insert(
                "profile".to_owned(),
                Value::String(self.native_profile.clone()),
            );
        }
        Ok(request)
    }
}

/// Sends one relay message within [`SEND_TIMEOUT`]; whether it went.
async fn send_within(
    sink: &mut SplitSink<WebSocket, ClientMessage>,
    message: &RelayMessage,
) -> bool {
    let text = serde_json::to_string(message).expect("serialises");
    let sent =
        tokio::time::timeout(SEND_TIMEOUT, sink.send(ClientMessage::Text(text.into()))).await;
    matches!(sent, Ok(Ok(())))
}
