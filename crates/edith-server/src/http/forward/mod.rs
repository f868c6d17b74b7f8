//! Requests that touch an instance's runtime are served by the replica owning the instance
//! (`app::replicas`): one that arrives elsewhere is forwarded there, as it came (its key is
//! checked again by the owner, and its `Idempotency-Key` is the owner's to honour), and the
//! owner's answer goes back as it is. Which routes those are is declared with each route
//! (`Op::on_owner`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderName, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use edith_types::{ErrorCode, InstanceId};

use crate::app::replicas::{self, Place};
use crate::error::AppError;
use crate::state::AppState;

/// Marks a request one replica forwarded to another, with the forwarder's name: a replica
/// that is not the owner either (ownership moved meanwhile) answers it rather than forwarding
/// it again.
pub(super) const FORWARDED_BY: HeaderName = HeaderName::from_static("edith-forwarded-by");

mod websocket;

/// Names the replica that gave an answer, on every answer.
pub const REPLICA: HeaderName = HeaderName::from_static("edith-replica");

/// Says which replica answered (for operators behind a load balancer, and for a replica
/// starting under a name another may be using): a forwarded request's answer keeps the
/// owner's name.
pub async fn name_replica(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if let Ok(name) = header::HeaderValue::from_str(state.replica.name()) {
        response.headers_mut().entry(REPLICA).or_insert(name);
    }
    response
}

/// How long the owner has to answer a forwarded request, stream included.
const FORWARD_LIMIT: Duration = Duration::from_secs(300);

/// Headers that belong to one connection, not to the request or answer they carry.
pub(super) const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
    header::TRAILER,
];

pub async fn to_owner(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let on_owner = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| super::on_owner(request.method(), path.as_str()));
    if !on_owner {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let instance = RawPathParams::from_request_parts(&mut parts, &state)
        .await
        .ok()
        .and_then(|params| {
            let (_, value) = params.iter().find(|(name, _)| *name == "instance_id")?;
            value.parse::<InstanceId>().ok()
        });
    let request = Request::from_parts(parts, body);
    // A malformed id is the handler's to refuse.
    let Some(instance) = instance else {
        return next.run(request).await;
    };
    match replicas::place(&state, &instance).await {
        Ok(Place::Here) => next.run(request).await,
        // Boxed: a forwarded request is a future of kilobytes, and this middleware wraps every
        // request that names an instance, nearly all of them served here.
        Ok(Place::There { replica, url }) => {
            Box::pin(forward(&state, &instance, &replica, url, request))
                .await
                .unwrap_or_else(IntoResponse::into_response)
        }
        Err(e) => e.into_response(),
    }
}

async fn forward(
    state: &AppState,
    instance: &InstanceId,
    owner: &str,
    url: Option<String>,
    request: Request,
) -> Result<Response, AppError> {
    let unavailable = |why: String| {
        AppError::new(
            ErrorCode::RuntimeUnavailable,
            format!("instance `{instance}` is served by replica `{owner}`, which {why}"),
        )
    };
    if request.headers().contains_key(FORWARDED_BY) {
        return Err(unavailable(
            "handed it on as its owner changed; try again".to_owned(),
        ));
    }
    let Some(base) = url else {
        return Err(unavailable("has not said where it answers".to_owned()));
    };
    if request.headers().contains_key(header::UPGRADE) {
        return websocket::relay(state, &base, request, unavailable).await;
    }
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|_| AppError::invalid("the request's body could not be read"))?;
    let mut headers = header::HeaderMap::new();
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) {
            headers.append(name, value.clone());
        }
    }
    crate::telemetry::pass_on_trace(&mut headers);
    let outgoing = state
        .http
        .request(parts.method.clone(), format!("{base}{path}"))
        .timeout(FORWARD_LIMIT)
        .headers(headers)
        .header(FORWARDED_BY, state.replica.name())
        .body(body);
    let answer = outgoing.send().await.map_err(|e| {
        let lease = state.replica.lease();
        unavailable(if e.is_timeout() {
            format!("did not answer in {} s", FORWARD_LIMIT.as_secs())
        } else {
            format!(
                "does not answer; if it stopped, another replica takes the instance over within \
                 {} s",
                lease.as_secs()
            )
        })
    })?;
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .map_err(|e| AppError::internal(format!("cannot pass the owner's answer on: {e}")))
}
