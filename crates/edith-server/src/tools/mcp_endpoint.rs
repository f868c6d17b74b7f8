//! The MCP endpoint each profile's runtime is configured with: it lists the callback tools
//! attached to that profile and forwards each call to the tool host that serves it. The runtime
//! never needs to reach the application.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use edith_mcp::server::{
    SESSION_HEADER, ToolCallError, ToolService, bearer_matches, handle_post, list_changes,
};
use edith_mcp::{ToolDescriptor, ToolOutput, session_relists};
use edith_types::{ErrorCode, InstanceId, ProfileId};
use futures_util::StreamExt;
use serde_json::Value;

use crate::error::{AppError, AppResult};
use crate::http::extract::Ids;
use crate::state::AppState;

/// The endpoint's path; runtimes get it in their `mcp_servers` config.
pub const PATH: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/mcp";

pub fn url(state: &AppState, instance: &InstanceId, profile: &ProfileId) -> String {
    format!(
        "{}{}",
        state.public_url,
        PATH.replace("{instance_id}", instance.as_str())
            .replace("{profile_id}", profile.as_str())
    )
}

struct ProfileTools {
    state: AppState,
    instance: InstanceId,
    profile: ProfileId,
    /// The MCP session the message came in.
    session: Option<String>,
}

impl ToolService for ProfileTools {
    fn announces_list_changes(&self) -> bool {
        true
    }

    async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
        let lists = &self.state.tool_lists;
        let seen = lists.changes();
        let tools = self
            .state
            .store
            .profile_tools(&self.profile)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(session) = &self.session {
            lists.listed(&self.profile, session, seen);
        }
        Ok(tools
            .into_iter()
            .map(|(tool, _)| ToolDescriptor {
                name: tool.name,
                description: tool.description,
                input_schema: tool.input_schema,
            })
            .collect())
    }

    async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ToolCallError> {
        let read = self.state.tool_hosts.before_reading().await;
        let tools = self
            .state
            .store
            .profile_tools(&self.profile)
            .await
            .map_err(|e| ToolCallError::Unavailable(e.to_string()))?;
        let (tool, host) = tools
            .into_iter()
            .find(|(tool, _)| tool.name == name)
            .ok_or_else(|| ToolCallError::UnknownTool(name.to_owned()))?;
        // The call belongs to the turn that asked for it, not to the runtime's request.
        let parent = (self.state.running_turns)
            .only_one(&self.instance, &self.profile)
            .unwrap_or_else(tracing::Span::current);
        let span = tracing::info_span!(
            parent: &parent,
            "tool.call",
            tool = %tool.name,
            tool_host = %host.host.id,
            otel.kind = "client",
        );
        let called = self.state.tool_hosts.call(&host, read, &tool.name, args);
        Ok(tracing::Instrument::instrument(called, span).await)
    }
}

/// `POST`: one MCP message from a runtime, authenticated with the instance's MCP token.
pub async fn post(
    State(state): State<AppState>,
    ids: Ids,
    headers: HeaderMap,
    body: Bytes,
) -> AppResult<Response> {
    let (instance, profile) = authenticate(&state, &ids, &headers).await?;
    let service = ProfileTools {
        state,
        instance,
        profile,
        session: session_of(&headers),
    };
    Ok(handle_post(&service, &body).await)
}

/// `GET`: the event stream of a runtime whose MCP client lists the tools again as soon as it is
/// told they changed (its session says so): told each time the profile's tools change, until it
/// disconnects, the profile is deleted or the server stops. Other clients list the tools when
/// they need them; they get no stream.
pub async fn get(
    State(state): State<AppState>,
    ids: Ids,
    headers: HeaderMap,
) -> AppResult<Response> {
    let (_, profile) = authenticate(&state, &ids, &headers).await?;
    let Some(session) = session_of(&headers).filter(|s| session_relists(s)) else {
        return Err(AppError::new(
            ErrorCode::MethodNotAllowed,
            "this endpoint sends an event stream only to a session whose client lists the tools \
             again when told they changed",
        ));
    };
    let watching = state.tool_lists.watch(&profile, &session);
    let changes = futures_util::stream::unfold(watching, |watching| async move {
        watching.next_change().await.then_some(((), watching))
    });
    let mut shutdown = state.shutdown.clone();
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    Ok(list_changes(changes.take_until(Box::pin(stopping))))
}

/// The instance and profile of the path, when the request carries the instance's MCP token.
async fn authenticate(
    state: &AppState,
    ids: &Ids,
    headers: &HeaderMap,
) -> AppResult<(InstanceId, ProfileId)> {
    let instance: InstanceId = ids.get("instance_id")?;
    let profile: ProfileId = ids.get("profile_id")?;
    let unauthorized = || {
        AppError::new(
            ErrorCode::Unauthorized,
            "this endpoint needs the instance's MCP token",
        )
    };
    // Read in one go for every message; only when it finds nothing is it told apart which is
    // missing.
    match state
        .store
        .mcp_token_of_profile(&instance, &profile)
        .await?
    {
        Some(token) if bearer_matches(headers, &token) => Ok((instance, profile)),
        Some(_) => Err(unauthorized()),
        None => {
            // An unknown instance is refused like a wrong token: without the token, nobody
            // learns which instances exist.
            let record = state.store.instance(&instance).await?;
            if !record.is_some_and(|record| bearer_matches(headers, &record.mcp_token)) {
                return Err(unauthorized());
            }
            Err(AppError::not_found("profile"))
        }
    }
}

fn session_of(headers: &HeaderMap) -> Option<String> {
    let session = headers.get(SESSION_HEADER)?.to_str().ok()?;
    Some(session.to_owned())
}
