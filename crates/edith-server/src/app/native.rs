//! One native gateway call on an instance's runtime, over the control plane's connection to
//! it; profile-scoped methods get the profile's native name (the pinned catalog says which).

use edith_types::Scope as KeyScope;
use edith_types::{InstanceId, NativeCall, NativeReply};
use hermes_native::catalog::{Scope, catalog};
use serde_json::Value;

use super::instances;
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
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
    if info.admin {
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
        if info.scope == Scope::Profile && !params.contains_key("profile") {
            params.insert("profile".to_owned(), Value::String(profile.native_name));
        }
    }
    let link = state.gateway(&record).await?;
    let result = link
        .gateway
        .call(&body.method, Value::Object(params))
        .await?;
    Ok(NativeReply { result })
}
