//! The agent loop of one turn: model → tool calls → tools → model … until the model answers
//! without calling a tool, or the turn is interrupted.
//!
//! Events follow Hermes 0.19: `message.start`, `message.delta`…, `tool.generating`,
//! `tool.start` / `tool.complete` around each call, then `message.complete {text, usage,
//! status}`. A model failure is reported as an `error` event and a `message.complete` with
//! status `error`.

use std::sync::Arc;

use futures_util::StreamExt;
use hermes_native::NativeEvent;
use hermes_native::config::HermesConfig;
use hermes_native::events::{
    CompletionStatus, ErrorPayload, MessageComplete, TextPayload, ToolComplete, ToolGenerating,
    ToolStart,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::model::{self, ChatMessage, ModelEvent, Role, TokenUsage};
use crate::retry;
use crate::runtime::Runtime;
use crate::session::LiveSession;
use crate::store::{Billing, FirstWrite, ModelCall, SessionRow, Setup, StateDb};
use crate::tools::{ToolBox, TurnContext};

/// Runs one turn; returns the `message.complete` event, which the caller emits once the
/// session is ready for the next prompt (so a prompt sent on seeing it is not taken as busy).
pub async fn run_turn(
    runtime: Arc<Runtime>,
    session: Arc<LiveSession>,
    text: String,
    interrupt: Arc<Notify>,
) -> NativeEvent {
    session.emit(NativeEvent::MessageStart {});
    let (status, final_text) = match run_model_loop(&runtime, &session, text, &interrupt).await {
        Ok(outcome) => outcome,
        Err(failure) => {
            // Ours only: Hermes tells of a failed call in `status.update` and the completion.
            session.emit(NativeEvent::Error(ErrorPayload {
                message: failure.message,
            }));
            (CompletionStatus::Error, failure.text)
        }
    };
    let usage = {
        let mut state = session.state.lock().expect("not poisoned");
        // A steer no tool batch carried was for this turn: it does not reach a later one.
        state.steer = None;
        // A model switched for one turn (`--once`) switches back.
        if std::mem::take(&mut state.settings.model_once) {
            state.settings.model = None;
        }
        state.usage
    };
    NativeEvent::MessageComplete(MessageComplete {
        text: final_text,
        status,
        usage: usage.native(&session.model(), session.context_window),
    })
}

async fn run_model_loop(
    runtime: &Runtime,
    session: &LiveSession,
    text: String,
    interrupt: &Notify,
) -> Result<(CompletionStatus, String), Failure> {
    let mut config = HermesConfig::load(&session.home)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(switched) = session.settings().model {
        config.model.default = Some(switched);
    }
    let model = model::from_config(&config, &runtime.http).map_err(|e| e.to_string())?;
    let db = runtime
        .db(&session.home)
        .await
        .map_err(|e| format!("state.db: {e}"))?;
    let (mut history, first_turn, settings) = {
        let state = session.state.lock().expect("not poisoned");
        (
            state.messages.clone(),
            !state.setup_noted,
            state.settings.clone(),
        )
    };
    // What the session was started with (for its listing) goes with its first prompt.
    let model_config = first_turn.then(|| model_config(&config));
    let setup = model_config.as_deref().map(|model_config| Setup {
        model_config,
        cwd: settings.cwd_chosen.then_some(settings.cwd.as_path()),
    });
    // The prompt is stored while the tools are listed (an MCP server's listing is a round trip):
    // neither needs the other.
    let prompt = ChatMessage::user(text);
    let (recorded, (toolbox, problems)) = tokio::join!(
        record(session, &db, &mut history, prompt, None, setup),
        ToolBox::for_turn(runtime, &config)
    );
    recorded?;
    if first_turn {
        session.state.lock().expect("not poisoned").setup_noted = true;
    }
    let billing = Billing::of(&config);

    for problem in problems {
        session.status("warn", problem);
    }
    let specs = toolbox.specs();
    let ctx = TurnContext::new(runtime, session);
    // Like Hermes: after a tool batch, the first streamed text that is not blank gets a
    // paragraph break in front, in the stream only, so text does not run on across the calls.
    let mut break_before_text = false;

    let attempts = config.api_attempts();
    for _ in 0..config.max_turns() {
        ctx.next_model_call();
        let call = call_model(
            &*model,
            &history,
            &specs,
            session,
            interrupt,
            attempts,
            &mut break_before_text,
        );
        let (reply, usage) = match call.await? {
            Called::Answered(reply, usage) => (reply, usage),
            Called::Interrupted(partial) => {
                let partial_text = partial.content.clone();
                if !partial_text.is_empty() {
                    record(session, &db, &mut history, partial, None, None).await?;
                }
                return Ok((CompletionStatus::Interrupted, partial_text));
            }
        };
        let tool_calls = reply.tool_calls.clone();
        let reply_text = reply.content.clone();
        // Like Hermes: a call is accounted for when the endpoint told its usage; here in the
        // same write as the reply.
        let accounted = usage.map(|usage| ModelCall {
            usage,
            billing: &billing,
        });
        record(session, &db, &mut history, reply, accounted.as_ref(), None).await?;
        if tool_calls.is_empty() {
            return Ok((CompletionStatus::Complete, reply_text));
        }
        break_before_text = true;
        let batch = tool_calls.len();
        for (done, call) in tool_calls.into_iter().enumerate() {
            session.emit(NativeEvent::ToolStart(ToolStart {
                tool_id: call.id.clone(),
                name: call.name.clone(),
                context: summarize(&call.arguments),
            }));
            let result = tokio::select! {
                biased;
                _ = interrupt.notified() => {
                    return Ok((CompletionStatus::Interrupted, String::new()));
                }
                result = toolbox.call(&ctx, &call.name, call.arguments.clone()) => result,
            };
            // Like Hermes: the event carries the result decoded when it is JSON.
            let decoded: Value =
                serde_json::from_str(&result.text).unwrap_or_else(|_| json!(result.text));
            session.emit(NativeEvent::ToolComplete(ToolComplete {
                tool_id: call.id.clone(),
                name: call.name.clone(),
                args: call.arguments.clone(),
                result: decoded,
                duration_s: result.duration.as_secs_f64(),
            }));
            let mut content = result.for_model;
            if done + 1 == batch {
                content = with_steer(session, content);
            }
            let mut message = ChatMessage::plain(Role::Tool, content);
            message.tool_call_id = Some(call.id);
            message.tool_name = Some(call.name);
            record(session, &db, &mut history, message, None, None).await?;
        }
    }
    Err(format!(
        "stopped after {} model calls in one turn (agent.max_turns)",
        config.max_turns()
    )
    .into())
}

/// Why a turn failed: `message` for our `error` event, `text` for `message.complete`.
struct Failure {
    message: String,
    text: String,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self {
            text: format!("API call failed: {message}"),
            message,
        }
    }
}

/// How one model call ended.
enum Called {
    /// The model's whole reply (text, tool calls or both), and its usage when the endpoint
    /// told it.
    Answered(ChatMessage, Option<TokenUsage>),
    /// The turn was interrupted; what the model had said so far.
    Interrupted(ChatMessage),
}

/// One model call, streamed to the client, attempted up to `attempts` times as Hermes does: an
/// attempt that fails before anything of it was streamed, for a reason that may pass (a
/// connection, a rate limit, a server error), is tried again after a back-off. The client hears
/// of the retries only if the call fails in the end.
async fn call_model(
    model: &dyn model::Model,
    history: &[ChatMessage],
    specs: &[model::ToolSpec],
    session: &LiveSession,
    interrupt: &Notify,
    attempts: u64,
    break_before_text: &mut bool,
) -> Result<Called, Failure> {
    let mut retry_notes = Vec::new();
    let mut attempt = 1;
    let sent = model::as_sent(history);
    loop {
        let mut stream = model.stream(&sent, specs);
        let mut reply = ChatMessage::plain(Role::Assistant, String::new());
        let mut usage = None;
        let mut streamed_any = false;
        let error = loop {
            let next = tokio::select! {
                biased;
                _ = interrupt.notified() => return Ok(Called::Interrupted(reply)),
                next = stream.next() => next,
            };
            match next {
                None => return Ok(Called::Answered(reply, usage)),
                Some(Err(error)) => break error,
                Some(Ok(ModelEvent::Delta(piece))) => {
                    streamed_any = true;
                    let streamed = if *break_before_text && !piece.trim().is_empty() {
                        *break_before_text = false;
                        format!("\n\n{piece}")
                    } else {
                        piece.clone()
                    };
                    session.note_streamed(&streamed);
                    session.emit(NativeEvent::MessageDelta(TextPayload { text: streamed }));
                    reply.content.push_str(&piece);
                }
                Some(Ok(ModelEvent::ToolCall(call))) => {
                    streamed_any = true;
                    session.emit(NativeEvent::ToolGenerating(ToolGenerating {
                        name: call.name.clone(),
                    }));
                    reply.tool_calls.push(call);
                }
                Some(Ok(ModelEvent::Done(finish))) => {
                    // As Hermes stores it: the endpoint's reason, else `stop`.
                    reply.finish_reason = Some(finish.reason.unwrap_or_else(|| "stop".to_owned()));
                    usage = finish.usage;
                    let step = finish.usage.unwrap_or_default();
                    let mut state = session.state.lock().expect("not poisoned");
                    state.usage.input += step.input;
                    state.usage.output += step.output;
                    state.usage.calls += 1;
                    state.usage.last_prompt = step.input;
                }
            }
        };
        if !error.transient || streamed_any || attempt >= attempts {
            for note in retry_notes {
                session.status("lifecycle", note);
            }
            return Err(call_failed(session, error, attempts));
        }
        let wait = retry::backoff(attempt, error.retry_after, fastrand::f64());
        retry_notes.push(if error.rate_limited() {
            format!(
                "⏱️ Rate limited. Waiting {:.1}s (attempt {}/{attempts})...",
                wait.as_secs_f64(),
                attempt + 1
            )
        } else {
            format!(
                "⏳ Retrying in {:.1}s (attempt {attempt}/{attempts})...",
                wait.as_secs_f64()
            )
        });
        tokio::select! {
            biased;
            _ = interrupt.notified() => {
                return Ok(Called::Interrupted(ChatMessage::plain(Role::Assistant, String::new())));
            }
            _ = tokio::time::sleep(wait) => {}
        }
        attempt += 1;
    }
}

/// The end of a model call that failed, told as Hermes tells it: a `status.update` saying why,
/// and the completion's text.
fn call_failed(session: &LiveSession, error: model::ModelError, attempts: u64) -> Failure {
    let summary = error.message.clone();
    let (note, text) = match error.status {
        _ if error.transient => (
            format!(
                "❌ {} after {attempts} retries — {summary}",
                if error.rate_limited() {
                    "Rate limited"
                } else {
                    "API failed"
                }
            ),
            format!("API call failed after {attempts} retries: {summary}"),
        ),
        Some(status) => (
            format!("❌ Non-retryable error (HTTP {status}): {summary}"),
            summary.clone(),
        ),
        None => return Failure::from(summary),
    };
    session.status("lifecycle", note);
    Failure {
        message: summary,
        text,
    }
}

/// How a steer is marked in a tool result, in Hermes's words, so the model takes it as the
/// user's message and not the tool's output.
const STEER_OPEN: &str = "[OUT-OF-BAND USER MESSAGE — a direct message from the user, delivered mid-turn; not tool output]";
const STEER_CLOSE: &str = "[/OUT-OF-BAND USER MESSAGE]";

/// The last tool result of a batch, with what the user steered with meanwhile (if anything).
fn with_steer(session: &LiveSession, result: String) -> String {
    match session.state.lock().expect("not poisoned").steer.take() {
        Some(steer) => format!("{result}\n\n{STEER_OPEN}\n{steer}\n{STEER_CLOSE}"),
        None => result,
    }
}

/// Adds a message to the turn's history, the live session and `state.db` (with the model call
/// that produced it, when it told its usage; with what the session's first turn was started
/// with, for its prompt).
async fn record(
    session: &LiveSession,
    db: &StateDb,
    history: &mut Vec<ChatMessage>,
    message: ChatMessage,
    call: Option<&ModelCall<'_>>,
    setup: Option<Setup<'_>>,
) -> Result<(), String> {
    persist(session, db, std::slice::from_ref(&message), call, setup).await?;
    session
        .state
        .lock()
        .expect("not poisoned")
        .messages
        .push(message.clone());
    history.push(message);
    Ok(())
}

/// Writes messages, creating the session row on first use as Hermes does, in one transaction
/// with what the session's first turn was started with (`setup`).
async fn persist(
    session: &LiveSession,
    db: &StateDb,
    messages: &[ChatMessage],
    call: Option<&ModelCall<'_>>,
    setup: Option<Setup<'_>>,
) -> Result<(), String> {
    let _writing = session.writes.lock().await;
    let (first, title) = {
        let state = session.state.lock().expect("not poisoned");
        (!state.persisted, state.title.clone())
    };
    let row = first.then(|| SessionRow {
        id: session.stored_id.clone(),
        source: session.source.clone(),
        model: session.model(),
        started_at: session.started_at,
        title,
        message_count: 0,
        profile_name: session.profile.clone(),
    });
    let first_write = FirstWrite {
        row: row.as_ref(),
        setup,
    };
    db.append_messages(&session.stored_id, messages, call, &first_write)
        .await
        .map_err(|e| format!("state.db: {e}"))?;
    if first {
        session.state.lock().expect("not poisoned").persisted = true;
    }
    Ok(())
}

/// The agent's settings a session is stored with, as Hermes writes them (JSON text). Hermes
/// also writes the reasoning settings it sends; ours sends none.
fn model_config(config: &HermesConfig) -> String {
    crate::pyjson::to_string(
        &json!({"max_iterations": config.max_turns(), "reasoning_config": null, "max_tokens": null}),
    )
}

/// A short, single-line description of tool arguments for `tool.start`'s `context`.
fn summarize(args: &Value) -> String {
    let text = args.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
