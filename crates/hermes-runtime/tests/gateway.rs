//! The `hermes-runtime` binary, launched like `hermes serve`, spoken to over the wire.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use testkit::ReadyProcess;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "test-token-0123456789";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Runtime {
    process: ReadyProcess,
    port: String,
    home: tempfile::TempDir,
}

impl Runtime {
    async fn start() -> Self {
        let home = tempfile::tempdir().expect("temp dir");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hermes-runtime"));
        command
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .env("HERMES_HOME", home.path())
            .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN);
        let process = ReadyProcess::spawn(
            command,
            "HERMES_BACKEND_READY port=",
            Duration::from_secs(30),
        )
        .await;
        let port = process.ready_value("port");
        Self {
            process,
            port,
            home,
        }
    }

    async fn connect(&self) -> Client {
        let url = format!("ws://127.0.0.1:{}/api/ws?token={TOKEN}", self.port);
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connect");
        Client { socket, next: 0 }
    }

    fn http(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

struct Client {
    socket: Socket,
    next: u64,
}

impl Client {
    async fn send_raw(&mut self, text: &str) {
        self.socket
            .send(Message::Text(text.to_owned().into()))
            .await
            .expect("send");
    }

    async fn frame(&mut self) -> Value {
        let message = tokio::time::timeout(Duration::from_secs(10), self.socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("open")
            .expect("frame");
        let Message::Text(text) = message else {
            panic!("not text: {message:?}")
        };
        serde_json::from_str(&text).expect("JSON")
    }

    /// Sends a request; returns its reply and the events that came before it.
    async fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next += 1;
        let id = format!("t{}", self.next);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&frame.to_string()).await;
        let mut events = Vec::new();
        loop {
            let frame = self.frame().await;
            if frame["id"] == id {
                return (frame, events);
            }
            events.push(frame);
        }
    }

    /// Events until (and with) the first of `kind`.
    async fn events_until(&mut self, kind: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let frame = self.frame().await;
            assert_eq!(frame["method"], "event", "{frame}");
            let done = frame["params"]["type"] == kind;
            events.push(frame);
            if done {
                return events;
            }
        }
    }
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["params"]["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn the_first_frame_is_gateway_ready_and_framing_errors_have_their_codes() {
    let runtime = Runtime::start().await;
    let mut client = runtime.connect().await;
    let ready = client.frame().await;
    assert_eq!(ready["jsonrpc"], "2.0");
    assert_eq!(ready["method"], "event");
    assert_eq!(ready["params"]["type"], "gateway.ready");

    client.send_raw("{not json").await;
    assert_eq!(client.frame().await["error"]["code"], -32700);
    client
        .send_raw(r#"{"jsonrpc":"2.0","id":1,"method":7}"#)
        .await;
    let invalid = client.frame().await;
    assert_eq!(
        (invalid["id"].clone(), invalid["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
    let (reply, _) = client.call("no.such.method", json!({})).await;
    assert_eq!(reply["error"]["code"], -32601);
    client
        .send_raw(r#"{"jsonrpc":"2.0","id":"p","method":"session.create","params":[1]}"#)
        .await;
    assert_eq!(client.frame().await["error"]["code"], -32602);
    runtime.process.stop(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn auth_guards_the_socket_and_rest_but_not_status() {
    let runtime = Runtime::start().await;
    let wrong = format!("ws://127.0.0.1:{}/api/ws?token=wrong", runtime.port);
    let err = tokio_tungstenite::connect_async(wrong).await.unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");

    let http = reqwest::Client::new();
    let status = http.get(runtime.http("/api/status")).send().await.unwrap();
    assert_eq!(status.status(), 200);
    let anonymous = http
        .get(runtime.http("/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let authorized = http
        .get(runtime.http("/api/sessions"))
        .header("X-Hermes-Session-Token", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(authorized.status(), 200);
    runtime.process.stop(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn a_prompt_streams_a_message_and_a_stored_session_resumes_under_a_new_live_id() {
    let runtime = Runtime::start().await;
    let mut client = runtime.connect().await;
    client.frame().await; // gateway.ready

    let (created, _) = client
        .call("session.create", json!({"source": "test"}))
        .await;
    let live = created["result"]["session_id"].as_str().unwrap().to_owned();
    let stored = created["result"]["stored_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(live.len(), 8);
    assert_ne!(live, stored);

    let (reply, early) = client
        .call(
            "prompt.submit",
            json!({"session_id": live, "text": "hi there"}),
        )
        .await;
    assert_eq!(reply["result"]["status"], "streaming");
    assert!(early.is_empty(), "the reply comes before the turn's events");
    let events = client.events_until("message.complete").await;
    assert_eq!(
        types(&events),
        [
            "message.start",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.complete"
        ]
    );
    assert!(events.iter().all(|e| e["params"]["session_id"] == live));
    let deltas: String = events
        .iter()
        .filter(|e| e["params"]["type"] == "message.delta")
        .map(|e| e["params"]["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "You said: hi there");
    let complete = &events.last().unwrap()["params"]["payload"];
    assert_eq!(complete["text"], "You said: hi there");
    assert_eq!(complete["status"], "complete");
    assert_eq!(complete["usage"]["calls"], 1);

    let (resumed, _) = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    let resumed = &resumed["result"];
    assert_ne!(resumed["session_id"], live, "a new live id");
    assert_eq!(resumed["resumed"], stored);
    assert_eq!(
        resumed["messages"],
        json!([{"role": "user", "text": "hi there"}, {"role": "assistant", "text": "You said: hi there"}])
    );
    let (unknown, _) = client
        .call(
            "session.resume",
            json!({"session_id": "20000101_000000_abcdef"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], 4007);
    let (missing, _) = client.call("prompt.submit", json!({"text": "x"})).await;
    assert_eq!(missing["error"]["code"], 4006);

    let (listed, _) = client.call("session.list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["id"], stored);
    assert_eq!(sessions[0]["message_count"], 2);
    assert_eq!(sessions[0]["preview"], "hi there");

    let status = runtime.process.stop(Duration::from_secs(10)).await;
    assert!(status.success(), "{status}");
    assert!(runtime.home.path().join("state.db").is_file());
}
