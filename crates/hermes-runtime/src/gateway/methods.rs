//! The gateway methods this runtime implements. Every other method answers `-32601`.

use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_native::codes;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::agent;
use crate::config::HomeConfig;
use crate::model::{ChatMessage, Role};
use crate::runtime::Runtime;
use crate::session::{self, LiveSession, RunningTurn, SessionState, Transport};
use crate::store::unix_now;

/// Methods this runtime answers; the catalog marks them as implemented.
pub const IMPLEMENTED: &[&str] = &[
    "session.create",
    "session.resume",
    "session.list",
    "session.history",
    "session.close",
    "session.interrupt",
    "prompt.submit",
];

#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

pub enum Handled {
    Reply(Value),
    /// Reply, then run the future (a turn) on the same task.
    ReplyThen(Value, BoxFuture<'static, ()>),
}

type Result<T> = std::result::Result<T, RpcError>;

pub async fn dispatch(
    runtime: &Arc<Runtime>,
    transport: &Transport,
    method: &str,
    params: Value,
) -> Result<Handled> {
    let reply = match method {
        "session.create" => session_create(runtime, transport, &params).await?,
        "session.resume" => session_resume(runtime, transport, &params).await?,
        "session.list" => session_list(runtime, &params).await?,
        "session.history" => session_history(runtime, &params)?,
        "session.close" => session_close(runtime, &params).await?,
        "session.interrupt" => session_interrupt(runtime, &params)?,
        "prompt.submit" => return prompt_submit(runtime, transport, &params),
        other => {
            return Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            ));
        }
    };
    Ok(Handled::Reply(reply))
}

fn str_param<'p>(params: &'p Value, name: &str) -> Option<&'p str> {
    params.get(name).and_then(Value::as_str)
}

fn live_session(runtime: &Runtime, params: &Value) -> Result<Arc<LiveSession>> {
    let sid = str_param(params, "session_id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RpcError::new(codes::SESSION_ID_REQUIRED, "session_id required"))?;
    runtime
        .session(sid)
        .ok_or_else(|| RpcError::new(codes::SESSION_NOT_FOUND, "session not found"))
}

fn handler_error(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(codes::HANDLER_ERROR, e.to_string())
}

fn history_json(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| match m.role {
            Role::Tool => json!({
                "role": "tool",
                "name": m.tool_name,
                "context": m.content,
            }),
            role => json!({"role": role.as_str(), "text": m.content}),
        })
        .collect()
}

fn info(session: &LiveSession) -> Value {
    json!({
        "model": session.model_name,
        "tools": {},
        "skills": {},
        "cwd": session.home.display().to_string(),
        "lazy": true,
        "desktop_contract": 4,
        "profile_name": session.profile.as_deref().unwrap_or("default"),
    })
}

/// Registers a new live session bound to `transport`.
async fn open_live(
    runtime: &Runtime,
    transport: &Transport,
    params: &Value,
    stored_id: String,
    messages: Vec<ChatMessage>,
    persisted: bool,
    title: Option<String>,
) -> Result<Arc<LiveSession>> {
    let profile = str_param(params, "profile")
        .filter(|p| !p.is_empty() && *p != "default")
        .map(str::to_owned);
    let home = runtime
        .profile_home(profile.as_deref())
        .map_err(handler_error)?;
    let config = HomeConfig::load(&home).await.map_err(handler_error)?;
    let session = Arc::new(LiveSession {
        sid: session::new_live_id(),
        stored_id,
        home,
        profile,
        source: str_param(params, "source").unwrap_or("tui").to_owned(),
        started_at: unix_now(),
        model_name: config.model_name(),
        state: Mutex::new(SessionState {
            messages,
            transport: transport.clone(),
            running: None,
            title,
            persisted,
            close_on_disconnect: params["close_on_disconnect"].as_bool().unwrap_or(false),
        }),
    });
    runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .insert(session.sid.clone(), session.clone());
    Ok(session)
}

async fn session_create(runtime: &Runtime, transport: &Transport, params: &Value) -> Result<Value> {
    let title = str_param(params, "title").map(str::to_owned);
    let session = open_live(
        runtime,
        transport,
        params,
        session::new_stored_id(),
        Vec::new(),
        false,
        title,
    )
    .await?;
    Ok(json!({
        "session_id": session.sid,
        "stored_session_id": session.stored_id,
        "message_count": 0,
        "messages": [],
        "info": info(&session),
    }))
}

async fn session_resume(runtime: &Runtime, transport: &Transport, params: &Value) -> Result<Value> {
    let wanted = str_param(params, "session_id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RpcError::new(codes::SESSION_ID_REQUIRED, "session_id required"))?;
    let home = runtime
        .profile_home(str_param(params, "profile").filter(|p| *p != "default"))
        .map_err(handler_error)?;
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let row = db
        .session(wanted)
        .await
        .map_err(handler_error)?
        .ok_or_else(|| RpcError::new(codes::SESSION_NOT_FOUND, "session not found"))?;
    let messages = db.messages(&row.id).await.map_err(handler_error)?;
    let history = history_json(&messages);
    let session = open_live(
        runtime,
        transport,
        params,
        row.id.clone(),
        messages,
        true,
        row.title.clone(),
    )
    .await?;
    Ok(json!({
        "session_id": session.sid,
        "resumed": row.id,
        "message_count": history.len(),
        "messages": history,
        "info": info(&session),
        "running": false,
        "status": "idle",
        "started_at": row.started_at,
    }))
}

async fn session_list(runtime: &Runtime, params: &Value) -> Result<Value> {
    let home = runtime
        .profile_home(str_param(params, "profile"))
        .map_err(handler_error)?;
    let limit = params["limit"].as_u64().unwrap_or(200);
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let rows = db.list_sessions(limit).await.map_err(handler_error)?;
    let sessions: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            json!({
                "id": row.id,
                "title": row.title,
                "preview": row.preview,
                "started_at": row.started_at,
                "message_count": row.message_count,
                "source": row.source,
            })
        })
        .collect();
    Ok(json!({ "sessions": sessions }))
}

fn session_history(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    let messages = session.state.lock().expect("not poisoned").messages.clone();
    let history = history_json(&messages);
    Ok(json!({"count": history.len(), "messages": history}))
}

async fn session_close(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    close(runtime, &session, "tui_close").await;
    Ok(json!({"closed": true}))
}

/// Interrupts the session's turn, forgets the live session and ends its stored row.
pub async fn close(runtime: &Runtime, session: &LiveSession, reason: &str) {
    runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .remove(&session.sid);
    let (running, persisted) = {
        let state = session.state.lock().expect("not poisoned");
        (
            state
                .running
                .as_ref()
                .map(|r| (r.interrupt.clone(), r.done.clone())),
            state.persisted,
        )
    };
    if let Some((interrupt, mut done)) = running {
        interrupt.notify_one();
        let _ = done.changed().await;
    }
    if persisted && let Ok(db) = runtime.db(&session.home).await {
        let _ = db.end_session(&session.stored_id, reason).await;
    }
}

fn session_interrupt(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    if let Some(running) = &session.state.lock().expect("not poisoned").running {
        running.interrupt.notify_one();
    }
    Ok(json!({"status": "interrupted"}))
}

fn prompt_submit(runtime: &Arc<Runtime>, transport: &Transport, params: &Value) -> Result<Handled> {
    let session = live_session(runtime, params)?;
    let text = str_param(params, "text")
        .ok_or_else(|| RpcError::new(codes::INVALID_PARAMS, "text required"))?
        .to_owned();
    let interrupt = Arc::new(Notify::new());
    let (done_tx, done_rx) = tokio::sync::watch::channel(());
    {
        let mut state = session.state.lock().expect("not poisoned");
        if state.running.is_some() {
            return Err(RpcError::new(codes::BUSY, "session busy"));
        }
        // Like Hermes, a prompt re-binds the session to the connection that sent it.
        state.transport = transport.clone();
        state.running = Some(RunningTurn {
            interrupt: interrupt.clone(),
            done: done_rx,
        });
    }
    let runtime = runtime.clone();
    let turn = async move {
        agent::run_turn(runtime, session.clone(), text, interrupt).await;
        session.state.lock().expect("not poisoned").running = None;
        drop(done_tx);
    };
    Ok(Handled::ReplyThen(
        json!({"status": "streaming"}),
        turn.boxed(),
    ))
}

/// A connection went away: its sessions are reaped after the grace period unless a client
/// resumed them elsewhere (or at once, when they asked for `close_on_disconnect`).
pub fn detach_connection(runtime: &Arc<Runtime>, connection: u64) {
    let orphans: Vec<Arc<LiveSession>> = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .filter(|s| s.state.lock().expect("not poisoned").transport.connection == connection)
        .cloned()
        .collect();
    for session in orphans {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let immediate = session
                .state
                .lock()
                .expect("not poisoned")
                .close_on_disconnect;
            if !immediate {
                tokio::time::sleep(runtime.orphan_grace).await;
            }
            let still_orphaned = session
                .state
                .lock()
                .expect("not poisoned")
                .transport
                .connection
                == connection;
            if still_orphaned {
                close(&runtime, &session, "ws_disconnect").await;
            }
        });
    }
}
