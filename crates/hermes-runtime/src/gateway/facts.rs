//! Gateway methods that report on the runtime without running a turn: whether a model is set
//! up, background work, toolsets and tools, configuration values.

use std::path::PathBuf;

use hermes_native::codes;
use hermes_native::config::HermesConfig;
use hermes_native::methods::{
    BackgroundProcesses, CommandCatalog, ConfigGetParams, LiveSessionParams, NoParams, SetupState,
    ToolSection, ToolSummary, ToolsShown, ToolsetEntry, ToolsetsListed,
};
use serde_json::{Value, json};

use super::methods::{Result, RpcError, handler_error, live_session};
use crate::config_view;
use crate::runtime::Runtime;
use crate::tools::{BUILT_IN_TOOLSETS, ToolBox, enabled_toolsets};

/// Always set up: without a provider, the offline scripted model answers (Hermes asks a new
/// user to set one up instead).
pub fn setup_status(_: NoParams) -> SetupState {
    SetupState {
        provider_configured: true,
    }
}

/// The agent starts no background processes here (its terminal tool runs each command to its
/// end), so there are never any; a live session is still required, as in Hermes.
pub fn process_list(runtime: &Runtime, p: LiveSessionParams) -> Result<BackgroundProcesses> {
    live_session(runtime, &p.session_id)?;
    Ok(BackgroundProcesses::default())
}

/// No slash commands: the gateway here runs none (no `slash.exec`, `command.dispatch`), so it
/// offers none; a client's own commands are its own.
pub fn commands_catalog(_: NoParams) -> CommandCatalog {
    CommandCatalog::default()
}

pub fn agents_list(_: NoParams) -> BackgroundProcesses {
    BackgroundProcesses::default()
}

/// The home whose configuration a call reads: its live session's, else the launch home (an
/// unknown session is no error here, as in Hermes).
fn home_of(runtime: &Runtime, session: &LiveSessionParams) -> PathBuf {
    session
        .session_id
        .as_ref()
        .and_then(|sid| runtime.session(sid.as_str()))
        .map(|session| session.home.clone())
        .unwrap_or_else(|| runtime.root.clone())
}

async fn config_of(runtime: &Runtime, session: &LiveSessionParams) -> Result<HermesConfig> {
    HermesConfig::load(&home_of(runtime, session))
        .await
        .map_err(handler_error)
}

/// The built-in toolsets, sorted by name; with their tools' names when `with_tools`.
pub async fn toolsets(
    runtime: &Runtime,
    p: LiveSessionParams,
    with_tools: bool,
) -> Result<ToolsetsListed> {
    let enabled = enabled_toolsets(&config_of(runtime, &p).await?);
    let mut toolsets: Vec<ToolsetEntry> = BUILT_IN_TOOLSETS
        .iter()
        .map(|toolset| ToolsetEntry {
            name: toolset.name.to_owned(),
            description: toolset.purpose.to_owned(),
            tool_count: toolset.tools.len() as u64,
            enabled: enabled.iter().any(|e| e == toolset.name),
            tools: with_tools.then(|| toolset.tools.iter().map(|t| (*t).to_owned()).collect()),
        })
        .collect();
    toolsets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ToolsetsListed { toolsets })
}

/// The tools a turn would have now (built-ins left on, and the MCP servers' tools), by toolset.
pub async fn tools_show(runtime: &Runtime, p: LiveSessionParams) -> Result<ToolsShown> {
    let config = config_of(runtime, &p).await?;
    let (toolbox, _) = ToolBox::for_turn(runtime, &config).await;
    let specs = toolbox.specs();
    let mut total = 0;
    let sections = toolbox
        .by_toolset()
        .into_iter()
        .map(|(name, mut tools)| {
            tools.sort();
            total += tools.len() as u64;
            let tools = tools
                .into_iter()
                .map(|tool| {
                    let description = specs
                        .iter()
                        .find(|spec| spec.name == tool)
                        .map(|spec| first_sentence(&spec.description))
                        .unwrap_or_default();
                    ToolSummary {
                        name: tool,
                        description,
                    }
                })
                .collect();
            ToolSection { name, tools }
        })
        .collect();
    Ok(ToolsShown { sections, total })
}

/// A description's first line, cut after its first sentence, as Hermes shortens it.
fn first_sentence(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(end) => line[..=end].to_owned(),
        None => line.to_owned(),
    }
}

/// One configuration value by key, with the reply shape Hermes gives that key. Credentials in
/// `full` are masked (Hermes shows them as they are).
pub async fn config_get(runtime: &Runtime, p: ConfigGetParams) -> Result<Value> {
    let home = home_of(
        runtime,
        &LiveSessionParams {
            session_id: p.session_id,
        },
    );
    let key = p.key.unwrap_or_default();
    if key == "mtime" {
        let modified = tokio::fs::metadata(home.join(hermes_native::config::CONFIG_FILE))
            .await
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok());
        return Ok(json!({"mtime": modified.map_or(0.0, |at| at.as_secs_f64())}));
    }
    let mut config = config_view::raw(&home).await.map_err(handler_error)?;
    let display = |name: &str| config.get("display").and_then(|d| d.get(name)).cloned();
    Ok(match key.as_str() {
        "skin" => json!({"value": display("skin").unwrap_or(json!("default"))}),
        "personality" => {
            let set = display("personality").filter(|v| !v.is_null() && *v != json!(""));
            json!({"value": set.unwrap_or(json!("none"))})
        }
        "prompt" => json!({"prompt": config.get("custom_prompt").cloned().unwrap_or(json!(""))}),
        "full" => {
            config_view::mask_credentials(&mut config);
            json!({"config": config})
        }
        _ => {
            return Err(RpcError::new(
                codes::UNKNOWN_CONFIG_KEY,
                format!("unknown config key: {key}"),
            ));
        }
    })
}
