//! `/api/sessions…`: the stored sessions of a profile's `state.db` — the ones the gateway
//! writes — listed, searched, read, renamed, archived and deleted as Hermes does.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_native::desktop::replies::{
    MessagePage, SearchResults, SessionDeleted, SessionPage, SessionUpdated,
};
use hermes_native::desktop::{
    SessionDeleteQuery, SessionGetQuery, SessionListQuery, SessionMessagesQuery,
    SessionSearchQuery, SessionUpdateBody,
};
use hermes_native::profile::DEFAULT_PROFILE;

use super::profiles::home_of;
use crate::http::extract::{Body, Params};
use crate::http::reply::{internal, refuse};
use crate::runtime::Runtime;
use crate::store::StateDb;
use crate::store::desktop::{Archived, ListFilter, MAX_TITLE_CHARS, Order, TitleRefusal};

/// The `state.db` a request reads (its `profile`, else the runtime's own) and the profile's
/// name when the request named one.
async fn db_of(
    runtime: &Runtime,
    profile: Option<&str>,
) -> Result<(StateDb, Option<String>), Response> {
    let (home, named): (PathBuf, Option<String>) =
        home_of(runtime, profile).map_err(IntoResponse::into_response)?;
    let db = runtime
        .db(&home)
        .await
        .map_err(|e| internal("opening state.db", e))?;
    Ok((db, named))
}

/// What a handler answers: its reply, or a refusal already shaped.
type Reply = Result<Response, Response>;

fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "Session not found")
}

/// The whole id of the session `id` names (itself or a prefix of it); 404 for none.
async fn resolved(db: &StateDb, id: &str) -> Result<String, Response> {
    match db.resolve_id(id).await {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(not_found()),
        Err(e) => Err(internal("reading a session", e)),
    }
}

pub async fn list(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<SessionListQuery>,
) -> Reply {
    let archived = match query.archived.as_deref().unwrap_or("exclude") {
        "exclude" => Archived::Exclude,
        "only" => Archived::Only,
        "include" => Archived::Include,
        _ => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "archived must be one of: exclude, only, include",
            ));
        }
    };
    let order = match query.order.as_deref().unwrap_or("created") {
        "created" => Order::Created,
        "recent" => Order::Recent,
        _ => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "order must be one of: created, recent",
            ));
        }
    };
    let (db, named) = db_of(&runtime, query.profile.as_deref()).await?;
    let filter = ListFilter {
        limit: query.limit.unwrap_or(20),
        offset: query.offset.unwrap_or(0),
        min_messages: query.min_messages.unwrap_or(0),
        archived,
        order,
        source: query.source.filter(|s| !s.is_empty()),
        exclude_sources: query
            .exclude_sources
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        cwd_prefix: query.cwd_prefix.filter(|s| !s.is_empty()),
        full: query.full.unwrap_or(false),
    };
    let (mut sessions, total) = db
        .session_page(&filter)
        .await
        .map_err(|e| internal("listing sessions", e))?;
    if let Some(name) = named {
        for session in &mut sessions {
            session.profile = Some(name.clone());
            session.is_default_profile = Some(name == DEFAULT_PROFILE);
        }
    }
    Ok(Json(SessionPage {
        sessions,
        total,
        limit: filter.limit,
        offset: filter.offset,
    })
    .into_response())
}

pub async fn search(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<SessionSearchQuery>,
) -> Reply {
    let text = query.q.unwrap_or_default();
    if text.trim().is_empty() {
        return Ok(Json(SearchResults {
            results: Vec::new(),
        })
        .into_response());
    }
    let limit = match query.limit.unwrap_or(20) {
        0 => 20,
        n => n.clamp(1, 100) as usize,
    };
    let (db, _) = db_of(&runtime, query.profile.as_deref()).await?;
    let results = db.search(text.trim(), limit).await.map_err(|e| {
        tracing::error!(error = %e, "searching sessions");
        refuse(StatusCode::INTERNAL_SERVER_ERROR, "Search failed")
    })?;
    Ok(Json(SearchResults { results }).into_response())
}

pub async fn get(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<SessionGetQuery>,
) -> Reply {
    let (db, named) = db_of(&runtime, query.profile.as_deref()).await?;
    let id = resolved(&db, &id).await?;
    let mut detail = db
        .session_detail(&id)
        .await
        .map_err(|e| internal("reading a session", e))?
        .ok_or_else(not_found)?;
    detail.profile = named;
    Ok(Json(detail).into_response())
}

pub async fn messages(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<SessionMessagesQuery>,
) -> Reply {
    let (db, _) = db_of(&runtime, query.profile.as_deref()).await?;
    let id = resolved(&db, &id).await?;
    let (messages, pagination) = db
        .stored_messages(&id, query.limit, query.offset.unwrap_or(0))
        .await
        .map_err(|e| internal("reading messages", e))?;
    Ok(Json(MessagePage {
        session_id: hermes_native::StoredSessionId::new(id),
        messages,
        pagination,
    })
    .into_response())
}

pub async fn update(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Body(body): Body<SessionUpdateBody>,
) -> Reply {
    let (db, _) = db_of(&runtime, body.profile.as_deref()).await?;
    let id = resolved(&db, &id).await?;
    if body.title.is_none() && body.archived.is_none() {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "Nothing to update; provide 'title' and/or 'archived'.",
        ));
    }
    let updated = db
        .update_session(&id, body.title.as_deref(), body.archived)
        .await
        .map_err(|e| internal("updating a session", e))?;
    let title = updated.map_err(|refusal| {
        let detail = match refusal {
            TitleRefusal::TooLong(chars) => {
                format!("Title too long ({chars} chars, max {MAX_TITLE_CHARS})")
            }
            TitleRefusal::InUse(holder) => format!(
                "Title '{}' is already in use by session {holder}",
                crate::store::desktop::tidy_title(body.title.as_deref().unwrap_or(""))
            ),
        };
        refuse(StatusCode::BAD_REQUEST, detail)
    })?;
    Ok(Json(SessionUpdated {
        ok: true,
        title,
        archived: body.archived,
    })
    .into_response())
}

/// Idempotent: a session that is not there is `already_absent`, not a 404.
pub async fn delete(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<SessionDeleteQuery>,
) -> Reply {
    let (db, _) = db_of(&runtime, query.profile.as_deref()).await?;
    let found = match db.resolve_id(&id).await {
        Ok(Some(id)) => db.delete_session(&id).await,
        Ok(None) => Ok(false),
        Err(e) => Err(e),
    }
    .map_err(|e| internal("deleting a session", e))?;
    Ok(Json(SessionDeleted {
        ok: true,
        already_absent: (!found).then_some(true),
    })
    .into_response())
}
