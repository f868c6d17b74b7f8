//! The Desktop routes of an instance's runtime, forwarded: the application calls the control
//! plane with its own key, the control plane calls the runtime with the runtime's token (which
//! never leaves it). Only the routes of `contracts/hermes-desktop.routes.json` pass; a runtime's
//! other routes (its secrets, its updates, its shell) stay out of reach.

use std::time::Duration;

use axum::body::Body;
use axum::body::Bytes;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use edith_types::Scope;
use edith_types::{ErrorCode, InstanceId};
use hermes_native::desktop::{Route, RouteGroup, TOKEN_HEADER};

use super::instances;
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// How long a runtime may take to answer one Desktop request.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);

/// What is forwarded: the runtime path (`/api/…`), its query, and the body with its type.
pub struct Forward {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub content_type: Option<HeaderValue>,
    pub body: Bytes,
}

pub async fn forward(
    state: &AppState,
    caller: &Principal,
    instance: &InstanceId,
    request: Forward,
) -> AppResult<Response> {
    let Some(route) = Route::matching(request.method.as_str(), &request.path) else {
        return Err(AppError::new(
            ErrorCode::RouteNotFound,
            format!(
                "{} {} is not a Desktop route of the pinned contract",
                request.method, request.path
            ),
        ));
    };
    // The real Hermes's file and git routes reach the whole machine, and its configuration
    // holds credentials (model keys, the MCP tokens of callback tools): reading them is
    // administration too.
    if matches!(
        route.group(),
        RouteGroup::Fs | RouteGroup::Git | RouteGroup::Config
    ) {
        caller.require(
            Scope::Admin,
            &format!("the runtime's {}: reaching them", route.group().as_str()),
        )?;
    }
    let record = instances::load_ready(state, instance).await?;
    let endpoint = state.endpoint(&record).await?;
    let mut url = format!("{}{}", endpoint.http_url(), request.path);
    if let Some(query) = request.query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(&query);
    }
    let mut outgoing = state
        .http
        .request(request.method, url)
        .timeout(FORWARD_TIMEOUT)
        .header(TOKEN_HEADER, &endpoint.token)
        .body(request.body);
    if let Some(content_type) = request.content_type {
        outgoing = outgoing.header(header::CONTENT_TYPE, content_type);
    }
    let reply = outgoing.send().await.map_err(|e| {
        let what = if e.is_timeout() {
            format!("did not answer in {} s", FORWARD_TIMEOUT.as_secs())
        } else {
            "could not be reached".to_owned()
        };
        AppError::new(
            ErrorCode::RuntimeUnavailable,
            format!("the runtime of instance `{instance}` {what}"),
        )
    })?;
    let status = StatusCode::from_u16(reply.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = reply.headers().get(header::CONTENT_TYPE).cloned();
    let body = reply.bytes().await.map_err(|_| {
        AppError::new(
            ErrorCode::RuntimeUnavailable,
            format!("the runtime of instance `{instance}` broke off its answer"),
        )
    })?;
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}
