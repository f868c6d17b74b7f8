//! `session.info`: what a live session's agent has and how it is set, in Hermes 0.19's shape.
//! Before the agent is announced a reply carries only what is known without one ([`lazy`]);
//! once it is, the whole of it ([`full`]), as the event that announces it and every change to
//! a setting does.

use hermes_native::NativeEvent;
use hermes_native::config::HermesConfig;
use hermes_native::events::SessionInfo;
use hermes_native::profile::DEFAULT_PROFILE;
use serde_json::{Map, Value, json};

use crate::http::desktop::git::branch_of;
use crate::runtime::Runtime;
use crate::session::LiveSession;
use crate::tools::ToolBox;

/// How long the info waits for the MCP servers' tools.
const MCP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Hermes Desktop's backend contract version, which Hermes sends with every session's info.
const DESKTOP_CONTRACT: u64 = 4;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// What `session.create` and `session.resume` reply with: the agent is not built yet, so
/// `tools` is empty and `lazy` is set.
pub fn lazy(session: &LiveSession) -> SessionInfo {
    SessionInfo {
        tools: Default::default(),
        other: object(json!({
            "model": session.model(),
            "skills": {},
            "cwd": session.settings().cwd.display().to_string(),
            "lazy": true,
            "desktop_contract": DESKTOP_CONTRACT,
            "profile_name": session.profile.as_deref().unwrap_or(DEFAULT_PROFILE),
        })),
    }
}

/// What `session.cwd.set` replies before the agent is announced.
pub async fn lazy_cwd(session: &LiveSession) -> Value {
    let cwd = session.settings().cwd;
    json!({
        "cwd": cwd.display().to_string(),
        "branch": branch_of(&cwd).await,
        "project": null,
        "lazy": true,
    })
}

/// The whole info of a session whose agent is (being) announced: its model and provider, how
/// approvals and reasoning are set, its tools by toolset, where it works, its MCP servers.
pub async fn full(runtime: &Runtime, session: &LiveSession) -> SessionInfo {
    let config = HermesConfig::load(&session.home).await.unwrap_or_default();
    // A client waits for this (it is the reply of several methods): MCP servers that take
    // longer to list their tools are shown as still connecting.
    let (toolbox, problems, connecting) =
        match tokio::time::timeout(MCP_WAIT, ToolBox::for_turn(runtime, &config)).await {
            Ok((toolbox, problems)) => (toolbox, problems, false),
            Err(_) => (ToolBox::built_ins(&config), Vec::new(), true),
        };
    let settings = session.settings();
    let (running, title) = {
        let state = session.state.lock().expect("not poisoned");
        (state.running.is_some(), state.title.clone())
    };
    let approval_mode = config.approval_mode();
    let text_at = |dotted: &str| {
        config
            .value_at(dotted)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let reasoning = settings
        .reasoning
        .clone()
        .unwrap_or_else(|| text_at("agent.reasoning_effort"));
    let mcp_servers: Vec<Value> = config
        .mcp_servers
        .keys()
        .map(|name| {
            let prefix = format!("mcp__{name}__");
            let tools = toolbox
                .specs()
                .iter()
                .filter(|spec| spec.name.starts_with(&prefix))
                .count();
            let failed = problems
                .iter()
                .find(|problem| problem.starts_with(&format!("MCP server `{name}`")));
            // Why it failed is left out: the error may name the server's URL, with a token
            // in it, and `session.info` reaches every client of the session.
            let status = match (connecting, failed) {
                (true, _) => "connecting",
                (false, Some(_)) => "failed",
                (false, None) => "connected",
            };
            json!({
                "name": name, "transport": "http", "tools": tools,
                "connected": status == "connected", "disabled": false, "status": status,
            })
        })
        .collect();
    let cwd = settings.cwd.display().to_string();
    SessionInfo {
        tools: toolbox.by_toolset(),
        other: object(json!({
            "model": session.model(),
            "provider": config.model.provider_name(),
            "reasoning_effort": reasoning,
            "service_tier": "",
            "fast": false,
            "yolo": settings.yolo || approval_mode == "off",
            "approval_mode": approval_mode,
            "skills": {},
            "cwd": cwd,
            "branch": branch_of(&settings.cwd).await,
            "project": null,
            "personality": text_at("display.personality"),
            "running": running,
            "title": title.unwrap_or_default(),
            "stored_session_id": session.stored_id,
            "desktop_contract": DESKTOP_CONTRACT,
            "version": crate::HERMES_COMPAT_VERSION,
            "usage": session.usage_now(),
            "profile_name": session.profile.as_deref().unwrap_or(DEFAULT_PROFILE),
            "mcp_servers": mcp_servers,
            "system_prompt": "",
        })),
    }
}

/// Sends the session's whole info as a `session.info` event; from now on its replies carry
/// the whole info too.
pub async fn announce(runtime: &Runtime, session: &LiveSession) -> SessionInfo {
    let info = full(runtime, session).await;
    let text = serde_json::to_string(&info).expect("session info always serializes");
    session.state.lock().expect("not poisoned").info = Some(text.into());
    session.emit(NativeEvent::SessionInfo(info.clone()));
    info
}

/// After each turn, as Hermes does: the session's info again, with what a turn changes (its
/// model, title, usage, and that it no longer runs). The rest is what was last announced:
/// listing tools and asking git for the branch at every turn would cost more than it tells.
pub fn after_turn(session: &LiveSession) {
    let (info, title, running) = {
        let state = session.state.lock().expect("not poisoned");
        (
            state.info.clone(),
            state.title.clone(),
            state.running.is_some(),
        )
    };
    let Some(text) = info else {
        return;
    };
    let mut info: SessionInfo = match serde_json::from_str(&text) {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(error = %e, "the session's last info does not read back");
            return;
        }
    };
    let usage = serde_json::to_value(session.usage_now()).unwrap_or_default();
    for (key, value) in [
        ("model", json!(session.model())),
        ("title", json!(title.unwrap_or_default())),
        ("running", json!(running)),
        ("usage", usage),
    ] {
        info.other.insert(key.to_owned(), value);
    }
    session.emit(NativeEvent::SessionInfo(info));
}
