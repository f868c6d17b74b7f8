//! API keys: made (the secret shown once), listed, revoked.

use edith_types::{ApiKey, ApiKeyId, CreateApiKey, CreatedApiKey, Timestamp};

use super::instances;
use crate::auth::{hash, new_secret, shown_prefix};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

pub async fn create(state: &AppState, body: CreateApiKey) -> AppResult<CreatedApiKey> {
    if !edith_types::rules::is_display_name(&body.name) {
        return Err(AppError::invalid(format!(
            "`name` must be 1 to {} characters, not all blank",
            edith_types::rules::NAME_MAX_CHARS
        )));
    }
    let name = body.name.trim();
    if let Some(limited) = &body.instances {
        if limited.is_empty() {
            return Err(AppError::invalid(
                "`instances` must name at least one instance (leave it out for all)",
            ));
        }
        for instance in limited {
            instances::load(state, instance).await?;
        }
    }
    let secret = new_secret();
    let key = ApiKey {
        id: ApiKeyId::generate(),
        name: name.to_owned(),
        prefix: shown_prefix(&secret),
        scope: body.scope,
        instances: body.instances,
        created_at: Timestamp::now(),
        last_used_at: None,
        revoked_at: None,
    };
    state.store.insert_api_key(&key, &hash(&secret)).await?;
    Ok(CreatedApiKey { key, secret })
}

pub async fn load(state: &AppState, id: &ApiKeyId) -> AppResult<ApiKey> {
    state
        .store
        .api_key(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("API key `{id}`")))
}

/// Revokes a key: from now on it is refused. Revoking twice changes nothing.
pub async fn revoke(state: &AppState, id: &ApiKeyId) -> AppResult<ApiKey> {
    let mut key = load(state, id).await?;
    if key.revoked_at.is_none() {
        let now = Timestamp::now();
        state.store.revoke_api_key(&key.id, &now).await?;
        key.revoked_at = Some(now);
        forget(state, &key.id);
    }
    Ok(key)
}

/// Forgets what this replica holds for a revoked key (here, or on another replica that said
/// so): it is not trusted from memory, and its relays end.
pub fn forget(state: &AppState, id: &ApiKeyId) {
    state.known_keys.forget(id);
    state.gate.forget(id);
    state.last_use.forget(id);
    state.relays.end_for_key(id);
}
