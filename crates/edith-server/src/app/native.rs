//! One native gateway call on an instance's runtime, over the control plane's connection to
//! it; profile-scoped methods get the profile's native name (the pinned catalog says which).

use edith_types::Scope as KeyScope;
use edith_types::{ErrorCode, InstanceId, NativeCall, NativeReply};
use hermes_native::LiveSessionId;
use hermes_native::catalog::{Scope, catalog};
use hermes_native::desktop::replies::SessionPage;
use hermes_native::desktop::{Route, SessionListQuery, TOKEN_HEADER};
use hermes_native::methods::{
    Method, SessionClose, SessionList, SessionListParams, SessionListed, StoredSessionSummary,
    opened_live_session,
};
use serde_json::Value;

use super::instances;
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::runtime::{Link, TurnOn};
use crate::state::AppState;

/// Runs `body` on the instance's runtime for `caller`; methods the catalog marks as
/// administering the runtime need the `admin` scope.
pub async fn call(
    state: &AppState,
    caller: &Principal,
    instance: &InstanceId,
    body: NativeCall,
) -> AppResult<NativeReply> {
    let record = instances::load_ready(state, instance).await?;
    let Value::Object(mut params) = body.params else {
        return Err(AppError::invalid("`params` must be an object"));
    };
    // A name outside the catalog is the caller's mistake (4xx); a method of the catalog the
    // runtime lacks is the runtime's (`unsupported`).
    let info = catalog().method(&body.method).ok_or_else(|| {
        AppError::invalid(format!(
            "`{}` is not a method of the pinned Hermes 0.19 catalog",
            body.method
        ))
    })?;
    if info.administers(&Value::Object(params.clone())) {
        caller.require(
            KeyScope::Admin,
            &format!("`{}` administers the runtime: it", body.method),
        )?;
    }
    if let Some(profile_id) = &body.profile_id {
        let profile = state
            .store
            .profile(&record.instance.id, profile_id)
            .await?
            .ok_or_else(|| AppError::not_found(format!("profile `{profile_id}`")))?;
        // Hermes 0.19's gateway lists only the root profile's stored sessions, whatever the
        // profile: through a profile, its own come from the runtime's Desktop route instead.
        if body.method == SessionList::NAME {
            let list: SessionListParams = serde_json::from_value(Value::Object(params))
                .map_err(|e| AppError::invalid(format!("`params` of `session.list`: {e}")))?;
            let result = profile_sessions(state, &record, &profile.native_name, list.limit).await?;
            return Ok(NativeReply { result });
        }
        if info.scope == Scope::Profile && !params.contains_key("profile") {
            params.insert("profile".to_owned(), Value::String(profile.native_name));
        }
    }
    let named = (params.get("session_id").and_then(Value::as_str)).map(LiveSessionId::new);
    let link = state.gateway(&record).await?;
    // In use while the call runs, too: a slow call is not taken for idleness.
    if let Some(sid) = &named {
        link.live.used_natively(sid);
    }
    // Held through a close, so that no turn starts on the live session meanwhile.
    let _no_turn = match &named {
        Some(sid) if body.method == SessionClose::NAME => Some(no_turn_runs_on(&link, sid)?),
        _ => None,
    };
    let result = link
        .gateway
        .call(&body.method, Value::Object(params))
        .await?;
    note_live_session(&link, &body.method, named.as_ref(), &result);
    Ok(NativeReply { result })
}

/// The slot of a live session no control-plane turn runs on: a close would cut such a turn off
/// unheard (a runtime sends nothing more of a session it closed, not even the end of its turn,
/// so the turn would wait out its silence limit).
fn no_turn_runs_on<'a>(link: &'a Link, sid: &LiveSessionId) -> AppResult<TurnOn<'a>> {
    link.turns.try_take(sid).ok_or_else(|| {
        AppError::new(
            ErrorCode::Conflict,
            format!(
                "a turn of the control plane runs on live session `{sid}`: cancel it, or let it \
                 end, before closing the live session"
            ),
        )
    })
}

/// Keeps count of the live sessions native calls open on the control plane's connection, and
/// of their use: nothing else closes them (the runtime keeps a connected client's sessions, on
/// the real Hermes a process each), so those left unused are closed as the control plane's own
/// are (`idle_sessions`). A session named by a native call is used; one it closes is forgotten.
fn note_live_session(link: &Link, method: &str, named: Option<&LiveSessionId>, reply: &Value) {
    if let Some(opened) = opened_live_session(method, reply) {
        link.live.opened_natively(opened);
    } else if let Some(sid) = named {
        if method == SessionClose::NAME {
            link.live.closed_natively(sid);
        } else {
            link.live.used_natively(sid);
        }
    }
}

/// How many stored sessions `session.list` answers when not told (as Hermes).
const DEFAULT_LIST_LIMIT: u64 = 200;

/// The stored sessions of the runtime's profile `native_name`, newest first, in the shape of
/// `session.list`, read from the runtime's Desktop route `GET /api/sessions?profile=`.
pub(super) async fn profile_sessions(
    state: &AppState,
    record: &edith_store::InstanceRecord,
    native_name: &str,
    limit: Option<u64>,
) -> AppResult<Value> {
    let endpoint = state.endpoint(record).await?;
    let query = SessionListQuery {
        profile: Some(native_name.to_owned()),
        // As `session.list`: latest activity first; 0 asks for the default.
        order: Some("recent".to_owned()),
        limit: Some(
            limit
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_LIST_LIMIT)
                .min(i64::MAX as u64) as i64,
        ),
        ..Default::default()
    };
    let unavailable = |what: String| {
        AppError::new(
            edith_types::ErrorCode::RuntimeUnavailable,
            format!("the runtime of instance `{}` {what}", record.instance.id),
        )
    };
    let reply = state
        .http
        .get(format!(
            "{}{}",
            endpoint.http_url(),
            Route::SessionList.path()
        ))
        .query(&query)
        .header(TOKEN_HEADER, &endpoint.token)
        .timeout(std::time::Duration::from_secs(60))
        .send()
        .await
        .map_err(|e| unavailable(format!("could not list sessions: {e}")))?;
    if !reply.status().is_success() {
        return Err(unavailable(format!(
            "refused to list sessions: {}",
            reply.status()
        )));
    }
    let page: SessionPage = reply
        .json()
        .await
        .map_err(|e| unavailable(format!("listed sessions unreadably: {e}")))?;
    let listed = SessionListed {
        sessions: page
            .sessions
            .into_iter()
            .map(|s| StoredSessionSummary {
                id: s.columns.id,
                title: s.columns.title.unwrap_or_default(),
                preview: s.preview,
                started_at: s.columns.started_at,
                message_count: s.columns.message_count.max(0) as u64,
                source: s.columns.source,
                other: Default::default(),
            })
            .collect(),
    };
    serde_json::to_value(listed).map_err(AppError::internal)
}
