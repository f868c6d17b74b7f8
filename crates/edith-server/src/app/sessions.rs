//! Sessions: a conversation on a profile, optionally continuing a stored native session.

use edith_store::{InstanceRecord, SessionChange};
use edith_types::{
    CreateSession, ErrorCode, InstanceId, Profile, ProfileId, Session, SessionId, Timestamp,
    UpdateSession, control_plane_kind,
};
use hermes_native::methods::{LiveSessionParams, SessionClose};

use super::{instances, profiles, turns};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// A session and the profile it belongs to.
pub async fn load(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    id: &SessionId,
) -> AppResult<(Profile, Session)> {
    let (_, profile, session) = load_all(state, instance, profile, id).await?;
    Ok((profile, session))
}

/// A session with its profile and instance, in one read.
pub async fn load_all(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    id: &SessionId,
) -> AppResult<(InstanceRecord, Profile, Session)> {
    let (record, profile, session) =
        profiles::load_path(state, instance, profile, Some(id)).await?;
    let session = session.ok_or_else(|| {
        AppError::not_found(format!("session `{id}` of profile `{}`", profile.id))
    })?;
    Ok((record, profile, session))
}

pub async fn create(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    body: CreateSession,
) -> AppResult<Session> {
    let profile = profiles::load(state, instance, profile).await?;
    if body
        .resume_native_session_id
        .as_ref()
        .is_some_and(|id| id.as_str().trim().is_empty())
    {
        return Err(AppError::invalid(
            "`resume_native_session_id` must not be empty",
        ));
    }
    if let Some(native) = &body.resume_native_session_id
        && let Some(kind) = control_plane_kind(native.as_str())
    {
        return Err(AppError::invalid(format!(
            "`resume_native_session_id` takes the runtime's stored session id (as the native \
             session list shows it); `{native}` is {kind} id of the control plane"
        )));
    }
    let mut session = Session {
        id: SessionId::generate(),
        profile_id: profile.id.clone(),
        instance_id: profile.instance_id.clone(),
        native_session_id: body.resume_native_session_id,
        title: body.title,
        created_at: Timestamp::now(),
    };
    if session.native_session_id.is_some() {
        // Resumed now: an unknown id is the caller's 404 here, not a failed turn later; the
        // live session serves the first turn.
        let record = instances::load_ready(state, instance).await?;
        let link = state.gateway(&record).await?;
        turns::open_live_session(state, &link, &mut session, &profile).await?;
    }
    state.store.insert_session(&session).await?;
    Ok(session)
}

/// Changes the session's title.
pub async fn update(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    id: &SessionId,
    body: UpdateSession,
) -> AppResult<Session> {
    let (_, session) = load(state, instance, profile, id).await?;
    let Some(title) = body.title else {
        return Ok(session);
    };
    // The title alone: a native session id a first turn writes meanwhile stays.
    let changed = state
        .store
        .change_session(&session.id, SessionChange::Title(title))
        .await?;
    // Gone since it was read: deleted meanwhile.
    changed.ok_or_else(|| AppError::not_found(format!("session `{id}` of profile `{profile}`")))
}

/// Deletes the control-plane session with its turns and their logs, and closes its live
/// session on the runtime; the runtime's stored session stays (it can be resumed by its native
/// id). Refused (409) while one of its turns has not finished.
pub async fn delete(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    id: &SessionId,
) -> AppResult<Session> {
    let (_, session) = load(state, instance, profile, id).await?;
    if !state.store.delete_idle_session(&session.id).await? {
        // Which turn kept it: named when it is still there (it may have just finished).
        let turn = state.store.unfinished_turn_of_session(&session.id).await?;
        let which = turn.map_or_else(|| "a turn".to_owned(), |turn| format!("turn `{turn}`"));
        return Err(AppError::new(
            ErrorCode::Conflict,
            format!(
                "session `{id}` has {which} that has not finished: cancel it or let it finish \
                 first"
            ),
        ));
    }
    // Its live session is closed unless another session continuing the same stored session
    // holds it too; one given to another session meanwhile waits for the close.
    if let Some(link) = state.gateways.existing(instance)
        && let Some(closing) = link.live.take_to_close(&session.id)
    {
        let params = LiveSessionParams {
            session_id: Some(closing.sid.clone()),
        };
        // Best effort: one left open holds the runtime's resources (on the real Hermes, a
        // process) until the connection closes; said in the log.
        if let Err(e) = link.gateway.request::<SessionClose>(&params).await {
            tracing::warn!(session = %session.id, error = %e, "a deleted session's live session was not closed");
        }
        drop(closing);
    }
    Ok(session)
}
