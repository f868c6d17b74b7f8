//! Sessions: a conversation on a profile, optionally continuing a stored native session.

use edith_types::{CreateSession, InstanceId, Profile, ProfileId, Session, SessionId, Timestamp};

use super::profiles;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// A session and the profile it belongs to.
pub async fn load(
    state: &AppState,
    instance: &InstanceId,
    profile: &ProfileId,
    id: &SessionId,
) -> AppResult<(Profile, Session)> {
    let profile = profiles::load(state, instance, profile).await?;
    let session = state.store.session(&profile.id, id).await?.ok_or_else(|| {
        AppError::not_found(format!("session `{id}` of profile `{}`", profile.id))
    })?;
    Ok((profile, session))
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
    let session = Session {
        id: SessionId::generate(),
        profile_id: profile.id,
        instance_id: profile.instance_id,
        native_session_id: body.resume_native_session_id,
        title: body.title,
        created_at: Timestamp::now(),
    };
    state.store.insert_session(&session).await?;
    Ok(session)
}
