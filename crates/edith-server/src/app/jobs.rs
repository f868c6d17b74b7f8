//! Provisioning jobs: durable, step by step, each step idempotent so that a job interrupted by
//! a restart is simply run again from the top.

use edith_types::{
    InstanceId, InstanceState, Job, JobEventKind, JobId, JobKind, JobState, JobStep, StepState,
    Timestamp,
};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// One step of a job. Its name is what jobs record and clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
enum Step {
    /// Make the runtime's home.
    PrepareHome,
    /// Start the runtime (a no-op when it runs).
    StartRuntime,
    /// Open the native gateway connection.
    ConnectGateway,
    /// Close the gateway connection.
    Disconnect,
    /// Stop the runtime and remove its home.
    DestroyRuntime,
    /// Forget the instance and everything in it.
    RemoveRecords,
}

impl Step {
    fn of(kind: JobKind) -> &'static [Step] {
        match kind {
            JobKind::InstanceProvision => {
                &[Step::PrepareHome, Step::StartRuntime, Step::ConnectGateway]
            }
            JobKind::InstanceDelete => {
                &[Step::Disconnect, Step::DestroyRuntime, Step::RemoveRecords]
            }
        }
    }

    fn name(self) -> &'static str {
        self.into()
    }
}

pub async fn load(state: &AppState, id: &JobId) -> AppResult<Job> {
    state
        .store
        .job(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("job `{id}`")))
}

pub fn new_job(instance: &InstanceId, kind: JobKind) -> Job {
    let steps = Step::of(kind);
    let now = Timestamp::now();
    Job {
        id: JobId::generate(),
        instance_id: instance.clone(),
        kind,
        state: JobState::Queued,
        steps: steps
            .iter()
            .map(|step| JobStep {
                name: step.name().to_owned(),
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

async fn run_step(state: &AppState, job: &Job, name: &str) -> AppResult<()> {
    let step: Step = name
        .parse()
        .map_err(|_| AppError::internal(format!("unknown job step `{name}`")))?;
    let id = &job.instance_id;
    match step {
        Step::PrepareHome => {
            let record = instance(state, id).await?;
            state
                .provider(record.instance.provider)?
                .provision(&record)
                .await?
        }
        Step::StartRuntime => {
            let record = instance(state, id).await?;
            drop(
                state
                    .provider(record.instance.provider)?
                    .start(&record)
                    .await?,
            )
        }
        Step::ConnectGateway => drop(state.gateway(&instance(state, id).await?).await?),
        Step::Disconnect => state.gateways.forget(id).await,
        Step::DestroyRuntime => {
            let record = instance(state, id).await?;
            state
                .provider(record.instance.provider)?
                .destroy(id)
                .await?
        }
        Step::RemoveRecords => state.store.purge_instance(id).await?,
    }
    Ok(())
}

async fn instance(state: &AppState, id: &InstanceId) -> AppResult<edith_store::InstanceRecord> {
    state
        .store
        .instance(id)
        .await?
        .ok_or_else(|| AppError::not_found("instance"))
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
    tracing::info!(
        job = %job.id,
        instance = %job.instance_id,
        kind = job.kind.as_str(),
        error = outcome.as_ref().err().map(String::as_str).unwrap_or(""),
        "job finished"
    );
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
