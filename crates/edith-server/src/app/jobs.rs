//! Provisioning jobs: durable, step by step. Each step is idempotent, so a job interrupted by a
//! restart is simply run again from the top; each step that makes something has an undo, so a
//! job that fails halfway leaves nothing behind. A job runs under a lease (owner, expiry,
//! renewed while it runs): one runner at a time, and a runner that died is replaced once its
//! lease runs out — at once when the same replica restarts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use edith_types::{
    Instance, InstanceId, InstanceState, Job, JobEventKind, JobId, JobKind, JobState, JobStep,
    StepState, Timestamp,
};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// One step of a job. Its name is what jobs record and clients see.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString, strum::VariantArray,
)]
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

    /// Whether the step makes something (which its undo removes), rather than removing.
    fn makes(self) -> bool {
        matches!(
            self,
            Step::PrepareHome | Step::StartRuntime | Step::ConnectGateway
        )
    }
}

/// Whether `name` is the name of a job step.
pub fn is_step(name: &str) -> bool {
    name.parse::<Step>().is_ok()
}

/// Every job step's name.
pub fn step_names() -> Vec<&'static str> {
    <Step as strum::VariantArray>::VARIANTS
        .iter()
        .map(|step| step.name())
        .collect()
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

/// Runs the job in the background, unless it runs here already or another runner holds its
/// lease.
pub fn spawn(state: AppState, job: Job) {
    let fresh = state
        .jobs_running
        .lock()
        .expect("not poisoned")
        .insert(job.id.clone());
    if !fresh {
        return;
    }
    let span = tracing::info_span!(
        "job",
        instance = %job.instance_id,
        job = %job.id,
        kind = job.kind.as_str(),
    );
    let run_it = async move {
        let id = job.id.clone();
        // A job works on its instance's runtime: it runs where the instance is owned.
        match super::replicas::place(&state, &job.instance_id).await {
            Ok(super::replicas::Place::Here) => {}
            Ok(super::replicas::Place::There { .. }) => {
                tracing::debug!("the instance is another replica's; it runs the job");
                state.jobs_running.lock().expect("not poisoned").remove(&id);
                return;
            }
            Err(e) => {
                tracing::error!(detail = %e.detail, "cannot tell which replica runs the job");
                state.jobs_running.lock().expect("not poisoned").remove(&id);
                return;
            }
        }
        match Lease::take(&state, &id).await {
            Ok(Some(lease)) => {
                if let Err(e) = run(&state, job, &lease).await {
                    tracing::error!(detail = %e.detail, "job could not record its outcome");
                }
                lease.release(&state).await;
                state.job_events.finish(id.as_str());
            }
            Ok(None) => tracing::debug!("leased by another runner"),
            Err(e) => tracing::error!(detail = %e.detail, "cannot lease a job"),
        }
        state.jobs_running.lock().expect("not poisoned").remove(&id);
    };
    tokio::spawn(tracing::Instrument::instrument(run_it, span));
}

/// Starts every unfinished job this replica may take: after a restart, and whenever another
/// replica's lease ran out.
pub async fn take_over(state: &AppState) -> AppResult<()> {
    for job in state
        .store
        .jobs_to_take(state.replica.name(), super::replicas::now_ms())
        .await?
    {
        spawn(state.clone(), job);
    }
    Ok(())
}

impl Drop for Lease {
    /// However the runner ends (a panic too), the lease stops being renewed, so it runs out
    /// and another runner can take the job.
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

/// This replica's lease on a job, renewed in the background while it is held.
struct Lease {
    job: JobId,
    lost: Arc<AtomicBool>,
    renewing: tokio::task::JoinHandle<()>,
}

impl Lease {
    async fn take(state: &AppState, job: &JobId) -> AppResult<Option<Lease>> {
        let (now, until) = state.replica.lease_from_now();
        if !state
            .store
            .lease_job(job, state.replica.name(), now, until)
            .await?
        {
            return Ok(None);
        }
        let lost = Arc::new(AtomicBool::new(false));
        let renewing = {
            let (state, job, lost) = (state.clone(), job.clone(), lost.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(state.replica.renew_every()).await;
                    let (now, until) = state.replica.lease_from_now();
                    let renewed = state
                        .store
                        .lease_job(&job, state.replica.name(), now, until)
                        .await;
                    if !matches!(renewed, Ok(true)) {
                        tracing::warn!(job = %job, "lost the lease of a running job");
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            })
        };
        Ok(Some(Lease {
            job: job.clone(),
            lost,
            renewing,
        }))
    }

    /// Whether another runner may have the job now: this one must stop.
    fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    async fn release(self, state: &AppState) {
        if let Err(e) = state
            .store
            .release_job(&self.job, state.replica.name())
            .await
        {
            tracing::warn!(job = %self.job, error = %e, "cannot release a job's lease");
        }
    }
}

/// The error of a runner whose lease another runner took over: it stops without writing.
fn lease_lost(job: &Job) -> AppError {
    AppError::new(
        edith_types::ErrorCode::Conflict,
        format!("job `{}` is run by another runner now", job.id),
    )
}

/// Records the job's progress and its event — only while this replica holds its lease.
async fn record(state: &AppState, job: &mut Job, event: JobEventKind) -> AppResult<()> {
    job.updated_at = Timestamp::now();
    if !state
        .store
        .update_leased_job(job, state.replica.name())
        .await?
    {
        return Err(lease_lost(job));
    }
    let event = state.store.append_job_event(&job.id, &event).await?;
    state.metrics.job_event_appended();
    state.job_events.publish(job.id.as_str(), event);
    Ok(())
}

async fn run(state: &AppState, mut job: Job, lease: &Lease) -> AppResult<()> {
    job.state = JobState::Running;
    let total = job.steps.len() as u32;
    for index in 0..job.steps.len() {
        if lease.lost() {
            // Another runner has the job now and takes it from the top.
            return Ok(());
        }
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
        let started = std::time::Instant::now();
        let ran = run_checked_step(state, &job, &step).await;
        state.metrics.job_step_took(&step, started.elapsed());
        if let Err(e) = ran {
            // Only the lease holder undoes: another runner may be building it again by now.
            if !state
                .store
                .holds_job_lease(&job.id, state.replica.name())
                .await?
            {
                return Err(lease_lost(&job));
            }
            job.steps[index].state = StepState::Failed;
            let mut reason = format!("{step}: {}", e.detail);
            for undo_failed in undo(state, &job, index).await {
                reason.push_str(&format!("; undo: {undo_failed}"));
            }
            return finish(state, job, Err(reason)).await;
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

/// Runs a step, and the faults a `sim` instance asks for: the step twice, or a failure after
/// it did its work.
async fn run_checked_step(state: &AppState, job: &Job, name: &str) -> AppResult<()> {
    let step: Step = name
        .parse()
        .map_err(|_| AppError::internal(format!("unknown job step `{name}`")))?;
    let faults = match state.store.instance(&job.instance_id).await? {
        Some(record) => sim_faults(state, &record.instance, step),
        None => SimFault::default(),
    };
    let simulated = || {
        AppError::new(
            edith_types::ErrorCode::RuntimeUnavailable,
            "simulated failure (sim.fail_step)",
        )
    };
    // A step that makes something fails after its work, so that there is something to undo; a
    // step that removes something fails before it (after it, nothing would be left to show).
    if faults.fail && !step.makes() {
        return Err(simulated());
    }
    run_step(state, job, step).await?;
    if faults.repeat {
        run_step(state, job, step).await?;
    }
    if faults.fail {
        return Err(simulated());
    }
    Ok(())
}

#[derive(Default)]
struct SimFault {
    repeat: bool,
    fail: bool,
}

#[cfg(feature = "embedded")]
fn sim_faults(state: &AppState, instance: &Instance, step: Step) -> SimFault {
    use crate::runtime::SimProvider;
    match &state.providers.sim {
        Some(sim) if instance.provider == edith_types::ProviderKind::Sim => SimFault {
            repeat: SimProvider::repeats_steps(instance),
            fail: sim.step_fails(instance, step.name()),
        },
        _ => SimFault::default(),
    }
}

#[cfg(not(feature = "embedded"))]
fn sim_faults(_: &AppState, _: &Instance, _: Step) -> SimFault {
    SimFault::default()
}

/// Undoes steps `0..=failed` of the job, the last first; returns what could not be undone.
async fn undo(state: &AppState, job: &Job, failed: usize) -> Vec<String> {
    let mut problems = Vec::new();
    let Ok(Some(record)) = state.store.instance(&job.instance_id).await else {
        return problems;
    };
    let id = &record.instance.id;
    for done in job.steps[..=failed].iter().rev() {
        let Ok(step) = done.name.parse::<Step>() else {
            continue;
        };
        let undone = match step {
            Step::PrepareHome => match state.provider(record.instance.provider) {
                Ok(provider) => provider.destroy(id).await.map_err(AppError::from),
                Err(e) => Err(e),
            },
            Step::StartRuntime => match state.provider(record.instance.provider) {
                Ok(provider) => provider.stop(id).await.map_err(AppError::from),
                Err(e) => Err(e),
            },
            Step::ConnectGateway => {
                state.gateways.forget(id);
                Ok(())
            }
            // A removal has nothing to undo: deleting again finishes it.
            Step::Disconnect | Step::DestroyRuntime | Step::RemoveRecords => Ok(()),
        };
        if let Err(e) = undone {
            tracing::error!(job = %job.id, step = done.name, detail = %e.detail, "undo failed");
            problems.push(format!("{}: {}", done.name, e.detail));
        }
    }
    problems
}

async fn run_step(state: &AppState, job: &Job, step: Step) -> AppResult<()> {
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
        Step::Disconnect => state.gateways.forget(id),
        Step::DestroyRuntime => {
            let record = instance(state, id).await?;
            // A profile change that read the instance ready before it was being deleted
            // finishes first, or finds it deleting: none writes a home after it is gone.
            let _no_profile_changes = state.profile_changes.lock(id).await;
            (state.provider(record.instance.provider)?)
                .destroy(id)
                .await?;
            // A request that read the instance ready may have connected since `Disconnect`.
            state.gateways.forget(id)
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
    if !state
        .store
        .holds_job_lease(&job.id, state.replica.name())
        .await?
    {
        return Err(lease_lost(&job));
    }
    let mut instance_state = match (&outcome, job.kind) {
        (Ok(()), JobKind::InstanceProvision) => InstanceState::Ready,
        (Ok(()), JobKind::InstanceDelete) => InstanceState::Deleted,
        (Err(_), _) => InstanceState::Failed,
    };
    // The state the job moves its instance out of: in any other, the instance has moved on
    // without it (an earlier run of the job finished it, and a delete or the reconciler came
    // after), and writing the whole resource over it would undo that.
    let working = match job.kind {
        JobKind::InstanceProvision => InstanceState::Provisioning,
        JobKind::InstanceDelete => InstanceState::Deleting,
    };
    if let Some(mut record) = state.store.instance(&job.instance_id).await? {
        let seen = record.instance.state;
        record.instance.state = instance_state;
        record.instance.state_reason = outcome.as_ref().err().cloned();
        record.instance.updated_at = Timestamp::now();
        let moved = seen == working
            && state
                .store
                .update_instance_from(&record.instance, working)
                .await?;
        if !moved {
            let now = state.store.instance(&job.instance_id).await?;
            // Purged meanwhile: only a deletion does that.
            instance_state = now.map_or(InstanceState::Deleted, |r| r.instance.state);
            tracing::warn!(
                instance = %job.instance_id,
                state = instance_state.as_str(),
                "the instance moved on before its job finished; its state is left as it is"
            );
        }
    }
    tracing::info!(
        error = outcome.as_ref().err().map(String::as_str).unwrap_or(""),
        "job finished"
    );
    job.state = if outcome.is_ok() {
        JobState::Succeeded
    } else {
        JobState::Failed
    };
    state.metrics.job_ended(job.kind.as_str(), outcome.is_ok());
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
