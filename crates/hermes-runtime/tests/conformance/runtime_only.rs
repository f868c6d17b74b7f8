//! Behaviour of our runtime that the real Hermes does not show with a fake model.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::harness::{McpServer, Peer, PeerOptions, Target};

/// SIGTERM during a turn: the turn ends as interrupted and state.db stays consistent.
/// (Hermes 0.19 exits on SIGTERM without completing the turn; not a conformance expectation.)
#[tokio::test]
async fn sigterm_ends_in_flight_turns_as_interrupted() {
    let peer = Peer::start(Target::Ours).await;
    let mut client = peer.connect().await;
    let created = client.call("session.create", json!({})).await;
    let live = created["session_id"].clone();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    client.submit(&live, "SLOW shutdown").await;
    loop {
        if client.event().await["type"] == "message.delta" {
            break;
        }
    }
    let mut peer = peer;
    let (status, events) = tokio::join!(peer.terminate(), client.events_until("message.complete"));
    assert_eq!(events.last().unwrap()["payload"]["status"], "interrupted");
    assert!(status.success(), "{status}");

    // The store is whole: a new process resumes the session with the user message.
    peer.restart().await;
    let mut client = peer.connect().await;
    let resumed = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    assert_eq!(
        resumed["messages"][0],
        json!({"role": "user", "text": "SLOW shutdown"})
    );
    peer.stop().await;
}

/// A model failure is also reported as an `error` event carrying the model's message (Hermes
/// reports it through `status.update` and `message.complete` only).
#[tokio::test]
async fn a_model_failure_is_an_error_event() {
    let peer = Peer::start(Target::Ours).await;
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "FAIL").await;
    let events = client.events_until("message.complete").await;
    let error = events
        .iter()
        .find(|e| e["type"] == "error")
        .expect("an error event");
    assert!(
        error["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 500: the fake model was asked to fail"),
        "{error}"
    );
    peer.stop().await;
}

/// MCP calls have deadlines: a tool slower than `timeout` fails the call, not the turn; a server
/// that cannot be reached is reported and left out, and the other tools still work.
#[tokio::test]
async fn mcp_calls_and_connections_have_deadlines() {
    let server = McpServer::start().await;
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", listener.local_addr().unwrap())
    }; // nothing listens there any more
    let options = PeerOptions {
        mcp_servers: vec![
            ("tools".to_owned(), server.url.clone()),
            ("gone".to_owned(), dead),
        ],
        mcp_call_timeout: Some(1),
        ..Default::default()
    };
    let peer = Peer::start_with(Target::Ours, options).await;
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let started = std::time::Instant::now();
    client
        .call(
            "prompt.submit",
            json!({"session_id": live, "text": "CALL sleepy {}"}),
        )
        .await;
    let mut warned = false;
    let complete = loop {
        let frame = client.next_frame().await;
        let event = &frame["params"];
        if event["type"] == "status.update"
            && event["payload"]["text"]
                .as_str()
                .unwrap_or("")
                .contains("`gone`")
        {
            warned = true;
        }
        if event["type"] == "tool.complete" {
            break event["payload"].clone();
        }
    };
    assert!(warned, "the unreachable server is reported");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "the call gave up at its deadline"
    );
    assert_eq!(complete["name"], "mcp__tools__sleepy");
    let error = complete["result"]["error"]
        .as_str()
        .expect("the call failed");
    assert!(error.ends_with("did not answer within 1s"), "{error}");
    let events = client.events_until("message.complete").await;
    assert_eq!(events.last().unwrap()["payload"]["status"], "complete");
    peer.stop().await;
}

/// A `config.yaml` whose MCP timeout is negative, NaN or infinite is refused with a clear
/// configuration error in the turn (it once panicked the turn's task, and the turn never ended).
#[tokio::test]
async fn a_bad_timeout_in_the_config_ends_the_turn_with_a_configuration_error() {
    let peer = Peer::start(Target::Ours).await;
    let config_path = peer.home.join("config.yaml");
    let good = std::fs::read_to_string(&config_path).unwrap();
    let mut client = peer.connect().await;
    for bad in ["-1", ".nan", ".inf"] {
        std::fs::write(&config_path, &good).unwrap();
        let live = client.new_session().await;
        let mut config: serde_yaml::Value = serde_yaml::from_str(&good).unwrap();
        config["mcp_servers"] = serde_yaml::from_str(&format!(
            "tools:\n  url: http://127.0.0.1:9/mcp\n  timeout: {bad}\n"
        ))
        .unwrap();
        std::fs::write(&config_path, serde_yaml::to_string(&config).unwrap()).unwrap();
        client.submit(&live, "hello").await;
        let events = client.events_until("message.complete").await;
        let error = events
            .iter()
            .find(|e| e["type"] == "error")
            .unwrap_or_else(|| panic!("an error event for timeout {bad}: {events:?}"));
        let message = error["payload"]["message"].as_str().unwrap();
        assert!(
            message.contains("config.yaml") && message.contains("timeout"),
            "{bad}: {message}"
        );
        assert_eq!(events.last().unwrap()["payload"]["status"], "error");
    }
    // Mended, the same runtime runs turns again.
    std::fs::write(&config_path, &good).unwrap();
    let live = client.new_session().await;
    client.submit(&live, "hello again").await;
    let events = client.events_until("message.complete").await;
    assert_eq!(events.last().unwrap()["payload"]["status"], "complete");
    peer.stop().await;
}

/// Once a session is open, `session.info` names its tools by toolset — built-ins and the tools
/// of the home's MCP servers — as Hermes does after building the agent (Hermes connects MCP
/// servers later for profiles made after it started: not a conformance expectation).
#[tokio::test]
async fn an_opened_session_announces_its_tools() {
    let server = McpServer::start().await;
    let peer = Peer::with_mcp_server(Target::Ours, &server).await;
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let info = client.any_event("session.info").await;
    assert_eq!(info["session_id"], live);
    let tools = &info["payload"]["tools"];
    assert_eq!(tools["terminal"], json!(["terminal"]), "{info}");
    assert_eq!(
        tools["mcp-tools"],
        json!([
            "mcp__tools__word_count",
            "mcp__tools__fails",
            "mcp__tools__sleepy"
        ]),
        "{info}"
    );
    // And, as Hermes's TUI reads it: the release, and the usage so far (no call yet, so how
    // full the context window is stays unknown).
    assert_eq!(info["payload"]["version"], "0.19.0", "{info}");
    assert_eq!(info["payload"]["usage"]["calls"], 0, "{info}");
    assert!(info["payload"]["usage"]["context_used"].is_null(), "{info}");
    peer.stop().await;
}

/// Sessions opened together share one connection to an MCP server: a burst of new sessions
/// opens one MCP session on the server, not one each (all but one then thrown away).
#[tokio::test]
async fn sessions_opened_at_once_connect_to_an_mcp_server_once() {
    const SESSIONS: usize = 16;
    let server = McpServer::start().await;
    let peer = Peer::with_mcp_server(Target::Ours, &server).await;
    let mut client = peer.connect().await;
    for _ in 0..SESSIONS {
        client.send_request("session.create", json!({})).await;
    }
    // Replies and the sessions' infos, in whatever order they come.
    let (mut opened, mut announced) = (0, 0);
    while opened < SESSIONS || announced < SESSIONS {
        let frame = client.next_frame().await;
        if frame["params"]["type"] == "session.info" {
            let tools = &frame["params"]["payload"]["tools"]["mcp-tools"];
            assert_eq!(tools.as_array().map(Vec::len), Some(3), "{frame}");
            announced += 1;
        } else if frame["id"].is_string() {
            assert!(frame["result"]["session_id"].is_string(), "{frame}");
            opened += 1;
        }
    }
    assert_eq!(server.initialized.load(Ordering::SeqCst), 1);
    peer.stop().await;
}

/// An MCP server that could not be reached when a session opened is connected for the next
/// one once it is up: a failed connection attempt is not kept.
#[tokio::test]
async fn an_mcp_server_that_was_down_is_connected_once_it_is_up() {
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    }; // nothing listens there for now
    let options = PeerOptions {
        mcp_servers: vec![("late".to_owned(), format!("http://{address}/mcp"))],
        ..Default::default()
    };
    let peer = Peer::start_with(Target::Ours, options).await;
    let mut client = peer.connect().await;
    let status = |info: &serde_json::Value| info["payload"]["mcp_servers"][0]["status"].clone();

    client.new_session().await;
    let info = client.any_event("session.info").await;
    assert_eq!(status(&info), "failed", "{info}");

    let _server = McpServer::start_on(&address).await;
    client.new_session().await;
    let info = client.any_event("session.info").await;
    assert_eq!(status(&info), "connected", "{info}");
    assert_eq!(info["payload"]["mcp_servers"][0]["tools"], 3, "{info}");
    peer.stop().await;
}

/// Completion lists paths only inside the runtime's workspace (Hermes lists the whole machine).
#[tokio::test]
async fn path_completion_stays_inside_the_workspace() {
    let peer = Peer::start(Target::Ours).await;
    std::fs::write(peer.work.join("inside.txt"), "i").unwrap();
    // A link inside that leads out.
    std::os::unix::fs::symlink(&peer.home, peer.work.join("out")).unwrap();
    let mut client = peer.connect().await;
    // The parent holds `home/` and `work/`: `h` would list `home/` if it were reached.
    let outside = peer.work.parent().unwrap().display().to_string();
    for (word, cwd) in [
        ("../", None),
        ("/etc/", None),
        ("~/", None),
        ("@file:../", None),
        ("h", Some(outside.as_str())),
        ("out/", None),
        ("out/c", None),
    ] {
        let mut params = json!({"word": word});
        if let Some(cwd) = cwd {
            params["cwd"] = json!(cwd);
        }
        let listed = client.call("complete.path", params).await;
        assert_eq!(listed, json!({"items": []}), "{word} from {cwd:?}");
    }
    let inside = client.call("complete.path", json!({"word": "ins"})).await;
    assert_eq!(inside["items"][0]["text"], "inside.txt", "{inside}");
    peer.stop().await;
}

/// A client in the runtime's own process reaches its gateway over channels: the same frames,
/// the same turn, no socket and no token; and the runtime stopping closes the connection.
#[tokio::test]
async fn a_client_in_the_process_drives_a_turn_without_a_socket() {
    use hermes_native::events::CompletionStatus;
    use hermes_native::methods::{
        PromptSubmit, PromptSubmitParams, SessionCreate, SessionCreateParams,
    };
    use hermes_native::{GatewayClient, NativeEvent};
    use std::time::Duration;

    let home = tempfile::tempdir().unwrap();
    let config = hermes_runtime::RuntimeConfig::new(
        home.path().to_owned(),
        "never-asked".to_owned(),
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    );
    let running = hermes_runtime::serve(config).await.unwrap();
    let (requests, frames) = running.in_process_gateway().connect();
    let gateway = GatewayClient::in_process(requests, frames, Duration::from_secs(30))
        .await
        .expect("gateway.ready over the channels");
    let created = gateway
        .request::<SessionCreate>(&SessionCreateParams::default())
        .await
        .unwrap();
    let mut events = gateway.subscribe(&created.session_id);
    // The session's first info, sent as it opened, reaches a subscriber that reads info. (Here
    // it mostly comes after the subscription; `hermes-native`'s client tests cover one that
    // came before.)
    tokio::time::timeout(Duration::from_secs(30), async {
        while !matches!(events.recv().await, Some(NativeEvent::SessionInfo(_))) {}
    })
    .await
    .expect("the session's first info");
    gateway
        .request::<PromptSubmit>(&PromptSubmitParams {
            session_id: Some(created.session_id.clone()),
            text: Some("hello".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let complete = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.recv().await.expect("the session's events go on") {
                NativeEvent::MessageComplete(complete) => return complete,
                _ => continue,
            }
        }
    })
    .await
    .expect("the turn completes");
    assert_eq!(complete.status, CompletionStatus::Complete, "{complete:?}");
    assert!(!complete.text.is_empty());

    running.shutdown().await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while !gateway.is_closed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the connection closes with the runtime");
}

/// Sessions with no client are closed by the idle scan once idle for `Reaping::idle_ttl`, one
/// that runs a turn only once its turn has ended; with a grace of zero, a dropped connection's
/// sessions are left to the scan. (Hermes 0.19's `_reap_idle_sessions` does the same, every 5
/// minutes with a TTL of hours: too long to show there.)
#[tokio::test]
async fn sessions_with_no_client_are_closed_once_idle_never_mid_turn() {
    use crate::harness::{Client, TOKEN, write_config};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let model = testkit::FakeModel::start().await;
    write_config(dir.path(), &model, &PeerOptions::default());
    let mut config = hermes_runtime::RuntimeConfig::new(
        dir.path().to_owned(),
        TOKEN.to_owned(),
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    );
    config.reaping = hermes_runtime::Reaping {
        orphan_grace: Duration::ZERO,
        idle_ttl: Duration::from_secs(1),
        scan_every: Duration::from_millis(100),
    };
    let running = hermes_runtime::serve(config).await.unwrap();
    let port = running.addr().port();
    let mut gone = Client::connect(port).await;
    let idle = gone.call("session.create", json!({})).await;
    let busy = gone.call("session.create", json!({})).await;
    // It runs for 6 s, far past the TTL.
    gone.submit(&busy["session_id"], "SLOW please").await;
    while gone.event().await["type"] != "message.delta" {}
    drop(gone);

    let mut back = Client::connect(port).await;
    let usage = |session: &serde_json::Value| json!({"session_id": session["session_id"]});
    let closed_within = async |back: &mut Client, session: &serde_json::Value| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let reply = back.request("session.usage", usage(session)).await;
            if reply["error"]["code"] == 4001 {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    assert!(closed_within(&mut back, &idle).await, "the idle one closed");
    let running_turn = back.request("session.usage", usage(&busy)).await;
    assert!(
        running_turn["error"].is_null(),
        "kept while its turn runs: {running_turn}"
    );
    assert!(
        closed_within(&mut back, &busy).await,
        "closed once it ended"
    );
    // Its turn ran to its end.
    let resume = json!({"session_id": busy["stored_session_id"]});
    let resumed = back.call("session.resume", resume).await;
    let answer = resumed["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(answer["role"], "assistant", "{resumed}");
    let text = answer["text"].as_str().unwrap();
    assert_eq!(text.matches("tick").count(), 60, "{answer}");
    running.shutdown().await;
}
