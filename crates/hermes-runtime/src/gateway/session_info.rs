//! `session.info`: what a live session's agent has and how it is set, in Hermes 0.19's shape.
//! Before the agent is announced a reply carries only what is known without one ([`lazy`]);
//! once it is, the whole of it ([`full`]), as the event that announces it and every change to
//! a setting does.

use hermes_native::config::HermesConfig;
use hermes_native::events::{NativeUsage, SessionInfo};
use hermes_native::profile::DEFAULT_PROFILE;
use serde::Serialize;
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
    let mut info = unchanged_by_a_turn(runtime, session).await;
    set_over(&mut info, ChangedByATurn::now(session));
    info
}

/// What a turn changes in a session's info: set over the rest of it after every turn.
#[derive(Serialize)]
struct ChangedByATurn {
    model: String,
    title: String,
    running: bool,
    usage: NativeUsage,
}

impl ChangedByATurn {
    fn now(session: &LiveSession) -> Self {
        let (title, running) = {
            let state = session.state.lock().expect("not poisoned");
            (
                state.title.clone().unwrap_or_default(),
                state.running.is_some(),
            )
        };
        Self {
            model: session.model(),
            title,
            running,
            usage: session.usage_now(),
        }
    }
}

fn set_over(info: &mut SessionInfo, changed: ChangedByATurn) {
    let changed = object(serde_json::to_value(changed).expect("a turn's changes serialize"));
    // `after_turn` joins the two as text, which holds only while no field is in both.
    debug_assert!(
        changed.keys().all(|key| !info.other.contains_key(key)),
        "a field a turn changes is also in the rest of the info"
    );
    info.other.extend(changed);
}

/// The info but for what a turn changes ([`ChangedByATurn`]).
async fn unchanged_by_a_turn(runtime: &Runtime, session: &LiveSession) -> SessionInfo {
    let config = HermesConfig::load(&session.home).await.unwrap_or_default();
    // A client waits for this (it is the reply of several methods): MCP servers that take
    // longer to list their tools are shown as still connecting.
    let (toolbox, problems, connecting) =
        match tokio::time::timeout(MCP_WAIT, ToolBox::for_turn(runtime, &config)).await {
            Ok((toolbox, problems)) => (toolbox, problems, false),
            Err(_) => (ToolBox::built_ins(&config), Vec::new(), true),
        };
    let settings = session.settings();
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
                .names()
                .filter(|tool| tool.starts_with(&prefix))
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
            "stored_session_id": session.stored_id,
            "desktop_contract": DESKTOP_CONTRACT,
            "version": crate::HERMES_COMPAT_VERSION,
            "profile_name": session.profile.as_deref().unwrap_or(DEFAULT_PROFILE),
            "mcp_servers": mcp_servers,
            "system_prompt": "",
        })),
    }
}

/// Sends the session's whole info as a `session.info` event; from now on its replies carry
/// the whole info too.
pub async fn announce(runtime: &Runtime, session: &LiveSession) -> SessionInfo {
    let mut info = unchanged_by_a_turn(runtime, session).await;
    let text = serde_json::to_string(&info).expect("session info always serializes");
    session.state.lock().expect("not poisoned").info = Some(text.into());
    // The event is that text with what a turn changes joined on, as after a turn: the info
    // is not written out a second time.
    after_turn(session);
    set_over(&mut info, ChangedByATurn::now(session));
    info
}

/// After each turn, as Hermes does: the session's info again, with what a turn changes (its
/// model, title, usage, and that it no longer runs) set over the rest of what was last
/// announced, as text: listing tools and asking git for the branch at every turn would cost
/// more than it tells, and so would reading the rest back.
pub fn after_turn(session: &LiveSession) {
    let Some(unchanged) = session.state.lock().expect("not poisoned").info.clone() else {
        return;
    };
    let changed =
        serde_json::to_string(&ChangedByATurn::now(session)).expect("a turn's changes serialize");
    let payload = joined(&unchanged, &changed)
        .and_then(|text| serde_json::value::RawValue::from_string(text).ok());
    match payload {
        Some(payload) => session.emit_payload(SessionInfo::kind(), &payload),
        None => tracing::warn!("the session's last info is not a JSON object"),
    }
}

/// The text of one JSON object with the fields of two, each the text of an object (as
/// `serde_json` writes it, with no space around its braces) and no field in both.
fn joined(first: &str, second: &str) -> Option<String> {
    let head = first.strip_suffix('}')?;
    let tail = second.strip_prefix('{')?;
    let comma = if head == "{" || tail == "}" { "" } else { "," };
    Some(format!("{head}{comma}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::joined;
    use serde_json::{Value, json};

    #[test]
    fn two_objects_join_into_one_with_the_fields_of_both() {
        let joined_value = |a: Value, b: Value| -> Value {
            let text = joined(&a.to_string(), &b.to_string()).expect("two objects");
            serde_json::from_str(&text).expect("one object")
        };
        assert_eq!(
            joined_value(json!({"a": 1, "b": {"c": [2]}}), json!({"d": "}"})),
            json!({"a": 1, "b": {"c": [2]}, "d": "}"})
        );
        assert_eq!(joined_value(json!({}), json!({"d": 1})), json!({"d": 1}));
        assert_eq!(joined_value(json!({"a": 1}), json!({})), json!({"a": 1}));
        assert_eq!(joined("[1]", "{}"), None);
    }
}
