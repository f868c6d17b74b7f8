//! The gateway methods this runtime implements, with Hermes 0.19's shapes and error codes.
//! Every other method answers `-32601`.

use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_native::codes;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::agent;
use crate::config::HomeConfig;
use crate::model::{ChatMessage, Role};
use crate::prompts::Choice;
use crate::runtime::Runtime;
use crate::session::{self, LiveSession, RunningTurn, SessionState, Transport};
use crate::store::{SessionRow, unix_now};

/// Methods this runtime answers; the native catalog marks them as implemented.
pub const IMPLEMENTED: &[&str] = &[
    "approval.respond",
    "clarify.respond",
    "prompt.submit",
    "session.active_list",
    "session.close",
    "session.create",
    "session.delete",
    "session.history",
    "session.interrupt",
    "session.list",
    "session.most_recent",
    "session.resume",
    "session.title",
    "session.usage",
];

const TITLE_REQUIRED: i64 = 4021;
const SESSION_ACTIVE: i64 = 4023;

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
    let p = &params;
    let reply = match method {
        "session.create" => session_create(runtime, transport, p).await?,
        "session.resume" => session_resume(runtime, transport, p).await?,
        "session.list" => session_list(runtime, p).await?,
        "session.most_recent" => session_most_recent(runtime, p).await?,
        "session.active_list" => session_active_list(runtime, p),
        "session.history" => session_history(runtime, p)?,
        "session.close" => session_close(runtime, p).await,
        "session.delete" => session_delete(runtime, p).await?,
        "session.title" => session_title(runtime, p).await?,
        "session.usage" => session_usage(runtime, p)?,
        "session.interrupt" => session_interrupt(runtime, p)?,
        "approval.respond" => approval_respond(runtime, p)?,
        "clarify.respond" => clarify_respond(runtime, p)?,
        "prompt.submit" => return prompt_submit(runtime, transport, p),
        other => {
            return Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("unknown method: {other}"),
            ));
        }
    };
    Ok(Handled::Reply(reply))
}

fn str_param<'p>(params: &'p Value, name: &str) -> Option<&'p str> {
    params
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The live session named by `session_id`; missing or unknown is 4001, as in Hermes.
fn live_session(runtime: &Runtime, params: &Value) -> Result<Arc<LiveSession>> {
    str_param(params, "session_id")
        .and_then(|sid| runtime.session(sid))
        .ok_or_else(|| RpcError::new(codes::LIVE_SESSION_NOT_FOUND, "session not found"))
}

fn handler_error(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(codes::INTERNAL, e.to_string())
}

/// Messages as Hermes shows them: tool rows by name, empty assistant rows left out.
fn history_json(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|m| match m.role {
            Role::System => None,
            Role::Tool => Some(json!({
                "role": "tool",
                "name": m.tool_name,
                "context": m.content,
            })),
            _ if m.content.trim().is_empty() => None,
            role => Some(json!({"role": role.as_str(), "text": m.content})),
        })
        .collect()
}

fn info(session: &LiveSession) -> Value {
    json!({
        "model": session.model_name,
        "tools": {},
        "skills": {},
        "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
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
    row: SessionRow,
    messages: Vec<ChatMessage>,
    persisted: bool,
) -> Result<Arc<LiveSession>> {
    let profile = str_param(params, "profile")
        .filter(|p| *p != "default")
        .map(str::to_owned);
    let home = runtime
        .profile_home(profile.as_deref())
        .map_err(handler_error)?;
    let config = HomeConfig::load(&home).await.map_err(handler_error)?;
    let now = unix_now();
    let session = Arc::new(LiveSession {
        sid: session::new_live_id(),
        stored_id: row.id,
        home,
        profile,
        source: str_param(params, "source")
            .unwrap_or(&row.source)
            .to_owned(),
        started_at: if persisted { row.started_at } else { now },
        model_name: config.model_name(),
        state: Mutex::new(SessionState {
            messages,
            transport: transport.clone(),
            running: None,
            title: row.title,
            persisted,
            close_on_disconnect: params["close_on_disconnect"].as_bool().unwrap_or(false),
            usage: Default::default(),
            last_active: now,
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
    let row = SessionRow {
        id: session::new_stored_id(),
        source: "tui".to_owned(),
        model: String::new(),
        started_at: unix_now(),
        title: str_param(params, "title").map(str::to_owned),
        message_count: 0,
        profile_name: None,
    };
    let session = open_live(runtime, transport, params, row, Vec::new(), false).await?;
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
    let stored_id = row.id.clone();

    // Already live here: the same live session, now bound to this connection.
    let live = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .find(|s| s.stored_id == stored_id && s.home == home)
        .cloned();
    let session = match live {
        Some(session) => {
            let mut state = session.state.lock().expect("not poisoned");
            state.transport = transport.clone();
            state.last_active = unix_now();
            drop(state);
            session
        }
        None => {
            let messages = db.messages(&stored_id).await.map_err(handler_error)?;
            open_live(runtime, transport, params, row, messages, true).await?
        }
    };
    let (history, running) = {
        let state = session.state.lock().expect("not poisoned");
        (history_json(&state.messages), state.running.is_some())
    };
    Ok(json!({
        "session_id": session.sid,
        "resumed": stored_id,
        "session_key": stored_id,
        "message_count": history.len(),
        "messages": history,
        "info": info(&session),
        "inflight": null,
        "running": running,
        "status": if running { "streaming" } else { "idle" },
        "started_at": session.started_at,
    }))
}

async fn session_list(runtime: &Runtime, params: &Value) -> Result<Value> {
    let home = runtime
        .profile_home(str_param(params, "profile"))
        .map_err(handler_error)?;
    let limit = params["limit"].as_u64().filter(|l| *l > 0).unwrap_or(200);
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let rows = db.list_sessions(limit).await.map_err(handler_error)?;
    let sessions: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            json!({
                "id": row.id,
                "title": row.title.unwrap_or_default(),
                "preview": row.preview,
                "started_at": row.started_at,
                "message_count": row.message_count,
                "source": row.source,
            })
        })
        .collect();
    Ok(json!({ "sessions": sessions }))
}

async fn session_most_recent(runtime: &Runtime, params: &Value) -> Result<Value> {
    let home = runtime
        .profile_home(str_param(params, "profile"))
        .map_err(handler_error)?;
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let newest = db.list_sessions(1).await.map_err(handler_error)?;
    Ok(match newest.into_iter().next() {
        Some(row) => json!({
            "session_id": row.id,
            "title": row.title.unwrap_or_default(),
            "started_at": row.started_at,
            "source": row.source,
        }),
        None => json!({"session_id": null}),
    })
}

fn session_active_list(runtime: &Runtime, params: &Value) -> Value {
    let current = str_param(params, "current_session_id").unwrap_or_default();
    let mut sessions: Vec<Arc<LiveSession>> = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .cloned()
        .collect();
    sessions.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
    let rows: Vec<Value> = sessions
        .iter()
        .map(|s| {
            let state = s.state.lock().expect("not poisoned");
            let preview = state
                .messages
                .iter()
                .rev()
                .find(|m| m.role != Role::Tool && !m.content.trim().is_empty())
                .map(|m| m.content.chars().take(160).collect::<String>())
                .unwrap_or_default();
            json!({
                "current": s.sid.as_str() == current,
                "id": s.sid,
                "last_active": state.last_active,
                "message_count": state.messages.len(),
                "model": s.model_name,
                "preview": preview,
                "session_key": s.stored_id,
                "started_at": s.started_at,
                "status": if state.running.is_some() { "streaming" } else { "idle" },
                "title": state.title.clone().unwrap_or_default(),
            })
        })
        .collect();
    json!({ "sessions": rows })
}

fn session_history(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    let history = history_json(&session.state.lock().expect("not poisoned").messages);
    Ok(json!({"count": history.len(), "messages": history}))
}

/// Closing a live session that does not exist is not an error: `{closed: false}`.
async fn session_close(runtime: &Runtime, params: &Value) -> Value {
    let Some(session) = str_param(params, "session_id").and_then(|sid| runtime.session(sid)) else {
        return json!({"closed": false});
    };
    close(runtime, &session, "tui_close").await;
    json!({"closed": true})
}

/// Interrupts the session's turn, forgets the live session and ends its stored row.
pub async fn close(runtime: &Runtime, session: &LiveSession, reason: &str) {
    runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .remove(&session.sid);
    let (running, persisted) = {
        let mut state = session.state.lock().expect("not poisoned");
        let running = state.running.as_mut().map(|r| {
            r.queued = None;
            (r.interrupt.clone(), r.done.clone())
        });
        (running, state.persisted)
    };
    runtime.prompts.forget_session(&session.sid);
    if let Some((interrupt, mut done)) = running {
        interrupt.notify_one();
        let _ = done.changed().await;
    }
    if persisted && let Ok(db) = runtime.db(&session.home).await {
        let _ = db.end_session(&session.stored_id, reason).await;
    }
}

async fn session_delete(runtime: &Runtime, params: &Value) -> Result<Value> {
    let target = str_param(params, "session_id")
        .ok_or_else(|| RpcError::new(codes::SESSION_ID_REQUIRED, "session_id required"))?;
    let home = runtime
        .profile_home(str_param(params, "profile"))
        .map_err(handler_error)?;
    let active = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .any(|s| s.stored_id == target);
    if active {
        return Err(RpcError::new(
            SESSION_ACTIVE,
            "cannot delete an active session",
        ));
    }
    let db = runtime.db(&home).await.map_err(handler_error)?;
    if db.delete_session(target).await.map_err(handler_error)? {
        Ok(json!({"deleted": target}))
    } else {
        Err(RpcError::new(codes::SESSION_NOT_FOUND, "session not found"))
    }
}

async fn session_title(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    if params.get("title").is_none() {
        let title = session.state.lock().expect("not poisoned").title.clone();
        return Ok(json!({"title": title.unwrap_or_default(), "session_key": session.stored_id}));
    }
    let title = params["title"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if title.is_empty() {
        return Err(RpcError::new(TITLE_REQUIRED, "title required"));
    }
    let persisted = {
        let mut state = session.state.lock().expect("not poisoned");
        state.title = Some(title.clone());
        std::mem::replace(&mut state.persisted, true)
    };
    let db = runtime.db(&session.home).await.map_err(handler_error)?;
    if !persisted {
        // An explicit title is intent enough to write the row now, as Hermes does.
        db.ensure_session(&SessionRow {
            id: session.stored_id.clone(),
            source: session.source.clone(),
            model: session.model_name.clone(),
            started_at: session.started_at,
            title: Some(title.clone()),
            message_count: 0,
            profile_name: session.profile.clone(),
        })
        .await
        .map_err(handler_error)?;
    }
    db.set_title(&session.stored_id, &title)
        .await
        .map_err(handler_error)?;
    Ok(json!({"pending": false, "title": title}))
}

fn session_usage(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    let usage = session.state.lock().expect("not poisoned").usage;
    Ok(usage.to_json(&session.model_name))
}

fn session_interrupt(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    {
        let mut state = session.state.lock().expect("not poisoned");
        if let Some(running) = state.running.as_mut() {
            running.queued = None;
            running.interrupt.notify_one();
        }
    }
    runtime.prompts.release(&session.sid);
    Ok(json!({"status": "interrupted"}))
}

fn approval_respond(runtime: &Runtime, params: &Value) -> Result<Value> {
    let session = live_session(runtime, params)?;
    let choice = Choice::parse(str_param(params, "choice").unwrap_or("deny"));
    let all = params["all"].as_bool().unwrap_or(false);
    let resolved = runtime.prompts.resolve_approvals(&session.sid, choice, all);
    Ok(json!({ "resolved": resolved }))
}

fn clarify_respond(runtime: &Runtime, params: &Value) -> Result<Value> {
    let request_id = str_param(params, "request_id").unwrap_or_default();
    let answer = params["answer"].as_str().unwrap_or_default().to_owned();
    if runtime.prompts.answer(request_id, answer) {
        Ok(json!({"status": "ok"}))
    } else {
        Err(RpcError::new(codes::BUSY, "no pending answer request"))
    }
}

/// Starts a turn; while one runs, the prompt is queued to run next and the running turn is
/// interrupted (Hermes's default `busy_input_mode: interrupt`), answering `{status: queued}`.
fn prompt_submit(runtime: &Arc<Runtime>, transport: &Transport, params: &Value) -> Result<Handled> {
    let session = live_session(runtime, params)?;
    let text = params
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(codes::INVALID_PARAMS, "text required"))?
        .to_owned();
    let interrupt = Arc::new(Notify::new());
    let (done_tx, done_rx) = tokio::sync::watch::channel(());
    {
        let mut state = session.state.lock().expect("not poisoned");
        state.last_active = unix_now();
        if let Some(running) = state.running.as_mut() {
            running.queued = Some((text, transport.clone()));
            running.interrupt.notify_one();
            return Ok(Handled::Reply(json!({"status": "queued"})));
        }
        // Like Hermes, a prompt re-binds the session to the connection that sent it.
        state.transport = transport.clone();
        state.running = Some(RunningTurn {
            interrupt: interrupt.clone(),
            done: done_rx,
            queued: None,
        });
    }
    let runtime = runtime.clone();
    let turns = async move {
        let mut next = Some((text, interrupt));
        while let Some((text, interrupt)) = next.take() {
            let complete = agent::run_turn(runtime.clone(), session.clone(), text, interrupt).await;
            // Settle what runs next before telling the client this turn is over, so a prompt
            // sent on seeing `message.complete` starts a turn instead of being queued.
            let queued = {
                let mut state = session.state.lock().expect("not poisoned");
                let queued = state.running.as_mut().and_then(|r| r.queued.take());
                match (queued, state.running.as_mut()) {
                    (Some((text, transport)), Some(running)) => {
                        // A fresh interrupt: the one that stopped this turn must not stop the
                        // next.
                        running.interrupt = Arc::new(Notify::new());
                        Some((text, transport, running.interrupt.clone()))
                    }
                    _ => {
                        state.running = None;
                        None
                    }
                }
            };
            session.emit("message.complete", complete);
            if let Some((text, transport, interrupt)) = queued {
                session.state.lock().expect("not poisoned").transport = transport;
                next = Some((text, interrupt));
            }
        }
        drop(done_tx);
    };
    Ok(Handled::ReplyThen(
        json!({"status": "streaming"}),
        turns.boxed(),
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
