//! Provisioning jobs: durable, step by step, each step idempotent so that a job interrupted by
//! a restart is simply run again from the top.

use edith_types::{
    InstanceId, InstanceState, Job, JobEventKind, JobId, JobKind, JobState, JobStep, StepState,
    Timestamp,
};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

const PROVISION_STEPS: &[&str] = &["prepare_home", "start_runtime", "connect_gateway"];
const DELETE_STEPS: &[&str] = &["disconnect", "destroy_runtime", "remove_records"];

pub fn new_job(instance: &InstanceId, kind: JobKind) -> Job {
    let steps = match kind {
        JobKind::InstanceProvision => PROVISION_STEPS,
        JobKind::InstanceDelete => DELETE_STEPS,
    };
    let now = Timestamp::now();
    Job {
        id: JobId::generate(),
        instance_id: instance.clone(),
        kind,
        state: JobState::Queued,
        steps: steps
            .iter()
            .map(|name| JobStep {
                name: (*name).to_owned(),
                state: StepState::Pending,
            })
            .collect(),
        error: None,
        created_at: now.clone(),
        updated_at: now,
    }
}

/// Runs the job in the background.
pub fn spawn(state: AppState, job: Job) {
    tokio::spawn(async move {
        let id = job.id.clone();
        if let Err(e) = run(&state, job).await {
            tracing::error!(job = %id, detail = %e.detail, "job could not record its outcome");
        }
        state.job_events.finish(id.as_str());
    });
}

async fn record(state: &AppState, job: &mut Job, event: JobEventKind) -> AppResult<()> {
    job.updated_at = Timestamp::now();
    state.store.update_job(job).await?;
    let event = state.store.append_job_event(&job.id, &event).await?;
    state.job_events.publish(job.id.as_str(), event);
    Ok(())
}

async fn run(state: &AppState, mut job: Job) -> AppResult<()> {
    job.state = JobState::Running;
    let total = job.steps.len() as u32;
    for index in 0..job.steps.len() {
        let step = job.steps[index].name.clone();
        let position = index as u32 + 1;
        job.steps[index].state = StepState::Running;
        record(
            state,
            &mut job,
            JobEventKind::StepStarted {
                step: step.clone(),
                index: position,
                of: total,
            },
        )
        .await?;
        if let Err(e) = run_step(state, &job, &step).await {
            job.steps[index].state = StepState::Failed;
            return finish(state, job, Err(format!("{step}: {}", e.detail))).await;
        }
        job.steps[index].state = StepState::Done;
        record(
            state,
            &mut job,
            JobEventKind::StepCompleted {
                step,
                index: position,
                of: total,
            },
        )
        .await?;
    }
    finish(state, job, Ok(())).await
}

async fn run_step(state: &AppState, job: &Job, step: &str) -> AppResult<()> {
    let id = &job.instance_id;
    if step == "remove_records" {
        return Ok(state.store.purge_instance(id).await?);
    }
    let record = state
        .store
        .instance(id)
        .await?
        .ok_or_else(|| AppError::not_found("instance"))?;
    let provider = state.provider(record.instance.provider);
    let provider_error = |e: crate::providers::ProviderError| {
        AppError::new(edith_types::ErrorCode::RuntimeUnavailable, e.0)
    };
    match step {
        "prepare_home" => provider.provision(&record).await.map_err(provider_error),
        "start_runtime" => provider
            .start(&record)
            .await
            .map(drop)
            .map_err(provider_error),
        "connect_gateway" => state.links.connect(state, &record).await.map(drop),
        "disconnect" => {
            state.links.forget(id).await;
            Ok(())
        }
        "destroy_runtime" => provider.destroy(id).await.map_err(provider_error),
        other => Err(AppError::internal(format!("unknown job step `{other}`"))),
    }
}

async fn finish(state: &AppState, mut job: Job, outcome: Result<(), String>) -> AppResult<()> {
    let instance_state = match (&outcome, job.kind) {
        (Ok(()), JobKind::InstanceProvision) => InstanceState::Ready,
        (Ok(()), JobKind::InstanceDelete) => InstanceState::Deleted,
        (Err(_), _) => InstanceState::Failed,
    };
    if let Some(mut record) = state.store.instance(&job.instance_id).await? {
        record.instance.state = instance_state;
        record.instance.state_reason = outcome.as_ref().err().cloned();
        record.instance.updated_at = Timestamp::now();
        state.store.update_instance(&record.instance).await?;
    }
    job.state = if outcome.is_ok() {
        JobState::Succeeded
    } else {
        JobState::Failed
    };
    job.error = outcome.err();
    let error = job.error.clone();
    let state_now = job.state;
    record(
        state,
        &mut job,
        JobEventKind::JobFinished {
            state: state_now,
            instance_state,
            error,
        },
    )
    .await
}
