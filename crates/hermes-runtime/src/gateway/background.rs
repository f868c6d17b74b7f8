//! Work the agent does besides the turn a client watches: a prompt run in the background
//! (`prompt.background`), background processes (`process.stop`, `process.kill`) and subagents
//! (`subagent.interrupt`), with Hermes 0.19's replies and codes.
//!
//! This runtime's terminal tool runs every command to its end and its agent delegates to no
//! subagent, so there are never background processes or subagents to stop: those methods
//! answer as Hermes does when there are none.

use std::sync::Arc;
use std::time::Duration;

use hermes_native::config::HermesConfig;
use hermes_native::events::{BackgroundComplete, CompletionStatus};
use hermes_native::methods::{
    BackgroundStarted, NoParams, ProcessKillParams, ProcessesKilled, PromptBackgroundParams,
    SubagentInterruptParams, SubagentInterrupted,
};
use hermes_native::{NativeEvent, codes};
use tokio::sync::Notify;

use super::methods::{Result, RpcError, handler_error, live_session};
use crate::runtime::Runtime;
use crate::session::{Detached, LiveSession};

/// How long a background prompt may run before it is interrupted.
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long an interrupted background prompt has to wind down.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// `prompt.background`: the prompt runs as the only prompt of a session of its own (stored as
/// `bg_…`, with the asking session's home and working directory); its final answer comes as
/// `background.complete` on the asking session. A turn running there does not stop it.
pub async fn prompt(
    runtime: &Arc<Runtime>,
    p: PromptBackgroundParams,
) -> Result<BackgroundStarted> {
    let parent = live_session(runtime, &p.session_id)?;
    let Some(text) = p.text.filter(|t| !t.is_empty()) else {
        return Err(RpcError::new(codes::REQUIRED, "text required"));
    };
    let config = HermesConfig::load(&parent.home)
        .await
        .map_err(handler_error)?;
    let task_id = format!("bg_{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    let opening = Detached {
        stored_id: task_id.clone(),
        home: parent.home.clone(),
        profile: parent.profile.clone(),
        source: "tui".to_owned(),
        title: None,
        // The asking session's model, switched or not, as Hermes builds it.
        model_name: Some(parent.model()),
    };
    let session = LiveSession::detached(opening, &config);
    session.state.lock().expect("not poisoned").settings.cwd = parent.settings().cwd;
    let runtime = runtime.clone();
    let id = task_id.clone();
    runtime.clone().spawn_background(async move {
        let text = run(&runtime, session, text).await;
        parent.emit(NativeEvent::BackgroundComplete(BackgroundComplete {
            task_id: id,
            text: Some(text),
        }));
    });
    Ok(BackgroundStarted { task_id })
}

/// Runs the background prompt to its end (bounded; interrupted when the runtime stops); its
/// final answer, or why there is none.
async fn run(runtime: &Arc<Runtime>, session: Arc<LiveSession>, text: String) -> String {
    let interrupt = Arc::new(Notify::new());
    let turn = crate::agent::run_turn(runtime.clone(), session, text, interrupt.clone());
    tokio::pin!(turn);
    let mut stopping = runtime.stopping.clone();
    let finished = tokio::select! {
        done = tokio::time::timeout(BACKGROUND_TIMEOUT, &mut turn) => done.ok(),
        _ = stopping.wait_for(|stopping| *stopping) => None,
    };
    let complete = match finished {
        Some(complete) => Some(complete),
        None => {
            interrupt.notify_one();
            tokio::time::timeout(WIND_DOWN, &mut turn).await.ok()
        }
    };
    match complete {
        Some(NativeEvent::MessageComplete(done))
            if done.status != CompletionStatus::Interrupted =>
        {
            done.text
        }
        _ => format!(
            "error: the background prompt was interrupted (it may run at most {} s, and not \
             past the runtime's stop)",
            BACKGROUND_TIMEOUT.as_secs()
        ),
    }
}

/// `process.stop`: there are no background processes here, so none is killed.
pub fn stop_all(_: NoParams) -> ProcessesKilled {
    ProcessesKilled { killed: 0 }
}

/// `process.kill`: a live session's background process by id; there are none here, so any
/// id is one the session does not have (4044).
pub fn kill(runtime: &Runtime, p: ProcessKillParams) -> Result<serde_json::Value> {
    live_session(runtime, &p.session_id)?;
    let id = p.process_id.unwrap_or_default();
    if id.is_empty() {
        return Err(RpcError::new(codes::REQUIRED, "process_id required"));
    }
    Err(RpcError::new(
        codes::NO_SUCH_PROCESS,
        format!("no such process: {id}"),
    ))
}

/// `subagent.interrupt`: there are no subagents here, so none is found.
pub fn interrupt_subagent(p: SubagentInterruptParams) -> Result<SubagentInterrupted> {
    let id = match p.subagent_id {
        Some(serde_json::Value::String(text)) => text,
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let id = id.trim().to_owned();
    if id.is_empty() {
        return Err(RpcError::new(
            codes::SUBAGENT_ID_REQUIRED,
            "subagent_id required",
        ));
    }
    Ok(SubagentInterrupted {
        found: false,
        subagent_id: id,
    })
}
