//! The SDK's journeys on the three runtimes the control plane drives: the runtime it embeds,
//! our `hermes-runtime` as a `process` instance, and the real `hermes serve` 0.19.0 as a
//! `process` instance. Every target talks to the same fake OpenAI-compatible model, so each
//! journey asserts the same thing on all three; where a runtime differs, the assertion says so
//! and `docs/runtimes.md` names the test.
//!
//! Each journey is a module with one test per target: `…::embedded`, `…::process` and
//! `…::hermes` (the last needs the real Hermes, which `scripts/test` installs; a plain
//! `cargo nextest run` leaves it out).

use std::future::Future;
use std::time::Duration;

use hermes::native::SessionListParams;
use hermes::types::{
    ApprovalChoice, CreateInstance, ModelSpec, NativeSessionId, ProviderKind, TurnEvent,
    TurnEventKind, TurnState,
};
use hermes::{Hermes, InstanceHandle, ProfileSpec, RuntimeCommand, SessionHandle, Tool};
use serde_json::json;
use testkit::FakeModel;

use super::{collect, recording_word_count, until_event};

/// How long one step of a journey may take before it is reported as hanging. The real Hermes
/// takes a second or two to start and answers a turn in well under that.
const STEP: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Embedded,
    Process,
    Hermes,
}

/// `step` within [`STEP`], or a panic naming what hung.
async fn bounded<T>(what: &str, step: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, step)
        .await
        .unwrap_or_else(|_| panic!("{what}: hanging, no answer within {STEP:?}"))
}

/// A local context, a ready instance on `target`, and the model its profiles use.
struct Journey {
    hermes: Hermes,
    instance: InstanceHandle,
    model: FakeModel,
}

impl Journey {
    async fn start(target: Target) -> Self {
        Self::start_with(target, FakeModel::start().await).await
    }

    /// A journey whose profiles use `model`.
    async fn start_with(target: Target, model: FakeModel) -> Self {
        let mut local = Hermes::local_builder();
        if target == Target::Hermes {
            let (program, args) = testkit::real_hermes_command();
            local = local.runtime("hermes", RuntimeCommand { program, args });
        }
        let hermes = local.start().await.expect("local context");
        let mut spec = CreateInstance::named("journey");
        match target {
            Target::Embedded => {}
            Target::Process => {
                spec.provider = ProviderKind::Process;
                spec.runtime = Some(edith_server::BUILTIN_RUNTIME.to_owned());
            }
            Target::Hermes => {
                spec.provider = ProviderKind::Process;
                spec.runtime = Some("hermes".to_owned());
            }
        }
        let creation = hermes.instances().create_with(&spec).await.expect("create");
        let instance = bounded("provisioning", creation.ready())
            .await
            .expect("ready");
        Self {
            hermes,
            instance,
            model,
        }
    }

    /// The `default` profile with the fake model and `tools`. The real Hermes 0.19 offers
    /// callback tools only on its root profile, which is `default` (see `docs/runtimes.md`),
    /// so every journey uses that one, on every target.
    async fn profile(&self, tools: &[&hermes::types::Tool]) -> hermes::ProfileHandle {
        let mut spec = ProfileSpec::new("default").model(ModelSpec::OpenaiCompatible {
            base_url: self.model.base_url().to_owned(),
            model: "fake-model".to_owned(),
            api_key: Some("sk-fake-journey-0123".to_owned()),
        });
        for tool in tools {
            spec = spec.tool(tool);
        }
        self.instance
            .profiles()
            .create(spec)
            .await
            .expect("profile")
    }

    async fn session(&self) -> SessionHandle {
        self.profile(&[])
            .await
            .sessions()
            .create()
            .await
            .expect("session")
    }

    async fn close(self) {
        bounded("close", self.hermes.close()).await.expect("close");
    }
}

/// The events of a turn to its end, bounded.
async fn all_events(turn: &hermes::TurnHandle) -> Vec<TurnEvent> {
    bounded("the turn's events", collect(turn.events())).await
}

/// The kinds of `events` with each run of deltas kept as one (runtimes cut text differently).
fn shape(events: &[TurnEvent]) -> Vec<&'static str> {
    let mut shape: Vec<&'static str> = Vec::new();
    for event in events {
        let name = match &event.kind {
            TurnEventKind::TurnStarted => "turn.started",
            TurnEventKind::MessageStarted => "message.started",
            TurnEventKind::MessageDelta { .. } => "message.delta",
            TurnEventKind::ToolStarted { .. } => "tool.started",
            TurnEventKind::ToolCompleted { .. } => "tool.completed",
            TurnEventKind::MessageCompleted { .. } => "message.completed",
            TurnEventKind::ApprovalRequested { .. } => "approval.requested",
            TurnEventKind::ClarifyRequested { .. } => "clarify.requested",
            TurnEventKind::ActionAnswered { .. } => "action.answered",
            TurnEventKind::Error { .. } => "error",
            TurnEventKind::TurnFinished { .. } => "turn.finished",
        };
        if !(name == "message.delta" && shape.last() == Some(&name)) {
            shape.push(name);
        }
    }
    shape
}

/// The result of the turn's completed call of `tool`.
fn completed_tool(target: Target, log: &[TurnEvent], tool: &str) -> serde_json::Value {
    log.iter()
        .find_map(|e| match &e.kind {
            TurnEventKind::ToolCompleted { name, result, .. } if name == tool => {
                Some(result.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{target:?}: no completed {tool} call: {log:#?}"))
}

fn streamed_text(events: &[TurnEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            TurnEventKind::MessageDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// One module per journey, with a test for each target.
macro_rules! on_every_target {
    ($journey:ident) => {
        mod $journey {
            use super::Target;

            #[tokio::test]
            async fn embedded() {
                super::$journey(Target::Embedded).await;
            }

            #[tokio::test]
            async fn process() {
                super::$journey(Target::Process).await;
            }

            #[tokio::test]
            async fn hermes() {
                super::$journey(Target::Hermes).await;
            }
        }
    };
}

on_every_target!(a_callback_tool_is_called_through_the_control_plane);
on_every_target!(a_reply_streams_in_order_and_resumes_after_any_event);
on_every_target!(an_approval_pauses_the_turn_until_the_application_answers);
on_every_target!(a_question_is_answered_through_the_control_plane);
on_every_target!(a_running_turn_is_cancelled_and_the_session_goes_on);
on_every_target!(a_stored_native_session_is_listed_and_resumed);
on_every_target!(a_profile_connection_answers_an_approval_and_a_question);
on_every_target!(the_runtimes_desktop_routes_are_found_through_the_control_plane);
on_every_target!(a_profile_connection_comes_back_after_its_socket_drops);

/// The model calls the application's `word_count`, which runs in this process, reached by the
/// runtime through the control plane's MCP endpoint and the context's tool host.
async fn a_callback_tool_is_called_through_the_control_plane(target: Target) {
    let journey = Journey::start(target).await;
    let (tool, calls): (Tool, _) = recording_word_count();
    let tool = journey.hermes.register_tool(tool).await.expect("register");
    let profile = journey.profile(&[&tool]).await;
    let session = profile.sessions().create().await.expect("session");
    let turn = session
        .send(r#"CALL word_count {"text": "one two three four"}"#)
        .await
        .expect("turn");
    let events = all_events(&turn).await;
    assert_eq!(
        shape(&events),
        [
            "turn.started",
            "message.started",
            "tool.started",
            "tool.completed",
            "message.delta",
            "message.completed",
            "turn.finished"
        ],
        "{target:?}: {events:#?}"
    );
    let (started, completed) = match (&events[2].kind, &events[3].kind) {
        (
            TurnEventKind::ToolStarted { tool_call_id, name },
            TurnEventKind::ToolCompleted {
                tool_call_id: completed_id,
                name: completed_name,
                args,
                result,
            },
        ) => (
            (tool_call_id.clone(), name.clone()),
            (completed_id.clone(), completed_name.clone(), args, result),
        ),
        other => panic!("{target:?}: {other:?}"),
    };
    // Named as the application registered it, whatever the runtime calls it inside.
    assert_eq!(started.1, "word_count", "{target:?}");
    assert_eq!(completed.0, started.0, "{target:?}: one call, one id");
    assert_eq!(completed.1, "word_count", "{target:?}");
    assert_eq!(
        *completed.2,
        json!({"text": "one two three four"}),
        "{target:?}"
    );
    assert_eq!(*completed.3, json!(4), "{target:?}: the tool's own value");
    assert_eq!(*calls.lock().unwrap(), ["one two three four"], "{target:?}");

    let finished = turn.get().await.expect("turn");
    assert_eq!(finished.state, TurnState::Completed, "{target:?}");
    let output = finished.output.expect("output");
    assert_eq!(output, r#"Tool result: {"result": "4"}"#, "{target:?}");
    // As Hermes streams it: text after a tool call starts with a paragraph break, which the
    // completed message and the turn's output leave out.
    assert_eq!(
        streamed_text(&events),
        format!("\n\n{output}"),
        "{target:?}"
    );
    let completed = &events[events.len() - 2];
    assert!(
        matches!(&completed.kind, TurnEventKind::MessageCompleted { text, .. } if *text == output),
        "{target:?}: {completed:?}"
    );
    journey.close().await;
}

/// A plain reply arrives in several pieces, numbered from 1 without gaps; a reader that
/// resumes after any event gets exactly the rest; a second turn, streamed in the request that
/// starts it, continues the same native session.
async fn a_reply_streams_in_order_and_resumes_after_any_event(target: Target) {
    let journey = Journey::start(target).await;
    let session = journey.session().await;
    let turn = session
        .send("hello from the application")
        .await
        .expect("turn");
    let events = all_events(&turn).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        shape(&events),
        [
            "turn.started",
            "message.started",
            "message.delta",
            "message.completed",
            "turn.finished"
        ],
        "{target:?}: {events:#?}"
    );
    let deltas = events
        .iter()
        .filter(|e| matches!(e.kind, TurnEventKind::MessageDelta { .. }))
        .count();
    assert!(deltas > 1, "{target:?}: streamed in pieces, not at the end");
    assert_eq!(
        streamed_text(&events),
        "You said: hello from the application"
    );
    assert_eq!(
        events.last().map(|e| &e.kind),
        Some(&TurnEventKind::TurnFinished {
            state: TurnState::Completed,
            output: Some("You said: hello from the application".into()),
            error: None,
        }),
        "{target:?}"
    );
    for after in [1, 3, events.len() as u64 - 1] {
        let tail = bounded("a resumed stream", collect(turn.events_after(after))).await;
        assert_eq!(tail, events[after as usize..], "{target:?}: after {after}");
    }

    let native = session.get().await.expect("session").native_session_id;
    assert!(native.is_some(), "{target:?}: learned at the first turn");
    // The second turn streamed in the request that starts it: the same log.
    let streamed = bounded("the second turn, streamed", async {
        collect(session.stream("again").await.expect("turn")).await
    })
    .await;
    let second = session.turn(&streamed[0].turn_id);
    assert_eq!(streamed, all_events(&second).await, "{target:?}");
    assert_eq!(shape(&streamed).last(), Some(&"turn.finished"));
    let second = second.get().await.expect("turn");
    assert_eq!(second.output.as_deref(), Some("You said: again"));
    assert_eq!(
        session.get().await.expect("session").native_session_id,
        native
    );
    let history = journey.model.streamed_requests().last().unwrap()["messages"].to_string();
    assert!(
        history.contains("hello from the application"),
        "{target:?}: the second turn continues the first's conversation: {history}"
    );
    journey.close().await;
}

/// Starts a turn whose model runs `rm -rf <victim>` through the runtime's `terminal` tool.
async fn delete_with_terminal(
    session: &SessionHandle,
    victim: &std::path::Path,
) -> (hermes::TurnHandle, String) {
    let command = format!("rm -rf {}", victim.display());
    let input = format!("CALL terminal {}", json!({ "command": command }));
    (session.send(&input).await.expect("turn"), command)
}

/// A dangerous command waits for the application's answer; approved once, it runs.
async fn an_approval_pauses_the_turn_until_the_application_answers(target: Target) {
    let journey = Journey::start(target).await;
    let session = journey.session().await;
    let victim = tempfile::tempdir().expect("temp dir");
    let (turn, command) = delete_with_terminal(&session, victim.path()).await;
    let mut events = turn.events();
    let asked = bounded(
        "the approval request",
        until_event(&mut events, |kind| match kind {
            TurnEventKind::ApprovalRequested {
                command, choices, ..
            } => Some((command.clone(), choices.clone())),
            _ => None,
        }),
    )
    .await;
    assert_eq!(asked.0, command, "{target:?}");
    assert_eq!(asked.1, ["once", "session", "always", "deny"], "{target:?}");
    assert_eq!(turn.get().await.unwrap().state, TurnState::RequiresAction);
    assert!(
        victim.path().exists(),
        "{target:?}: nothing runs before the answer"
    );

    turn.approve(ApprovalChoice::Once).await.expect("approve");
    let finished = bounded("the approved turn", turn.wait())
        .await
        .expect("wait");
    assert_eq!(
        finished.state,
        TurnState::Completed,
        "{target:?}: {finished:?}"
    );
    assert!(!victim.path().exists(), "{target:?}: approved, so it ran");
    let log = all_events(&turn).await;
    assert!(
        log.iter()
            .any(|e| matches!(&e.kind, TurnEventKind::ActionAnswered { .. })),
        "{target:?}: {log:#?}"
    );
    let result = completed_tool(target, &log, "terminal");
    assert_eq!(result["exit_code"], 0, "{target:?}: {result}");
    journey.close().await;
}

/// The agent's question reaches the application, whose answer reaches the agent.
async fn a_question_is_answered_through_the_control_plane(target: Target) {
    let journey = Journey::start(target).await;
    let session = journey.session().await;
    let turn = session
        .send(r#"CALL clarify {"question": "Which colour?", "choices": ["red", "blue"]}"#)
        .await
        .expect("turn");
    let mut events = turn.events();
    let (request_id, question, choices) = bounded(
        "the question",
        until_event(&mut events, |kind| match kind {
            TurnEventKind::ClarifyRequested {
                request_id,
                question,
                choices,
            } => Some((request_id.clone(), question.clone(), choices.clone())),
            _ => None,
        }),
    )
    .await;
    assert_eq!(question, "Which colour?", "{target:?}");
    assert_eq!(choices, ["red", "blue"], "{target:?}");
    assert_eq!(turn.get().await.unwrap().state, TurnState::RequiresAction);
    turn.answer(&request_id, "blue").await.expect("answer");
    let finished = bounded("the answered turn", turn.wait())
        .await
        .expect("wait");
    assert_eq!(
        finished.state,
        TurnState::Completed,
        "{target:?}: {finished:?}"
    );
    let log = all_events(&turn).await;
    let result = completed_tool(target, &log, "clarify");
    assert_eq!(result["user_response"], "blue", "{target:?}: {result}");
    journey.close().await;
}

/// A turn cancelled while its reply streams ends `cancelled`; the session takes the next one.
async fn a_running_turn_is_cancelled_and_the_session_goes_on(target: Target) {
    let journey = Journey::start(target).await;
    let session = journey.session().await;
    let turn = session.send("SLOW").await.expect("turn");
    let mut events = turn.events();
    bounded(
        "the first piece",
        until_event(&mut events, |kind| {
            matches!(kind, TurnEventKind::MessageDelta { .. }).then_some(())
        }),
    )
    .await;
    turn.cancel().await.expect("cancel");
    let finished = bounded("the cancelled turn", turn.wait())
        .await
        .expect("wait");
    assert_eq!(
        finished.state,
        TurnState::Cancelled,
        "{target:?}: {finished:?}"
    );
    let log = all_events(&turn).await;
    assert!(
        matches!(
            log.last().map(|e| &e.kind),
            Some(TurnEventKind::TurnFinished {
                state: TurnState::Cancelled,
                ..
            })
        ),
        "{target:?}: {log:#?}"
    );
    assert!(
        streamed_text(&log).len() < "tick ".len() * 60,
        "{target:?}: stopped before the model's last piece"
    );
    let next = session.send("still here").await.expect("next turn");
    let next = bounded("the next turn", next.wait()).await.expect("wait");
    assert_eq!(
        next.output.as_deref(),
        Some("You said: still here"),
        "{target:?}"
    );
    journey.close().await;
}

/// The runtime's stored sessions, listed natively through the profile; one resumed in a new
/// control-plane session, whose next turn the model answers with the earlier conversation.
async fn a_stored_native_session_is_listed_and_resumed(target: Target) {
    let journey = Journey::start(target).await;
    let profile = journey.profile(&[]).await;
    let first = profile.sessions().create().await.expect("session");
    let said = first.send("my name is Ada").await.expect("turn");
    bounded("the first turn", said.wait()).await.expect("wait");
    let native = first
        .get()
        .await
        .expect("session")
        .native_session_id
        .expect("native id");

    let listed = profile
        .native()
        .api()
        .session()
        .list(&SessionListParams::default())
        .await
        .expect("native list");
    assert!(
        listed
            .sessions
            .iter()
            .any(|s| s.id.as_str() == native.as_str()),
        "{target:?}: {native:?} in {listed:?}"
    );

    let resumed = profile
        .sessions()
        .resume_native(&native)
        .await
        .expect("resume");
    assert_ne!(resumed.id(), first.id());
    let asked = resumed.send("what is my name?").await.expect("turn");
    let asked = bounded("the resumed turn", asked.wait())
        .await
        .expect("wait");
    assert_eq!(asked.state, TurnState::Completed, "{target:?}: {asked:?}");
    let history = journey.model.streamed_requests().last().unwrap()["messages"].to_string();
    assert!(
        history.contains("my name is Ada") && history.contains("what is my name?"),
        "{target:?}: the model saw the earlier conversation: {history}"
    );
    let unknown = profile
        .sessions()
        .resume_native(&NativeSessionId::new("20200101_000000_abcdef"))
        .await
        .unwrap_err();
    assert_eq!(
        unknown.code(),
        Some(hermes::types::ErrorCode::NotFound),
        "{target:?}: {unknown}"
    );
    journey.close().await;
}

/// The application on a persistent connection to its profile's gateway (`profile.connect()`):
/// a native session of its own, the agent's approval and question answered there, typed events
/// to the end of each turn.
async fn a_profile_connection_answers_an_approval_and_a_question(target: Target) {
    use hermes::native::{
        ApprovalRespond, ApprovalRespondParams, ClarifyRespond, ClarifyRespondParams, NativeEvent,
        PromptSubmit, PromptSubmitParams, SessionCreateParams,
    };
    let journey = Journey::start(target).await;
    let profile = journey.profile(&[]).await;
    let connection = bounded("connect", profile.connect())
        .await
        .expect("connect");
    let created = bounded(
        "a native session",
        connection
            .api()
            .session()
            .create(&SessionCreateParams::default()),
    )
    .await
    .expect("session");
    let submit = |text: String| PromptSubmitParams {
        session_id: Some(created.session_id.clone()),
        text: Some(text),
        ..Default::default()
    };

    let victim = tempfile::tempdir().expect("temp dir");
    let command = format!("rm -rf {}", victim.path().display());
    let input = format!("CALL terminal {}", json!({ "command": command }));
    bounded("prompt", connection.request::<PromptSubmit>(&submit(input)))
        .await
        .expect("prompt");
    let asked = super::until_native(&connection, |event| match event {
        NativeEvent::ApprovalRequest(request) => Some(request.command.clone()),
        _ => None,
    })
    .await;
    assert_eq!(asked, command, "{target:?}");
    let deny = ApprovalRespondParams {
        session_id: Some(created.session_id.clone()),
        choice: Some("deny".to_owned()),
        ..Default::default()
    };
    bounded("deny", connection.request::<ApprovalRespond>(&deny))
        .await
        .expect("deny");
    super::until_native(&connection, |event| {
        matches!(event, NativeEvent::MessageComplete(_)).then_some(())
    })
    .await;
    assert!(victim.path().exists(), "{target:?}: denied, so nothing ran");

    let input = r#"CALL clarify {"question": "Which colour?", "choices": ["red", "blue"]}"#;
    bounded(
        "prompt",
        connection.request::<PromptSubmit>(&submit(input.to_owned())),
    )
    .await
    .expect("prompt");
    let request_id = super::until_native(&connection, |event| match event {
        NativeEvent::ClarifyRequest(question) => {
            assert_eq!(question.question, "Which colour?", "{target:?}");
            Some(question.request_id.clone())
        }
        _ => None,
    })
    .await;
    let answer = ClarifyRespondParams {
        request_id: Some(request_id),
        answer: Some("blue".to_owned()),
        session_id: Some(created.session_id.clone()),
    };
    bounded("answer", connection.request::<ClarifyRespond>(&answer))
        .await
        .expect("answer");
    let result = super::until_native(&connection, |event| match event {
        NativeEvent::ToolComplete(done) if done.name == "clarify" => Some(done.result.clone()),
        _ => None,
    })
    .await;
    assert_eq!(result["user_response"], "blue", "{target:?}: {result}");
    super::until_native(&connection, |event| {
        matches!(event, NativeEvent::MessageComplete(_)).then_some(())
    })
    .await;
    connection.close().await;
    journey.close().await;
}

/// What of the Desktop routes the instance's runtime serves, found through the control plane:
/// every group of the pinned contract on all three, and no plugin routes (the control plane
/// forwards the contract's routes only; the real Hermes has a `kanban` plugin with routes).
async fn the_runtimes_desktop_routes_are_found_through_the_control_plane(target: Target) {
    use hermes::native::desktop::RouteGroup;
    let journey = Journey::start(target).await;
    let desktop = journey.instance.desktop();
    let offered = bounded("capabilities", desktop.capabilities())
        .await
        .expect("capabilities");
    for group in RouteGroup::ALL {
        assert!(offered.has(*group), "{target:?}: {group:?} in {offered:?}");
    }
    assert_eq!(offered.plugin_routes, Vec::<String>::new(), "{target:?}");
    let plugins = bounded("plugins", desktop.plugin_list())
        .await
        .expect("plugins");
    if target == Target::Hermes {
        let served = plugins
            .iter()
            .find(|p| p.has_api)
            .expect("a plugin with routes");
        let refused = desktop.plugin_get(&served.name, "anything").await;
        assert!(
            matches!(refused, Err(hermes::Error::Unsupported { .. })),
            "{refused:?}"
        );
    }
    journey.close().await;
}

/// A profile connection whose socket drops mid-reply (a proxy cuts it) comes back by itself and
/// delivers every piece of the reply once, in order.
async fn a_profile_connection_comes_back_after_its_socket_drops(target: Target) {
    use hermes::native::{PromptSubmit, PromptSubmitParams, SessionCreateParams};
    let model = FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: Duration::from_millis(15),
        ..Default::default()
    })
    .await;
    let journey = Journey::start_with(target, model).await;
    let profile = journey.profile(&[]).await;
    // The application reaches the control plane through a network that will drop.
    let local = journey
        .hermes
        .sdk()
        .base_url()
        .trim_start_matches("http://");
    let proxy = testkit::CutProxy::start(local.parse().unwrap()).await;
    let key = journey
        .hermes
        .sdk()
        .key_create(&hermes::types::CreateApiKey {
            name: "through a flaky network".to_owned(),
            scope: hermes::types::Scope::Write,
            instances: None,
        })
        .await
        .expect("key");
    let remote = Hermes::remote(&proxy.url(), Some(&key.secret));
    let connection = bounded(
        "connect",
        remote
            .instance(journey.instance.id())
            .profile(profile.id())
            .connect(),
    )
    .await
    .expect("connect");
    let created = bounded(
        "a native session",
        connection
            .api()
            .session()
            .create(&SessionCreateParams::default()),
    )
    .await
    .expect("session");
    let words: Vec<String> = (0..40).map(|n| format!("w{n}")).collect();
    let submit = PromptSubmitParams {
        session_id: Some(created.session_id),
        text: Some(words.join(" ")),
        ..Default::default()
    };
    bounded("prompt", connection.request::<PromptSubmit>(&submit))
        .await
        .expect("prompt");
    let (streamed, complete) = super::read_turn_cutting_once(&connection, &proxy).await;
    assert!(
        connection.reconnects() >= 1,
        "{target:?}: the socket was replaced"
    );
    assert_eq!(
        streamed.trim_start(),
        complete,
        "{target:?}: every piece once, in order"
    );
    assert_eq!(complete, format!("You said: {}", words.join(" ")));
    connection.close().await;
    remote.close().await.expect("close");
    journey.close().await;
}
