//! The agent loop of one turn: model → tool calls → tools → model … until the model answers
//! without calling a tool, or the turn is interrupted.
//!
//! Events follow Hermes 0.19: `message.start`, `message.delta`…, `tool.start` / `tool.complete`
//! around each call, then `message.complete {text, usage, status}`.

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::config::HomeConfig;
use crate::model::{self, ChatMessage, ModelEvent, Role, TokenUsage};
use crate::runtime::Runtime;
use crate::session::LiveSession;
use crate::store::{SessionRow, StateDb};

/// A turn may not loop through the model more often than this.
const MAX_MODEL_CALLS: u64 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Complete,
    Interrupted,
    Error,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "complete",
            Status::Interrupted => "interrupted",
            Status::Error => "error",
        }
    }
}

pub async fn run_turn(
    runtime: Arc<Runtime>,
    session: Arc<LiveSession>,
    text: String,
    interrupt: Arc<Notify>,
) {
    session.emit("message.start", json!({}));
    let mut usage = TokenUsage::default();
    let mut calls = 0u64;
    let (status, final_text) =
        match run_model_loop(&runtime, &session, text, &interrupt, &mut usage, &mut calls).await {
            Ok(outcome) => outcome,
            Err(message) => {
                session.emit("error", json!({ "message": message }));
                (Status::Error, String::new())
            }
        };
    if let Ok(db) = runtime.db(&session.home).await
        && let Err(e) = db
            .append_messages(&session.stored_id, &[], usage.input, usage.output)
            .await
    {
        tracing::warn!(error = %e, "could not record usage");
    }
    session.emit(
        "message.complete",
        json!({
            "text": final_text,
            "status": status.as_str(),
            "usage": {
                "model": session.model_name,
                "input": usage.input,
                "output": usage.output,
                "prompt": usage.input,
                "completion": usage.output,
                "total": usage.input + usage.output,
                "calls": calls,
            },
        }),
    );
}

async fn run_model_loop(
    runtime: &Runtime,
    session: &LiveSession,
    text: String,
    interrupt: &Notify,
    usage: &mut TokenUsage,
    calls: &mut u64,
) -> Result<(Status, String), String> {
    let config = HomeConfig::load(&session.home)
        .await
        .map_err(|e| e.to_string())?;
    let model = model::from_config(&config).map_err(|e| e.to_string())?;
    let db = runtime
        .db(&session.home)
        .await
        .map_err(|e| format!("state.db: {e}"))?;
    let user = ChatMessage::user(text);
    persist(session, &db, std::slice::from_ref(&user)).await?;
    let mut history = {
        let mut state = session.state.lock().expect("not poisoned");
        state.messages.push(user);
        state.messages.clone()
    };

    let (toolbox, problems) = runtime.mcp.toolbox(&config).await;
    for problem in problems {
        session.emit("status.update", json!({"kind": "warn", "text": problem}));
    }
    let specs = toolbox.specs();

    loop {
        if *calls >= MAX_MODEL_CALLS {
            return Err(format!(
                "stopped after {MAX_MODEL_CALLS} model calls in one turn"
            ));
        }
        *calls += 1;
        let mut stream = model.stream(&history, &specs);
        let mut reply = ChatMessage::plain(Role::Assistant, String::new());
        loop {
            let next = tokio::select! {
                biased;
                _ = interrupt.notified() => {
                    record(session, &db, &mut history, reply.clone()).await?;
                    return Ok((Status::Interrupted, reply.content));
                }
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => return Err(format!("model error: {e}")),
                Some(Ok(ModelEvent::Delta(piece))) => {
                    session.emit("message.delta", json!({ "text": piece }));
                    reply.content.push_str(&piece);
                }
                Some(Ok(ModelEvent::ToolCall(call))) => reply.tool_calls.push(call),
                Some(Ok(ModelEvent::Done(step))) => {
                    usage.input += step.input;
                    usage.output += step.output;
                }
            }
        }
        let tool_calls = reply.tool_calls.clone();
        let reply_text = reply.content.clone();
        record(session, &db, &mut history, reply).await?;
        if tool_calls.is_empty() {
            return Ok((Status::Complete, reply_text));
        }
        for call in tool_calls {
            session.emit(
                "tool.start",
                json!({
                    "tool_id": call.id,
                    "name": call.name,
                    "context": summarize(&call.arguments),
                    "args_text": call.arguments.to_string(),
                }),
            );
            let result = tokio::select! {
                biased;
                _ = interrupt.notified() => return Ok((Status::Interrupted, String::new())),
                result = toolbox.call(&call.name, call.arguments.clone()) => result,
            };
            session.emit(
                "tool.complete",
                json!({
                    "tool_id": call.id,
                    "name": call.name,
                    "args": call.arguments,
                    "result": result.text,
                    "error": result.is_error,
                    "duration_s": result.duration.as_secs_f64(),
                }),
            );
            let mut message = ChatMessage::plain(Role::Tool, result.text);
            message.tool_call_id = Some(call.id);
            message.tool_name = Some(call.name);
            record(session, &db, &mut history, message).await?;
        }
    }
}

/// Adds a message to the turn's history, the live session and `state.db`.
async fn record(
    session: &LiveSession,
    db: &StateDb,
    history: &mut Vec<ChatMessage>,
    message: ChatMessage,
) -> Result<(), String> {
    persist(session, db, std::slice::from_ref(&message)).await?;
    session
        .state
        .lock()
        .expect("not poisoned")
        .messages
        .push(message.clone());
    history.push(message);
    Ok(())
}

/// Writes messages, creating the session row on first use as Hermes does.
async fn persist(
    session: &LiveSession,
    db: &StateDb,
    messages: &[ChatMessage],
) -> Result<(), String> {
    let first = {
        let mut state = session.state.lock().expect("not poisoned");
        !std::mem::replace(&mut state.persisted, true)
    };
    if first {
        let title = session.state.lock().expect("not poisoned").title.clone();
        db.ensure_session(&SessionRow {
            id: session.stored_id.clone(),
            source: session.source.clone(),
            model: session.model_name.clone(),
            started_at: session.started_at,
            title,
            message_count: 0,
            profile_name: session.profile.clone(),
        })
        .await
        .map_err(|e| format!("state.db: {e}"))?;
    }
    db.append_messages(&session.stored_id, messages, 0, 0)
        .await
        .map_err(|e| format!("state.db: {e}"))
}

/// A short, single-line description of tool arguments for `tool.start`'s `context`.
fn summarize(args: &Value) -> String {
    let text = args.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
