//! End-to-end: the SDK drives an embedded control plane, which drives the project's runtime
//! through the native gateway; the runtime calls a callback tool back through the control
//! plane's MCP endpoint and the SDK's tool host. All on loopback, no model key.
//!
//! `targets` runs the main journeys on every kind of runtime the control plane drives.

mod targets;

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use hermes::types::{
    ApprovalChoice, ErrorCode, InstanceState, TurnEvent, TurnEventKind, TurnState, Usage,
};
use hermes::{Error, Hermes, InstanceHandle, ProfileSpec, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    text: String,
}

/// A `word_count` tool that records every text it was called with.
fn recording_word_count() -> (Tool, Arc<Mutex<Vec<String>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let tool = Tool::new("word_count", "Count words", move |args: WordCountArgs| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(args.text.clone());
            Ok::<_, ToolError>(args.text.split_whitespace().count())
        }
    });
    (tool, calls)
}

/// What the first tool the turn called returned, once the turn completed.
async fn tool_result(turn: hermes::TurnHandle) -> serde_json::Value {
    assert_eq!(turn.wait().await.expect("wait").state, TurnState::Completed);
    let log = collect(turn.events()).await;
    log.iter()
        .find_map(|e| match &e.kind {
            TurnEventKind::ToolCompleted { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the tool was called: {log:#?}"))
}

async fn ready_instance(hermes: &Hermes, name: &str) -> InstanceHandle {
    let creation = hermes.instances().create(name).await.expect("create");
    assert_eq!(creation.instance.state, InstanceState::Provisioning);
    creation.ready().await.expect("ready")
}

async fn collect(mut events: hermes::EventStream<TurnEvent>) -> Vec<TurnEvent> {
    let mut all = Vec::new();
    while let Some(event) = events.next().await {
        all.push(event.expect("event"));
    }
    all
}

#[tokio::test]
async fn a_tool_calling_turn_streams_the_exact_event_sequence() {
    let hermes = Hermes::local().await.expect("local");
    let (tool, calls) = recording_word_count();
    let tool = hermes.register_tool(tool).await.expect("register");
    let instance = ready_instance(&hermes, "e2e").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant").tool(&tool))
        .await
        .expect("profile");
    let session = profile.sessions().create().await.expect("session");
    let turn = session
        .send(r#"count with word_count {"text": "one two three four"}"#)
        .await
        .expect("turn");

    let events = collect(turn.events()).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let kinds: Vec<TurnEventKind> = events.into_iter().map(|e| e.kind).collect();
    let usage = match &kinds[kinds.len() - 2] {
        TurnEventKind::MessageCompleted { usage, .. } => usage.clone(),
        other => panic!("expected message.completed, got {other:?}"),
    };
    assert_eq!(
        kinds,
        vec![
            TurnEventKind::TurnStarted,
            TurnEventKind::MessageStarted,
            TurnEventKind::ToolStarted {
                tool_call_id: "call_1".into(),
                name: "word_count".into()
            },
            TurnEventKind::ToolCompleted {
                tool_call_id: "call_1".into(),
                name: "word_count".into(),
                args: json!({"text": "one two three four"}),
                result: json!(4),
            },
            TurnEventKind::MessageDelta {
                text: "\n\nword_count ".into()
            },
            TurnEventKind::MessageDelta {
                text: "returned ".into()
            },
            TurnEventKind::MessageDelta { text: "4.".into() },
            TurnEventKind::MessageCompleted {
                text: "word_count returned 4.".into(),
                usage: usage.clone(),
            },
            TurnEventKind::TurnFinished {
                state: TurnState::Completed,
                output: Some("word_count returned 4.".into()),
                error: None,
            },
        ]
    );
    assert_eq!(
        usage.map(|u| u.calls),
        Some(2),
        "one model call for the tool, one after it"
    );
    assert_eq!(*calls.lock().unwrap(), ["one two three four"]);

    let finished = turn.get().await.expect("turn");
    assert_eq!(finished.state, TurnState::Completed);
    assert_eq!(finished.output.as_deref(), Some("word_count returned 4."));
    assert!(matches!(finished.usage, Some(Usage { calls: 2, .. })));
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn a_stream_resumes_after_a_given_event_and_a_session_keeps_its_native_session() {
    let hermes = Hermes::local().await.expect("local");
    let instance = ready_instance(&hermes, "resume").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("echo"))
        .await
        .expect("profile");
    let session = profile.sessions().create().await.expect("session");
    let turn = session.send("hello there").await.expect("turn");
    let all = collect(turn.events()).await;
    assert_eq!(
        all.last().map(|e| &e.kind),
        Some(&TurnEventKind::TurnFinished {
            state: TurnState::Completed,
            output: Some("You said: hello there".into()),
            error: None,
        })
    );
    // The log is durable: a later reader resuming after event 3 gets exactly the rest.
    let tail = collect(turn.events_after(3)).await;
    assert_eq!(tail, all[3..]);

    // The first turn taught the session its native (stored) session id; a second turn
    // continues the same native session.
    let native = session
        .get()
        .await
        .expect("session")
        .native_session_id
        .expect("learned at the first turn");
    let second = session.send("again").await.expect("turn");
    assert_eq!(
        second.wait().await.expect("wait").output.as_deref(),
        Some("You said: again")
    );
    assert_eq!(
        session.get().await.expect("session").native_session_id,
        Some(native)
    );
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn close_deletes_the_instances_created_in_the_context() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hermes = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("local");
    let instance = ready_instance(&hermes, "owned").await;
    let id = instance.id().clone();
    let home = dir.path().join("instances").join(id.as_str());
    assert!(
        home.is_dir(),
        "the runtime home exists while the instance does"
    );
    hermes.close().await.expect("close");
    assert!(!home.exists(), "close destroyed the runtime home");

    let again = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("reopen");
    let err = again.open_instance(&id).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::NotFound), "{err}");
    again.close().await.expect("close");
}

/// `close()` stops the embedded control plane (its port refuses) and the tools the context
/// hosted: a later turn — through another context on the same data — that calls one gets a
/// clear error in the turn, and the function is not called.
#[tokio::test]
async fn a_closed_local_context_refuses_and_its_tools_are_reached_no_more() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Hermes::local_builder()
        .data_dir(dir.path())
        .cleanup(false)
        .start()
        .await
        .expect("local");
    let (tool, calls) = recording_word_count();
    let registered = first.register_tool(tool).await.expect("tool");
    let instance = ready_instance(&first, "kept").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant").tool(&registered))
        .await
        .expect("profile");
    let session = profile.sessions().create().await.expect("session");
    let input = r#"word_count {"text": "one two three"}"#;
    let turn = session.send(input).await.expect("turn");
    assert_eq!(turn.wait().await.expect("wait").state, TurnState::Completed);
    assert_eq!(*calls.lock().unwrap(), ["one two three"]);
    let url = first.sdk().base_url().to_owned();
    first.close().await.expect("close");
    let refused = reqwest::Client::new()
        .get(format!("{url}/healthz"))
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await;
    assert!(
        refused.as_ref().is_err_and(reqwest::Error::is_connect),
        "the control plane's port refuses: {refused:?}"
    );

    let second = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("reopen");
    let again = second
        .instance(instance.id())
        .profile(profile.id())
        .session(session.id());
    let turn = again.send(input).await.expect("turn");
    assert_eq!(turn.wait().await.expect("wait").state, TurnState::Completed);
    let result = tool_result(turn).await;
    assert!(
        result.to_string().contains("tool host unreachable"),
        "the turn says the tool could not be reached: {result}"
    );
    assert_eq!(
        *calls.lock().unwrap(),
        ["one two three"],
        "not called again"
    );
    second
        .instance(instance.id())
        .delete()
        .await
        .expect("delete");
    second.close().await.expect("close");
}

#[tokio::test]
async fn a_tool_host_served_on_its_own_is_called_with_its_secret_only() {
    let hermes = Hermes::local().await.expect("local");
    let host = hermes::ToolHost::serve(([127, 0, 0, 1], 0).into())
        .await
        .expect("serve");
    let (tool, calls) = recording_word_count();
    host.add(tool);
    let registered = hermes.register_tool_host(&host).await.expect("register");
    assert_eq!(registered.len(), 1);

    // Nobody but the holder of its secret may call it.
    let http = reqwest::Client::new();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    for bearer in [None, Some("not-the-secret")] {
        let mut request = http
            .post(host.url())
            .header("accept", "application/json, text/event-stream")
            .json(&call)
            .timeout(std::time::Duration::from_secs(10));
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let refused = request.send().await.expect("the host answers");
        assert_eq!(refused.status(), 401, "bearer {bearer:?}");
    }

    let instance = ready_instance(&hermes, "hosted").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant").tool(&registered[0]))
        .await
        .expect("profile");
    let session = profile.sessions().create().await.expect("session");
    let input = r#"word_count {"text": "one two three"}"#;
    let result = tool_result(session.send(input).await.expect("turn")).await;
    assert!(result.to_string().contains('3'), "{result}");
    assert_eq!(*calls.lock().unwrap(), ["one two three"]);

    // A host that is gone: the turn says so, and goes on.
    host.shutdown().await;
    let result = tool_result(session.send(input).await.expect("turn")).await;
    assert!(
        result.to_string().contains("tool host unreachable"),
        "the turn says the tool could not be reached: {result}"
    );
    assert_eq!(calls.lock().unwrap().len(), 1, "not called again");
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn without_cleanup_the_instance_remains_and_open_instance_reaches_it_without_owning_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Hermes::local_builder()
        .data_dir(dir.path())
        .cleanup(false)
        .start()
        .await
        .expect("local");
    let id = ready_instance(&first, "kept").await.id().clone();
    first.close().await.expect("close");

    // A second client on the same data dir attaches; the runtime is started again on demand.
    let second = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("second");
    let instance = second.open_instance(&id).await.expect("open_instance");
    assert_eq!(
        instance.get().await.expect("get").state,
        InstanceState::Ready
    );
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("later"))
        .await
        .expect("profile");
    let session = profile.sessions().create().await.expect("session");
    let turn = session.send("still here?").await.expect("turn");
    assert_eq!(
        turn.wait().await.expect("wait").output.as_deref(),
        Some("You said: still here?")
    );
    // Attached, not owned: closing the second client leaves the instance alone.
    second.close().await.expect("close");

    let third = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("third");
    let instance = third.open_instance(&id).await.expect("still there");
    instance.delete().await.expect("explicit delete");
    let err = instance.get().await.unwrap_err();
    assert!(matches!(err, Error::Api { status: 404, .. }), "{err}");
    third.close().await.expect("close");
}

#[tokio::test]
async fn a_remote_client_never_deletes_and_leaves_the_callers_http_client_usable() {
    let server_side = Hermes::local().await.expect("local");
    let instance = ready_instance(&server_side, "shared").await;
    let url = server_side.sdk().base_url().to_owned();

    let key_file = server_side.data_dir().unwrap().join("admin.key");
    let key = std::fs::read_to_string(key_file).expect("the local context's admin key");
    let http = reqwest::Client::new();
    let remote = Hermes::remote_with_http_client(&url, Some(key.trim()), http.clone());
    let seen = remote.open_instance(instance.id()).await.expect("open");
    remote.close().await.expect("close");
    // Closed: its handles fail clearly; the instance is still there.
    assert!(matches!(seen.get().await, Err(Error::Closed)));
    assert!(matches!(
        remote
            .sdk()
            .instance_list(&Default::default(), &Default::default())
            .await,
        Err(Error::Closed)
    ));
    let still = server_side
        .instance(instance.id())
        .get()
        .await
        .expect("get");
    assert_eq!(still.state, InstanceState::Ready);
    let health = http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .expect("the caller's client still works");
    assert!(health.status().is_success());
    server_side.close().await.expect("close");
}

/// A stand-in HTTP/1.1 server on loopback: it answers every request `{}` on a kept-alive
/// connection and reports each connection its client closes.
async fn connection_watching_server() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (closed, closes) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let closed = closed.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    // Bodiless requests only: each ends at its blank line.
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                     content-length: 2\r\n\r\n{}";
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
                let _ = closed.send(());
            });
        }
    });
    (url, closes)
}

#[tokio::test]
async fn closing_a_client_the_sdk_made_closes_its_connections() {
    let wait = std::time::Duration::from_secs(10);
    let (url, mut closes) = connection_watching_server().await;
    let client = hermes::EdithHermes::remote(&url, Some("key"));
    // The reply does not decode as a page: what matters is the connection it opened.
    let _ = client
        .instance_list(&Default::default(), &Default::default())
        .await;
    client.close();
    tokio::time::timeout(wait, closes.recv())
        .await
        .expect("the control-plane client's connection was closed with it");

    let desktop = hermes::HermesDesktop::remote(&url, Some("token"));
    let work = desktop.for_profile("work");
    let _ = desktop.profile_list().await;
    // A profile's client shares the connection and leaves it to its parent.
    work.close();
    let after = desktop.profile_list().await;
    assert!(
        !matches!(after, Err(Error::Closed | Error::Transport(_))),
        "the parent still sends: {after:?}"
    );
    desktop.close();
    tokio::time::timeout(wait, closes.recv())
        .await
        .expect("the Desktop client's connection was closed with it");
}

#[tokio::test]
async fn native_methods_run_through_the_control_plane_routed_by_scope() {
    use hermes::native::{
        LiveSessionId, LiveSessionParams, NativeError, PromptSubmitParams, SessionCreateParams,
        SessionListParams, SessionResumeParams,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let hermes = Hermes::local_builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect("local");
    let instance = ready_instance(&hermes, "native").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant"))
        .await
        .expect("profile");
    let native = profile.native();

    // session.create is profile-scoped: the control plane fills in the native profile.
    let created = native
        .api()
        .session()
        .create(&SessionCreateParams {
            source: Some("sdk".to_owned()),
            ..Default::default()
        })
        .await
        .expect("session.create");
    let live = created.session_id.clone();
    let stored = created.stored_session_id.as_str().to_owned();
    let submitted = native
        .api()
        .prompt()
        .submit(&PromptSubmitParams {
            session_id: Some(live.clone()),
            text: Some("through the control plane".to_owned()),
            ..Default::default()
        })
        .await
        .expect("prompt.submit");
    assert_eq!(submitted.status, "streaming");
    let history = LiveSessionParams {
        session_id: Some(live.clone()),
    };
    let mut count = 0;
    for _ in 0..200 {
        count = native
            .api()
            .session()
            .history(&history)
            .await
            .unwrap()
            .count;
        if count == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(count, 2, "the turn ran on the runtime");
    let profile_db = dir
        .path()
        .join("instances")
        .join(instance.id().as_str())
        .join("home/profiles/assistant/state.db");
    assert!(profile_db.is_file(), "stored in the profile's own home");
    let root = instance
        .native()
        .api()
        .session()
        .list(&SessionListParams::default())
        .await
        .expect("session.list");
    assert!(
        !root.sessions.iter().any(|s| s.id.as_str() == stored),
        "not in the root profile: {root:?}"
    );
    let own = native
        .api()
        .session()
        .list(&SessionListParams::default())
        .await
        .expect("the profile's session.list");
    assert!(
        own.sessions.iter().any(|s| s.id.as_str() == stored),
        "in its own profile's list: {own:?}"
    );
    let resumed = native
        .api()
        .session()
        .resume(&SessionResumeParams {
            session_id: Some(stored.clone()),
            ..Default::default()
        })
        .await
        .expect("resume in the profile");
    assert_eq!(resumed.resumed.as_str(), stored.as_str());

    // What the runtime lacks is typed; what it refuses keeps its code.
    let unsupported = native.api().plugins().list().await.unwrap_err();
    assert!(
        matches!(&unsupported, NativeError::Unsupported { method } if method == "plugins.list"),
        "{unsupported:?}"
    );
    let refused = native
        .api()
        .session()
        .history(&LiveSessionParams {
            session_id: Some(LiveSessionId::new("00000000")),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(4001), "{refused:?}");
    hermes.close().await.expect("close");
}

/// Follows a turn's events until `pick` finds one; returns it and the events so far.
async fn until_event<T>(
    events: &mut hermes::EventStream<TurnEvent>,
    mut pick: impl FnMut(&TurnEventKind) -> Option<T>,
) -> T {
    while let Some(event) = events.next().await {
        if let Some(found) = pick(&event.expect("event").kind) {
            return found;
        }
    }
    panic!("the stream ended first");
}

async fn assistant(hermes: &Hermes) -> hermes::SessionHandle {
    let instance = ready_instance(hermes, "actions").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant"))
        .await
        .expect("profile");
    profile.sessions().create().await.expect("session")
}

/// Starts a turn whose model runs `rm -rf <victim>` through the built-in `terminal` tool.
async fn delete_with_terminal(
    session: &hermes::SessionHandle,
    victim: &std::path::Path,
) -> (hermes::TurnHandle, String) {
    let command = format!("rm -rf {}", victim.display());
    let turn = session
        .send(&format!("terminal {}", json!({ "command": command })))
        .await
        .expect("turn");
    (turn, command)
}

#[tokio::test]
async fn an_approval_pauses_the_turn_until_the_application_answers() {
    let hermes = Hermes::local().await.expect("local");
    let session = assistant(&hermes).await;
    let victim = tempfile::tempdir().expect("temp dir");
    let (turn, command) = delete_with_terminal(&session, victim.path()).await;
    let mut events = turn.events();
    let asked = until_event(&mut events, |kind| match kind {
        TurnEventKind::ApprovalRequested {
            command, choices, ..
        } => Some((command.clone(), choices.clone())),
        _ => None,
    })
    .await;
    assert_eq!(asked.0, command);
    assert_eq!(asked.1, ["once", "session", "always", "deny"]);
    assert_eq!(turn.get().await.unwrap().state, TurnState::RequiresAction);
    assert!(victim.path().exists(), "nothing runs before the answer");

    turn.approve(ApprovalChoice::Once).await.expect("approve");
    let result = until_event(&mut events, |kind| match kind {
        TurnEventKind::ToolCompleted { name, result, .. } if name == "terminal" => {
            Some(result.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(result["exit_code"], 0, "{result}");
    assert!(!victim.path().exists(), "approved, so it ran");
    let finished = turn.wait().await.expect("wait");
    assert_eq!(finished.state, TurnState::Completed);
    let err = turn.approve(ApprovalChoice::Once).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Conflict), "{err}");
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn a_question_is_answered_through_the_control_plane() {
    let hermes = Hermes::local().await.expect("local");
    let session = assistant(&hermes).await;
    let turn = session
        .send(r#"clarify {"question": "Which colour?", "choices": ["red", "blue"]}"#)
        .await
        .expect("turn");
    let mut events = turn.events();
    let request_id = until_event(&mut events, |kind| match kind {
        TurnEventKind::ClarifyRequested {
            request_id,
            question,
            choices,
        } => {
            assert_eq!(
                (question.as_str(), choices.as_slice()),
                ("Which colour?", &["red".to_owned(), "blue".to_owned()][..])
            );
            Some(request_id.clone())
        }
        _ => None,
    })
    .await;
    let err = turn.answer("not-the-id", "red").await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Conflict), "{err}");
    turn.answer(&request_id, "blue").await.expect("answer");
    let result = until_event(&mut events, |kind| match kind {
        TurnEventKind::ToolCompleted { result, .. } => Some(result.clone()),
        _ => None,
    })
    .await;
    assert_eq!(result["user_response"], "blue");
    // The answer is logged before what the runtime did after it.
    let log: Vec<TurnEvent> = collect(turn.events()).await;
    let answered = log
        .iter()
        .position(|e| matches!(&e.kind, TurnEventKind::ActionAnswered { .. }))
        .expect("the answer is logged");
    let used = log
        .iter()
        .position(|e| matches!(&e.kind, TurnEventKind::ToolCompleted { .. }))
        .expect("the tool's result");
    assert!(answered < used, "{log:?}");
    assert_eq!(turn.wait().await.unwrap().state, TurnState::Completed);
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn cancelling_a_turn_that_waits_for_approval_denies_it_and_ends_cancelled() {
    let hermes = Hermes::local().await.expect("local");
    let session = assistant(&hermes).await;
    let victim = tempfile::tempdir().expect("temp dir");
    let (turn, _) = delete_with_terminal(&session, victim.path()).await;
    let mut events = turn.events();
    until_event(&mut events, |kind| {
        matches!(kind, TurnEventKind::ApprovalRequested { .. }).then_some(())
    })
    .await;
    turn.cancel().await.expect("cancel");
    let finished = turn.wait().await.expect("wait");
    assert_eq!(finished.state, TurnState::Cancelled, "{finished:?}");
    assert!(
        victim.path().exists(),
        "a cancelled approval never runs the command"
    );
    // Cancelling again is harmless, and the session takes the next turn.
    assert_eq!(turn.cancel().await.unwrap().state, TurnState::Cancelled);
    let next = session.send("still here").await.expect("next turn");
    assert_eq!(
        next.wait().await.unwrap().output.as_deref(),
        Some("You said: still here")
    );
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn dropping_a_local_context_without_close_stops_everything_it_started() {
    let hermes = Hermes::local().await.expect("local");
    let instance = ready_instance(&hermes, "dropped").await;
    let url = hermes.sdk().base_url().to_owned();
    let data_dir = hermes.data_dir().expect("local").to_path_buf();
    assert!(
        data_dir
            .join("instances")
            .join(instance.id().as_str())
            .is_dir()
    );
    drop(instance);
    drop(hermes);

    // The temporary data dir goes at once; the server stops serving shortly after.
    assert!(!data_dir.exists(), "the temporary data dir is removed");
    let http = reqwest::Client::new();
    let mut stopped = false;
    for _ in 0..100 {
        if http.get(format!("{url}/healthz")).send().await.is_err() {
            stopped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(stopped, "the embedded control plane stopped serving");
}

#[tokio::test]
async fn a_profile_can_use_an_openai_compatible_model_and_its_key_is_never_shown() {
    use hermes::types::{ModelConfig, ModelSpec};
    let model = testkit::FakeModel::start().await;
    let hermes = Hermes::local().await.expect("local");
    let (tool, calls) = recording_word_count();
    let tool = hermes.register_tool(tool).await.expect("register");
    let instance = ready_instance(&hermes, "openai").await;
    let key = "sk-test-do-not-show-0123456789";
    let profile = instance
        .profiles()
        .create(
            ProfileSpec::new("assistant")
                .tool(&tool)
                .model(ModelSpec::OpenaiCompatible {
                    base_url: model.base_url().to_owned(),
                    model: "fake-model".to_owned(),
                    api_key: Some(key.to_owned()),
                }),
        )
        .await
        .expect("profile");
    let shown = profile.get().await.expect("get");
    assert_eq!(
        shown.model,
        ModelConfig::OpenaiCompatible {
            base_url: model.base_url().to_owned(),
            model: "fake-model".to_owned(),
            api_key_set: true,
        }
    );
    assert!(!serde_json::to_string(&shown).unwrap().contains(key));

    let session = profile.sessions().create().await.expect("session");
    let plain = session.send("hello model").await.expect("turn");
    assert_eq!(
        plain.wait().await.unwrap().output.as_deref(),
        Some("You said: hello model")
    );
    // The model calls the callback tool through the control plane.
    let with_tool = session
        .send(r#"CALL word_count {"text": "a b c d"}"#)
        .await
        .expect("turn");
    let events = collect(with_tool.events()).await;
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        TurnEventKind::ToolCompleted { name, result, .. } if name == "word_count" && *result == json!(4)
    )));
    assert_eq!(*calls.lock().unwrap(), ["a b c d"]);
    assert_eq!(
        with_tool.get().await.unwrap().output.as_deref(),
        Some(r#"Tool result: {"result": "4"}"#)
    );
    // The key went to the model endpoint, with the model's name.
    let requests = model.streamed_requests();
    assert_eq!(requests.last().unwrap()["model"], "fake-model");
    assert!(
        model
            .authorizations()
            .iter()
            .all(|a| *a == format!("Bearer {key}"))
    );
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn a_turn_resumes_the_stored_session_when_its_live_session_is_gone() {
    use hermes::native::{LiveSessionParams, SessionActiveListParams};
    let hermes = Hermes::local().await.expect("local");
    let session = assistant(&hermes).await;
    let first = session.send("first").await.expect("turn");
    first.wait().await.expect("wait");
    let native_id = session
        .get()
        .await
        .unwrap()
        .native_session_id
        .expect("native");

    // Close the live session behind the control plane's back, as a runtime reaping it would.
    let instance = hermes.instance(&session.get().await.unwrap().instance_id);
    let native = instance.native();
    let active = native
        .api()
        .session()
        .active_list(&SessionActiveListParams::default())
        .await
        .expect("active_list");
    let live = active
        .sessions
        .iter()
        .find(|s| s.session_key == native_id.as_str())
        .expect("live")
        .id
        .clone();
    let closed = native
        .api()
        .session()
        .close(&LiveSessionParams {
            session_id: Some(live),
        })
        .await
        .expect("close");
    assert!(closed.closed);

    let second = session.send("second").await.expect("turn");
    let finished = second.wait().await.expect("wait");
    assert_eq!(finished.state, TurnState::Completed, "{finished:?}");
    assert_eq!(finished.output.as_deref(), Some("You said: second"));
    assert_eq!(
        session.get().await.unwrap().native_session_id,
        Some(native_id)
    );
    hermes.close().await.expect("close");
}

/// Building handles makes no request; `get()` makes one.
#[tokio::test]
async fn handles_are_built_without_a_request() {
    let requests = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(uri.path().to_owned());
            (axum::http::StatusCode::NOT_FOUND, "{}")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let hermes = Hermes::remote(&url, Some("edk_any"));
    let instance_id: hermes::types::InstanceId = "inst_0".parse().unwrap();
    let profile_id: hermes::types::ProfileId = "prof_0".parse().unwrap();
    let profile = hermes.instance(&instance_id).profile(&profile_id);
    let _native = profile.native();
    assert!(
        requests.lock().unwrap().is_empty(),
        "{:?}",
        requests.lock().unwrap()
    );
    let _ = profile.get().await;
    assert_eq!(
        *requests.lock().unwrap(),
        ["/v1/instances/inst_0/profiles/prof_0"]
    );
}

#[tokio::test]
async fn capabilities_say_what_the_control_plane_and_a_runtime_offer() {
    let hermes = Hermes::local().await.expect("local");
    let offered = hermes.capabilities().await.expect("capabilities");
    assert_eq!(offered.native_catalog, "0.19.0");
    for provider in ["embedded", "process", "external"] {
        assert!(
            offered.providers.iter().any(|p| p.as_str() == provider),
            "{offered:?}"
        );
    }
    assert!(
        offered.runtimes.iter().any(|r| r == "hermes-runtime"),
        "{offered:?}"
    );

    let instance = ready_instance(&hermes, "caps").await;
    let runtime = instance
        .capabilities()
        .await
        .expect("instance capabilities");
    assert!(
        runtime.runtime.starts_with("hermes-runtime "),
        "{runtime:?}"
    );
    let has = |method: &str| runtime.native_methods.iter().any(|m| m == method);
    assert!(has("session.create") && has("prompt.submit"), "{runtime:?}");
    assert!(
        !has("plugins.list"),
        "what ours lacks is not listed: {runtime:?}"
    );
    // What is not listed answers Unsupported at once.
    let lacking = instance.native().api().plugins().list().await.unwrap_err();
    assert!(matches!(
        lacking,
        hermes::native::NativeError::Unsupported { .. }
    ));
    hermes.close().await.expect("close");
}

/// The next native event of `connection` that `pick` finds, within 30 s.
/// Reads a turn's streamed pieces and its final text from `connection`, cutting the proxy's
/// sockets once, after the fifth piece: the connection must resume and lose nothing.
async fn read_turn_cutting_once(
    connection: &hermes::GatewayConnection,
    proxy: &testkit::CutProxy,
) -> (String, String) {
    use hermes::native::NativeEvent;
    let mut streamed = String::new();
    let mut deltas = 0;
    loop {
        let event = until_native(connection, |event| match event {
            NativeEvent::MessageDelta(delta) => Some(Ok(delta.text.clone())),
            NativeEvent::MessageComplete(complete) => Some(Err(complete.text.clone())),
            _ => None,
        })
        .await;
        match event {
            Ok(piece) => {
                streamed.push_str(&piece);
                deltas += 1;
                if deltas == 5 {
                    proxy.cut();
                }
            }
            Err(complete) => return (streamed, complete),
        }
    }
}

async fn until_native<T>(
    connection: &hermes::GatewayConnection,
    mut pick: impl FnMut(&hermes::native::NativeEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(event) = connection.next_event().await {
            if let hermes::GatewayEvent::Native(frame) = event
                && let Some(found) = pick(&frame.event)
            {
                return Some(found);
            }
        }
        None
    })
    .await
    .expect("within 30 s");
    found.unwrap_or_else(|| panic!("the connection ended: {:?}", connection.ended()))
}

#[tokio::test]
async fn a_profile_connection_relays_native_events_and_answers_an_approval() {
    use hermes::native::{
        ApprovalRespond, ApprovalRespondParams, NativeEvent, PromptSubmit, PromptSubmitParams,
        SessionCreateParams,
    };
    let hermes = Hermes::local().await.expect("local");
    let instance = ready_instance(&hermes, "gateway").await;
    let profiles = instance.profiles();
    let profile = profiles
        .create(ProfileSpec::new("assistant"))
        .await
        .unwrap();
    let connection = profile.connect().await.expect("connect");
    let created = connection
        .api()
        .session()
        .create(&SessionCreateParams::default())
        .await
        .expect("session");
    assert!(connection.id().is_some(), "the relay named the connection");

    let victim = tempfile::tempdir().expect("temp dir");
    let command = format!("rm -rf {}", victim.path().display());
    let submit = PromptSubmitParams {
        session_id: Some(created.session_id.clone()),
        text: Some(format!("terminal {}", json!({ "command": command }))),
        ..Default::default()
    };
    connection
        .request::<PromptSubmit>(&submit)
        .await
        .expect("prompt");
    let asked = until_native(&connection, |event| match event {
        NativeEvent::ApprovalRequest(request) => Some(request.command.clone()),
        _ => None,
    })
    .await;
    assert_eq!(asked, command);
    let deny = ApprovalRespondParams {
        session_id: Some(created.session_id.clone()),
        choice: Some("deny".to_owned()),
        ..Default::default()
    };
    connection
        .request::<ApprovalRespond>(&deny)
        .await
        .expect("answer");
    until_native(&connection, |event| {
        matches!(event, NativeEvent::MessageComplete(_)).then_some(())
    })
    .await;
    assert!(victim.path().exists(), "denied, so nothing ran");

    // A name outside the pinned catalog never reaches the runtime.
    let unknown = connection.call("no.such_method", json!({})).await;
    assert!(
        matches!(
            unknown,
            Err(hermes::native::NativeError::Unsupported { .. })
        ),
        "{unknown:?}"
    );
    connection.close().await;
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn a_dropped_gateway_socket_resumes_and_delivers_every_event_once() {
    use hermes::native::{PromptSubmit, PromptSubmitParams, SessionCreateParams};
    use hermes::types::{CreateApiKey, ModelSpec, Scope};
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: std::time::Duration::from_millis(15),
        ..Default::default()
    })
    .await;
    let local = Hermes::local().await.expect("local");
    let instance = ready_instance(&local, "resume").await;
    let profile = instance
        .profiles()
        .create(
            ProfileSpec::new("talker").model(ModelSpec::OpenaiCompatible {
                base_url: model.base_url().to_owned(),
                model: "fake-model".to_owned(),
                api_key: Some("sk-fake-0123456789".to_owned()),
            }),
        )
        .await
        .expect("profile");
    let key = local
        .sdk()
        .key_create(&CreateApiKey {
            name: "through a flaky network".to_owned(),
            scope: Scope::Write,
            instances: None,
        })
        .await
        .expect("key");
    // The application reaches the control plane through a network that will drop.
    let target = local.sdk().base_url().trim_start_matches("http://");
    let proxy = testkit::CutProxy::start(target.parse().unwrap()).await;
    let remote = Hermes::remote(&proxy.url(), Some(&key.secret));
    let profile = remote.instance(instance.id()).profile(profile.id());
    let connection = profile.connect().await.expect("connect");
    let created = connection
        .api()
        .session()
        .create(&SessionCreateParams::default())
        .await
        .expect("session");
    let words: Vec<String> = (0..40).map(|n| format!("w{n}")).collect();
    let submit = PromptSubmitParams {
        session_id: Some(created.session_id),
        text: Some(words.join(" ")),
        ..Default::default()
    };
    connection.request::<PromptSubmit>(&submit).await.unwrap();

    let (streamed, complete) = read_turn_cutting_once(&connection, &proxy).await;
    assert!(connection.reconnects() >= 1, "the socket was replaced");
    assert_eq!(streamed, complete, "every piece once, in order");
    assert_eq!(complete, format!("You said: {}", words.join(" ")));
    // Closing the client that opened it ends the connection.
    remote.close().await.expect("close");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while connection.next_event().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the connection ended with its client");
    assert_eq!(connection.ended().as_deref(), Some("closed by this client"));
    local.close().await.expect("close");
}

/// A connection that comes back after a longer outage than the relay could keep frames for is
/// told which frames are lost (`GatewayEvent::Missed`), then goes on.
#[tokio::test]
async fn a_connection_back_after_a_long_outage_is_told_what_it_missed() {
    use hermes::native::{NativeEvent, PromptSubmit, PromptSubmitParams, SessionCreateParams};
    use hermes::types::ModelSpec;
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: std::time::Duration::from_millis(15),
        ..Default::default()
    })
    .await;
    let data = tempfile::tempdir().expect("data dir");
    let mut config = edith_server::ServerConfig::local(data.path().to_path_buf());
    // Room for any one frame (a session's info is the largest), not for a whole reply.
    config.limits.relay_kept_bytes = 4000;
    let server = edith_server::start(config).await.expect("control plane");
    let key = std::fs::read_to_string(data.path().join(edith_server::ADMIN_KEY_FILE)).unwrap();
    let direct = Hermes::remote(server.url(), Some(key.trim()));
    let instance = ready_instance(&direct, "outage").await;
    let profile = instance
        .profiles()
        .create(
            ProfileSpec::new("talker").model(ModelSpec::OpenaiCompatible {
                base_url: model.base_url().to_owned(),
                model: "fake-model".to_owned(),
                api_key: Some("sk-fake-0123456789".to_owned()),
            }),
        )
        .await
        .expect("profile");
    let target = server.url().trim_start_matches("http://").to_owned();
    let proxy = testkit::CutProxy::start(target.parse().unwrap()).await;
    let remote = Hermes::remote(&proxy.url(), Some(key.trim()));
    let connection = remote
        .instance(instance.id())
        .profile(profile.id())
        .connect()
        .await
        .expect("connect");
    let created = connection
        .api()
        .session()
        .create(&SessionCreateParams::default())
        .await
        .expect("session");
    let words: Vec<String> = (0..60).map(|n| format!("w{n}")).collect();
    let submit = PromptSubmitParams {
        session_id: Some(created.session_id.clone()),
        text: Some(words.join(" ")),
        ..Default::default()
    };
    connection.request::<PromptSubmit>(&submit).await.unwrap();
    until_native(&connection, |event| {
        matches!(event, NativeEvent::MessageDelta(_)).then_some(())
    })
    .await;
    // Down for longer than the rest of the reply takes: about 10 KB of frames.
    proxy.cut_for(std::time::Duration::from_secs(3));
    let missed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(event) = connection.next_event().await {
            if let hermes::GatewayEvent::Missed { first, last } = event {
                return Some((first, last));
            }
        }
        None
    })
    .await
    .expect("within 30 s")
    .unwrap_or_else(|| panic!("the connection ended: {:?}", connection.ended()));
    assert!(missed.0 <= missed.1, "{missed:?}");
    assert!(connection.reconnects() >= 1);
    // The connection goes on: the next turn is seen whole.
    let submit = PromptSubmitParams {
        text: Some("after the outage".to_owned()),
        ..submit
    };
    connection.request::<PromptSubmit>(&submit).await.unwrap();
    // (The first turn's end may come first, if the relay still had it.)
    until_native(&connection, |event| match event {
        NativeEvent::MessageComplete(complete) if complete.text.contains("after the outage") => {
            Some(())
        }
        _ => None,
    })
    .await;
    connection.close().await;
    remote.close().await.expect("close");
    direct.close().await.expect("close");
    server.shutdown().await;
}

#[tokio::test]
async fn an_instances_desktop_routes_are_reached_through_the_control_plane_with_its_keys() {
    use hermes::native::desktop::{FsReadTextQuery, SessionListQuery, SessionMessagesQuery};
    use hermes::types::{CreateApiKey, Scope};
    let hermes = Hermes::local().await.expect("local");
    let instance = ready_instance(&hermes, "desk").await;
    let handle = instance
        .profiles()
        .create(ProfileSpec::new("assistant"))
        .await
        .expect("profile");
    let session = handle.sessions().create().await.expect("session");
    let turn = session.send("hello desktop").await.expect("turn");
    assert_eq!(turn.wait().await.expect("wait").state, TurnState::Completed);
    let profile = handle.get().await.expect("profile");

    // The admin key of the local context: the profile's native sessions, as the runtime has them.
    let desktop = instance.desktop().for_profile(&profile.native_name);
    let page = desktop
        .session_list(&SessionListQuery::default())
        .await
        .expect("sessions");
    assert_eq!(page.total, 1, "{page:?}");
    let stored = &page.sessions[0].columns.id;
    let messages = desktop
        .session_messages(stored, &SessionMessagesQuery::default())
        .await
        .expect("messages");
    assert_eq!(messages.messages[0].content, json!("hello desktop"));
    // The runtime's workspace is its own directory, not its home (whose config holds keys).
    let config = desktop
        .fs_read_text(&FsReadTextQuery {
            path: "../config.yaml".to_owned(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&config, Error::Runtime { status: 403, .. }),
        "{config:?}"
    );
    // What the instance's runtime serves of the Desktop routes, found through the control
    // plane: every group of our runtime.
    let offered = instance
        .desktop()
        .capabilities()
        .await
        .expect("capabilities");
    assert_eq!(
        offered.runtime.as_deref(),
        Some("hermes-runtime"),
        "{offered:?}"
    );
    for group in hermes::native::desktop::RouteGroup::ALL {
        assert!(offered.has(*group), "{group:?}: {offered:?}");
    }

    // A read key reads sessions, but neither files nor changes.
    let read = hermes
        .sdk()
        .key_create(&CreateApiKey {
            name: "reader".to_owned(),
            scope: Scope::Read,
            instances: None,
        })
        .await
        .expect("key");
    let reader = Hermes::remote(hermes.sdk().base_url(), Some(&read.secret));
    let as_reader = reader.instance(instance.id()).desktop();
    assert_eq!(
        as_reader
            .session_list(&SessionListQuery {
                profile: Some(profile.native_name.clone()),
                ..Default::default()
            })
            .await
            .expect("read")
            .total,
        1
    );
    for refused in [
        as_reader
            .fs_read_text(&FsReadTextQuery {
                path: "notes.txt".to_owned(),
            })
            .await
            .unwrap_err(),
        as_reader
            .git_status(&hermes::native::desktop::GitStatusQuery {
                path: ".".to_owned(),
            })
            .await
            .unwrap_err(),
        as_reader.profile_delete("anything").await.unwrap_err(),
    ] {
        assert_eq!(refused.code(), Some(ErrorCode::Forbidden), "{refused:?}");
    }

    // A write key changes sessions, but files, git and the configuration (which holds
    // credentials) are the admin's.
    let write = hermes
        .sdk()
        .key_create(&CreateApiKey {
            name: "writer".to_owned(),
            scope: Scope::Write,
            instances: None,
        })
        .await
        .expect("key");
    let writer = Hermes::remote(hermes.sdk().base_url(), Some(&write.secret));
    let as_writer = writer.instance(instance.id()).desktop();
    for refused in [
        as_writer
            .fs_read_text(&FsReadTextQuery {
                path: "notes.txt".to_owned(),
            })
            .await
            .unwrap_err(),
        as_writer
            .git_status(&hermes::native::desktop::GitStatusQuery {
                path: ".".to_owned(),
            })
            .await
            .unwrap_err(),
        as_writer
            .config_get(&hermes::native::desktop::ConfigGetQuery::default())
            .await
            .unwrap_err(),
    ] {
        assert_eq!(refused.code(), Some(ErrorCode::Forbidden), "{refused:?}");
    }

    // Routes beyond the contract are not forwarded, also when dressed up as one of its routes.
    for beyond in [
        "api/env",
        "api/sessions/%2e%2e/messages",
        "api/sessions/..%2Fenv",
    ] {
        let raw = reqwest::Client::new()
            .get(format!(
                "{}/v1/instances/{}/desktop/{beyond}",
                hermes.sdk().base_url(),
                instance.id()
            ))
            .bearer_auth(&read.secret)
            .send()
            .await
            .expect("request");
        assert_eq!(raw.status(), 404, "{beyond}");
    }
    // Plugin routes are not forwarded: the client says so at once.
    assert!(matches!(
        as_reader.plugin_get("kanban", "board").await,
        Err(Error::Unsupported { .. })
    ));
    reader.close().await.expect("close");
    assert!(matches!(
        as_reader.session_list(&SessionListQuery::default()).await,
        Err(Error::Closed)
    ));
    hermes.close().await.expect("close");
}

/// Every resource changes and goes through its handle: a profile's model and a session's title,
/// a tool updated, detached and deleted (refused while a profile has it), a tool host moved and
/// deleted, a session and a profile deleted.
#[tokio::test]
async fn instances_are_listed_by_state_and_label_through_the_sdk() {
    use hermes::types::{CreateInstance, InstanceFilter};
    let hermes = Hermes::local().await.expect("local");
    let mut spec = CreateInstance::named("labelled");
    spec.labels.insert("team".to_owned(), "blue".to_owned());
    let labelled = hermes
        .instances()
        .create_with(&spec)
        .await
        .expect("create")
        .ready()
        .await
        .expect("ready");
    let plain = ready_instance(&hermes, "plain").await;
    let ids = |page: hermes::types::Page<hermes::types::Instance>| -> Vec<_> {
        page.items.into_iter().map(|i| i.id).collect()
    };
    let page = Default::default();
    let blue = InstanceFilter {
        label: Some("team=blue".to_owned()),
        ..Default::default()
    };
    let listed = hermes.instances().list_where(&blue, &page).await.unwrap();
    assert_eq!(ids(listed), [labelled.id().clone()]);
    let ready = InstanceFilter {
        state: Some(InstanceState::Ready),
        ..Default::default()
    };
    let mut listed = ids(hermes.instances().list_where(&ready, &page).await.unwrap());
    listed.sort();
    let mut both = vec![labelled.id().clone(), plain.id().clone()];
    both.sort();
    assert_eq!(listed, both);
    let failed = InstanceFilter {
        state: Some(InstanceState::Failed),
        ..Default::default()
    };
    assert!(ids(hermes.instances().list_where(&failed, &page).await.unwrap()).is_empty());
    let bad = InstanceFilter {
        label: Some("no equals sign".to_owned()),
        ..Default::default()
    };
    let refused = hermes
        .instances()
        .list_where(&bad, &page)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::InvalidRequest), "{refused}");
    hermes.close().await.expect("close");
}

#[tokio::test]
async fn resources_are_changed_and_deleted_through_their_handles() {
    use hermes::types::{ModelConfig, ModelSpec, RegisterToolHost, UpdateTool, UpdateToolHost};
    let hermes = Hermes::local().await.expect("local");
    let (tool, _) = recording_word_count();
    let registered = hermes.register_tool(tool).await.expect("tool");
    let instance = ready_instance(&hermes, "resources").await;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant").tool(&registered))
        .await
        .expect("profile");

    let tool = hermes.tool(&registered.id);
    let in_use = tool.delete().await.unwrap_err();
    assert_eq!(in_use.code(), Some(ErrorCode::Conflict), "{in_use}");
    assert!(
        in_use.to_string().contains(profile.id().as_str()),
        "{in_use}"
    );
    let change = UpdateTool {
        description: Some("Counts the words again".to_owned()),
        input_schema: None,
    };
    assert_eq!(
        tool.update(&change).await.expect("update").description,
        "Counts the words again"
    );
    assert_eq!(
        tool.get().await.unwrap().description,
        "Counts the words again"
    );
    let detached = profile.detach_tool(&registered.id).await.expect("detach");
    assert!(!detached.tools.contains(&registered.id), "{detached:?}");
    tool.delete().await.expect("delete the tool");
    assert_eq!(
        tool.get().await.unwrap_err().code(),
        Some(ErrorCode::NotFound)
    );

    let host = hermes
        .sdk()
        .tool_host_register(&RegisterToolHost {
            url: "http://127.0.0.1:9/mcp".to_owned(),
            secret: "a-secret-long-enough-for-a-host".to_owned(),
        })
        .await
        .expect("host");
    let second = hermes
        .sdk()
        .tool_host_register(&RegisterToolHost {
            url: "http://127.0.0.1:11/mcp".to_owned(),
            secret: "another-secret-long-enough-for-a-host".to_owned(),
        })
        .await
        .expect("a second host");
    // One host a page: the pages follow one another in the order the hosts were registered
    // (the context's own host first), and no page carries a secret.
    let mut listed = Vec::new();
    let mut page = hermes::PageRequest {
        cursor: None,
        limit: Some(1),
    };
    loop {
        let one = hermes.tool_hosts(&page).await.expect("a page of hosts");
        assert_eq!(one.items.len(), 1, "{one:?}");
        let shown = serde_json::to_string(&one.items).unwrap();
        assert!(!shown.contains("secret-long-enough"), "{shown}");
        listed.extend(one.items.into_iter().map(|h| h.id));
        match one.next_cursor {
            Some(cursor) => page.cursor = Some(cursor),
            None => break,
        }
    }
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[1..], [host.id.clone(), second.id.clone()]);
    hermes.tool_host(&second.id).delete().await.expect("delete");
    let left = hermes.tool_hosts(&Default::default()).await.unwrap();
    assert!(!left.items.iter().any(|h| h.id == second.id), "{left:?}");

    let host = hermes.tool_host(&host.id);
    let moved = UpdateToolHost {
        url: Some("http://127.0.0.1:10/mcp".to_owned()),
        secret: None,
    };
    host.update(&moved).await.expect("move");
    assert_eq!(host.get().await.unwrap().url, "http://127.0.0.1:10/mcp");
    host.delete().await.expect("delete the host");
    assert_eq!(
        host.get().await.unwrap_err().code(),
        Some(ErrorCode::NotFound)
    );

    let endpoint = ModelSpec::OpenaiCompatible {
        base_url: "http://127.0.0.1:9/v1".to_owned(),
        model: "elsewhere".to_owned(),
        api_key: None,
    };
    let changed = profile.set_model(endpoint).await.expect("model");
    assert!(
        matches!(&changed.model, ModelConfig::OpenaiCompatible { model, api_key_set: false, .. } if model == "elsewhere"),
        "{changed:?}"
    );
    let session = profile.sessions().create().await.expect("session");
    assert_eq!(
        session
            .set_title("Plans")
            .await
            .expect("title")
            .title
            .as_deref(),
        Some("Plans")
    );
    session.delete().await.expect("delete the session");
    assert_eq!(
        session.get().await.unwrap_err().code(),
        Some(ErrorCode::NotFound)
    );
    profile.delete().await.expect("delete the profile");
    assert_eq!(
        profile.get().await.unwrap_err().code(),
        Some(ErrorCode::NotFound)
    );
    hermes.close().await.expect("close");
}

/// A reply that does not read as what the contract says is a decode error that keeps the body
/// as it came; an error reply that is not a problem document keeps it too.
#[tokio::test]
async fn replies_that_do_not_decode_keep_their_body() {
    let app = axum::Router::new()
        .route(
            "/v1/instances/inst_0",
            axum::routing::get(|| async { (axum::http::StatusCode::OK, "<html>a proxy</html>") }),
        )
        .fallback(|| async { (axum::http::StatusCode::BAD_GATEWAY, "upstream went away") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let hermes = Hermes::remote(&url, Some("edk_any"));
    let id: hermes::types::InstanceId = "inst_0".parse().unwrap();
    let decoded = hermes.instance(&id).get().await.unwrap_err();
    assert!(
        matches!(&decoded, Error::Decode { body, .. } if body == "<html>a proxy</html>"),
        "{decoded:?}"
    );
    let other: hermes::types::InstanceId = "inst_1".parse().unwrap();
    let refused = hermes.instance(&other).get().await.unwrap_err();
    assert!(
        format!("{refused:?}").contains("upstream went away"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn errors_tell_a_refusal_from_a_broken_transport_and_say_what_may_be_retried() {
    use hermes::types::{ErrorCode, Problem};
    let problem = |code: ErrorCode| {
        let problem = Problem::new(code, "said by the stand-in");
        (
            axum::http::StatusCode::from_u16(problem.status).unwrap(),
            [("content-type", "application/problem+json")],
            serde_json::to_string(&problem).unwrap(),
        )
    };
    let app = axum::Router::new()
        .route(
            "/v1/instances/inst_0",
            axum::routing::get(move || async move { problem(ErrorCode::RuntimeUnavailable) }),
        )
        .route(
            "/v1/instances/inst_1",
            axum::routing::get(move || async move { problem(ErrorCode::NotFound) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let hermes = Hermes::remote(&url, Some("edk_any"));

    let busy = hermes.instance(&"inst_0".parse().unwrap()).get().await;
    let busy = busy.unwrap_err();
    assert!(
        matches!(
            &busy,
            Error::Api {
                status: 503,
                retryable: true,
                ..
            }
        ),
        "{busy:?}"
    );
    assert!(busy.is_retryable());
    assert_eq!(busy.code(), Some(ErrorCode::RuntimeUnavailable));
    let missing = hermes.instance(&"inst_1".parse().unwrap()).get().await;
    let missing = missing.unwrap_err();
    assert!(
        matches!(
            &missing,
            Error::Api {
                status: 404,
                retryable: false,
                ..
            }
        ),
        "{missing:?}"
    );
    assert!(!missing.is_retryable());

    // Nothing listens: the transport broke, and a later attempt may find the server.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let gone = Hermes::remote(&nowhere, Some("edk_any"))
        .instance(&"inst_0".parse().unwrap())
        .get()
        .await
        .unwrap_err();
    assert!(matches!(&gone, Error::Transport(_)), "{gone:?}");
    assert!(gone.is_retryable());
    assert_eq!(gone.code(), None);
}
