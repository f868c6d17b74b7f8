//! Instances: made and removed by jobs, loaded by id.

use edith_store::InstanceRecord;
use edith_types::{
    CreateInstance, ErrorCode, Instance, InstanceId, InstanceState, InstanceWithJob, JobKind,
    Timestamp,
};

use super::jobs;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Records a `provisioning` instance and starts the job that brings it to `ready`.
pub async fn create(state: &AppState, body: CreateInstance) -> AppResult<InstanceWithJob> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 128 {
        return Err(AppError::invalid("`name` must be 1 to 128 characters"));
    }
    state.provider(body.provider)?;
    let now = Timestamp::now();
    let instance = Instance {
        id: InstanceId::generate(),
        name: name.to_owned(),
        provider: body.provider,
        state: InstanceState::Provisioning,
        state_reason: None,
        created_at: now.clone(),
        updated_at: now,
    };
    let record = InstanceRecord {
        instance: instance.clone(),
        runtime_token: secret(),
        mcp_token: secret(),
    };
    let job = jobs::new_job(&instance.id, JobKind::InstanceProvision);
    state.store.insert_instance(&record, &job).await?;
    jobs::spawn(state.clone(), job.clone());
    Ok(InstanceWithJob { instance, job })
}

/// 256 random bits, hex.
fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

pub async fn load(state: &AppState, id: &InstanceId) -> AppResult<InstanceRecord> {
    state
        .store
        .instance(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("instance `{id}`")))
}

/// An instance that is `ready`; any other state is 409 `instance_not_ready`.
pub async fn load_ready(state: &AppState, id: &InstanceId) -> AppResult<InstanceRecord> {
    let record = load(state, id).await?;
    let instance = &record.instance;
    if instance.state != InstanceState::Ready {
        return Err(AppError::new(
            ErrorCode::InstanceNotReady,
            format!(
                "instance `{}` is {}, not ready",
                instance.id,
                instance.state.as_str()
            ),
        ));
    }
    Ok(record)
}

/// Marks the instance `deleting` and starts the job that stops, destroys and forgets it.
pub async fn delete(state: &AppState, id: &InstanceId) -> AppResult<InstanceWithJob> {
    let mut record = load(state, id).await?;
    let instance = &mut record.instance;
    if matches!(
        instance.state,
        InstanceState::Deleting | InstanceState::Deleted | InstanceState::Provisioning
    ) {
        return Err(AppError::new(
            ErrorCode::Conflict,
            format!(
                "instance `{}` is {}; it can be deleted once that has finished",
                instance.id,
                instance.state.as_str()
            ),
        ));
    }
    instance.state = InstanceState::Deleting;
    instance.state_reason = None;
    instance.updated_at = Timestamp::now();
    let job = jobs::new_job(&instance.id, JobKind::InstanceDelete);
    state.store.insert_job(&job).await?;
    state.store.update_instance(instance).await?;
    jobs::spawn(state.clone(), job.clone());
    Ok(InstanceWithJob {
        instance: record.instance,
        job,
    })
}
