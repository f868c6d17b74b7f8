//! Gateway methods that work on a live session besides prompting — take the last exchange
//! back, say its status, save it to a file — and count recent sessions.

use chrono::{Local, TimeZone};
use hermes_native::codes;
use hermes_native::config::HermesConfig;
use hermes_native::methods::{
    ContextBreakdown, ContextCategory, Insights, InsightsParams, LiveSessionParams, SavedFile,
    SessionSteerParams, Steered, TextOutput, Undone,
};
use serde_json::{Value, json};

use super::methods::{Result, RpcError, handler_error, live_session};
use crate::model::{ChatMessage, Role, ToolSpec};
use crate::runtime::Runtime;
use crate::session::{SessionState, Transport};
use crate::tools::ToolBox;

/// The most a turn may be steered with, in bytes (its steers together); beyond, the steers
/// are dropped and the last one is answered `rejected`.
const STEER_LIMIT: usize = 64 * 1024;

/// Hermes's default for `insights.get`.
const INSIGHT_DAYS: u64 = 30;

/// Refused while a turn runs (checked under the lock the caller then works under), with
/// Hermes's words for `what`.
pub(super) fn idle(state: &SessionState, what: &str) -> Result<()> {
    if state.running.is_some() {
        return Err(RpcError::new(
            codes::BUSY,
            format!("session busy — /interrupt the current turn before {what}"),
        ));
    }
    Ok(())
}

/// Takes back the trailing answer (with its tool messages) and the prompt before it, in
/// memory, as Hermes's `session.undo` does: the next prompt is made on what is left, and the
/// stored conversation keeps them.
pub fn undo(runtime: &Runtime, p: LiveSessionParams) -> Result<Undone> {
    let session = live_session(runtime, &p.session_id)?;
    let mut state = session.state.lock().expect("not poisoned");
    idle(&state, "/undo")?;
    Ok(Undone {
        removed: take_back_last_exchange(&mut state.messages) as u64,
    })
}

/// Takes the trailing answer (with its tool messages) and the prompt before it off a
/// conversation; how many messages went.
pub(super) fn take_back_last_exchange(messages: &mut Vec<ChatMessage>) -> usize {
    let before = messages.len();
    while messages
        .last()
        .is_some_and(|m| matches!(m.role, Role::Assistant | Role::Tool))
    {
        messages.pop();
    }
    if messages.last().is_some_and(|m| m.role == Role::User) {
        messages.pop();
    }
    before - messages.len()
}

/// Queues `text` for the agent: the result of its next tool batch carries it, marked as the
/// user's (`agent::with_steer`). A session whose agent does not exist yet (no prompt so far in
/// this process) cannot be steered, as in Hermes.
pub fn steer(runtime: &Runtime, p: SessionSteerParams) -> Result<Steered> {
    let text = p.text.unwrap_or_default().trim().to_owned();
    if text.is_empty() {
        return Err(RpcError::new(codes::TEXT_REQUIRED, "text is required"));
    }
    let session = live_session(runtime, &p.session_id)?;
    let mut state = session.state.lock().expect("not poisoned");
    if state.running.is_none() && state.usage.calls == 0 {
        return Err(RpcError::new(
            codes::NO_AGENT,
            "agent does not support steer",
        ));
    }
    let steered = match state.steer.take() {
        Some(earlier) => format!("{earlier}\n{text}"),
        None => text.clone(),
    };
    if steered.len() > STEER_LIMIT {
        state.steer = None;
        return Ok(Steered {
            status: "rejected".to_owned(),
            text,
        });
    }
    state.steer = Some(steered);
    Ok(Steered {
        status: "queued".to_owned(),
        text,
    })
}

/// `/status`, line for line as Hermes writes it.
pub async fn status(runtime: &Runtime, p: LiveSessionParams) -> Result<TextOutput> {
    let session = live_session(runtime, &p.session_id)?;
    let config = HermesConfig::load(&session.home)
        .await
        .map_err(handler_error)?;
    let (title, last_active, running, usage) = {
        let state = session.state.lock().expect("not poisoned");
        let title = state.title.clone().unwrap_or_default();
        (
            title,
            state.last_active,
            state.running.is_some(),
            state.usage,
        )
    };
    let mut lines = vec![
        "Hermes TUI Status".to_owned(),
        String::new(),
        format!("Session ID: {}", session.stored_id),
        format!("Path: {}", shown_path(&session.home)),
    ];
    if !title.is_empty() {
        lines.push(format!("Title: {title}"));
    }
    lines.extend([
        format!(
            "Model: {} ({})",
            session.model(),
            config.model.provider_name()
        ),
        format!("Created: {}", minutes(session.started_at)),
        format!(
            "Last Activity: {}",
            minutes(last_active.max(session.started_at))
        ),
        format!("Tokens: {}", thousands(usage.input + usage.output)),
        format!("Agent Running: {}", if running { "Yes" } else { "No" }),
    ]);
    Ok(TextOutput {
        output: lines.join("\n"),
    })
}

/// A path with the user's home written `~`, as Hermes shows its home.
fn shown_path(path: &std::path::Path) -> String {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    match home
        .as_deref()
        .and_then(|home| path.strip_prefix(home).ok())
    {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

/// Unix seconds as local `YYYY-MM-DD HH:MM`.
fn minutes(unix: f64) -> String {
    local(unix).format("%Y-%m-%d %H:%M").to_string()
}

fn local(unix: f64) -> chrono::DateTime<Local> {
    let nanos = (unix.fract() * 1e9) as u32;
    Local
        .timestamp_opt(unix as i64, nanos)
        .single()
        .unwrap_or_else(Local::now)
}

/// `1234567` as `1,234,567`.
pub(super) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Writes the conversation as Hermes does (`model`, `session_id`, `session_start`,
/// `system_prompt`, `messages` in the model's chat format) to
/// `<home>/sessions/saved/hermes_conversation_<local time>.json`.
pub async fn save(runtime: &Runtime, p: LiveSessionParams) -> Result<SavedFile> {
    let session = live_session(runtime, &p.session_id)?;
    let messages: Vec<Value> = {
        let state = session.state.lock().expect("not poisoned");
        state.messages.iter().map(|m| m.to_openai()).collect()
    };
    let content = json!({
        "model": session.model(),
        "session_id": session.stored_id,
        "session_start": local(session.started_at).naive_local().to_string().replace(' ', "T"),
        // This runtime sends the model no system prompt.
        "system_prompt": "",
        "messages": messages,
    });
    let failed = |e: std::io::Error| RpcError::new(codes::SAVE_FAILED, e.to_string());
    let dir = session.home.join("sessions").join("saved");
    tokio::fs::create_dir_all(&dir).await.map_err(failed)?;
    let name = format!(
        "hermes_conversation_{}.json",
        Local::now().format("%Y%m%d_%H%M%S")
    );
    let file = dir.join(name);
    let text = serde_json::to_string_pretty(&content).map_err(handler_error)?;
    tokio::fs::write(&file, text).await.map_err(failed)?;
    Ok(SavedFile {
        file: file.display().to_string(),
    })
}

/// Stored sessions of the launch home that started in the last `days`, and their messages.
pub async fn insights(runtime: &Runtime, p: InsightsParams) -> Result<Insights> {
    let days = p.days.unwrap_or(json!(INSIGHT_DAYS));
    let count = days.as_f64().ok_or_else(|| {
        RpcError::new(
            codes::INSIGHTS_FAILED,
            format!("not a number of days: {days}"),
        )
    })?;
    let since = crate::store::unix_now() - count * 86_400.0;
    let db = runtime
        .db(&runtime.root)
        .await
        .map_err(|e| RpcError::new(codes::INSIGHTS_FAILED, format!("state.db unavailable: {e}")))?;
    let (sessions, messages) = db
        .activity_since(since)
        .await
        .map_err(|e| RpcError::new(codes::INSIGHTS_FAILED, e.to_string()))?;
    Ok(Insights {
        days,
        sessions,
        messages,
    })
}

/// The kinds of what fills the window that this runtime has (no system prompt, rules, skills,
/// sub-agents or memory): (id, label, colour).
const TOOL_DEFINITIONS: (&str, &str, &str) = (
    "tool_definitions",
    "Tool definitions",
    "var(--context-usage-tools)",
);
const MCP: (&str, &str, &str) = ("mcp", "MCP", "var(--context-usage-mcp)");
const CONVERSATION: (&str, &str, &str) = (
    "conversation",
    "Conversation",
    "var(--context-usage-conversation)",
);

/// Roughly how many tokens `chars` characters are (four a token, rounded up), as Hermes counts.
fn rough_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// The rough size of a request with these messages and tools, as Hermes estimates it.
pub(super) fn request_tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u64 {
    conversation_tokens(messages) + schema_tokens(tools)
}

fn conversation_tokens(messages: &[ChatMessage]) -> u64 {
    rough_tokens(messages.iter().map(message_chars).sum())
}

/// What the tools' definitions take of a request.
fn schema_tokens(specs: &[ToolSpec]) -> u64 {
    if specs.is_empty() {
        return 0;
    }
    let listed: Vec<Value> = specs.iter().map(ToolSpec::to_openai).collect();
    rough_tokens(Value::from(listed).to_string().chars().count())
}

fn message_chars(message: &ChatMessage) -> usize {
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|call| call.name.len() + call.arguments.to_string().len())
        .sum();
    message.content.chars().count() + calls
}

/// What fills the session's context window: the tools the next call would offer (built-in
/// and MCP) and the conversation, and how full the window is — what the last call measured,
/// else the estimate. Before the first prompt there is no agent yet, so nothing, as in Hermes.
pub async fn context_breakdown(
    runtime: &Runtime,
    p: LiveSessionParams,
) -> Result<ContextBreakdown> {
    let session = live_session(runtime, &p.session_id)?;
    let (messages, usage) = {
        let state = session.state.lock().expect("not poisoned");
        (state.messages.clone(), state.usage)
    };
    let context_max = session.context_window.unwrap_or(0);
    let percent = |used: u64| match context_max {
        0 => 0,
        max => ((used as f64 / max as f64 * 100.0).round() as u64).min(100),
    };
    if usage.calls == 0 {
        return Ok(ContextBreakdown {
            model: session.model(),
            ..Default::default()
        });
    }
    let config = HermesConfig::load(&session.home)
        .await
        .map_err(handler_error)?;
    let (toolbox, _) = ToolBox::for_turn(runtime, &config).await;
    let (mcp, built_in): (Vec<_>, Vec<_>) = toolbox
        .specs()
        .into_iter()
        .partition(|spec| spec.name.starts_with("mcp_"));
    let categories: Vec<ContextCategory> = [
        (TOOL_DEFINITIONS, schema_tokens(&built_in)),
        (MCP, schema_tokens(&mcp)),
        (CONVERSATION, conversation_tokens(&messages)),
    ]
    .into_iter()
    .filter(|(_, tokens)| *tokens > 0)
    .map(|((id, label, color), tokens)| ContextCategory {
        color: color.to_owned(),
        id: id.to_owned(),
        label: label.to_owned(),
        tokens,
    })
    .collect();
    let estimated_total = categories.iter().map(|c| c.tokens).sum();
    let context_used = match usage.last_prompt {
        0 => estimated_total,
        measured => measured,
    };
    Ok(ContextBreakdown {
        categories,
        context_max,
        context_percent: percent(context_used),
        context_used,
        estimated_total,
        model: session.model(),
    })
}

/// `session.activate`: the calling connection takes the session over (its events go there
/// from now on), and is told where the session stands.
pub async fn activate(
    runtime: &Runtime,
    transport: &Transport,
    p: LiveSessionParams,
) -> Result<Value> {
    let session = live_session(runtime, &p.session_id)?;
    let settings = session.settings();
    let info = if session.announced() {
        serde_json::to_value(super::session_info::full(runtime, &session).await)
            .map_err(handler_error)?
    } else {
        json!({"cwd": settings.cwd.display().to_string(), "project": null, "lazy": true,
               "model": session.model(), "skills": {}, "tools": {}})
    };
    let waits = runtime.prompts.waits(&session.sid);
    let mut state = session.state.lock().expect("not poisoned");
    if !state.bind(transport) {
        return Err(RpcError::new(
            codes::LIVE_SESSION_NOT_FOUND,
            "session not found",
        ));
    }
    let messages = super::methods::history(&state.messages);
    let status = match &state.running {
        _ if waits => "waiting",
        Some(_) => "working",
        None => "idle",
    };
    let mut reply = json!({
        "info": info,
        "message_count": messages.len(),
        "messages": messages,
        "running": state.running.is_some(),
        "session_id": session.sid,
        "session_key": session.stored_id,
        "started_at": session.started_at,
        "status": status,
    });
    if let Some(running) = &state.running {
        reply["inflight"] = json!({"assistant": running.streamed, "streaming": true,
                                   "user": running.prompt});
        if let Some((queued, _)) = &running.queued {
            reply["queued"] = json!({"user": queued});
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
