//! The gateway relay (`profile_gateway`) seen from a raw WebSocket client: what a key may not
//! do never reaches the runtime, and a client back after a long gap is told what it missed.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::{ADMIN_KEY, Ctx};

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Ctx {
    /// The relay path of a new profile `p` of a new ready instance.
    async fn relay_path(&self) -> String {
        let iid = self.ready_instance().await;
        let (status, profile) = self
            .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
            .await;
        assert_eq!(status, 201, "{profile}");
        let pid = profile["id"].as_str().unwrap();
        format!("/v1/instances/{iid}/profiles/{pid}/gateway")
    }

    /// Opens the relay at `path` with `key`; a refusal is its status and problem.
    pub(crate) async fn relay(
        &self,
        path: &str,
        key: Option<&str>,
    ) -> Result<Socket, (u16, Value)> {
        open_relay(&self.url(path), key)
            .await
            .map(|(socket, _)| socket)
    }
}

/// Opens the relay at `url` (`http://…`) with `key`: the socket and the handshake's answer
/// headers, or a refusal's status and problem.
pub(crate) async fn open_relay(
    url: &str,
    key: Option<&str>,
) -> Result<(Socket, reqwest::header::HeaderMap), (u16, Value)> {
    let url = url.replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().unwrap();
    if let Some(key) = key {
        let value = format!("Bearer {key}").parse().unwrap();
        request.headers_mut().insert("authorization", value);
    }
    let connecting = tokio_tungstenite::connect_async(request);
    match tokio::time::timeout(Duration::from_secs(30), connecting)
        .await
        .expect("a handshake within 30 s")
    {
        Ok((socket, answer)) => Ok((socket, answer.headers().clone())),
        Err(WsError::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            let problem = serde_json::from_slice(&body).unwrap_or(Value::Null);
            Err((response.status().as_u16(), problem))
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

/// The next relay message, within 30 s.
pub(crate) async fn next(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(30), socket.next())
            .await
            .expect("a message within 30 s")
            .expect("the socket is open")
            .expect("a message");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).expect("JSON");
        }
    }
}

/// The next text message, or `None` after `quiet` without one (pings do not count).
async fn next_within(socket: &mut Socket, quiet: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Text(text)))) => {
                return Some(serde_json::from_str(&text).expect("JSON"));
            }
            Ok(Some(Ok(_))) => continue,
            Ok(other) => panic!("the socket ended: {other:?}"),
        }
    }
}

/// Relay frames until the reply to request `id`.
async fn reply_to(socket: &mut Socket, id: u64) -> Value {
    loop {
        let message = next(socket).await;
        if message["type"] == "frame" && message["frame"]["id"] == id {
            return message["frame"].clone();
        }
    }
}

async fn send(socket: &mut Socket, request: Value) {
    let text = request.to_string();
    socket.send(Message::Text(text.into())).await.unwrap();
}

#[tokio::test]
async fn the_gateway_relay_refuses_what_a_key_may_not_do() {
    let ctx = Ctx::start().await;
    let path = ctx.relay_path().await;
    let (writer_id, writer) = ctx.key_and_id("write").await;

    let (status, problem) = ctx.relay(&path, None).await.unwrap_err();
    assert_eq!(
        (status, problem["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let reader = ctx.key_with("read").await;
    let (status, problem) = ctx.relay(&path, Some(&reader)).await.unwrap_err();
    assert_eq!((status, problem["code"].as_str()), (403, Some("forbidden")));
    let plain = ctx.get(&path).await;
    crate::assert_problem(&plain, 400, "invalid_request");

    let mut socket = ctx.relay(&path, Some(&writer)).await.expect("open");
    let attached = next(&mut socket).await;
    assert_eq!(attached["type"], "attached", "{attached}");
    assert_eq!(attached["resumed"], false);
    let first = next(&mut socket).await;
    assert_eq!(first["seq"], 1);
    assert_eq!(first["frame"]["params"]["type"], "gateway.ready", "{first}");

    let admin = hermes_native::catalog::catalog()
        .methods
        .iter()
        .find(|m| m.admin)
        .expect("an administrative method");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 7, "method": admin.name, "params": {}}),
    )
    .await;
    let refused = reply_to(&mut socket, 7).await;
    assert_eq!(
        refused["error"]["code"],
        edith_types::relay::FORBIDDEN,
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("admin"),
        "{refused}"
    );
    // Reading the whole config file back hands out its credentials: `admin` too. Other keys
    // of `config.get` need only `write`.
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 10, "method": "config.get", "params": {"key": "full"}}),
    )
    .await;
    let refused = reply_to(&mut socket, 10).await;
    assert_eq!(refused["error"]["code"], edith_types::relay::FORBIDDEN);
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 11, "method": "config.get", "params": {"key": "mtime"}}),
    )
    .await;
    let answered = reply_to(&mut socket, 11).await;
    assert!(answered["result"]["mtime"].is_number(), "{answered}");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 8, "method": "no.such", "params": {}}),
    )
    .await;
    let unknown = reply_to(&mut socket, 8).await;
    assert_eq!(
        unknown["error"]["code"],
        hermes_native::codes::METHOD_NOT_FOUND
    );

    // Only the key that opened a connection resumes it, and only from frames it was sent.
    let id = attached["connection"].as_str().unwrap();
    let other = ctx.key_with("write").await;
    let resume = format!("{path}?connection={id}&after=1");
    let (status, _) = ctx.relay(&resume, Some(&other)).await.unwrap_err();
    assert_eq!(status, 404);
    let beyond = format!("{path}?connection={id}&after=999");
    let (status, problem) = ctx.relay(&beyond, Some(&writer)).await.unwrap_err();
    assert_eq!(status, 400, "{problem}");
    for half in [format!("{path}?after=1"), format!("{path}?connection={id}")] {
        let (status, problem) = ctx.relay(&half, Some(&writer)).await.unwrap_err();
        assert_eq!(status, 400, "{half}: {problem}");
    }
    // The admin key may administer: the runtime answers it (ours lacks most such methods).
    let mut admin_socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    send(
        &mut admin_socket,
        json!({"jsonrpc": "2.0", "id": 9, "method": admin.name, "params": {}}),
    )
    .await;
    let answered = reply_to(&mut admin_socket, 9).await;
    assert_ne!(
        answered["error"]["code"],
        edith_types::relay::FORBIDDEN,
        "{answered}"
    );
    admin_socket.close(None).await.unwrap();

    // A key revoked ends the connections it opened, and they are told why.
    let (status, _) = ctx
        .send(
            reqwest::Method::DELETE,
            &format!("/v1/keys/{writer_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    loop {
        let message = next(&mut socket).await;
        if message["type"] == "closed" {
            assert_eq!(message["reason"], "the API key was revoked", "{message}");
            break;
        }
    }
}

#[tokio::test]
async fn a_client_back_after_a_long_gap_is_told_what_it_missed() {
    let kept = 3;
    let ctx = Ctx::start_limited(edith_server::Limits {
        relay_kept_frames: kept,
        ..Default::default()
    })
    .await;
    let path = ctx.relay_path().await;
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    let attached = next(&mut socket).await;
    let ready = next(&mut socket).await;
    assert_eq!(ready["seq"], 1);
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {}}),
    )
    .await;
    let created = reply_to(&mut socket, 1).await;
    let sid = created["result"]["session_id"].clone();
    let seen = 2;
    // A prompt whose reply streams word by word, and the client gone without a word.
    let text = (0..20)
        .map(|n| format!("w{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
            "params": {"session_id": sid, "text": text}}),
    )
    .await;
    drop(socket);
    // The scripted model answers at once; give the runtime ample time to finish the turn.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let id = attached["connection"].as_str().unwrap();
    let resume = format!("{path}?connection={id}&after={seen}");
    let mut socket = ctx.relay(&resume, Some(ADMIN_KEY)).await.expect("resume");
    let again = next(&mut socket).await;
    assert_eq!(again["type"], "attached", "{again}");
    assert_eq!(again["resumed"], true);
    assert_eq!(again["connection"], attached["connection"]);
    let missed = again["missed"]
        .as_array()
        .expect("frames were lost")
        .clone();
    assert_eq!(missed[0], seen + 1);
    let last_missed = missed[1].as_u64().unwrap();
    // The frames still kept follow, numbered on from the gap; the turn's end among them.
    let mut frames = Vec::new();
    for _ in 0..kept {
        frames.push(next(&mut socket).await);
    }
    let seqs: Vec<u64> = frames.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (last_missed + 1..=last_missed + kept as u64).collect();
    assert_eq!(seqs, expected, "{frames:?}");
    assert!(
        frames
            .iter()
            .any(|f| f["frame"]["params"]["type"] == "message.complete"),
        "{frames:?}"
    );
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn a_relay_keeps_a_bounded_number_of_bytes_for_a_client_that_dropped() {
    let kept_bytes = 1000;
    let ctx = Ctx::start_limited(edith_server::Limits {
        relay_kept_bytes: kept_bytes,
        ..Default::default()
    })
    .await;
    let path = ctx.relay_path().await;
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    let attached = next(&mut socket).await;
    assert_eq!(next(&mut socket).await["seq"], 1);
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {}}),
    )
    .await;
    let sid = reply_to(&mut socket, 1).await["result"]["session_id"].clone();
    // Forty words streamed one by one: far more than 1000 bytes of frames.
    let text = (0..40).map(|n| format!("w{n}")).collect::<Vec<_>>();
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
            "params": {"session_id": sid, "text": text.join(" ")}}),
    )
    .await;
    drop(socket);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let id = attached["connection"].as_str().unwrap();
    let resume = format!("{path}?connection={id}&after=2");
    let mut socket = ctx.relay(&resume, Some(ADMIN_KEY)).await.expect("resume");
    let again = next(&mut socket).await;
    assert_eq!(again["resumed"], true, "{again}");
    let missed = again["missed"].as_array().expect("frames were lost");
    let mut seq = missed[1].as_u64().unwrap();
    // What follows is numbered on from the gap and fits in the bytes kept: the newest frames
    // (after the turn's end the runtime sends the session's info and title, so which frames
    // those are varies).
    let mut bytes = 0;
    let mut kept = Vec::new();
    while let Some(frame) = next_within(&mut socket, Duration::from_secs(2)).await {
        seq += 1;
        assert_eq!(frame["seq"], seq, "{frame}");
        bytes += frame.to_string().len();
        kept.push(frame);
    }
    assert!(bytes <= kept_bytes, "{bytes} bytes kept");
    assert!(!kept.is_empty(), "the newest frames are kept");
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn a_silent_relay_client_is_dropped_and_may_resume() {
    let ctx = Ctx::start_limited(edith_server::Limits {
        relay_silence: Duration::from_millis(600),
        ..Default::default()
    })
    .await;
    let path = ctx.relay_path().await;
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    let attached = next(&mut socket).await;
    assert_eq!(next(&mut socket).await["seq"], 1);
    // Not read, so not a pong to the pings it is sent: after the silence, the relay lets go.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Ping(_))) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the relay let go within 10 s");
    assert!(
        !matches!(ended, Some(Ok(Message::Text(_)))),
        "the silent socket was dropped: {ended:?}"
    );
    // The connection waits for its client: a resume finds it.
    let id = attached["connection"].as_str().unwrap();
    let mut socket = ctx
        .relay(&format!("{path}?connection={id}&after=1"), Some(ADMIN_KEY))
        .await
        .expect("resume");
    let again = next(&mut socket).await;
    assert_eq!(again["type"], "attached", "{again}");
    assert_eq!(again["resumed"], true, "{again}");
    socket.close(None).await.unwrap();
}

/// Opens the relay to a new profile of instance `iid` that uses `model`, runs one prompt on a
/// new session, and returns the streamed text and the final text.
async fn prompt_through_the_relay(
    ctx: &Ctx,
    iid: &str,
    model: &testkit::FakeModel,
    input: &str,
) -> (String, String) {
    let profile = ctx.profile_on(iid, model, json!({"name": "relayed"})).await;
    let path = format!(
        "/v1/instances/{iid}/profiles/{}/gateway",
        profile["id"].as_str().unwrap()
    );
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {}}),
    )
    .await;
    let created = reply_to(&mut socket, 1).await;
    let sid = created["result"]["session_id"].clone();
    assert!(sid.is_string(), "{created}");
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
            "params": {"session_id": sid, "text": input}}),
    )
    .await;
    let mut streamed = String::new();
    // The real Hermes builds its agent first: seconds.
    let complete = tokio::time::timeout(Duration::from_secs(120), async {
        let mut last_seq: Option<u64> = None;
        loop {
            let message = next(&mut socket).await;
            let seq = message["seq"].as_u64().expect("a numbered frame");
            if let Some(last) = last_seq {
                assert_eq!(seq, last + 1, "frames are numbered in order: {message}");
            }
            last_seq = Some(seq);
            let event = &message["frame"]["params"];
            match event["type"].as_str() {
                Some("message.delta") => {
                    streamed.push_str(event["payload"]["text"].as_str().unwrap_or_default())
                }
                Some("message.complete") => {
                    return event["payload"]["text"].as_str().unwrap().to_owned();
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the turn completes within 120 s");
    // The connection is the profile's: its list is the profile's stored sessions (Hermes's own
    // gateway would list the root profile's, where there are none).
    send(
        &mut socket,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session.list", "params": {}}),
    )
    .await;
    let listed = reply_to(&mut socket, 3).await;
    let ids: Vec<&Value> = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {listed}"))
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&created["result"]["stored_session_id"]], "{listed}");
    socket.close(None).await.unwrap();
    assert_eq!(
        model.authorizations().last().map(String::as_str),
        Some("Bearer sk-fake-0123456789"),
        "the profile's own model answered: the relay opened the session in that profile"
    );
    (streamed, complete)
}

#[tokio::test]
async fn a_turn_streams_through_the_relay_from_our_runtime() {
    let ctx = Ctx::start().await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let (streamed, complete) = prompt_through_the_relay(&ctx, &iid, &model, "hello relay").await;
    assert_eq!(complete, "You said: hello relay");
    assert_eq!(streamed, complete);
}

#[tokio::test]
async fn a_turn_streams_through_the_relay_from_the_real_hermes() {
    let runtimes = [("hermes".to_owned(), crate::providers::real_hermes())];
    let ctx = Ctx::start_with(runtimes.into_iter().collect()).await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let (streamed, complete) = prompt_through_the_relay(&ctx, &iid, &model, "hello relay").await;
    assert_eq!(complete, "You said: hello relay");
    assert_eq!(streamed, complete);
}

#[tokio::test]
async fn a_client_back_after_the_runtime_went_hears_how_its_connection_ended() {
    let ctx = Ctx::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let (_, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    let path = format!(
        "/v1/instances/{iid}/profiles/{}/gateway",
        profile["id"].as_str().unwrap()
    );
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");
    let attached = next(&mut socket).await;
    let ready = next(&mut socket).await;
    assert_eq!(ready["seq"], 1);
    drop(socket);
    ctx.kill_runtime(&iid).await;
    ctx.instance_when(&iid, |i| i["state"] == "lost").await;

    let id = attached["connection"].as_str().unwrap();
    let resume = format!("{path}?connection={id}&after=1");
    let mut socket = ctx.relay(&resume, Some(ADMIN_KEY)).await.expect("resume");
    let again = next(&mut socket).await;
    assert_eq!(again["type"], "attached", "{again}");
    let closed = next(&mut socket).await;
    assert_eq!(closed["type"], "closed", "{closed}");
    assert_eq!(
        closed["reason"],
        "the runtime closed the gateway connection"
    );
    // Heard: it is gone now.
    let (status, _) = ctx.relay(&resume, Some(ADMIN_KEY)).await.unwrap_err();
    assert_eq!(status, 404);
}

/// A relayed connection may not resume a stored session that a control-plane session continues:
/// the runtime would give it that session's live session, and send it the events of that
/// session's turns from then on. Other stored sessions are the runtime's to answer.
#[tokio::test]
async fn a_relay_may_not_resume_a_stored_session_the_control_plane_continues() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let profiles = format!("/v1/instances/{iid}/profiles");
    let (_, profile) = ctx.post(&profiles, r#"{"name": "p"}"#).await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    assert_eq!(ctx.turn_on(&turns, "hello").await["state"], "completed");
    let (_, session) = ctx.get(turns.trim_end_matches("/turns")).await;
    let path = format!("{profiles}/{}/gateway", profile["id"].as_str().unwrap());
    let mut socket = ctx.relay(&path, Some(ADMIN_KEY)).await.expect("open");

    let resume = |id: u64, stored: &Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "session.resume",
            "params": {"session_id": stored}})
    };
    send(&mut socket, resume(1, &session["native_session_id"])).await;
    let refused = reply_to(&mut socket, 1).await;
    assert_eq!(
        refused["error"]["code"],
        edith_types::relay::HELD_BY_THE_CONTROL_PLANE,
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(session["id"].as_str().unwrap()),
        "{refused}"
    );
    // The session's turns go on as before.
    let again = ctx.turn_on(&turns, "again").await;
    assert_eq!(again["output"], "You said: again", "{again}");

    send(&mut socket, resume(2, &json!("20200101_000000_abcdef"))).await;
    let unknown = reply_to(&mut socket, 2).await;
    let code = &unknown["error"]["code"];
    assert!(
        code.is_i64() && *code != edith_types::relay::HELD_BY_THE_CONTROL_PLANE,
        "the runtime's own answer: {unknown}"
    );
}
