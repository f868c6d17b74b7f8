//! Gateway methods that change how the runtime or one live session works: `config.set`,
//! `config.show`, `session.cwd.set`, `tools.configure` and `reload.mcp`, with Hermes 0.19's
//! keys, replies and codes. Settings without a live session are written to the home's
//! `config.yaml`; those of a live session change only it, and an announced session is told
//! with a fresh `session.info`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hermes_native::config::{CONFIG_FILE, HermesConfig};
use hermes_native::events::Skin;
use hermes_native::methods::{
    ConfigSection, ConfigSetParams, ConfigShown, NoParams, ReloadMcpParams, SessionCwdSetParams,
    StatusReply, ToolsConfigureParams, ToolsConfigured,
};
use hermes_native::{EventFrame, LiveSessionId, NativeEvent, codes};
use serde_json::{Value, json};

use super::methods::{Result, RpcError, handler_error, live_session};
use super::session_info;
use crate::http::desktop::git::{self, branch_of};
use crate::http::desktop::workspace::expand_home;
use crate::runtime::Runtime;
use crate::session::{LiveSession, Transport};
use crate::store::GitPlace;
use crate::tools::{BUILT_IN_TOOLSETS, PLATFORM, enabled_toolsets};

fn refused(message: impl Into<String>) -> RpcError {
    RpcError::new(codes::UNKNOWN_CONFIG_KEY, message)
}

/// A value as Python's `str(value or "")` shows it: anything falsy is `""`.
fn text_or_empty(value: &Option<Value>) -> String {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => String::new(),
        Some(Value::Array(items)) if items.is_empty() => String::new(),
        Some(Value::Object(map)) if map.is_empty() => String::new(),
        Some(other) => python_str(other),
    }
}

/// A value as Python's `str(value)` shows it (`True`, `3`, text as it is).
fn python_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => "None".to_owned(),
        other => other.to_string(),
    }
}

/// The live session `session_id` names, if any: these methods treat an unknown id as none.
fn session_if_any(runtime: &Runtime, sid: &Option<LiveSessionId>) -> Option<Arc<LiveSession>> {
    sid.as_ref().and_then(|sid| runtime.session(sid.as_str()))
}

fn home_for(runtime: &Runtime, session: Option<&Arc<LiveSession>>) -> PathBuf {
    session.map_or_else(|| runtime.root.clone(), |s| s.home.clone())
}

/// Reads the home's `config.yaml`, applies `change` and writes it back. The caller holds
/// `runtime.config_lock` from before it read the values it changes, so that no other change
/// comes in between (two quick toggles must not both flip the same old value).
async fn edit_config(
    home: &Path,
    change: impl FnOnce(&mut HermesConfig) -> std::result::Result<(), serde_yaml::Error>,
) -> Result<()> {
    let mut config = HermesConfig::load(home).await.map_err(handler_error)?;
    change(&mut config).map_err(handler_error)?;
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || config.save(&home))
        .await
        .map_err(handler_error)?
        .map_err(handler_error)
}

/// Writes one dotted key of the home's config.
async fn write_key(home: &Path, dotted: &str, value: Value) -> Result<()> {
    let value = serde_yaml::to_value(value).map_err(handler_error)?;
    edit_config(home, |config| config.set_value_at(dotted, Some(value))).await
}

async fn config_of(home: &Path) -> Result<HermesConfig> {
    HermesConfig::load(home).await.map_err(handler_error)
}

/// Tells every announced live session its info anew (a runtime-wide setting changed).
async fn announce_all(runtime: &Runtime) {
    let sessions = runtime.live_sessions();
    for session in sessions {
        if session.announced() {
            session_info::announce(runtime, &session).await;
        }
    }
}

/// Tells one live session its info anew, if it was announced.
async fn announce_if_built(runtime: &Runtime, session: Option<&Arc<LiveSession>>) {
    if let Some(session) = session.filter(|s| s.announced()) {
        session_info::announce(runtime, session).await;
    }
}

/// `config.show`: the model, agent and environment rows of `/config`.
pub async fn config_show(runtime: &Runtime, _: NoParams) -> Result<ConfigShown> {
    let config = config_of(&runtime.root).await?;
    let top_text = |key: &str| {
        config
            .value_at(key)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let api_key = top_text("api_key");
    let api_key = if api_key.chars().count() > 4 {
        let last: String = api_key.chars().skip(api_key.chars().count() - 4).collect();
        format!("****{last}")
    } else {
        "(not set)".to_owned()
    };
    let base_url = Some(top_text("base_url"))
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| "(default)".to_owned());
    let toolsets: Vec<String> = config
        .value_at("enabled_toolsets")
        .and_then(|v| serde_yaml::from_value(v).ok())
        .unwrap_or_default();
    let verbose = config
        .value_at("verbose")
        .map(|v| python_str(&serde_json::to_value(v).unwrap_or_default()))
        .unwrap_or_else(|| "False".to_owned());
    let row = |label: &str, value: String| [label.to_owned(), value];
    let section = |title: &str, rows| ConfigSection {
        title: title.to_owned(),
        rows,
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    Ok(ConfigShown {
        sections: vec![
            section(
                "Model",
                vec![
                    row("Model", config.model_name()),
                    row("Base URL", base_url),
                    row("API Key", api_key),
                ],
            ),
            section(
                "Agent",
                vec![
                    row("Max Turns", config.max_turns().to_string()),
                    row(
                        "Toolsets",
                        if toolsets.is_empty() {
                            "all".to_owned()
                        } else {
                            toolsets.join(", ")
                        },
                    ),
                    row("Verbose", verbose),
                ],
            ),
            section(
                "Environment",
                vec![
                    row("Working Dir", cwd.display().to_string()),
                    row(
                        "Config File",
                        runtime.root.join(CONFIG_FILE).display().to_string(),
                    ),
                ],
            ),
        ],
    })
}

/// `~` expanded and a relative path made absolute against the runtime's own directory, as
/// Python's `abspath(expanduser(…))` does.
pub fn absolute(raw: &str) -> PathBuf {
    let expanded = expand_home(raw);
    let joined = std::env::current_dir().unwrap_or_default().join(expanded);
    // Lexically normalised (`..` and `.` taken out), as abspath does.
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `session.cwd.set`: where the session's commands run from now on.
pub async fn cwd_set(runtime: &Runtime, p: SessionCwdSetParams) -> Result<Value> {
    let session = live_session(runtime, &p.session_id)?;
    if session
        .state
        .lock()
        .expect("not poisoned")
        .running
        .is_some()
    {
        return Err(RpcError::new(codes::BUSY, "session busy"));
    }
    let raw = p.cwd.as_deref().unwrap_or_default().trim().to_owned();
    if raw.is_empty() {
        return Err(RpcError::new(codes::CWD_REQUIRED, "cwd required"));
    }
    let cwd = absolute(&raw);
    if !cwd.is_dir() {
        return Err(RpcError::new(
            codes::NO_SUCH_DIRECTORY,
            format!("working directory does not exist: {raw}"),
        ));
    }
    let announced = {
        // Checked again with the move: a turn may have started since.
        let mut state = session.state.lock().expect("not poisoned");
        if state.running.is_some() {
            return Err(RpcError::new(codes::BUSY, "session busy"));
        }
        state.settings.cwd = cwd.clone();
        state.settings.cwd_chosen = true;
        state.info.is_some()
    };
    store_cwd(runtime, &session, cwd).await;
    // As Hermes: the reply and a `session.info` event carry the same info.
    if announced {
        let info = session_info::announce(runtime, &session).await;
        serde_json::to_value(info).map_err(handler_error)
    } else {
        let info = session_info::lazy_cwd(&session).await;
        let event = serde_json::from_value(info.clone()).map_err(handler_error)?;
        session.emit(NativeEvent::SessionInfo(event));
        Ok(info)
    }
}

/// Stores a session's working directory with its row (when it has one yet) and then, off the
/// reply's path as Hermes does, the git branch and repository found there.
async fn store_cwd(runtime: &Runtime, session: &LiveSession, cwd: PathBuf) {
    let db = match runtime.db(&session.home).await {
        Ok(db) => db,
        Err(e) => {
            tracing::warn!(error = %e, "could not store the session's directory");
            return;
        }
    };
    match db.set_cwd(&session.stored_id, &cwd).await {
        Ok(true) => {}
        // No row yet: the first turn stores the directory (and, as in Hermes, no git probe).
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(error = %e, "could not store the session's directory");
            return;
        }
    }
    let id = session.stored_id.clone();
    // Each git command is bounded (`git::place_of`), so this task ends.
    tokio::spawn(async move {
        let place = git::place_of(&cwd).await;
        if place != GitPlace::default()
            && let Err(e) = db.set_git_place(&id, &cwd, &place).await
        {
            tracing::warn!(error = %e, "could not store the session's git branch");
        }
    });
}

/// `1|on|true|yes` is on, `0|off|false|no` off, anything else flips `current`.
fn toggled(value: &str, current: bool) -> bool {
    match value.trim().to_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => true,
        "0" | "off" | "false" | "no" => false,
        _ => !current,
    }
}

/// The effort a reasoning value names (`none` for off), or `None` if it names none.
fn reasoning_effort(value: &str) -> Option<&'static str> {
    const EFFORTS: &[&str] = &["minimal", "low", "medium", "high", "xhigh", "max", "ultra"];
    match value {
        "none" | "false" | "disabled" => Some("none"),
        effort => EFFORTS.iter().find(|e| **e == effort).copied(),
    }
}

const DETAIL_SECTIONS: &[&str] = &["thinking", "tools", "subagents", "activity"];
const DETAIL_MODES: &[&str] = &["hidden", "collapsed", "expanded"];
const STATUSBAR_MODES: &[&str] = &["off", "top", "bottom"];
const INDICATOR_STYLES: &[&str] = &["ascii", "emoji", "kaomoji", "unicode"];
const VERBOSE_CYCLE: &[&str] = &["off", "new", "all", "verbose"];

/// `mouse` values and what each means (`off`, `wheel`, `buttons`, `all`).
fn mouse_mode(value: &str) -> Option<&'static str> {
    Some(match value {
        "0" | "false" | "no" | "off" => "off",
        "1" | "all" | "any" | "full" | "on" | "true" | "yes" => "all",
        "button" | "buttons" | "click" => "buttons",
        "scroll" | "wheel" => "wheel",
        _ => return None,
    })
}

fn key_value(key: &str, value: impl Into<Value>) -> Value {
    json!({"key": key, "value": value.into()})
}

/// `config.set`: one setting by key (see `hermes_native::methods::ConfigSet`).
pub async fn config_set(
    runtime: &Runtime,
    transport: &Transport,
    p: ConfigSetParams,
) -> Result<Value> {
    let key = p.key.clone().unwrap_or_default();
    let session = session_if_any(runtime, &p.session_id);
    let home = home_for(runtime, session.as_ref());
    let _writing = runtime.config_lock.lock().await;
    let config = config_of(&home).await?;
    let value = text_or_empty(&p.value);
    let lowered = value.trim().to_lowercase();
    let display_text = |name: &str| {
        config
            .value_at(&format!("display.{name}"))
            .and_then(|v| v.as_str().map(|s| s.trim().to_lowercase()))
    };
    match key.as_str() {
        "model" if value.is_empty() => Err(refused("model value required")),
        "model" => switch_model(runtime, &home, &config, session.as_ref(), &value).await,
        "fast" => match lowered.as_str() {
            // No model here has a fast tier, so there is only `normal`.
            "status" | "normal" | "off" => {
                if lowered != "status" && session.is_none() {
                    write_key(&home, "agent.service_tier", json!("normal")).await?;
                }
                Ok(key_value("fast", "normal"))
            }
            "" | "toggle" | "fast" | "on" => {
                Err(refused("fast mode is not available for this model"))
            }
            _ => Err(refused(format!("unknown fast mode: {value}"))),
        },
        "busy" => match lowered.as_str() {
            "" | "status" => Ok(key_value(
                "busy",
                display_text("busy_input_mode")
                    .filter(|mode| ["queue", "steer", "interrupt"].contains(&mode.as_str()))
                    .unwrap_or_else(|| "interrupt".to_owned()),
            )),
            mode @ ("queue" | "steer" | "interrupt") => {
                write_key(&home, "display.busy_input_mode", json!(mode)).await?;
                Ok(key_value("busy", mode))
            }
            _ => Err(refused(format!("unknown busy mode: {value}"))),
        },
        "verbose" => {
            let next = if !value.is_empty() && value != "cycle" {
                if !VERBOSE_CYCLE.contains(&lowered.as_str()) {
                    return Err(refused(format!("unknown verbose mode: {value}")));
                }
                lowered.clone()
            } else {
                let current = match config.value_at("display.tool_progress") {
                    Some(serde_yaml::Value::Bool(false)) => "off".to_owned(),
                    Some(serde_yaml::Value::String(mode)) => mode,
                    _ => "all".to_owned(),
                };
                let at = VERBOSE_CYCLE
                    .iter()
                    .position(|m| *m == current)
                    .unwrap_or(2);
                VERBOSE_CYCLE[(at + 1) % VERBOSE_CYCLE.len()].to_owned()
            };
            write_key(&home, "display.tool_progress", json!(next)).await?;
            Ok(key_value("verbose", next))
        }
        "approval_mode" | "approvals.mode" => {
            if !["manual", "smart", "off"].contains(&lowered.as_str()) {
                return Err(refused(format!(
                    "unknown approval mode: {value}; pick one of manual|smart|off"
                )));
            }
            write_key(&home, "approvals.mode", json!(lowered)).await?;
            announce_all(runtime).await;
            Ok(key_value("approvals.mode", lowered))
        }
        "yolo" => yolo(runtime, &home, &config, session.as_ref(), &value, &p.scope).await,
        "reasoning" => reasoning(runtime, &home, session.as_ref(), &value, &p.scope).await,
        "details_mode" => {
            if !DETAIL_MODES.contains(&lowered.as_str()) {
                return Err(refused(format!("unknown details_mode: {value}")));
            }
            let mode = serde_yaml::Value::from(lowered.as_str());
            edit_config(&home, |config| {
                config.set_value_at("display.details_mode", Some(mode.clone()))?;
                for section in DETAIL_SECTIONS {
                    let dotted = format!("display.sections.{section}");
                    config.set_value_at(&dotted, Some(mode.clone()))?;
                }
                Ok(())
            })
            .await?;
            Ok(key_value("details_mode", lowered))
        }
        section_key if section_key.starts_with("details_mode.") => {
            let section = &section_key["details_mode.".len()..];
            if !DETAIL_SECTIONS.contains(&section) {
                return Err(refused(format!("unknown section: {section}")));
            }
            if !lowered.is_empty() && !DETAIL_MODES.contains(&lowered.as_str()) {
                return Err(refused(format!("unknown details_mode: {value}")));
            }
            let dotted = format!("display.sections.{section}");
            let mode = (!lowered.is_empty()).then(|| serde_yaml::Value::from(lowered.as_str()));
            edit_config(&home, |config| config.set_value_at(&dotted, mode)).await?;
            Ok(key_value(section_key, lowered))
        }
        "thinking_mode" => {
            if !["collapsed", "truncated", "full"].contains(&lowered.as_str()) {
                return Err(refused(format!("unknown thinking_mode: {value}")));
            }
            let details = if lowered == "full" {
                "expanded"
            } else {
                "collapsed"
            };
            edit_config(&home, |config| {
                config.set_value_at("display.thinking_mode", Some(lowered.as_str().into()))?;
                config.set_value_at("display.details_mode", Some(details.into()))
            })
            .await?;
            Ok(key_value("thinking_mode", lowered))
        }
        "compact" => {
            let current = config
                .value_at("display.tui_compact")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            let on = match lowered.as_str() {
                "" | "toggle" => !current,
                "on" => true,
                "off" => false,
                _ => return Err(refused(format!("unknown compact value: {value}"))),
            };
            write_key(&home, "display.tui_compact", json!(on)).await?;
            Ok(key_value("compact", if on { "on" } else { "off" }))
        }
        "statusbar" => {
            let current = match config.value_at("display.tui_statusbar") {
                Some(serde_yaml::Value::Bool(false)) => "off".to_owned(),
                _ => display_text("tui_statusbar")
                    .filter(|m| STATUSBAR_MODES.contains(&m.as_str()))
                    .unwrap_or_else(|| "top".to_owned()),
            };
            let next = match lowered.as_str() {
                "" | "toggle" if current == "off" => "top",
                "" | "toggle" => "off",
                "on" => "top",
                mode if STATUSBAR_MODES.contains(&mode) => mode,
                _ => return Err(refused(format!("unknown statusbar value: {value}"))),
            };
            write_key(&home, "display.tui_statusbar", json!(next)).await?;
            Ok(key_value("statusbar", next))
        }
        "mouse" => {
            let raw = p.value.as_ref().map(python_str).unwrap_or_default();
            let raw = raw.trim().to_lowercase();
            let current = match config.value_at("display.mouse_tracking") {
                Some(serde_yaml::Value::Bool(on)) => {
                    if on {
                        "all"
                    } else {
                        "off"
                    }
                }
                Some(serde_yaml::Value::String(mode)) => mouse_mode(&mode).unwrap_or("all"),
                _ => "all",
            };
            let next = match raw.as_str() {
                "" | "toggle" if current == "off" => "all",
                "" | "toggle" => "off",
                other => mouse_mode(other)
                    .ok_or_else(|| refused(format!("unknown mouse value: {value}")))?,
            };
            write_key(&home, "display.mouse_tracking", json!(next)).await?;
            Ok(key_value("mouse", next))
        }
        "indicator" => {
            let raw = p.value.as_ref().map(python_str).unwrap_or_default();
            let raw = raw.trim().to_lowercase();
            if !INDICATOR_STYLES.contains(&raw.as_str()) {
                return Err(refused(format!(
                    "unknown indicator: '{raw}'; pick one of {}",
                    INDICATOR_STYLES.join("|")
                )));
            }
            write_key(&home, "display.tui_status_indicator", json!(raw)).await?;
            Ok(key_value("indicator", raw))
        }
        "cwd" | "terminal.cwd" | "workdir" => {
            let raw = value.trim();
            if raw.is_empty() {
                return Err(refused("cwd required"));
            }
            let cwd = absolute(raw);
            if !cwd.is_dir() {
                return Err(refused(format!("working directory does not exist: {raw}")));
            }
            let shown = cwd.display().to_string();
            write_key(&home, "terminal.cwd", json!(shown)).await?;
            Ok(json!({"key": "terminal.cwd", "value": shown, "cwd": shown,
                      "branch": branch_of(&cwd).await}))
        }
        "prompt" => {
            let text = p.value.clone().unwrap_or(json!(""));
            let shown = if text == json!("clear") {
                edit_config(&home, |config| config.set_value_at("custom_prompt", None)).await?;
                json!("")
            } else {
                write_key(&home, "custom_prompt", text.clone()).await?;
                text
            };
            Ok(key_value("prompt", shown))
        }
        "personality" => personality(runtime, &home, &config, session.as_ref(), &p.value).await,
        "skin" => {
            let name = p.value.clone().unwrap_or(json!(""));
            write_key(&home, "display.skin", name.clone()).await?;
            // This runtime has no skins of its own: every name resolves to the default one,
            // as Hermes resolves a skin it does not know.
            let skin = Skin {
                name: "default".to_owned(),
                other: Default::default(),
            };
            let frame = EventFrame::new(
                Some(LiveSessionId::new(String::new())),
                NativeEvent::SkinChanged(skin),
            );
            let _ = transport.frames.send(frame.to_frame());
            Ok(key_value("skin", name))
        }
        _ => Err(refused(format!("unknown config key: {key}"))),
    }
}

/// `config.set model`: the session's turns use another model of the same provider from now
/// on (with `--global`, or `model.persist_switch_by_default`, also the config's
/// `model.default`); without a session only the config can change. The endpoint's model list
/// is asked first: a model it does not list is taken with a warning, an endpoint that does not
/// answer refuses the switch (5001), as in Hermes.
async fn switch_model(
    runtime: &Runtime,
    home: &Path,
    config: &HermesConfig,
    session: Option<&Arc<LiveSession>>,
    value: &str,
) -> Result<Value> {
    let mut words = value.split_whitespace();
    let mut global = config
        .value_at("model.persist_switch_by_default")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let (mut global_asked, mut once) = (false, false);
    let mut name = Vec::new();
    while let Some(word) = words.next() {
        match word.replace(['\u{2014}', '\u{2013}'], "--").as_str() {
            "--global" => (global, global_asked) = (true, true),
            "--session" => global = false,
            "--once" => once = true,
            "--refresh" => {}
            "--provider" => {
                words.next();
            }
            _ => name.push(word),
        }
    }
    let name = name.join(" ");
    let failed = |message: &str| RpcError::new(codes::SETTING_FAILED, message);
    if once && global_asked {
        return Err(failed("/model --once cannot be combined with --global"));
    }
    if name.is_empty() {
        return Err(failed("model value required"));
    }
    if once && session.is_none() {
        return Err(failed("/model --once requires a live session"));
    }
    let global = global && !once;
    let busy = || {
        RpcError::new(
            codes::BUSY,
            "session busy \u{2014} /interrupt the current turn before switching models",
        )
    };
    let running = |session: &LiveSession| {
        let state = session.state.lock().expect("not poisoned");
        state.running.is_some()
    };
    if session.is_some_and(|session| running(session)) {
        return Err(busy());
    }
    let Some(base_url) = config.model.base_url.as_deref() else {
        return Err(failed(&format!(
            "this runtime's offline scripted model has no other models (asked for `{name}`)"
        )));
    };
    let base_url = base_url.trim_end_matches('/');
    let listing = format!("{base_url}/models");
    let key = config.model.api_key.as_deref();
    let listed = super::models::listed_models(runtime, base_url, key).await;
    let meant = listed
        .as_deref()
        .and_then(|models| super::models::corrected(&name, models))
        .cloned();
    let (name, warning) = match (listed, meant) {
        (Some(models), _) if models.contains(&name) => (name, String::new()),
        (Some(_), Some(meant)) => {
            let warning = format!("Auto-corrected `{name}` \u{2192} `{meant}`");
            (meant, warning)
        }
        (Some(models), None) => {
            let similar = super::models::close_matches(&name, &models, 3, 0.5);
            let similar: Vec<String> = similar.iter().map(|m| format!("`{m}`")).collect();
            let mut warning = format!(
                "Note: `{name}` was not found in this custom endpoint's model listing ({listing}). \
             It may still work if the server supports hidden or aliased models."
            );
            if !similar.is_empty() {
                warning.push_str(&format!("\n  Similar models: {}", similar.join(", ")));
            }
            (name, warning)
        }
        (None, _) => {
            let mut message = format!(
                "Note: could not reach this custom endpoint's model listing at `{listing}`. \
                 Hermes will still save `{name}`, but the endpoint should expose `/models` for \
                 verification."
            );
            if let Some(root) = base_url.strip_suffix("/v1") {
                message.push_str(&format!(
                    "\n  If this server expects `/v1`, try base URL: `{root}`"
                ));
            }
            return Err(failed(&message));
        }
    };
    if global {
        write_key(home, "model.default", json!(name)).await?;
    }
    if let Some(session) = session {
        let provider = config.model.provider_name();
        {
            // Checked again with the switch: a turn may have started while the endpoint was
            // asked, and the notice must not land inside it.
            let mut state = session.state.lock().expect("not poisoned");
            if state.running.is_some() {
                return Err(busy());
            }
            state.settings.model = Some(name.clone());
            state.settings.model_once = once;
            // The model is told of the change, as Hermes tells it.
            state.messages.push(crate::model::ChatMessage::user(format!(
                "[System: The active model for this chat has changed to {name} via provider \
                 {provider}. From this point forward, use this runtime metadata when answering \
                 questions about what model/provider is active.]"
            )));
        }
        announce_if_built(runtime, Some(session)).await;
    }
    Ok(json!({
        "key": "model", "value": name, "warning": warning, "confirm_required": false,
        "confirm_message": "", "scope": if once { "once" } else if global { "global" } else { "session" },
    }))
}

/// `yolo`: dangerous commands run unasked, for the session (the default scope), for every
/// session of the process (no session), or in the config (`global`: `approvals.mode: off`).
async fn yolo(
    runtime: &Runtime,
    home: &Path,
    config: &HermesConfig,
    session: Option<&Arc<LiveSession>>,
    value: &str,
    scope: &Option<String>,
) -> Result<Value> {
    let scope = scope.as_deref().unwrap_or_default().trim().to_lowercase();
    let reply = |on: bool, scope: &str| json!({"key": "yolo", "value": if on { "1" } else { "0" }, "scope": scope});
    if scope == "global" {
        let on = toggled(value, config.approval_mode() == "off");
        let mode = if on { "off" } else { "manual" };
        write_key(home, "approvals.mode", json!(mode)).await?;
        announce_all(runtime).await;
        return Ok(reply(on, "global"));
    }
    let on = match session {
        Some(session) => {
            let mut state = session.state.lock().expect("not poisoned");
            state.settings.yolo = toggled(value, state.settings.yolo);
            state.settings.yolo
        }
        None => {
            use std::sync::atomic::Ordering;
            let on = toggled(value, runtime.yolo.load(Ordering::Relaxed));
            runtime.yolo.store(on, Ordering::Relaxed);
            on
        }
    };
    announce_if_built(runtime, session).await;
    Ok(reply(on, "session"))
}

/// `reasoning`: whether the client shows the model's reasoning (`show`/`hide`, `full`/
/// `clamp`), or the effort asked of the model, for the session or (`global`, or no
/// session) in the config.
async fn reasoning(
    runtime: &Runtime,
    home: &Path,
    session: Option<&Arc<LiveSession>>,
    value: &str,
    scope: &Option<String>,
) -> Result<Value> {
    let arg = value.trim().to_lowercase();
    let display: Option<(&str, &str, bool, &str)> = match arg.as_str() {
        "show" | "on" => Some(("show", "show_reasoning", true, "expanded")),
        "hide" | "off" => Some(("hide", "show_reasoning", false, "hidden")),
        "full" | "all" => Some(("full", "reasoning_full", true, "expanded")),
        "clamp" | "collapse" | "short" => Some(("clamp", "reasoning_full", false, "collapsed")),
        _ => None,
    };
    if let Some((shown, flag, on, thinking)) = display {
        edit_config(home, |config| {
            config.set_value_at(&format!("display.{flag}"), Some(on.into()))?;
            config.set_value_at("display.sections.thinking", Some(thinking.into()))
        })
        .await?;
        return Ok(key_value("reasoning", shown));
    }
    let Some(effort) = reasoning_effort(&arg) else {
        return Err(refused(format!("unknown reasoning value: {value}")));
    };
    let global = scope.as_deref().map(|s| s.trim().to_lowercase()) == Some("global".into());
    match session.filter(|_| !global) {
        Some(session) => {
            session
                .state
                .lock()
                .expect("not poisoned")
                .settings
                .reasoning = Some(effort.to_owned());
        }
        None => {
            write_key(home, "agent.reasoning_effort", json!(arg)).await?;
            if let Some(session) = session {
                session
                    .state
                    .lock()
                    .expect("not poisoned")
                    .settings
                    .reasoning = None;
            }
        }
    }
    announce_if_built(runtime, session).await;
    Ok(key_value("reasoning", arg))
}

/// `personality`: a persona from the config's `agent.personalities` (this runtime ships none
/// of its own), or `none` to clear it; written as `display.personality` and the prompt as
/// `agent.system_prompt`.
async fn personality(
    runtime: &Runtime,
    home: &Path,
    config: &HermesConfig,
    session: Option<&Arc<LiveSession>>,
    value: &Option<Value>,
) -> Result<Value> {
    let asked = text_or_empty(value);
    let name = asked.trim().to_lowercase();
    let known: std::collections::BTreeMap<String, Value> = config
        .value_at("agent.personalities")
        .and_then(|v| serde_json::to_value(v).ok())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let (name, prompt) = match name.as_str() {
        "" | "none" | "default" | "neutral" => (String::new(), String::new()),
        _ => match known.get(&name) {
            Some(Value::String(prompt)) => (name, prompt.clone()),
            Some(Value::Object(persona)) => {
                let part = |key: &str| persona.get(key).and_then(Value::as_str).unwrap_or("");
                let mut lines = vec![part("system_prompt").to_owned()];
                for (label, key) in [("Tone", "tone"), ("Style", "style")] {
                    if !part(key).is_empty() {
                        lines.push(format!("{label}: {}", part(key)));
                    }
                }
                lines.retain(|line| !line.is_empty());
                (name, lines.join("\n"))
            }
            _ => {
                let available = if known.is_empty() {
                    "No personalities configured.".to_owned()
                } else {
                    let names: Vec<String> = std::iter::once("none".to_owned())
                        .chain(known.keys().cloned())
                        .map(|n| format!("`{n}`"))
                        .collect();
                    format!("Available: {}", names.join(", "))
                };
                return Err(RpcError::new(
                    codes::SETTING_FAILED,
                    format!("Unknown personality: `{}`.\n\n{available}", asked.trim()),
                ));
            }
        },
    };
    edit_config(home, |config| {
        config.set_value_at("display.personality", Some(name.as_str().into()))?;
        config.set_value_at("agent.system_prompt", Some(prompt.as_str().into()))
    })
    .await?;
    let mut reply = json!({
        "key": "personality",
        "value": if asked.is_empty() { "none".to_owned() } else { asked },
        "history_reset": false,
    });
    if let Some(session) = session.filter(|s| s.announced()) {
        let info = session_info::announce(runtime, session).await;
        reply["info"] = serde_json::to_value(info).map_err(handler_error)?;
    }
    Ok(reply)
}

/// The names `tools.configure` was given: a list's items as text (a text is read letter by
/// letter, as Hermes iterates it), trimmed, empty ones left out.
fn names_of(names: &Option<Value>) -> Vec<String> {
    let items: Vec<String> = match names {
        Some(Value::Array(items)) => items.iter().map(python_str).collect(),
        Some(Value::String(text)) => text.chars().map(String::from).collect(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// `tools.configure`: built-in toolsets on or off for the terminal platform
/// (`platform_toolsets.cli`), single MCP tools by `server:tool` (the server's
/// `tools.exclude`). A live session's agent is rebuilt on them, with an empty context.
pub async fn tools_configure(
    runtime: &Runtime,
    p: ToolsConfigureParams,
) -> Result<ToolsConfigured> {
    let action = p
        .action
        .as_deref()
        .unwrap_or_default()
        .trim()
        .to_lowercase();
    let enable = match action.as_str() {
        "enable" => true,
        "disable" => false,
        _ => {
            return Err(RpcError::new(
                codes::UNKNOWN_TOOLS_ACTION,
                format!("unknown tools action: {action}"),
            ));
        }
    };
    let names = names_of(&p.names);
    if names.is_empty() {
        return Err(RpcError::new(codes::NAMES_REQUIRED, "names required"));
    }
    let session = session_if_any(runtime, &p.session_id);
    let home = home_for(runtime, session.as_ref());
    let (mut changed, mut unknown, mut missing) = (Vec::new(), Vec::new(), Vec::new());
    let _writing = runtime.config_lock.lock().await;
    let mut config = config_of(&home).await?;
    // The configured list is kept as it is but for the names acted on: toolsets this
    // runtime does not have (Hermes's `web`, `file` …) stay for Hermes to read.
    let mut toolsets = config
        .platform_toolsets(PLATFORM)
        .unwrap_or_else(|| enabled_toolsets(&config));
    for name in names {
        if let Some((server, tool)) = name.split_once(':') {
            let Some(entry) = config.mcp_servers.get_mut(server) else {
                missing.push(server.to_owned());
                continue;
            };
            let mut excluded = entry.excluded_tools();
            excluded.retain(|t| t != tool);
            if !enable {
                excluded.push(tool.to_owned());
            }
            entry.set_excluded_tools(excluded);
            changed.push(name);
        } else if BUILT_IN_TOOLSETS.iter().any(|t| t.name == name) {
            toolsets.retain(|t| *t != name);
            if enable {
                toolsets.push(name.clone());
            }
            changed.push(name);
        } else {
            unknown.push(name);
        }
    }
    toolsets.sort();
    config.set_platform_toolsets(PLATFORM, toolsets.clone());
    let saved_home = home.clone();
    tokio::task::spawn_blocking(move || config.save(&saved_home))
        .await
        .map_err(handler_error)?
        .map_err(handler_error)?;
    drop(_writing);
    missing.sort();
    missing.dedup();
    let info = match &session {
        Some(session) => {
            // A rebuilt agent starts with an empty context and none of the session's own
            // model settings, as in Hermes (the stored conversation stays).
            {
                let mut state = session.state.lock().expect("not poisoned");
                state.settings.reasoning = None;
                state.settings.model = None;
                state.messages.clear();
            }
            let info = session_info::announce(runtime, session).await;
            Some(serde_json::to_value(info).map_err(handler_error)?)
        }
        None => None,
    };
    Ok(ToolsConfigured {
        changed,
        enabled_toolsets: toolsets,
        info,
        missing_servers: missing,
        reset: session.is_some(),
        unknown,
    })
}

/// What `reload.mcp` answers until the reload is confirmed.
const RELOAD_CONFIRM: &str = "\u{26a0}\u{fe0f}  /reload-mcp invalidates the prompt cache (next \
    message re-sends full input tokens). Reply `/reload-mcp now` to proceed, or \
    `/reload-mcp always` to proceed and silence this prompt permanently.";

/// `reload.mcp`: drops every MCP connection, so the next turn connects and lists anew.
pub async fn reload_mcp(runtime: &Runtime, p: ReloadMcpParams) -> Result<StatusReply> {
    let session = session_if_any(runtime, &p.session_id);
    let home = home_for(runtime, session.as_ref());
    let _writing = runtime.config_lock.lock().await;
    let confirm_first = config_of(&home)
        .await
        .map(|config| {
            config
                .value_at("approvals.mcp_reload_confirm")
                .and_then(|v| v.as_bool())
                .unwrap_or(true)
        })
        .unwrap_or(true);
    if !p.confirm.unwrap_or(false) && confirm_first {
        let mut reply = StatusReply::new("confirm_required");
        reply
            .other
            .insert("message".to_owned(), json!(RELOAD_CONFIRM));
        return Ok(reply);
    }
    runtime.mcp.forget_all();
    if let Some(session) = &session {
        session_info::announce(runtime, session).await;
    }
    // As in Hermes, a reload that could not silence its prompt for good still happened.
    if p.always.unwrap_or(false)
        && let Err(e) = write_key(&home, "approvals.mcp_reload_confirm", json!(false)).await
    {
        tracing::warn!(error = %e.message, "could not write approvals.mcp_reload_confirm");
    }
    Ok(StatusReply::new("reloaded"))
}
