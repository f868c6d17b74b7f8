//! Profiles, sessions, tools and tool hosts.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, response::IntoResponse};
use edith_types::{
    CreateProfile, CreateSession, ErrorCode, InstanceId, ModelSpec, Page, Profile, ProfileId,
    RegisterTool, RegisterToolHost, Session, SessionId, Timestamp, Tool, ToolHost, ToolHostId,
    ToolId,
};
use hermes_native::config::{
    CONTROL_PLANE_MCP_SERVER, HermesConfig, McpServer, ModelSection, Seconds,
};
use hermes_native::profile::{PROFILE_NAME_RULE, valid_profile_name};

use super::extract::{ApiJson, ApiQuery, Ids, PageParams};
use super::instances::{load_instance, load_ready_instance};
use super::spec::{Api, Op};
use crate::error::{AppError, AppResult};
use crate::mcp_endpoint;
use crate::state::AppState;

const PROFILES: &str = "/v1/instances/{instance_id}/profiles";
const PROFILE: &str = "/v1/instances/{instance_id}/profiles/{profile_id}";
const PROFILE_TOOL: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/tools/{tool_id}";
const SESSIONS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions";
const SESSION: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}";

pub fn routes(api: &mut Api) {
    let create = Op::post(PROFILES, "profile_create")
        .summary("Create a profile (a native Hermes profile of the instance).")
        .body::<CreateProfile>(api)
        .returns::<Profile>(api, 201, "The profile.");
    let list = Op::get(PROFILES, "profile_list")
        .summary("List the instance's profiles.")
        .paginated()
        .returns::<Page<Profile>>(api, 200, "A page of profiles.");
    api.add(create, post(create_profile));
    api.add(list, get(list_profiles));
    let op = Op::get(PROFILE, "profile_get")
        .summary("Get a profile.")
        .returns::<Profile>(api, 200, "The profile.");
    api.add(op, get(get_profile));
    let op = Op::put(PROFILE_TOOL, "profile_tool_attach")
        .summary("Attach a callback tool to the profile; attaching twice is a no-op.")
        .returns::<Profile>(api, 200, "The profile with the tool attached.");
    api.add(op, put(attach_tool));

    let create = Op::post(SESSIONS, "session_create")
        .summary("Create a session, optionally continuing a stored native session.")
        .body::<CreateSession>(api)
        .returns::<Session>(api, 201, "The session.");
    let list = Op::get(SESSIONS, "session_list")
        .summary("List the profile's sessions.")
        .paginated()
        .returns::<Page<Session>>(api, 200, "A page of sessions.");
    api.add(create, post(create_session));
    api.add(list, get(list_sessions));
    let op = Op::get(SESSION, "session_get")
        .summary("Get a session.")
        .returns::<Session>(api, 200, "The session.");
    api.add(op, get(get_session));

    let op = Op::post("/v1/tool-hosts", "tool_host_register")
        .summary("Register an MCP endpoint that serves callback tools, with its secret.")
        .body::<RegisterToolHost>(api)
        .returns::<ToolHost>(api, 201, "The tool host (the secret is never returned).");
    api.add(op, post(register_tool_host));
    let op = Op::get("/v1/tool-hosts/{tool_host_id}", "tool_host_get")
        .summary("Get a tool host.")
        .returns::<ToolHost>(api, 200, "The tool host.");
    api.add(op, get(get_tool_host));

    let create = Op::post("/v1/tools", "tool_register")
        .summary("Register a callback tool served by a tool host.")
        .body::<RegisterTool>(api)
        .returns::<Tool>(api, 201, "The tool.");
    let list = Op::get("/v1/tools", "tool_list")
        .summary("List callback tools.")
        .paginated()
        .returns::<Page<Tool>>(api, 200, "A page of tools.");
    api.add(create, post(register_tool));
    api.add(list, get(list_tools));
    let op = Op::get("/v1/tools/{tool_id}", "tool_get")
        .summary("Get a callback tool.")
        .returns::<Tool>(api, 200, "The tool.");
    api.add(op, get(get_tool));
}

// ---- profiles ----

pub async fn load_profile(state: &AppState, ids: &Ids) -> AppResult<Profile> {
    let instance: InstanceId = ids.get("instance_id")?;
    let profile: ProfileId = ids.get("profile_id")?;
    load_instance(state, &instance).await?;
    state
        .store
        .profile(&instance, &profile)
        .await?
        .ok_or_else(|| AppError::not_found(format!("profile `{profile}` of instance `{instance}`")))
}

async fn create_profile(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateProfile>,
) -> AppResult<impl IntoResponse> {
    let record = load_ready_instance(&state, &ids.get("instance_id")?).await?;
    let instance = &record.instance;
    if !valid_profile_name(&body.name) {
        return Err(AppError::invalid(format!(
            "profile name `{}` must match {PROFILE_NAME_RULE}",
            body.name
        )));
    }
    for tool in &body.tools {
        load_tool(&state, tool).await?;
    }
    let model = body.model.clone().unwrap_or(ModelSpec::Scripted);
    if let ModelSpec::OpenaiCompatible {
        base_url, model, ..
    } = &model
    {
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(AppError::invalid(
                "`model.base_url` must be an http:// or https:// URL",
            ));
        }
        if model.trim().is_empty() {
            return Err(AppError::invalid("`model.model` must name the model"));
        }
    }
    let profile = Profile {
        id: ProfileId::generate(),
        instance_id: instance.id.clone(),
        name: body.name.clone(),
        native_name: body.name,
        model: model.shown(),
        tools: body.tools,
        created_at: Timestamp::now(),
    };
    // The row first: a duplicate name must not overwrite the other profile's config.
    state.store.insert_profile(&profile).await?;
    let tools = McpServer {
        url: mcp_endpoint::url(&state, &instance.id, &profile.id),
        headers: BTreeMap::from([(
            "Authorization".to_owned(),
            format!("Bearer {}", record.mcp_token),
        )]),
        timeout: Seconds::new(120.0).expect("a valid timeout"),
        connect_timeout: Seconds::new(30.0).expect("a valid timeout"),
        other: BTreeMap::new(),
    };
    let config = HermesConfig {
        model: model_section(&model),
        mcp_servers: BTreeMap::from([(CONTROL_PLANE_MCP_SERVER.to_owned(), tools)]),
        other: BTreeMap::new(),
    };
    let configured = state
        .provider(instance.provider)
        .configure_profile(&instance.id, &profile.native_name, &config)
        .await;
    if let Err(e) = configured {
        // Nothing half-made stays behind: a retry with the same name must be able to succeed.
        state.store.delete_profile(&profile.id).await?;
        return Err(AppError::new(ErrorCode::RuntimeUnavailable, e.0));
    }
    Ok((StatusCode::CREATED, Json(profile)))
}

/// The `model:` section of a native profile's config.yaml (Hermes's keys: an OpenAI-compatible
/// endpoint is its `custom` provider).
fn model_section(model: &ModelSpec) -> ModelSection {
    match model {
        ModelSpec::Scripted => ModelSection {
            provider: Some("scripted".to_owned()),
            default: Some("scripted".to_owned()),
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

async fn list_profiles(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Profile>>> {
    let instance: InstanceId = ids.get("instance_id")?;
    load_instance(&state, &instance).await?;
    let page = state
        .store
        .list_profiles(
            &instance,
            params.cursor::<ProfileId>()?.as_ref(),
            params.limit()?,
        )
        .await?;
    Ok(Json(page))
}

async fn get_profile(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Profile>> {
    Ok(Json(load_profile(&state, &ids).await?))
}

async fn attach_tool(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Profile>> {
    let profile = load_profile(&state, &ids).await?;
    let tool = load_tool(&state, &ids.get("tool_id")?).await?;
    state.store.attach_tool(&profile.id, &tool.id).await?;
    Ok(Json(load_profile(&state, &ids).await?))
}

// ---- sessions ----

pub async fn load_session(state: &AppState, ids: &Ids) -> AppResult<(Profile, Session)> {
    let profile = load_profile(state, ids).await?;
    let id: SessionId = ids.get("session_id")?;
    let session = state
        .store
        .session(&profile.id, &id)
        .await?
        .ok_or_else(|| {
            AppError::not_found(format!("session `{id}` of profile `{}`", profile.id))
        })?;
    Ok((profile, session))
}

async fn create_session(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateSession>,
) -> AppResult<impl IntoResponse> {
    let profile = load_profile(&state, &ids).await?;
    if body
        .resume_native_session_id
        .as_ref()
        .is_some_and(|id| id.as_str().trim().is_empty())
    {
        return Err(AppError::invalid(
            "`resume_native_session_id` must not be empty",
        ));
    }
    let session = Session {
        id: SessionId::generate(),
        profile_id: profile.id,
        instance_id: profile.instance_id,
        native_session_id: body.resume_native_session_id,
        title: body.title,
        created_at: Timestamp::now(),
    };
    state.store.insert_session(&session).await?;
    Ok((StatusCode::CREATED, Json(session)))
}

async fn list_sessions(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Session>>> {
    let profile = load_profile(&state, &ids).await?;
    let page = state
        .store
        .list_sessions(
            &profile.id,
            params.cursor::<SessionId>()?.as_ref(),
            params.limit()?,
        )
        .await?;
    Ok(Json(page))
}

async fn get_session(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Session>> {
    Ok(Json(load_session(&state, &ids).await?.1))
}

// ---- tools and tool hosts ----

async fn register_tool_host(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegisterToolHost>,
) -> AppResult<impl IntoResponse> {
    if !(body.url.starts_with("http://") || body.url.starts_with("https://")) {
        return Err(AppError::invalid(
            "`url` must be an http:// or https:// URL",
        ));
    }
    if body.secret.len() < 16 {
        return Err(AppError::invalid("`secret` must be at least 16 characters"));
    }
    let host = ToolHost {
        id: ToolHostId::generate(),
        url: body.url,
        created_at: Timestamp::now(),
    };
    let record = edith_store::ToolHostRecord {
        host: host.clone(),
        secret: body.secret,
    };
    state.store.insert_tool_host(&record).await?;
    Ok((StatusCode::CREATED, Json(host)))
}

async fn get_tool_host(State(state): State<AppState>, ids: Ids) -> AppResult<Json<ToolHost>> {
    let id: ToolHostId = ids.get("tool_host_id")?;
    let host = state
        .store
        .tool_host(&id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("tool host `{id}`")))?;
    Ok(Json(host))
}

fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphabetic()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

async fn register_tool(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegisterTool>,
) -> AppResult<impl IntoResponse> {
    if !valid_tool_name(&body.name) {
        return Err(AppError::invalid(format!(
            "tool name `{}` must match ^[A-Za-z][A-Za-z0-9_-]{{0,63}}$",
            body.name
        )));
    }
    if body.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(AppError::invalid(
            "`input_schema` must be a JSON Schema with \"type\": \"object\"",
        ));
    }
    if state.store.tool_host(&body.host_id).await?.is_none() {
        return Err(AppError::not_found(format!("tool host `{}`", body.host_id)));
    }
    let tool = Tool {
        id: ToolId::generate(),
        name: body.name,
        description: body.description,
        input_schema: body.input_schema,
        host_id: body.host_id,
        created_at: Timestamp::now(),
    };
    state.store.insert_tool(&tool).await?;
    Ok((StatusCode::CREATED, Json(tool)))
}

async fn load_tool(state: &AppState, id: &ToolId) -> AppResult<Tool> {
    state
        .store
        .tool(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("tool `{id}`")))
}

async fn list_tools(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Tool>>> {
    let page = state
        .store
        .list_tools(params.cursor::<ToolId>()?.as_ref(), params.limit()?)
        .await?;
    Ok(Json(page))
}

async fn get_tool(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Tool>> {
    Ok(Json(load_tool(&state, &ids.get("tool_id")?).await?))
}
