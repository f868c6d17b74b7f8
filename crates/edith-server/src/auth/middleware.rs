//! The check every request passes before its handler (and before `Idempotency-Key` handling).

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use edith_types::{ErrorCode, Timestamp};

use super::{Principal, hash};
use crate::error::{AppError, AppResult};
use crate::http::{self, Access};
use crate::state::AppState;

/// Authenticates the request's key and checks it against the route's access rule; the key
/// reaches the handler as a [`Principal`] extension.
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    // Closed by default: no route, or a method the route declared no rule for, still needs a
    // key to learn that.
    let access = route
        .as_deref()
        .and_then(|route| http::access(request.method(), route))
        .unwrap_or(Access::Key(edith_types::Scope::Read));
    let scope = match access {
        Access::Public | Access::OwnToken => return next.run(request).await,
        Access::Key(scope) => scope,
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_owned());
    let principal = match principal(&state, bearer.as_deref()).await {
        Ok(principal) => principal,
        Err(e) => return unauthorized(e),
    };
    if let Err(e) = principal.require(scope, "this operation") {
        return e.into_response();
    }
    if let Err(e) = state.gate.admit(&principal.0.id) {
        return e.into_response();
    }
    if let Some(route) = &route
        && let Err(e) = reaches_route(&principal, route, request.uri().path())
    {
        return e.into_response();
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// The key of `Authorization: Bearer <secret>`, if it is known and not revoked.
async fn principal(state: &AppState, bearer: Option<&str>) -> AppResult<Principal> {
    let unauthorized = |detail: &str| AppError::new(ErrorCode::Unauthorized, detail);
    let secret = bearer.filter(|s| !s.is_empty()).ok_or_else(|| {
        unauthorized("this operation needs an API key: `Authorization: Bearer <key>`")
    })?;
    // Found by its hash: how long the lookup takes depends on the hash, never on how much of
    // the secret a guess got right, so timing reveals nothing of it.
    let hashed = hash(secret);
    let key = match state.known_keys.get(&hashed) {
        Ok(key) => key,
        Err(seen) => {
            let Some(key) = state.store.api_key_by_hash(&hashed).await? else {
                return Err(unauthorized("the API key is not known"));
            };
            state.known_keys.keep(hashed, &key, seen);
            key
        }
    };
    if key.revoked_at.is_some() {
        return Err(unauthorized("the API key was revoked"));
    }
    if state.last_use.due(&key.id) {
        let now = Timestamp::now();
        if let Err(e) = state.store.record_api_key_use(&key.id, &now).await {
            tracing::warn!(key = %key.id, error = %e, "could not record a key's last use");
        }
    }
    Ok(Principal(key))
}

/// A key limited to some instances reaches only routes about one of them.
fn reaches_route(principal: &Principal, route: &str, path: &str) -> AppResult<()> {
    if !principal.is_limited() {
        return Ok(());
    }
    // A job belongs to one instance; its handlers check that this key reaches it
    // (`Principal::require_reach`), since the path does not say which.
    if route.split('/').any(|pattern| pattern == "{job_id}") {
        return Ok(());
    }
    let instance = route
        .split('/')
        .zip(path.split('/'))
        .find_map(|(pattern, value)| (pattern == "{instance_id}").then_some(value));
    match instance {
        Some(instance) if principal.reaches(instance) => Ok(()),
        Some(instance) => Err(AppError::new(
            ErrorCode::Forbidden,
            format!("this key does not reach instance `{instance}`"),
        )),
        None => Err(AppError::new(
            ErrorCode::Forbidden,
            "this key is limited to some instances; this operation is not about one of them",
        )),
    }
}

fn unauthorized(error: AppError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}
