//! Profiles: each is a native Hermes profile of its instance, whose `config.yaml` names its
//! model and points its runtime at the control plane's MCP endpoint for its tools.

use std::collections::BTreeMap;

use edith_store::InstanceRecord;
use edith_types::{
    CreateProfile, ErrorCode, Instance, InstanceId, ModelConfig, ModelSpec, Profile, ProfileId,
    ProviderKind, Session, SessionId, Timestamp, ToolId, TurnId, UpdateProfile,
};
use hermes_native::config::{HermesConfig, McpServer, ModelSection, SCRIPTED, Seconds};
use hermes_native::profile::{DEFAULT_PROFILE, PROFILE_NAME_RULE, valid_profile_name};

use super::{instances, tools};
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::tools::{MCP_SERVER_NAME, Touched, mcp_endpoint};

pub async fn load(state: &AppState, instance: &InstanceId, id: &ProfileId) -> AppResult<Profile> {
    Ok(load_path(state, instance, id, None).await?.1)
}

/// The instance, its profile `id` and, when `session` is given, what the store has of that
/// session, in one read; an instance or profile that is not there is 404.
pub async fn load_path(
    state: &AppState,
    instance: &InstanceId,
    id: &ProfileId,
    session: Option<&SessionId>,
) -> AppResult<(InstanceRecord, Profile, Option<Session>)> {
    let found = state
        .store
        .session_path(instance, id, session)
        .await?
        .ok_or_else(|| AppError::not_found(format!("instance `{instance}`")))?;
    let profile = found
        .profile
        .ok_or_else(|| AppError::not_found(format!("profile `{id}` of instance `{instance}`")))?;
    Ok((found.instance, profile, found.session))
}

/// Records the profile and configures its native home on the runtime; if the runtime cannot be
/// configured, nothing is left behind, so a retry with the same name can succeed.
pub async fn create(
    state: &AppState,
    instance: &InstanceId,
    body: CreateProfile,
) -> AppResult<Profile> {
    let _changing = state.profile_changes.lock(instance).await;
    let record = instances::load_ready(state, instance).await?;
    if !valid_profile_name(&body.name) {
        return Err(AppError::invalid(format!(
            "profile name `{}` must match {PROFILE_NAME_RULE}",
            body.name
        )));
    }
    for tool in &body.tools {
        tools::load(state, tool).await?;
    }
    let provider = state.provider(record.instance.provider)?;
    if !provider.configures_profiles() && (body.model.is_some() || !body.tools.is_empty()) {
        return Err(AppError::invalid(
            "this instance's runtime is configured by its owner: a profile here cannot set a \
             model or callback tools; it uses the native profile of the same name as it is",
        ));
    }
    let model = body.model.clone().unwrap_or(ModelSpec::Scripted {});
    check_model(&model)?;
    let restart = root_change_needs_restart(state, &record, &body.name).await?;
    let profile = Profile {
        id: ProfileId::generate(),
        instance_id: instance.clone(),
        name: body.name.clone(),
        native_name: body.name,
        model: if provider.configures_profiles() {
            model.shown()
        } else {
            ModelConfig::Runtime
        },
        tools: body.tools,
        created_at: Timestamp::now(),
    };
    // The row first: a duplicate name must not overwrite the other profile's config.
    state.store.insert_profile(&profile).await?;
    let config = native_config(state, &profile, &record.mcp_token, &model);
    if !provider.configures_profiles() {
        return Ok(profile);
    }
    let configured = provider
        .configure_profile(instance, &profile.native_name, &config)
        .await;
    if let Err(e) = configured {
        state.store.delete_profile(&profile.id).await?;
        return Err(e.into());
    }
    if restart {
        restart_runtime(state, &record).await?;
    }
    Ok(profile)
}

/// Changes the profile's model: its `config.yaml` is rewritten (and a `process` runtime
/// restarts for the `default` profile, as for its tools).
pub async fn update(
    state: &AppState,
    instance: &InstanceId,
    id: &ProfileId,
    body: UpdateProfile,
) -> AppResult<Profile> {
    let _changing = state.profile_changes.lock(instance).await;
    let mut profile = load(state, instance, id).await?;
    let Some(model) = body.model else {
        return Ok(profile);
    };
    let record = instances::load_ready(state, instance).await?;
    let provider = state.provider(record.instance.provider)?;
    if !provider.configures_profiles() {
        return Err(AppError::invalid(
            "this instance's runtime is configured by its owner: a profile here cannot set a \
             model",
        ));
    }
    check_model(&model)?;
    let restart = root_change_needs_restart(state, &record, &profile.native_name).await?;
    let config = native_config(state, &profile, &record.mcp_token, &model);
    provider
        .configure_profile(instance, &profile.native_name, &config)
        .await?;
    profile.model = model.shown();
    state.store.update_profile(&profile).await?;
    if restart {
        restart_runtime(state, &record).await?;
    }
    Ok(profile)
}

/// How many times a deletion is tried when turns start and end on the profile meanwhile.
const DELETE_ATTEMPTS: u32 = 3;

/// Deletes the profile with its sessions, turns and their logs, and its native profile's home
/// on the runtime (the root's stays). Refused (409) while one of its turns runs.
pub async fn delete(state: &AppState, instance: &InstanceId, id: &ProfileId) -> AppResult<Profile> {
    let _changing = state.profile_changes.lock(instance).await;
    let profile = load(state, instance, id).await?;
    let busy = |turn: TurnId| {
        AppError::new(
            ErrorCode::Conflict,
            format!(
                "profile `{id}` has turn `{turn}` that has not finished: cancel it or let it \
                 finish first"
            ),
        )
    };
    if let Some(turn) = state.store.unfinished_turn_of_profile(&profile.id).await? {
        return Err(busy(turn));
    }
    let record = instances::load(state, instance).await?;
    let restart = root_change_needs_restart(state, &record, &profile.native_name).await?;
    // A turn started since the look above keeps the profile (one that also ended since does
    // not: the delete is tried again).
    let mut attempts = 0;
    while !state.store.delete_idle_profile(&profile.id).await? {
        if let Some(turn) = state.store.unfinished_turn_of_profile(&profile.id).await? {
            return Err(busy(turn));
        }
        load(state, instance, id).await?;
        attempts += 1;
        if attempts == DELETE_ATTEMPTS {
            return Err(AppError::new(
                ErrorCode::Conflict,
                format!("profile `{id}` kept starting turns; try again"),
            ));
        }
    }
    state.tool_lists.forget(&profile.id);
    let provider = state.provider(record.instance.provider)?;
    if provider.configures_profiles() {
        provider
            .remove_profile(instance, &profile.native_name)
            .await?;
    }
    if restart {
        restart_runtime(state, &record).await?;
    }
    Ok(profile)
}

/// Whether a change to the tools of profile `native_name` needs the instance's runtime to
/// restart: a `process` runtime (the real Hermes) reads the root profile's MCP servers — the
/// only ones whose tools it offers — when it starts. Such a change is refused (409) while a
/// turn runs there, rather than cutting the turn short.
async fn root_change_needs_restart(
    state: &AppState,
    record: &edith_store::InstanceRecord,
    native_name: &str,
) -> AppResult<bool> {
    if native_name != DEFAULT_PROFILE
        || !runtime_restarts_for_root_changes(record.instance.provider)
    {
        return Ok(false);
    }
    if state
        .store
        .instance_has_unfinished_turns(&record.instance.id)
        .await?
    {
        return Err(AppError::new(
            ErrorCode::Conflict,
            "the `default` profile's tools are read by this runtime when it starts, so it \
             restarts to take them; turns are running on the instance: retry once they finish",
        ));
    }
    Ok(true)
}

/// Whether runtimes of `provider` read the root profile's MCP servers only when they start, so
/// that a change of them restarts the runtime. Turns on such an instance start under its
/// profile lock, shared (see `ProfileLocks`).
pub fn runtime_restarts_for_root_changes(provider: ProviderKind) -> bool {
    provider == ProviderKind::Process
}

/// Stops the runtime; the next use starts it again with the new configuration.
async fn restart_runtime(state: &AppState, record: &edith_store::InstanceRecord) -> AppResult<()> {
    state.gateways.forget(&record.instance.id);
    state
        .provider(record.instance.provider)?
        .stop(&record.instance.id)
        .await?;
    Ok(())
}

fn check_model(model: &ModelSpec) -> AppResult<()> {
    if let ModelSpec::OpenaiCompatible {
        base_url, model, ..
    } = model
    {
        if !edith_types::rules::is_http_url(base_url) {
            return Err(AppError::invalid(
                "`model.base_url` must be an http:// or https:// URL",
            ));
        }
        if model.trim().is_empty() {
            return Err(AppError::invalid("`model.model` must name the model"));
        }
    }
    Ok(())
}

/// Points the tool relay of every profile of `instance` at the address this replica serves
/// on. One that comes back on another address (a local context, an `edith serve` moved to
/// another port), or another replica that takes the instance over, would otherwise leave its
/// runtime reaching for the old one, offering no callback tools. Called when this replica takes
/// the instance, before it starts a runtime for it.
pub async fn retarget_tool_relays(state: &AppState, instance: &Instance) -> AppResult<()> {
    let Ok(provider) = state.provider(instance.provider) else {
        return Ok(());
    };
    if !provider.configures_profiles() {
        return Ok(());
    }
    let mut profiles = None;
    loop {
        let listed = state
            .store
            .list_profiles(&instance.id, profiles.as_ref(), 100)
            .await?;
        for profile in &listed.items {
            let _changing = state.profile_changes.lock(&instance.id).await;
            let url = mcp_endpoint::url(state, &instance.id, &profile.id);
            let name = &profile.native_name;
            let moved = provider.retarget_mcp_server(&instance.id, name, MCP_SERVER_NAME, &url);
            if let Err(e) = moved.await {
                tracing::warn!(profile = %profile.id, error = %e, "tool relay not retargeted");
            }
        }
        match listed.next_cursor.and_then(|c| c.parse().ok()) {
            Some(next) => profiles = Some(next),
            None => return Ok(()),
        }
    }
}

/// A native profile's `config.yaml`: its model, and the control plane's tool relay as its MCP
/// server.
fn native_config(
    state: &AppState,
    profile: &Profile,
    mcp_token: &str,
    model: &ModelSpec,
) -> HermesConfig {
    HermesConfig {
        model: model_section(model),
        mcp_servers: BTreeMap::from([(
            MCP_SERVER_NAME.to_owned(),
            tool_relay(state, profile, mcp_token),
        )]),
        other: BTreeMap::new(),
    }
}

/// The profile's `mcp_servers` entry: the control plane's MCP endpoint for it, with the
/// instance's MCP token.
fn tool_relay(state: &AppState, profile: &Profile, mcp_token: &str) -> McpServer {
    McpServer {
        url: mcp_endpoint::url(state, &profile.instance_id, &profile.id),
        headers: BTreeMap::from([("Authorization".to_owned(), format!("Bearer {mcp_token}"))]),
        timeout: Seconds::CALL_DEFAULT,
        connect_timeout: Seconds::CONNECT_DEFAULT,
        other: BTreeMap::new(),
    }
}

/// The `model:` section of a native profile's config.yaml (Hermes's keys: an OpenAI-compatible
/// endpoint is its `custom` provider).
fn model_section(model: &ModelSpec) -> ModelSection {
    match model {
        ModelSpec::Scripted {} => ModelSection {
            provider: Some(SCRIPTED.to_owned()),
            default: Some(SCRIPTED.to_owned()),
            ..Default::default()
        },
        ModelSpec::OpenaiCompatible {
            base_url,
            model,
            api_key,
        } => ModelSection {
            provider: Some("custom".to_owned()),
            default: Some(model.clone()),
            base_url: Some(base_url.clone()),
            api_key: api_key.clone(),
            ..Default::default()
        },
    }
}

/// Attaches a tool; attaching twice is a no-op.
pub async fn attach_tool(
    state: &AppState,
    instance: &InstanceId,
    id: &ProfileId,
    tool: &ToolId,
) -> AppResult<Profile> {
    let _changing = state.profile_changes.lock(instance).await;
    let profile = load(state, instance, id).await?;
    let record = instances::load(state, instance).await?;
    if !state
        .provider(record.instance.provider)?
        .configures_profiles()
    {
        return Err(AppError::invalid(
            "this instance's runtime is configured by its owner: its profiles take no callback \
             tools",
        ));
    }
    let tool = tools::load(state, tool).await?;
    let restart = root_change_needs_restart(state, &record, &profile.native_name).await?;
    let changing = (state.tool_lists).changing(Touched::Profile(profile.id.clone()));
    state.store.attach_tool(&profile.id, &tool.id).await?;
    drop(changing);
    if restart {
        restart_runtime(state, &record).await?;
    }
    load(state, instance, id).await
}

/// Detaches a tool; detaching one that is not attached is a 404.
pub async fn detach_tool(
    state: &AppState,
    instance: &InstanceId,
    id: &ProfileId,
    tool: &ToolId,
) -> AppResult<Profile> {
    let _changing = state.profile_changes.lock(instance).await;
    let profile = load(state, instance, id).await?;
    let record = instances::load(state, instance).await?;
    let restart = root_change_needs_restart(state, &record, &profile.native_name).await?;
    let changing = (state.tool_lists).changing(Touched::Profile(profile.id.clone()));
    if !state.store.detach_tool(&profile.id, tool).await? {
        return Err(AppError::not_found(format!(
            "tool `{tool}` attached to profile `{id}`"
        )));
    }
    drop(changing);
    if restart {
        restart_runtime(state, &record).await?;
    }
    load(state, instance, id).await
}
