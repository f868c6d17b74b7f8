//! A deterministic OpenAI-compatible model server for tests and benchmarks.
//!
//! `POST /v1/chat/completions` answers according to the last message, the same way for every
//! client, so two runtimes driven by it can be compared:
//! - after a tool result: `Tool result: <content>`;
//! - a user text containing `CALL <tool> <json object>`: a call of the offered tool whose name is
//!   `<tool>` or ends with `__<tool>`, with those arguments (ids `call_<n>`, unique per server);
//! - a user text whose last line contains `SLOW`: 60 pieces `tick `, one every 100 ms (for
//!   interrupts); `SLOWEST`: 200 of them (20 s, longer than anything waits for a turn's natural
//!   end);
//! - a user text whose last line contains `FAIL`: HTTP 500 with an OpenAI-style error body
//!   (the last line, because a runtime sends a user message left unanswered with the next, a
//!   blank line apart: Hermes 0.19 and ours);
//! - a user text whose last line contains `FLAKY`: HTTP 503 the first time a conversation is
//!   asked, then an answer as usual (for clients that try again);
//! - otherwise: `You said: <text>`, a word at a time.
//!
//! Requests without `"stream": true` (auxiliary calls such as title generation) get a short
//! non-streamed `OK`. Every request body is recorded. `GET /v1/models` lists `fake-model`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use futures_util::StreamExt;
use serde_json::{Value, json};

pub const MODEL: &str = "fake-model";

/// Tuning of the fake model.
#[derive(Debug, Clone)]
pub struct FakeModelOptions {
    /// Pause before each streamed piece of a normal reply (the model's own time per piece).
    pub piece_delay: Duration,
    /// Send every streamed frame that holds a multi-byte character as two network writes that
    /// cut that character in two (clients must reassemble it).
    pub split_characters: bool,
}

impl Default for FakeModelOptions {
    fn default() -> Self {
        Self {
            piece_delay: Duration::ZERO,
            split_characters: false,
        }
    }
}

struct Shared {
    requests: Mutex<Vec<Value>>,
    /// The `Authorization` header of each request (empty when absent).
    authorizations: Mutex<Vec<String>>,
    next_call: AtomicU64,
    options: FakeModelOptions,
    /// The conversations (their `messages`) a `FLAKY` request already failed once for.
    failed_once: Mutex<std::collections::HashSet<String>>,
}

/// A running fake model server; stops when dropped.
pub struct FakeModel {
    base_url: String,
    shared: Arc<Shared>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl FakeModel {
    pub async fn start() -> Self {
        Self::start_with(FakeModelOptions::default()).await
    }

    pub async fn start_with(options: FakeModelOptions) -> Self {
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            authorizations: Mutex::new(Vec::new()),
            next_call: AtomicU64::new(1),
            options,
            failed_once: Mutex::new(Default::default()),
        });
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(completions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake model");
        let addr = listener.local_addr().expect("address");
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopping.wait_for(|s| *s).await;
            };
            let _ = axum::serve(listener.tap_io(no_delay), app)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
            stop,
        }
    }

    /// `http://127.0.0.1:<port>/v1`
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Every chat-completions request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().expect("not poisoned").clone()
    }

    /// Forgets every request received so far (and which conversations already failed once), as
    /// if it had just started: a runtime shared by several checks gets a clean log for each.
    pub fn forget_requests(&self) {
        self.shared.requests.lock().expect("not poisoned").clear();
        (self.shared.authorizations.lock().expect("not poisoned")).clear();
        self.shared
            .failed_once
            .lock()
            .expect("not poisoned")
            .clear();
    }

    /// The `Authorization` header of every chat-completions request, in order.
    pub fn authorizations(&self) -> Vec<String> {
        self.shared
            .authorizations
            .lock()
            .expect("not poisoned")
            .clone()
    }

    /// The streamed (agent-loop) requests only.
    pub fn streamed_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["stream"] == true)
            .collect()
    }

    /// The `model:` section for a Hermes `config.yaml` pointing here.
    pub fn hermes_model_config(&self) -> Value {
        hermes_model_config_at(&self.base_url)
    }
}

/// The `model` section of a Hermes `config.yaml` for the fake model served at `base_url`, in
/// this process or another (the `fake-openai` binary).
pub fn hermes_model_config_at(base_url: &str) -> Value {
    json!({
        "default": MODEL,
        "provider": "custom",
        "base_url": base_url,
        "api_key": "sk-fake-0123456789",
        "context_length": 131072,
    })
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn models() -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "testkit"}],
    }))
}

enum Reply {
    Text {
        pieces: Vec<String>,
        delay: Duration,
    },
    Call {
        name: String,
        arguments: Value,
    },
    Fail,
    /// 503, once per conversation.
    Overloaded,
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn words(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
    if pieces.is_empty() {
        pieces.push(String::new());
    }
    pieces
}

fn decide(request: &Value, options: &FakeModelOptions) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let Some(last) = messages.last() else {
        return Reply::Text {
            pieces: words("You said nothing."),
            delay: options.piece_delay,
        };
    };
    let text = text_of(last);
    if last["role"] == "tool" {
        return Reply::Text {
            pieces: words(&format!("Tool result: {text}")),
            delay: options.piece_delay,
        };
    }
    // The last line: a runtime sends a prompt left unanswered together with the next one.
    let last_line = text.lines().last().unwrap_or_default();
    if last_line.contains("FAIL") {
        return Reply::Fail;
    }
    if last_line.contains("FLAKY") {
        return Reply::Overloaded;
    }
    if last_line.contains("SLOW") {
        let pieces = if last_line.contains("SLOWEST") {
            200
        } else {
            60
        };
        return Reply::Text {
            pieces: vec!["tick ".to_owned(); pieces],
            delay: Duration::from_millis(100),
        };
    }
    if let Some(call) = find_call(&text, request) {
        return call;
    }
    Reply::Text {
        pieces: words(&format!("You said: {text}")),
        delay: options.piece_delay,
    }
}

/// `CALL <tool> {json}` naming an offered tool.
fn find_call(text: &str, request: &Value) -> Option<Reply> {
    let rest = &text[text.find("CALL ")? + 5..];
    let (wanted, rest) = rest.split_once(' ')?;
    let mut objects = serde_json::Deserializer::from_str(rest.trim_start()).into_iter::<Value>();
    let arguments = match objects.next() {
        Some(Ok(args @ Value::Object(_))) => args,
        _ => return None,
    };
    let tools = request["tools"].as_array()?;
    let name = tools.iter().find_map(|tool| {
        let name = tool["function"]["name"].as_str()?;
        (name == wanted || name.ends_with(&format!("__{wanted}"))).then(|| name.to_owned())
    })?;
    Some(Reply::Call { name, arguments })
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {body}\n\n")
}

fn usage_chunk(request: &Value, output_chars: usize) -> String {
    let input = request["messages"].to_string().len().div_ceil(4);
    let output = output_chars.div_ceil(4).max(1);
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
    });
    format!("data: {body}\n\n")
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    shared
        .authorizations
        .lock()
        .expect("not poisoned")
        .push(authorization);
    shared
        .requests
        .lock()
        .expect("not poisoned")
        .push(request.clone());
    let mut reply = decide(&request, &shared.options);
    if let Reply::Overloaded = reply {
        let conversation = request["messages"].to_string();
        if shared
            .failed_once
            .lock()
            .expect("not poisoned")
            .insert(conversation)
        {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"error": {"message": "the fake model is overloaded, once", "type": "server_error", "code": "overloaded"}})),
            )
                .into_response();
        }
        let said = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(text_of)
            .unwrap_or_default();
        reply = Reply::Text {
            pieces: words(&format!("You said: {said}")),
            delay: shared.options.piece_delay,
        };
    }
    if let Reply::Fail = reply {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "the fake model was asked to fail", "type": "server_error", "code": "fake_failure"}})),
        )
            .into_response();
    }
    if request["stream"] != true {
        return Json(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }))
        .into_response();
    }
    let mut frames: Vec<(Duration, String)> = vec![(
        Duration::ZERO,
        chunk(json!({"role": "assistant", "content": ""}), None),
    )];
    let output_chars = match reply {
        Reply::Text { pieces, delay } => {
            let chars = pieces.iter().map(String::len).sum();
            for piece in pieces {
                frames.push((delay, chunk(json!({"content": piece}), None)));
            }
            frames.push((Duration::ZERO, chunk(json!({}), Some("stop"))));
            chars
        }
        Reply::Call { name, arguments } => {
            let id = format!("call_{}", shared.next_call.fetch_add(1, Ordering::Relaxed));
            let arguments = arguments.to_string();
            let chars = arguments.len();
            frames.push((
                Duration::ZERO,
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}}]}),
                    None,
                ),
            ));
            frames.push((Duration::ZERO, chunk(json!({}), Some("tool_calls"))));
            chars
        }
        Reply::Fail | Reply::Overloaded => 0,
    };
    frames.push((Duration::ZERO, usage_chunk(&request, output_chars)));
    frames.push((Duration::ZERO, "data: [DONE]\n\n".to_owned()));
    let writes: Vec<(Duration, Vec<u8>)> = if shared.options.split_characters {
        frames
            .into_iter()
            .flat_map(split_inside_a_character)
            .collect()
    } else {
        frames
            .into_iter()
            .map(|(delay, frame)| (delay, frame.into_bytes()))
            .collect()
    };
    let body = futures_util::stream::iter(writes).then(|(delay, bytes)| async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok::<_, Infallible>(bytes)
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// A frame as two writes, the first ending inside its first multi-byte character; the second
/// waits a little so the two leave as separate network packets.
fn split_inside_a_character((delay, frame): (Duration, String)) -> Vec<(Duration, Vec<u8>)> {
    let bytes = frame.into_bytes();
    match bytes.iter().position(|b| *b >= 0x80) {
        Some(lead) => vec![
            (delay, bytes[..=lead].to_vec()),
            (Duration::from_millis(10), bytes[lead + 1..].to_vec()),
        ],
        None => vec![(delay, bytes)],
    }
}

/// Small frames (stream pieces) go out at once instead of waiting on Nagle's algorithm.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
