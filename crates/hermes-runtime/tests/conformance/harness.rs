//! Launching a peer (our runtime or the real Hermes 0.19) exactly the same way, and talking to
//! it over the wire.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::serve::ListenerExt;
use edith_mcp::server::{ToolCallError, ToolService, handle_post};
use edith_mcp::{ToolDescriptor, ToolOutput};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use testkit::{FakeModel, ReadyProcess};
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "conformance-token-0123456789";

/// How long any single frame may take: the real Hermes builds its agent lazily on the first
/// prompt (seconds), and retries failed model calls with back-off.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Ours,
    Hermes,
}

/// What a peer's `config.yaml` holds besides the model.
#[derive(Default, Clone)]
pub struct PeerOptions {
    /// `mcp_servers:` entries: name → url.
    pub mcp_servers: Vec<(String, String)>,
    /// Seconds an MCP tool call may take (`timeout`); 30 when unset.
    pub mcp_call_timeout: Option<u64>,
    /// Variables set in the runtime's environment, besides the ones every peer gets.
    pub env: Vec<(String, String)>,
}

/// A running runtime, its home, and the fake model it talks to.
pub struct Peer {
    pub target: Target,
    process: Option<ReadyProcess>,
    pub port: u16,
    pub home: PathBuf,
    /// The directory the runtime runs in (where `terminal` commands run).
    pub work: PathBuf,
    pub model: FakeModel,
    env: Vec<(String, String)>,
    _dir: Arc<tempfile::TempDir>,
}

impl Peer {
    pub async fn start(target: Target) -> Self {
        Self::start_with(target, PeerOptions::default()).await
    }

    /// `target` with `server` as the MCP server `tools` of its home.
    pub async fn with_mcp_server(target: Target, server: &McpServer) -> Self {
        let options = PeerOptions {
            mcp_servers: vec![("tools".to_owned(), server.url.clone())],
            ..Default::default()
        };
        Self::start_with(target, options).await
    }

    pub async fn start_with(target: Target, options: PeerOptions) -> Self {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let model = FakeModel::start().await;
        write_config(&home, &model, &options);
        let process = launch(target, &home, &work, &options.env).await;
        let port = process.ready_value("port").parse().expect("a port");
        Self {
            target,
            process: Some(process),
            port,
            home,
            work,
            model,
            env: options.env,
            _dir: dir,
        }
    }

    /// Stops the runtime (SIGTERM), keeping its home.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let process = self.process.take().expect("running");
        process.stop(Duration::from_secs(30)).await
    }

    /// Kills the runtime (SIGKILL), as a crash would, keeping its home.
    pub async fn crash(&mut self) -> std::process::ExitStatus {
        let process = self.process.take().expect("running");
        process.kill().await
    }

    /// Stops the runtime if it runs, and starts it again on the same home.
    pub async fn restart(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop(Duration::from_secs(30)).await;
        }
        let process = launch(self.target, &self.home, &self.work, &self.env).await;
        self.port = process.ready_value("port").parse().expect("a port");
        self.process = Some(process);
    }

    pub async fn stop(mut self) -> std::process::ExitStatus {
        let process = self.process.take().expect("running");
        process.stop(Duration::from_secs(30)).await
    }

    pub async fn connect(&self) -> Client {
        Client::connect(self.port).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

pub fn write_config(home: &Path, model: &FakeModel, options: &PeerOptions) {
    let mut config = json!({
        "model": model.hermes_model_config(),
        // Manual approvals: the user decides (Hermes's `smart` mode would ask the model first).
        "approvals": {"mode": "manual"},
    });
    if !options.mcp_servers.is_empty() {
        let servers: serde_json::Map<String, Value> = options
            .mcp_servers
            .iter()
            .map(|(name, url)| {
                let timeout = options.mcp_call_timeout.unwrap_or(30);
                let server = json!({"url": url, "timeout": timeout, "connect_timeout": 10});
                (name.clone(), server)
            })
            .collect();
        config["mcp_servers"] = Value::Object(servers);
    }
    // JSON is YAML: both runtimes read the same file.
    std::fs::write(
        home.join("config.yaml"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
}

async fn launch(
    target: Target,
    home: &Path,
    work: &Path,
    env: &[(String, String)],
) -> ReadyProcess {
    let program = match target {
        Target::Ours => PathBuf::from(env!("CARGO_BIN_EXE_hermes-runtime")),
        Target::Hermes => testkit::real_hermes_bin(),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .current_dir(work)
        .env("HERMES_HOME", home)
        .env("HOME", home.parent().unwrap())
        .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
        // Hermes pip-installs missing optional packages into its own venv at run time; every
        // peer shares one venv, so one must never change it under the others.
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1")
        .envs(env.iter().map(|(k, v)| (k, v)));
    // A start that fails shows the runtime's own logs too (Hermes writes `$HERMES_HOME/logs`).
    ReadyProcess::spawn_with_logs(
        command,
        "HERMES_BACKEND_READY port=",
        Duration::from_secs(90),
        &[home.join("logs")],
    )
    .await
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A gateway connection that keeps events seen while waiting for replies.
pub struct Client {
    socket: Socket,
    next_id: u64,
    events: VecDeque<Value>,
}

/// Event types that carry no contract (UI hints, reasoning, build progress) and that the two
/// runtimes are free to send or not.
const INFORMATIONAL: &[&str] = &[
    "session.info",
    "thinking.delta",
    "reasoning.delta",
    "reasoning.available",
    "status.update",
    "session.title",
    "notification.show",
    "notification.clear",
    "skin.changed",
    "tool.generating",
];

impl Client {
    /// A gateway connection to the runtime on `port` of this machine, with the suite's token.
    pub async fn connect(port: u16) -> Client {
        let url = format!("ws://127.0.0.1:{port}/api/ws?token={TOKEN}");
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connect");
        let mut client = Client {
            socket,
            next_id: 0,
            events: VecDeque::new(),
        };
        let ready = client.next_frame().await;
        assert_eq!(ready["params"]["type"], "gateway.ready", "{ready}");
        client
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.socket
            .send(Message::Text(text.to_owned().into()))
            .await
            .expect("send");
    }

    pub async fn next_frame(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(FRAME_TIMEOUT, self.socket.next())
                .await
                .expect("a frame in time")
                .expect("the socket is open")
                .expect("a frame");
            match message {
                Message::Text(text) => return serde_json::from_str(&text).expect("JSON frame"),
                Message::Close(frame) => panic!("the gateway closed the socket: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// Sends a WebSocket ping carrying `payload` and waits for the pong that echoes it (text
    /// frames that come first are kept, as events).
    pub async fn ping(&mut self, payload: &[u8]) {
        let ping = Message::Ping(payload.to_vec().into());
        self.socket.send(ping).await.expect("send a ping");
        loop {
            let message = tokio::time::timeout(FRAME_TIMEOUT, self.socket.next())
                .await
                .expect("a pong in time")
                .expect("the socket is open")
                .expect("a frame");
            match message {
                Message::Pong(echo) if echo.as_ref() == payload => return,
                Message::Text(text) => {
                    let frame = serde_json::from_str(&text).expect("JSON frame");
                    self.events.push_back(frame);
                }
                Message::Close(frame) => panic!("the gateway closed the socket: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// Sends a request and returns its reply; events that arrive first are kept in order.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.reply_to(&id).await
    }

    pub async fn send_request(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&frame.to_string()).await;
        id
    }

    pub async fn reply_to(&mut self, id: &str) -> Value {
        loop {
            let frame = self.next_frame().await;
            if frame["id"] == id {
                return frame;
            }
            if frame["method"] == "event" {
                self.events.push_back(frame);
            } else {
                panic!("unexpected frame while waiting for {id}: {frame}");
            }
        }
    }

    /// `result` of a call that must succeed.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// A new live session's id.
    pub async fn new_session(&mut self) -> Value {
        self.call("session.create", json!({})).await["session_id"].clone()
    }

    /// `prompt.submit` of `text` on live session `live`; its result.
    pub async fn submit(&mut self, live: impl serde::Serialize, text: &str) -> Value {
        self.call("prompt.submit", json!({"session_id": live, "text": text}))
            .await
    }

    /// `(code, message)` of a call that must fail.
    pub async fn refusal(&mut self, method: &str, params: Value) -> (i64, String) {
        let reply = self.request(method, params).await;
        let error = &reply["error"];
        assert!(error.is_object(), "{method} should fail: {reply}");
        (
            error["code"].as_i64().unwrap(),
            error["message"].as_str().unwrap().to_owned(),
        )
    }

    /// The error code of a call that must fail.
    pub async fn error_code(&mut self, method: &str, params: Value) -> i64 {
        let reply = self.request(method, params).await;
        reply["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} should fail: {reply}"))
    }

    /// Whether an event of type `kind` came and waits to be read.
    pub fn has_waiting(&self, kind: &str) -> bool {
        self.events
            .iter()
            .any(|frame| frame["params"]["type"] == kind)
    }

    /// The next contract event (`params`), skipping informational ones.
    pub async fn event(&mut self) -> Value {
        loop {
            let frame = match self.events.pop_front() {
                Some(frame) => frame,
                None => self.next_frame().await,
            };
            assert_eq!(frame["method"], "event", "expected an event: {frame}");
            let kind = frame["params"]["type"].as_str().unwrap_or_default();
            if !INFORMATIONAL.contains(&kind) {
                return frame["params"].clone();
            }
        }
    }

    /// The params of the next event of type `kind`, informational ones included.
    pub async fn any_event(&mut self, kind: &str) -> Value {
        loop {
            let frame = match self.events.pop_front() {
                Some(frame) => frame,
                None => self.next_frame().await,
            };
            if frame["method"] == "event" && frame["params"]["type"] == kind {
                return frame["params"].clone();
            }
        }
    }

    /// Every event (`params`), informational ones included, up to and including the first of
    /// `kind`.
    pub async fn all_events_until(&mut self, kind: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let frame = match self.events.pop_front() {
                Some(frame) => frame,
                None => self.next_frame().await,
            };
            assert_eq!(frame["method"], "event", "expected an event: {frame}");
            let done = frame["params"]["type"] == kind;
            events.push(frame["params"].clone());
            if done {
                return events;
            }
        }
    }

    /// Contract events up to and including the first of `kind`.
    pub async fn events_until(&mut self, kind: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let event = self.event().await;
            let done = event["type"] == kind;
            events.push(event);
            if done {
                return events;
            }
        }
    }
}

/// The last message of the model's last streamed request.
pub fn last_message_to_model(model: &FakeModel) -> Value {
    let request = model.streamed_requests().pop().expect("a streamed request");
    request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .cloned()
        .expect("a message")
}

pub fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect()
}

/// The texts of the `status.update` events of kind `lifecycle` (the agent's own progress).
pub fn lifecycle_notes(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["type"] == "status.update" && e["payload"]["kind"] == "lifecycle")
        .map(|e| e["payload"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// The concatenated `message.delta` texts.
pub fn streamed_text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "message.delta")
        .map(|e| e["payload"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// An MCP server (Streamable HTTP) run by the test, serving `word_count` (recording its calls),
/// `fails` (which reports an error) and `sleepy` (which takes 10 s).
pub struct McpServer {
    pub url: String,
    pub calls: Arc<Mutex<Vec<Value>>>,
    /// How many MCP sessions clients opened (`initialize` requests).
    pub initialized: Arc<AtomicUsize>,
    _stop: tokio::sync::watch::Sender<bool>,
}

struct WordCount {
    calls: Arc<Mutex<Vec<Value>>>,
}

impl ToolService for WordCount {
    async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
        Ok(vec![
            ToolDescriptor {
                name: "word_count".into(),
                description: "Count the words in a text".into(),
                input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            },
            ToolDescriptor {
                name: "fails".into(),
                description: "Always reports a failure".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
            ToolDescriptor {
                name: "sleepy".into(),
                description: "Takes ten seconds".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
        ])
    }

    async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ToolCallError> {
        if name == "fails" {
            return Ok(ToolOutput::error("the tool could not do it"));
        }
        if name == "sleepy" {
            tokio::time::sleep(Duration::from_secs(10)).await;
            return Ok(ToolOutput::value(json!("awake")));
        }
        if name != "word_count" {
            return Err(ToolCallError::UnknownTool(name.to_owned()));
        }
        self.calls.lock().unwrap().push(args.clone());
        let count = args["text"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .count();
        Ok(ToolOutput::value(json!(count)))
    }
}

impl McpServer {
    pub async fn start() -> Self {
        Self::start_on("127.0.0.1:0").await
    }

    /// The server on `address` (`host:port`).
    pub async fn start_on(address: &str) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let initialized = Arc::new(AtomicUsize::new(0));
        let service = Arc::new(WordCount {
            calls: calls.clone(),
        });
        let counted = initialized.clone();
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |body: axum::body::Bytes| {
                let service = service.clone();
                let asked: Value = serde_json::from_slice(&body).unwrap_or_default();
                if asked["method"] == "initialize" {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                async move { handle_post(service.as_ref(), &body).await }
            }),
        );
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let _ = axum::serve(listener.tap_io(no_delay), app)
                .with_graceful_shutdown(async move {
                    let _ = stopping.wait_for(|s| *s).await;
                })
                .await;
        });
        Self {
            url,
            calls,
            initialized,
            _stop: stop,
        }
    }
}

/// Small frames (stream pieces) go out at once instead of waiting on Nagle's algorithm.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
