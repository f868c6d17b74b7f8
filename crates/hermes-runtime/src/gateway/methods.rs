//! The gateway methods this runtime implements, with Hermes 0.19's shapes and error codes.
//! Every other method answers `-32601`. Each method's name, params and result are declared once,
//! in `hermes_native::methods`; the table below binds each to its handler, and the list of
//! implemented methods is that table.

use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_native::config::HermesConfig;
use hermes_native::events::CompletionStatus;
use hermes_native::methods::*;
use hermes_native::profile::DEFAULT_PROFILE;
use hermes_native::{LiveSessionId, NativeEvent, StoredSessionId, codes};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;

use super::{
    background, completion, compress, facts, models, rollback, session_info, session_work,
    settings, skills,
};
use crate::model::{ChatMessage, Role};
use crate::runtime::Runtime;
use crate::session::{self, LiveSession, RunningTurn, SessionSettings, SessionState, Transport};
use crate::store::{SessionRow, unix_now};
use crate::{agent, title};

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

pub(super) type Result<T> = std::result::Result<T, RpcError>;

/// The reply of a handler: its method's result type.
fn reply<T: Serialize>(result: T) -> Result<Handled> {
    serde_json::to_value(result)
        .map(Handled::Reply)
        .map_err(handler_error)
}

/// The params of method `M`; a shape that does not fit is `-32602`.
fn params<M: Method>(params: Value) -> Result<M::Params> {
    serde_json::from_value(params).map_err(|e| {
        RpcError::new(
            codes::INVALID_PARAMS,
            format!("invalid params for {}: {e}", M::NAME),
        )
    })
}

/// Binds each implemented method to its handler: `Method => handler(args…)`, where the handler
/// gets the method's typed params as `p`. Generates `dispatch` and `IMPLEMENTED`.
macro_rules! methods {
    ($runtime:ident, $transport:ident, $p:ident; $($method:ty => $call:expr,)*) => {
        /// Methods this runtime answers; the native catalog marks them as implemented.
        pub const IMPLEMENTED: &[&str] = &[$(<$method as Method>::NAME),*];

        pub async fn dispatch(
            $runtime: &Arc<Runtime>,
            $transport: &Transport,
            method: &str,
            raw: Value,
        ) -> Result<Handled> {
            $(
                if method == <$method as Method>::NAME {
                    let $p = params::<$method>(raw)?;
                    return $call;
                }
            )*
            Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("unknown method: {method}"),
            ))
        }
    };
}

methods! { runtime, transport, p;
    SessionCreate => announced(runtime, session_create(runtime, transport, p).await?),
    SessionResume => announced(runtime, session_resume(runtime, transport, p).await?),
    SessionList => reply(session_list(runtime, p).await?),
    SessionMostRecent => reply(session_most_recent(runtime, p).await?),
    SessionActiveList => reply(session_active_list(runtime, p)),
    SessionHistory => reply(session_history(runtime, p)?),
    SessionClose => reply(session_close(runtime, p).await),
    SessionDelete => reply(session_delete(runtime, p).await?),
    SessionTitle => reply(session_title(runtime, p).await?),
    SessionUsage => reply(session_usage(runtime, p)?),
    SessionInterrupt => reply(session_interrupt(runtime, p)?),
    ApprovalRespond => reply(approval_respond(runtime, p)?),
    ClarifyRespond => reply(clarify_respond(runtime, p)?),
    PromptSubmit => prompt_submit(runtime, transport, p),
    PetInfo => reply(switched_off(p)),
    PetInfoMeta => reply(switched_off(p)),
    PetCells => reply(switched_off(p)),
    UsageBars => reply(no_hosted_account(p)),
    CronManage => reply(cron_manage(runtime, p).await?),
    SetupStatus => reply(facts::setup_status(p)),
    AgentsList => reply(facts::agents_list(p)),
    ProcessList => reply(facts::process_list(runtime, p)?),
    ToolsetsList => reply(facts::toolsets(runtime, p, false).await?),
    ToolsList => reply(facts::toolsets(runtime, p, true).await?),
    ToolsShow => reply(facts::tools_show(runtime, p).await?),
    ConfigGet => reply(facts::config_get(runtime, p).await?),
    CommandsCatalog => reply(facts::commands_catalog(p)),
    SessionUndo => reply(session_work::undo(runtime, p)?),
    SessionStatus => reply(session_work::status(runtime, p).await?),
    SessionSave => reply(session_work::save(runtime, p).await?),
    InsightsGet => reply(session_work::insights(runtime, p).await?),
    CompletePath => reply(completion::path(runtime, p).await),
    CompleteSlash => reply(completion::slash(p)),
    SessionBranch => announced(runtime, session_branch(runtime, transport, p).await?),
    SessionContextBreakdown => reply(session_work::context_breakdown(runtime, p).await?),
    SessionSteer => reply(session_work::steer(runtime, p)?),
    ConfigShow => reply(failing_as(codes::CONFIG_SHOW_FAILED, settings::config_show(runtime, p).await)?),
    ConfigSet => reply(failing_as(codes::SETTING_FAILED, settings::config_set(runtime, transport, p).await)?),
    SessionCwdSet => reply(settings::cwd_set(runtime, p).await?),
    ToolsConfigure => reply(failing_as(codes::TOOLS_CONFIGURE_FAILED, settings::tools_configure(runtime, p).await)?),
    ReloadMcp => reply(failing_as(codes::RELOAD_FAILED, settings::reload_mcp(runtime, p).await)?),
    SessionActivate => reply(session_work::activate(runtime, transport, p).await?),
    PromptBackground => reply(background::prompt(runtime, p).await?),
    ProcessStop => reply(background::stop_all(p)),
    ProcessKill => reply(background::kill(runtime, p)?),
    SubagentInterrupt => reply(background::interrupt_subagent(p)?),
    ModelOptions => reply(failing_as(codes::MODEL_OPTIONS_FAILED, models::options(runtime, p).await)?),
    SessionCompress => reply(compress::compress(runtime, p).await?),
    ReloadEnv => reply(reload_env(runtime, p)?),
    SudoRespond => reply(waiting_answer(runtime, p.request_id, p.password, "password")?),
    SecretRespond => reply(waiting_answer(runtime, p.request_id, p.value, "value")?),
    SkillsManage => reply(skills::manage(runtime, p).await?),
    SkillsReload => reply(skills::reload(runtime, p).await?),
    RollbackList => reply(rollback::list(runtime, p).await?),
    RollbackDiff => reply(rollback::diff(runtime, p).await?),
    RollbackRestore => reply(rollback::restore(runtime, p).await?),
}

async fn cron_manage(runtime: &Runtime, p: CronManageParams) -> Result<Value> {
    crate::cron::manage(runtime, p).await.map_err(|unknown| {
        RpcError::new(
            codes::UNKNOWN_CRON_ACTION,
            format!("unknown cron action: {}", unknown.0),
        )
    })
}

/// A handler's result with its internal failures (a file that could not be read or written)
/// under the method's own code, as Hermes numbers them.
fn failing_as<T>(code: i64, result: Result<T>) -> Result<T> {
    result.map_err(|mut e| {
        if e.code == codes::INTERNAL {
            e.code = code;
        }
        e
    })
}

/// A param that is set and not empty (Hermes treats `""` as unset).
fn given(param: &Option<String>) -> Option<&str> {
    param.as_deref().filter(|s| !s.is_empty())
}

/// The live session named by `session_id`; missing or unknown is 4001, as in Hermes.
pub(super) fn live_session(
    runtime: &Runtime,
    sid: &Option<LiveSessionId>,
) -> Result<Arc<LiveSession>> {
    sid.as_ref()
        .filter(|sid| !sid.as_str().is_empty())
        .and_then(|sid| runtime.session(sid.as_str()))
        .ok_or_else(|| RpcError::new(codes::LIVE_SESSION_NOT_FOUND, "session not found"))
}

pub(super) fn handler_error(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(codes::INTERNAL, e.to_string())
}

/// Messages as Hermes shows them: tool rows by name, empty assistant rows left out.
pub(super) fn history(messages: &[ChatMessage]) -> Vec<HistoryMessage> {
    messages
        .iter()
        .filter_map(|m| match m.role {
            Role::System => None,
            Role::Tool => Some(HistoryMessage {
                role: "tool".to_owned(),
                name: m.tool_name.clone(),
                context: Some(m.content.clone()),
                ..Default::default()
            }),
            _ if m.content.trim().is_empty() => None,
            role => Some(HistoryMessage {
                role: role.as_str().to_owned(),
                text: Some(m.content.clone()),
                ..Default::default()
            }),
        })
        .collect()
}

/// A session that was opened or resumed, replied to first; then its agent's tools (built-ins
/// and those of the home's MCP servers) are announced in a `session.info` event, as Hermes does
/// once it has built the agent.
trait Opened: Serialize {
    fn live(&self) -> &LiveSessionId;
}

impl Opened for SessionCreated {
    fn live(&self) -> &LiveSessionId {
        &self.session_id
    }
}

impl Opened for SessionBranched {
    fn live(&self) -> &LiveSessionId {
        &self.session_id
    }
}

impl Opened for SessionResumed {
    fn live(&self) -> &LiveSessionId {
        &self.session_id
    }
}

fn announced<T: Opened>(runtime: &Arc<Runtime>, opened: T) -> Result<Handled> {
    let session = runtime
        .session(opened.live().as_str())
        .ok_or_else(|| handler_error("the session closed while it opened"))?;
    let value = serde_json::to_value(&opened).map_err(handler_error)?;
    let runtime = runtime.clone();
    let announce = async move {
        session_info::announce(&runtime, &session).await;
    };
    Ok(Handled::ReplyThen(value, announce.boxed()))
}

/// What opening a live session needs from the params of `session.create` or `session.resume`.
struct Opening<'p> {
    profile: Option<&'p str>,
    source: Option<&'p str>,
    close_on_disconnect: bool,
    /// Where the session works, when the client says (a directory; else the default).
    cwd: Option<std::path::PathBuf>,
}

/// Registers a new live session bound to `transport`.
async fn open_live(
    runtime: &Runtime,
    transport: &Transport,
    opening: Opening<'_>,
    row: SessionRow,
    messages: Vec<ChatMessage>,
    persisted: bool,
) -> Result<Arc<LiveSession>> {
    let profile = opening
        .profile
        .filter(|p| *p != DEFAULT_PROFILE)
        .map(str::to_owned);
    let home = runtime
        .profile_home(profile.as_deref())
        .map_err(handler_error)?;
    let config = HermesConfig::load(&home).await.map_err(handler_error)?;
    let now = unix_now();
    let session = Arc::new(LiveSession {
        sid: session::new_live_id(),
        stored_id: row.id,
        home,
        profile,
        source: opening.source.unwrap_or(&row.source).to_owned(),
        started_at: if persisted { row.started_at } else { now },
        model_name: config.model_name(),
        context_window: config.context_length(),
        state: Mutex::new(SessionState {
            messages,
            transport: transport.clone(),
            closed: false,
            running: None,
            title: row.title,
            persisted,
            setup_noted: persisted,
            close_on_disconnect: opening.close_on_disconnect,
            usage: Default::default(),
            last_active: now,
            steer: None,
            settings: match opening.cwd.filter(|dir| dir.is_dir()) {
                Some(cwd) => SessionSettings {
                    cwd,
                    cwd_chosen: true,
                    ..SessionSettings::new(&config)
                },
                None => SessionSettings::new(&config),
            },
            compressions: 0,
            summary: None,
            sudo_password: None,
            passthrough: Default::default(),
            info: None,
        }),
        writes: Default::default(),
    });
    runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .insert(session.sid.clone(), session.clone());
    Ok(session)
}

async fn session_create(
    runtime: &Runtime,
    transport: &Transport,
    p: SessionCreateParams,
) -> Result<SessionCreated> {
    let row = SessionRow {
        id: session::new_stored_id(),
        source: "tui".to_owned(),
        model: String::new(),
        started_at: unix_now(),
        title: given(&p.title).map(str::to_owned),
        message_count: 0,
        profile_name: None,
    };
    let opening = Opening {
        profile: given(&p.profile),
        source: given(&p.source),
        close_on_disconnect: p.close_on_disconnect.unwrap_or(false),
        cwd: given(&p.cwd).map(settings::absolute),
    };
    let session = open_live(runtime, transport, opening, row, Vec::new(), false).await?;
    Ok(SessionCreated {
        session_id: session.sid.clone(),
        stored_session_id: StoredSessionId::new(session.stored_id.clone()),
        message_count: 0,
        messages: Vec::new(),
        info: session_info::lazy(&session),
    })
}

async fn session_branch(
    runtime: &Runtime,
    transport: &Transport,
    p: SessionBranchParams,
) -> Result<SessionBranched> {
    let parent = live_session(runtime, &p.session_id)?;
    let (messages, title) = {
        let state = parent.state.lock().expect("not poisoned");
        // Mid-turn, the conversation may hold a call whose result has not come yet.
        session_work::idle(&state, "/branch")?;
        (state.messages.clone(), state.title.clone())
    };
    if messages.iter().all(|m| m.role == Role::System) {
        return Err(RpcError::new(
            codes::NOTHING_TO_BRANCH,
            "nothing to branch — send a message first",
        ));
    }
    let failed =
        |e: sqlx::Error| RpcError::new(codes::BRANCH_FAILED, format!("branch failed: {e}"));
    let db = runtime.db(&parent.home).await.map_err(failed)?;
    let title = match given(&p.name) {
        Some(name) => name.to_owned(),
        None => {
            let lineage = title.filter(|t| !t.is_empty());
            db.next_title_in_lineage(lineage.as_deref().unwrap_or("branch"))
                .await
                .map_err(failed)?
        }
    };
    let row = SessionRow {
        id: session::new_stored_id(),
        source: parent.source.clone(),
        model: parent.model(),
        started_at: unix_now(),
        title: Some(title.clone()),
        message_count: messages.len() as i64,
        profile_name: parent.profile.clone(),
    };
    db.insert_branch(&row, &parent.stored_id, &messages)
        .await
        .map_err(failed)?;
    let opening = Opening {
        profile: parent.profile.as_deref(),
        source: Some(&parent.source),
        close_on_disconnect: false,
        cwd: Some(parent.settings().cwd),
    };
    let branch = open_live(runtime, transport, opening, row, messages, true).await?;
    Ok(SessionBranched {
        session_id: branch.sid.clone(),
        title,
        parent: StoredSessionId::new(parent.stored_id.clone()),
    })
}

async fn session_resume(
    runtime: &Runtime,
    transport: &Transport,
    p: SessionResumeParams,
) -> Result<SessionResumed> {
    let wanted = given(&p.session_id)
        .ok_or_else(|| RpcError::new(codes::SESSION_ID_REQUIRED, "session_id required"))?;
    let profile = given(&p.profile).filter(|p| *p != DEFAULT_PROFILE);
    let home = runtime.profile_home(profile).map_err(handler_error)?;
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
    // One closed since it was found is not live any more.
    let bound = |session: &Arc<LiveSession>| {
        let mut state = session.state.lock().expect("not poisoned");
        state.bind(transport)
    };
    let session = match live.filter(bound) {
        Some(session) => session,
        None => {
            let messages = db.messages(&stored_id).await.map_err(handler_error)?;
            // As Hermes: a resumed session works where it was stored as working.
            let stored_cwd = db.stored_cwd(&stored_id).await.map_err(handler_error)?;
            let opening = Opening {
                profile: given(&p.profile),
                source: given(&p.source),
                close_on_disconnect: p.close_on_disconnect.unwrap_or(false),
                cwd: stored_cwd.map(std::path::PathBuf::from),
            };
            open_live(runtime, transport, opening, row, messages, true).await?
        }
    };
    let (messages, running) = {
        let state = session.state.lock().expect("not poisoned");
        (history(&state.messages), state.running.is_some())
    };
    Ok(SessionResumed {
        session_id: session.sid.clone(),
        resumed: StoredSessionId::new(stored_id.clone()),
        session_key: stored_id,
        message_count: messages.len() as u64,
        messages,
        info: session_info::lazy(&session),
        inflight: Value::Null,
        running,
        status: if running { "streaming" } else { "idle" }.to_owned(),
        started_at: session.started_at,
    })
}

async fn session_list(runtime: &Runtime, p: SessionListParams) -> Result<SessionListed> {
    let home = runtime
        .profile_home(given(&p.profile))
        .map_err(handler_error)?;
    let limit = p.limit.filter(|l| *l > 0).unwrap_or(200);
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let rows = db.list_sessions(limit).await.map_err(handler_error)?;
    let sessions = rows
        .into_iter()
        .map(|row| StoredSessionSummary {
            id: StoredSessionId::new(row.id),
            title: row.title.unwrap_or_default(),
            preview: row.preview,
            started_at: row.started_at,
            message_count: row.message_count.max(0) as u64,
            source: row.source,
            other: Default::default(),
        })
        .collect();
    Ok(SessionListed { sessions })
}

async fn session_most_recent(runtime: &Runtime, p: ProfileParams) -> Result<MostRecentSession> {
    let home = runtime
        .profile_home(given(&p.profile))
        .map_err(handler_error)?;
    let db = runtime.db(&home).await.map_err(handler_error)?;
    let newest = db.list_sessions(1).await.map_err(handler_error)?;
    Ok(match newest.into_iter().next() {
        Some(row) => MostRecentSession {
            session_id: Some(StoredSessionId::new(row.id)),
            title: Some(row.title.unwrap_or_default()),
            started_at: Some(row.started_at),
            source: Some(row.source),
        },
        None => MostRecentSession::default(),
    })
}

fn session_active_list(runtime: &Runtime, p: SessionActiveListParams) -> ActiveSessions {
    let current = given(&p.current_session_id).unwrap_or_default();
    let mut sessions = runtime.live_sessions();
    sessions.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
    let sessions = sessions
        .iter()
        .map(|s| {
            // Before the lock: `model()` takes it too.
            let model = s.model();
            let state = s.state.lock().expect("not poisoned");
            let preview = state
                .messages
                .iter()
                .rev()
                .find(|m| m.role != Role::Tool && !m.content.trim().is_empty())
                .map(|m| m.content.chars().take(160).collect::<String>())
                .unwrap_or_default();
            ActiveSession {
                current: s.sid.as_str() == current,
                id: s.sid.clone(),
                last_active: state.last_active,
                message_count: state.messages.len() as u64,
                model,
                preview,
                session_key: s.stored_id.clone(),
                started_at: s.started_at,
                // Hermes's live status words (`session.activate` uses them too).
                status: if state.running.is_some() {
                    "working"
                } else {
                    "idle"
                }
                .to_owned(),
                title: state.title.clone().unwrap_or_default(),
                other: Default::default(),
            }
        })
        .collect();
    ActiveSessions { sessions }
}

fn session_history(runtime: &Runtime, p: LiveSessionParams) -> Result<HistoryReply> {
    let session = live_session(runtime, &p.session_id)?;
    let messages = history(&session.state.lock().expect("not poisoned").messages);
    Ok(HistoryReply {
        count: messages.len() as u64,
        messages,
    })
}

/// Closing a live session that does not exist is not an error: `{closed: false}`.
async fn session_close(runtime: &Runtime, p: LiveSessionParams) -> SessionClosed {
    let Ok(session) = live_session(runtime, &p.session_id) else {
        return SessionClosed { closed: false };
    };
    close(runtime, &session, "tui_close").await;
    SessionClosed { closed: true }
}

/// Interrupts the session's turn, forgets the live session and ends its stored row. Its client
/// hears nothing more of it, not even the end of the turn it ran, as with Hermes.
pub async fn close(runtime: &Runtime, session: &LiveSession, reason: &str) {
    close_if(runtime, session, reason, |_| true).await;
}

/// Closes the session as [`close`] does if `still` holds of it then (and it is not closed yet),
/// decided under the locks a resume and a prompt find and bind it under: one that comes first
/// makes `still` see it bound, one that comes after finds it closed. Returns whether it closed.
pub async fn close_if(
    runtime: &Runtime,
    session: &LiveSession,
    reason: &str,
    still: impl FnOnce(&SessionState) -> bool,
) -> bool {
    let running = {
        let mut sessions = runtime.sessions.lock().expect("not poisoned");
        let mut state = session.state.lock().expect("not poisoned");
        if state.closed || !still(&state) {
            return false;
        }
        sessions.remove(&session.sid);
        state.closed = true;
        state.transport = Transport::nowhere();
        state.running.as_mut().map(|r| {
            r.queued = None;
            (r.interrupt.clone(), r.done.clone())
        })
    };
    runtime.prompts.forget_session(&session.sid);
    if let Some((interrupt, mut done)) = running {
        interrupt.notify_one();
        let _ = done.changed().await;
    }
    // Read once the turn has ended: its first write may have made the row meanwhile.
    let persisted = session.state.lock().expect("not poisoned").persisted;
    if persisted && let Ok(db) = runtime.db(&session.home).await {
        let _ = db.end_session(&session.stored_id, reason).await;
    }
    true
}

async fn session_delete(runtime: &Runtime, p: SessionDeleteParams) -> Result<SessionDeleted> {
    let target = given(&p.session_id)
        .ok_or_else(|| RpcError::new(codes::SESSION_ID_REQUIRED, "session_id required"))?;
    let home = runtime
        .profile_home(given(&p.profile))
        .map_err(handler_error)?;
    let active = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .any(|s| s.stored_id == target);
    if active {
        return Err(RpcError::new(
            codes::SESSION_ACTIVE,
            "cannot delete an active session",
        ));
    }
    let db = runtime.db(&home).await.map_err(handler_error)?;
    if db.delete_session(target).await.map_err(handler_error)? {
        Ok(SessionDeleted {
            deleted: StoredSessionId::new(target),
        })
    } else {
        Err(RpcError::new(codes::SESSION_NOT_FOUND, "session not found"))
    }
}

async fn session_title(runtime: &Runtime, p: SessionTitleParams) -> Result<SessionTitled> {
    let session = live_session(runtime, &p.session_id)?;
    let Some(title) = p.title else {
        let title = session.state.lock().expect("not poisoned").title.clone();
        return Ok(SessionTitled {
            title: title.unwrap_or_default(),
            session_key: Some(session.stored_id.clone()),
            pending: None,
        });
    };
    let title = title.trim().to_owned();
    if title.is_empty() {
        return Err(RpcError::new(codes::TITLE_REQUIRED, "title required"));
    }
    // One writer of the session's rows at a time: a first turn's write also makes the row.
    let _writing = session.writes.lock().await;
    let persisted = {
        let mut state = session.state.lock().expect("not poisoned");
        state.title = Some(title.clone());
        state.persisted
    };
    let db = runtime.db(&session.home).await.map_err(handler_error)?;
    if !persisted {
        // An explicit title is intent enough to write the row now, as Hermes does.
        db.ensure_session(&SessionRow {
            id: session.stored_id.clone(),
            source: session.source.clone(),
            model: session.model(),
            started_at: session.started_at,
            title: Some(title.clone()),
            message_count: 0,
            profile_name: session.profile.clone(),
        })
        .await
        .map_err(handler_error)?;
        session.state.lock().expect("not poisoned").persisted = true;
    }
    db.set_title(&session.stored_id, &title)
        .await
        .map_err(handler_error)?;
    Ok(SessionTitled {
        pending: Some(false),
        title,
        session_key: None,
    })
}

fn session_usage(
    runtime: &Runtime,
    p: LiveSessionParams,
) -> Result<hermes_native::events::NativeUsage> {
    Ok(live_session(runtime, &p.session_id)?.usage_now())
}

fn session_interrupt(runtime: &Runtime, p: LiveSessionParams) -> Result<StatusReply> {
    let session = live_session(runtime, &p.session_id)?;
    {
        let mut state = session.state.lock().expect("not poisoned");
        if let Some(running) = state.running.as_mut() {
            running.queued = None;
            running.interrupt.notify_one();
        }
        // What was steered is for the turn that is being stopped.
        state.steer = None;
    }
    runtime.prompts.release(&session.sid);
    Ok(StatusReply::new("interrupted"))
}

fn approval_respond(runtime: &Runtime, p: ApprovalRespondParams) -> Result<ApprovalResolved> {
    let session = live_session(runtime, &p.session_id)?;
    let choice = ApprovalChoice::parse(given(&p.choice).unwrap_or("deny"));
    let all = p.all.unwrap_or(false);
    let resolved = runtime.prompts.resolve_approvals(&session.sid, choice, all);
    Ok(ApprovalResolved {
        resolved: resolved as u64,
    })
}

fn clarify_respond(runtime: &Runtime, p: ClarifyRespondParams) -> Result<StatusReply> {
    let request_id = given(&p.request_id).unwrap_or_default();
    if runtime
        .prompts
        .answer(request_id, p.answer.unwrap_or_default())
    {
        Ok(StatusReply::new("ok"))
    } else {
        Err(RpcError::new(codes::BUSY, "no pending answer request"))
    }
}

/// `reload.env`: the home's `.env` read again; how many variables changed.
fn reload_env(runtime: &Runtime, _: NoParams) -> Result<EnvReloaded> {
    let updated = runtime
        .dotenv(&runtime.root)
        .reload()
        .map_err(|e| RpcError::new(codes::RELOAD_FAILED, e.to_string()))?;
    Ok(EnvReloaded {
        updated: updated as u64,
    })
}

/// Answers a sudo or secret request, as Hermes does: `ok`; `expired` for a request no longer
/// waiting (it timed out, or the turn was interrupted); no request id is 4009.
fn waiting_answer(
    runtime: &Runtime,
    request_id: Option<String>,
    answer: Option<String>,
    what: &str,
) -> Result<StatusReply> {
    let Some(request_id) = request_id.filter(|id| !id.is_empty()) else {
        return Err(RpcError::new(
            codes::BUSY,
            format!("no pending {what} request"),
        ));
    };
    let status = match runtime
        .prompts
        .answer(&request_id, answer.unwrap_or_default())
    {
        true => "ok",
        false => "expired",
    };
    Ok(StatusReply::new(status))
}

/// Starts a turn; while one runs, the prompt is queued to run next and the running turn is
/// interrupted (Hermes's default `busy_input_mode: interrupt`), answering `{status: queued}`.
fn prompt_submit(
    runtime: &Arc<Runtime>,
    transport: &Transport,
    p: PromptSubmitParams,
) -> Result<Handled> {
    let session = live_session(runtime, &p.session_id)?;
    let text = p
        .text
        .ok_or_else(|| RpcError::new(codes::INVALID_PARAMS, "text required"))?;
    let interrupt = Arc::new(Notify::new());
    let (done_tx, done_rx) = tokio::sync::watch::channel(());
    {
        let mut state = session.state.lock().expect("not poisoned");
        // Like Hermes, a prompt re-binds the session to the connection that sent it, a queued
        // one too: the rest of the running turn goes there.
        if !state.bind(transport) {
            return Err(RpcError::new(
                codes::LIVE_SESSION_NOT_FOUND,
                "session not found",
            ));
        }
        if let Some(running) = state.running.as_mut() {
            running.queued = Some((text, transport.clone()));
            running.interrupt.notify_one();
            return reply(StatusReply::new(PROMPT_QUEUED));
        }
        state.running = Some(RunningTurn {
            interrupt: interrupt.clone(),
            done: done_rx,
            queued: None,
            prompt: text.clone(),
            streamed: String::new(),
        });
    }
    let runtime = runtime.clone();
    let turns = async move {
        let mut next = Some((text, interrupt));
        while let Some((text, interrupt)) = next.take() {
            let complete =
                agent::run_turn(runtime.clone(), session.clone(), text.clone(), interrupt).await;
            let answer = match &complete {
                NativeEvent::MessageComplete(done) if done.status == CompletionStatus::Complete => {
                    Some(done.text.clone())
                }
                _ => None,
            };
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
                        running.prompt = text.clone();
                        running.streamed.clear();
                        Some((text, transport, running.interrupt.clone()))
                    }
                    _ => {
                        state.running = None;
                        None
                    }
                }
            };
            session.emit(complete);
            session_info::after_turn(&session);
            if let Some(answer) = answer {
                title::after_turn(&runtime, &session, &text, &answer);
            }
            if let Some((text, transport, interrupt)) = queued {
                let mut state = session.state.lock().expect("not poisoned");
                // Closed meanwhile: the queued prompt goes with the session.
                if !state.bind(&transport) {
                    state.running = None;
                    break;
                }
                next = Some((text, interrupt));
            }
        }
        drop(done_tx);
    };
    let streaming =
        serde_json::to_value(StatusReply::new(PROMPT_STREAMING)).map_err(handler_error)?;
    Ok(Handled::ReplyThen(streaming, turns.boxed()))
}

/// Pets are drawn from sprite sheets and an optional hosted generator that this runtime does
/// not have: it answers as Hermes does with pets switched off, so clients that ask unprompted
/// (the TUI asks for `pet.cells` as it draws) show nothing instead of an error.
fn switched_off<P>(_: P) -> FeatureState {
    FeatureState::default()
}

/// Usage bars come from Hermes's hosted account; without one Hermes says they are unavailable.
fn no_hosted_account(_: NoParams) -> UsageAvailability {
    UsageAvailability {
        ok: true,
        available: false,
        other: Default::default(),
    }
}
