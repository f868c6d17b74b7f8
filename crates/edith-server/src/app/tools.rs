//! Callback tools and the tool hosts that serve them.

use edith_store::ToolHostRecord;
use edith_types::{
    RegisterTool, RegisterToolHost, Timestamp, Tool, ToolHost, ToolHostId, ToolId, UpdateTool,
    UpdateToolHost,
};

use edith_types::{ErrorCode, rules};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

fn check_host_url(url: &str) -> AppResult<()> {
    if rules::is_http_url(url) {
        return Ok(());
    }
    Err(AppError::invalid(
        "`url` must be an http:// or https:// URL",
    ))
}

fn check_secret(secret: &str) -> AppResult<()> {
    if secret.chars().count() < rules::TOOL_HOST_SECRET_MIN_CHARS {
        return Err(AppError::invalid(format!(
            "`secret` must be at least {} characters",
            rules::TOOL_HOST_SECRET_MIN_CHARS
        )));
    }
    Ok(())
}

fn check_schema(schema: &serde_json::Value) -> AppResult<()> {
    if schema.get("type").and_then(|t| t.as_str()) != Some(rules::OBJECT_SCHEMA) {
        return Err(AppError::invalid(
            "`input_schema` must be a JSON Schema with \"type\": \"object\"",
        ));
    }
    Ok(())
}

pub async fn register_host(state: &AppState, body: RegisterToolHost) -> AppResult<ToolHost> {
    check_host_url(&body.url)?;
    check_secret(&body.secret)?;
    let host = ToolHost {
        id: ToolHostId::generate(),
        url: body.url,
        created_at: Timestamp::now(),
    };
    let record = ToolHostRecord {
        host: host.clone(),
        secret: body.secret,
    };
    state.store.insert_tool_host(&record).await?;
    Ok(host)
}

pub async fn load_host(state: &AppState, id: &ToolHostId) -> AppResult<ToolHost> {
    state.store.tool_host(id).await?.ok_or_else(|| no_host(id))
}

fn no_host(id: &ToolHostId) -> AppError {
    AppError::not_found(format!("tool host `{id}`"))
}

fn no_tool(id: &ToolId) -> AppError {
    AppError::not_found(format!("tool `{id}`"))
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

pub async fn register(state: &AppState, body: RegisterTool) -> AppResult<Tool> {
    if !valid_tool_name(&body.name) {
        return Err(AppError::invalid(format!(
            "tool name `{}` must match {}",
            body.name,
            rules::TOOL_NAME
        )));
    }
    check_schema(&body.input_schema)?;
    load_host(state, &body.host_id).await?;
    let tool = Tool {
        id: ToolId::generate(),
        name: body.name,
        description: body.description,
        input_schema: body.input_schema,
        host_id: body.host_id,
        created_at: Timestamp::now(),
    };
    state.store.insert_tool(&tool).await?;
    Ok(tool)
}

/// Moves a tool host or changes its secret; the next call reaches it there, with that.
pub async fn update_host(
    state: &AppState,
    id: &ToolHostId,
    body: UpdateToolHost,
) -> AppResult<ToolHost> {
    if let Some(url) = &body.url {
        check_host_url(url)?;
    }
    if let Some(secret) = &body.secret {
        check_secret(secret)?;
    }
    let host = state.store.change_tool_host(id, &body).await?;
    let host = host.ok_or_else(|| no_host(id))?;
    // Its connection was to the old place or with the old secret.
    state.tool_hosts.forget(id).await;
    Ok(host)
}

/// Changes a tool's description or argument schema. The runtimes of this replica's instances
/// see it at their next turn; with replicas, the others' runtimes once this replica's
/// announcement reaches them (`docs/decisions.md`, 2026-12-05).
pub async fn update(state: &AppState, id: &ToolId, body: UpdateTool) -> AppResult<Tool> {
    if let Some(schema) = &body.input_schema {
        check_schema(schema)?;
    }
    let changing = (state.tool_lists).changing(crate::tools::Touched::All);
    let tool = state.store.change_tool(id, body).await?;
    drop(changing);
    tool.ok_or_else(|| no_tool(id))
}

pub async fn load(state: &AppState, id: &ToolId) -> AppResult<Tool> {
    state.store.tool(id).await?.ok_or_else(|| no_tool(id))
}

/// Deletes a tool no profile uses; one in use is a 409 naming the profiles.
pub async fn delete(state: &AppState, id: &ToolId) -> AppResult<()> {
    load(state, id).await?;
    if state.store.delete_unused_tool(id).await? {
        return Ok(());
    }
    let users: Vec<String> = state
        .store
        .profiles_using_tool(id)
        .await?
        .iter()
        .map(ToString::to_string)
        .collect();
    Err(AppError::new(
        ErrorCode::Conflict,
        format!(
            "tool `{id}` is attached to {}; detach it first",
            users.join(", ")
        ),
    ))
}

/// Deletes a tool host that serves no tool; one that does is a 409 naming the tools.
pub async fn delete_host(state: &AppState, id: &ToolHostId) -> AppResult<()> {
    load_host(state, id).await?;
    if state.store.delete_unused_tool_host(id).await? {
        state.tool_hosts.forget(id).await;
        return Ok(());
    }
    let served: Vec<String> = state
        .store
        .tools_of_host(id)
        .await?
        .iter()
        .map(ToString::to_string)
        .collect();
    Err(AppError::new(
        ErrorCode::Conflict,
        format!(
            "tool host `{id}` serves {}; delete them first",
            served.join(", ")
        ),
    ))
}
