//! Profiles, sessions, tools and tool hosts.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post, put};
use axum::{Json, response::IntoResponse};
use edith_types::{
    CreateProfile, CreateSession, InstanceId, Page, Profile, ProfileId, RegisterTool,
    RegisterToolHost, Session, SessionId, Tool, ToolHost, ToolHostId, ToolId, UpdateProfile,
    UpdateSession, UpdateTool, UpdateToolHost,
};

use super::extract::{ApiJson, ApiQuery, Ids, PageParams};
use super::spec::{Api, Op};
use crate::app::{instances, profiles, sessions, tools};
use crate::error::AppResult;
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
        .paginated::<edith_types::ProfileId>(api)
        .returns::<Page<Profile>>(api, 200, "A page of profiles.");
    api.add(create, post(create_profile));
    api.add(list, get(list_profiles));
    let op = Op::get(PROFILE, "profile_get")
        .summary("Get a profile.")
        .returns::<Profile>(api, 200, "The profile.");
    api.add(op, get(get_profile));
    let op = Op::patch(PROFILE, "profile_update")
        .summary("Change a profile's model (its native config.yaml is rewritten).")
        .body::<UpdateProfile>(api)
        .returns::<Profile>(api, 200, "The profile.");
    api.add(op, patch(update_profile));
    let op = Op::delete(PROFILE, "profile_delete")
        .summary(
            "Delete a profile with its sessions and turns, and its native profile's home; 409 \
             while one of its turns has not finished.",
        )
        .returns::<Profile>(api, 200, "The deleted profile.");
    api.add(op, delete(delete_profile));
    let op = Op::put(PROFILE_TOOL, "profile_tool_attach")
        .summary("Attach a callback tool to the profile; attaching twice is a no-op.")
        .returns::<Profile>(api, 200, "The profile with the tool attached.");
    api.add(op, put(attach_tool));
    let op = Op::delete(PROFILE_TOOL, "profile_tool_detach")
        .summary("Detach a callback tool from the profile.")
        .returns::<Profile>(api, 200, "The profile without the tool.");
    api.add(op, delete(detach_tool));

    let create = Op::post(SESSIONS, "session_create")
        .summary("Create a session, optionally continuing a stored native session.")
        .body::<CreateSession>(api)
        .returns::<Session>(api, 201, "The session.");
    let list = Op::get(SESSIONS, "session_list")
        .summary("List the profile's sessions.")
        .paginated::<edith_types::SessionId>(api)
        .returns::<Page<Session>>(api, 200, "A page of sessions.");
    api.add(create, post(create_session));
    api.add(list, get(list_sessions));
    let op = Op::get(SESSION, "session_get")
        .summary("Get a session.")
        .returns::<Session>(api, 200, "The session.");
    api.add(op, get(get_session));
    let op = Op::patch(SESSION, "session_update")
        .summary("Change a session's title.")
        .body::<UpdateSession>(api)
        .returns::<Session>(api, 200, "The session.");
    api.add(op, patch(update_session));
    let op = Op::delete(SESSION, "session_delete")
        .summary(
            "Delete a session with its turns and closes its live native session (the runtime's \
             stored session stays); 409 while one of its turns has not finished.",
        )
        .returns::<Session>(api, 200, "The deleted session.");
    api.add(op, delete(delete_session));

    let op = Op::post("/v1/tool-hosts", "tool_host_register")
        .summary("Register an MCP endpoint that serves callback tools, with its secret.")
        .body::<RegisterToolHost>(api)
        .returns::<ToolHost>(api, 201, "The tool host (the secret is never returned).");
    let list = Op::get("/v1/tool-hosts", "tool_host_list")
        .summary("List tool hosts, in the order they were registered.")
        .paginated::<ToolHostId>(api)
        .returns::<Page<ToolHost>>(api, 200, "A page of tool hosts (never their secrets).");
    api.add(op, post(register_tool_host));
    api.add(list, get(list_tool_hosts));
    let op = Op::get("/v1/tool-hosts/{tool_host_id}", "tool_host_get")
        .summary("Get a tool host.")
        .returns::<ToolHost>(api, 200, "The tool host.");
    api.add(op, get(get_tool_host));
    let op = Op::patch("/v1/tool-hosts/{tool_host_id}", "tool_host_update")
        .summary("Move a tool host or change its secret (write-only).")
        .body::<UpdateToolHost>(api)
        .returns::<ToolHost>(api, 200, "The tool host (the secret is never returned).");
    api.add(op, patch(update_tool_host));
    let op = Op::delete("/v1/tool-hosts/{tool_host_id}", "tool_host_delete")
        .summary("Delete a tool host that serves no tool (one that does is a 409 naming them).")
        .returns::<ToolHost>(api, 200, "The deleted tool host.");
    api.add(op, delete(delete_tool_host));

    let create = Op::post("/v1/tools", "tool_register")
        .summary("Register a callback tool served by a tool host.")
        .body::<RegisterTool>(api)
        .returns::<Tool>(api, 201, "The tool.");
    let list = Op::get("/v1/tools", "tool_list")
        .summary("List callback tools.")
        .paginated::<edith_types::ToolId>(api)
        .returns::<Page<Tool>>(api, 200, "A page of tools.");
    api.add(create, post(register_tool));
    api.add(list, get(list_tools));
    let op = Op::get("/v1/tools/{tool_id}", "tool_get")
        .summary("Get a callback tool.")
        .returns::<Tool>(api, 200, "The tool.");
    api.add(op, get(get_tool));
    let op = Op::patch("/v1/tools/{tool_id}", "tool_update")
        .summary("Change a callback tool's description or argument schema (not its name).")
        .body::<UpdateTool>(api)
        .returns::<Tool>(api, 200, "The tool.");
    api.add(op, patch(update_tool));
    let op = Op::delete("/v1/tools/{tool_id}", "tool_delete")
        .summary(
            "Delete a callback tool no profile uses (one in use is a 409 naming the profiles).",
        )
        .returns::<Tool>(api, 200, "The deleted tool.");
    api.add(op, delete(delete_tool));
}

// ---- profiles ----

async fn update_profile(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<UpdateProfile>,
) -> AppResult<Json<Profile>> {
    let (instance, id) = (ids.get("instance_id")?, ids.get("profile_id")?);
    Ok(Json(profiles::update(&state, &instance, &id, body).await?))
}

async fn delete_profile(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Profile>> {
    let (instance, id) = (ids.get("instance_id")?, ids.get("profile_id")?);
    Ok(Json(profiles::delete(&state, &instance, &id).await?))
}

async fn update_session(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<UpdateSession>,
) -> AppResult<Json<Session>> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let id = ids.get("session_id")?;
    Ok(Json(
        sessions::update(&state, &instance, &profile, &id, body).await?,
    ))
}

async fn delete_session(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Session>> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let id = ids.get("session_id")?;
    Ok(Json(
        sessions::delete(&state, &instance, &profile, &id).await?,
    ))
}

async fn create_profile(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateProfile>,
) -> AppResult<impl IntoResponse> {
    let profile = profiles::create(&state, &ids.get("instance_id")?, body).await?;
    Ok((StatusCode::CREATED, Json(profile)))
}

async fn list_profiles(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Profile>>> {
    let instance: InstanceId = ids.get("instance_id")?;
    instances::load(&state, &instance).await?;
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
    let profile = profiles::load(&state, &ids.get("instance_id")?, &ids.get("profile_id")?).await?;
    Ok(Json(profile))
}

async fn attach_tool(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Profile>> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let attached = profiles::attach_tool(&state, &instance, &profile, &ids.get("tool_id")?).await?;
    Ok(Json(attached))
}

async fn detach_tool(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Profile>> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let tool = ids.get("tool_id")?;
    let detached = profiles::detach_tool(&state, &instance, &profile, &tool).await?;
    Ok(Json(detached))
}

// ---- sessions ----

/// The session the path names, with its profile.
pub async fn load_session(state: &AppState, ids: &Ids) -> AppResult<(Profile, Session)> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    sessions::load(state, &instance, &profile, &ids.get("session_id")?).await
}

async fn create_session(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateSession>,
) -> AppResult<impl IntoResponse> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let session = sessions::create(&state, &instance, &profile, body).await?;
    Ok((StatusCode::CREATED, Json(session)))
}

async fn list_sessions(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Session>>> {
    let profile = profiles::load(&state, &ids.get("instance_id")?, &ids.get("profile_id")?).await?;
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

async fn update_tool_host(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<UpdateToolHost>,
) -> AppResult<Json<ToolHost>> {
    let id = ids.get("tool_host_id")?;
    Ok(Json(tools::update_host(&state, &id, body).await?))
}

async fn update_tool(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<UpdateTool>,
) -> AppResult<Json<Tool>> {
    Ok(Json(
        tools::update(&state, &ids.get("tool_id")?, body).await?,
    ))
}

async fn register_tool_host(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegisterToolHost>,
) -> AppResult<impl IntoResponse> {
    let host = tools::register_host(&state, body).await?;
    Ok((StatusCode::CREATED, Json(host)))
}

async fn list_tool_hosts(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<ToolHost>>> {
    let page = state
        .store
        .list_tool_hosts(params.cursor::<ToolHostId>()?.as_ref(), params.limit()?)
        .await?;
    Ok(Json(page))
}

async fn get_tool_host(State(state): State<AppState>, ids: Ids) -> AppResult<Json<ToolHost>> {
    Ok(Json(
        tools::load_host(&state, &ids.get("tool_host_id")?).await?,
    ))
}

async fn register_tool(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegisterTool>,
) -> AppResult<impl IntoResponse> {
    let tool = tools::register(&state, body).await?;
    Ok((StatusCode::CREATED, Json(tool)))
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
    Ok(Json(tools::load(&state, &ids.get("tool_id")?).await?))
}

async fn delete_tool(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Tool>> {
    let id = ids.get("tool_id")?;
    let tool = tools::load(&state, &id).await?;
    tools::delete(&state, &id).await?;
    Ok(Json(tool))
}

async fn delete_tool_host(State(state): State<AppState>, ids: Ids) -> AppResult<Json<ToolHost>> {
    let id = ids.get("tool_host_id")?;
    let host = tools::load_host(&state, &id).await?;
    tools::delete_host(&state, &id).await?;
    Ok(Json(host))
}
