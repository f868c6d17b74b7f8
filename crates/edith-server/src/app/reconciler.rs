//! The reconciler: notices at its next look (every 500 ms) that a runtime the control plane
//! started has exited on its own, or that the connection to a runtime's gateway closed and a
//! new one cannot be opened, and turns its instance `lost` with the reason, so the turns it was
//! running end `failed` saying why and new work on it is refused. An instance whose restart
//! policy is `on_failure` gets its runtime started again after a pause, and is `ready` once it
//! runs; its sessions go on from the runtime's stored sessions. An `external` runtime lost so
//! is tried again now and then, and its instance is `ready` again once it answers. It also
//! takes over jobs whose runner's lease ran out.

use std::time::Duration;

use futures_util::StreamExt;

use edith_types::{Instance, InstanceId, InstanceState, ProviderKind, RestartPolicy, Timestamp};

use crate::runtime::{Exited, RunningNow};
use crate::state::AppState;

/// How often runtimes are looked at.
const CHECK_EVERY: Duration = Duration::from_millis(500);
/// A runtime that ran this long before it exited was stable: its restarts in a row start again
/// from zero.
const STABLE_AFTER: Duration = Duration::from_secs(600);
/// How many pauses in a row a restart waits for this replica to be known to own the instance.
const UNOWNED_LOOKS: u32 = 3;
/// The longest pause before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a runtime whose gateway connection closed is given to take a new one.
const RECONNECT_WITHIN: Duration = Duration::from_secs(2);
/// How often `external` runtimes that were lost are tried again.
const RETRY_EXTERNAL_EVERY: Duration = Duration::from_secs(5);
/// How many lost `external` runtimes are tried at once (and how many a replica that takes
/// instances connects to at once).
const RETRIES_AT_ONCE: usize = 8;

/// Runs until the server stops: the looks for exits, and apart from them (each may wait out
/// [`RECONNECT_WITHIN`], which a look for exits must not) the reconnects of closed gateway
/// connections, the tries of lost `external` runtimes and the close of idle live sessions.
pub fn spawn(state: AppState) {
    every(state.clone(), CHECK_EVERY, |state| async move {
        check(&state).await
    });
    every(state.clone(), CHECK_EVERY, |state| async move {
        reconnect_dropped(&state).await
    });
    every(state.clone(), RETRY_EXTERNAL_EVERY, |state| async move {
        retry_lost_externals(&state).await
    });
    let sweep_every = super::idle_sessions::sweep_every(&state);
    every(state, sweep_every, |state| async move {
        super::idle_sessions::close(&state).await
    });
}

/// Runs `work` every `period` until the server stops; a late run does not bunch the next ones.
fn every<F, W>(state: AppState, period: Duration, work: W)
where
    W: Fn(AppState) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut stopping = state.shutdown.clone();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stop = tokio::select! {
                _ = stopping.wait_for(|stop| *stop) => true,
                _ = tick.tick() => false,
            };
            if stop {
                break;
            }
            work(state.clone()).await;
        }
    });
}

/// Marks every runtime that exited since the last look as lost, and takes over the jobs whose
/// runner's lease ran out. One look at a time: whoever asks while another look runs waits for
/// it, and then finds the instance already marked.
pub async fn check(state: &AppState) {
    let _one_at_a_time = state.reconciling.lock().await;
    lose_exited(state).await;
    if let Err(e) = super::jobs::take_over(state).await {
        tracing::error!(detail = %e.detail, "cannot look for jobs to take over");
    }
}

/// Opens again every gateway connection that closed by itself; marks lost the instances whose
/// runtime does not take a new one. Each may wait out its time: all at once, not one after
/// another. (A connection that closed because its runtime exited finds it stopped, and is the
/// exit's to report.)
async fn reconnect_dropped(state: &AppState) {
    let dropped = state.gateways.dropped();
    let why = "the connection to the runtime's gateway closed and none could be opened again";
    let reconnects = dropped.iter().map(|id| reconnect(state, id, why));
    for (instance, lost) in futures_util::future::join_all(reconnects)
        .await
        .into_iter()
        .flatten()
    {
        after_loss(state, instance, lost);
    }
}

/// The runtimes that exited since the last look: their instances lost, restarts planned.
async fn lose_exited(state: &AppState) {
    for exited in state.providers.reap_exited().await {
        if let Some(instance) = mark_lost(state, &exited).await {
            after_loss(state, instance, exited);
        }
    }
}

/// Once an instance is marked `lost`: its runtime is stopped (it may be hung rather than gone,
/// or a use that saw the instance `ready` just before may have started one) and none is started
/// for it but by a restart its policy plans, after the stop. Apart from the look: a stop may
/// take its grace period. (An `external` runtime is its owner's: nothing is stopped there.)
fn after_loss(state: &AppState, instance: Instance, lost: Exited) {
    let state = state.clone();
    tokio::spawn(async move {
        if let Ok(provider) = state.provider(instance.provider)
            && let Err(e) = provider.stop_lost(&instance.id).await
        {
            let why = "cannot stop a runtime that was lost";
            tracing::warn!(instance = %instance.id, error = %e, "{why}");
        }
        plan_restart(&state, instance, lost);
    });
}

/// Opens again a gateway connection that closed by itself, to the runtime its provider runs
/// now; nothing is started (a runtime stopped on purpose is started by its next use, one that
/// exited is reaped by a look) and no start or stop under way is waited for (the next look
/// asks again). A runtime that does not take the connection in time has its instance marked
/// lost, returned with `why` and the error.
async fn reconnect(state: &AppState, id: &InstanceId, why: &str) -> Option<(Instance, Exited)> {
    let record = ready(state, id).await;
    let provider = record
        .as_ref()
        .and_then(|r| state.provider(r.instance.provider).ok());
    let (Some(record), Some(provider)) = (record, provider) else {
        // Gone, or no longer ready (being deleted, lost already): its connection is not wanted.
        state.gateways.forget(id);
        return None;
    };
    let (endpoint, since) = match provider.running_now(&record).await {
        RunningNow::Running { endpoint, since } => (endpoint, since),
        RunningNow::Stopped => {
            state.gateways.forget(id);
            return None;
        }
        RunningNow::Changing => return None,
    };
    let reconnected =
        tokio::time::timeout(RECONNECT_WITHIN, state.gateways.reconnect(id, &endpoint));
    let error = match reconnected.await {
        Ok(Ok(())) => {
            // A deletion that began meanwhile forgot the connection before this one was made.
            if ready(state, id).await.is_none() {
                state.gateways.forget(id);
            }
            return None;
        }
        Ok(Err(e)) => e.detail,
        Err(_) => format!("it did not answer in {} s", RECONNECT_WITHIN.as_secs()),
    };
    // A runtime that exited meanwhile is the exit's to report, with its status; one being
    // stopped or started meanwhile, or started anew since (a change of the `default` profile
    // restarts it), is the next look's.
    match provider.running_now(&record).await {
        RunningNow::Running { since: now, .. } if now == since => {}
        _ => return None,
    }
    let lost = Exited {
        instance: id.clone(),
        how: format!("{why}: {error}"),
        // From its start, so that a long healthy run lets its restarts in a row start over.
        ran_for: since.map(|since| since.elapsed()).unwrap_or_default(),
    };
    let instance = mark_lost(state, &lost).await?;
    Some((instance, lost))
}

/// When this replica takes a `ready` `external` instance (at its start, or from a replica that
/// died): a connection to its runtime is opened at once, so that the runtime's going away is
/// noticed as any other's, and not only by the next use. (The runtimes this replica starts are
/// watched from their start; one an earlier owner started is stopped when it is taken.)
pub fn watch_external(state: &AppState, instance: &Instance) {
    if instance.provider != ProviderKind::External || instance.state != InstanceState::Ready {
        return;
    }
    let (state, id) = (state.clone(), instance.id.clone());
    tokio::spawn(async move {
        let Ok(_turn) = state.external_watches.0.acquire().await else {
            return;
        };
        let why = "the runtime's gateway took no connection when this replica took the instance";
        if let Some((instance, lost)) = reconnect(&state, &id, why).await {
            after_loss(&state, instance, lost);
        }
    });
}

/// How many `external` runtimes a replica connects to at once as it takes their instances: a
/// replica starting up takes every instance at once.
pub struct ExternalWatches(tokio::sync::Semaphore);

impl Default for ExternalWatches {
    fn default() -> Self {
        Self(tokio::sync::Semaphore::new(RETRIES_AT_ONCE))
    }
}

/// The instance's record while it is `ready`.
async fn ready(state: &AppState, id: &InstanceId) -> Option<edith_store::InstanceRecord> {
    record_in(state, id, InstanceState::Ready).await
}

/// `external` runtimes that were lost, on instances this replica owns, are tried again, a few
/// at a time: one whose gateway answers has its instance `ready` again (nothing else can bring
/// them back: they are their owner's to run).
async fn retry_lost_externals(state: &AppState) {
    let mut lost = Vec::new();
    let mut cursor = None;
    loop {
        let page = match (state.store)
            .list_instances(cursor.as_ref(), 100, Some(InstanceState::Lost), None)
            .await
        {
            Ok(page) => page,
            Err(e) => {
                return tracing::error!(error = %e, "cannot list the lost instances");
            }
        };
        let more = page.next_cursor.is_some();
        cursor = page.items.last().map(|last| last.id.clone());
        let external = page.items.into_iter();
        lost.extend(
            external
                .filter(|i| i.provider == ProviderKind::External)
                .map(|i| i.id),
        );
        if !more {
            break;
        }
    }
    futures_util::stream::iter(lost)
        .for_each_concurrent(RETRIES_AT_ONCE, |id| async move {
            retry_external(state, &id).await
        })
        .await;
}

async fn retry_external(state: &AppState, id: &InstanceId) {
    // Another replica's to try (claims are left to the replicas' own take-over).
    if !state.replica.known_owned(id) {
        return;
    }
    let Some(record) = still_lost(state, id).await else {
        return;
    };
    let Ok(provider) = state.provider(ProviderKind::External) else {
        return;
    };
    let RunningNow::Running { endpoint, .. } = provider.running_now(&record).await else {
        return;
    };
    let connected =
        tokio::time::timeout(RECONNECT_WITHIN, state.gateways.reconnect(id, &endpoint)).await;
    // An open connection, not only one left to someone else connecting, brings it back.
    if !matches!(connected, Ok(Ok(()))) || state.gateways.existing(id).is_none() {
        return state.gateways.forget(id);
    }
    let mut instance = record.instance;
    let after = instance.state_reason.clone().unwrap_or_default();
    let reason = format!("its gateway answers again, after: {after}");
    if move_state(state, &mut instance, InstanceState::Ready, reason).await {
        tracing::info!(instance = %id, "external runtime back");
    } else {
        state.gateways.forget(id);
    }
}

/// Turns a `ready` instance `lost`; returns it as it is now recorded.
async fn mark_lost(state: &AppState, exited: &Exited) -> Option<Instance> {
    let id = &exited.instance;
    state.gateways.forget(id);
    let mut instance = load(state, id).await?;
    if instance.state != InstanceState::Ready {
        return None;
    }
    tracing::warn!(instance = %id, reason = exited.how, "runtime lost");
    if exited.ran_for >= STABLE_AFTER {
        instance.restarts = 0;
    }
    let how = exited.how.clone();
    move_state(state, &mut instance, InstanceState::Lost, how)
        .await
        .then_some(instance)
}

/// When a replica takes an instance (at its start, or from a replica that died): one left
/// `lost` whose policy still allows a restart gets one, as if its runtime had just exited.
pub fn resume_restart(state: &AppState, instance: Instance) {
    let within_limit = instance.restarts < instance.max_restarts.unwrap_or(0);
    if instance.state != InstanceState::Lost
        || instance.restart_policy != RestartPolicy::OnFailure
        || !within_limit
    {
        return;
    }
    let how = instance
        .state_reason
        .clone()
        .unwrap_or_else(|| "the runtime was lost".to_owned());
    let state = state.clone();
    tokio::spawn(async move { restart(&state, instance, &how).await });
}

/// Starts the restarts the instance's policy asks for, in the background.
fn plan_restart(state: &AppState, instance: Instance, exited: Exited) {
    if instance.restart_policy != RestartPolicy::OnFailure {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move { restart(&state, instance, &exited.how).await });
}

/// Restarts the runtime after a pause that doubles with each restart in a row, until one runs
/// or the limit is reached. Gives up quietly when the instance left `lost` meanwhile (deleted).
async fn restart(state: &AppState, mut instance: Instance, how: &str) {
    let max = instance.max_restarts.unwrap_or(1);
    let mut stopping = state.shutdown.clone();
    let mut unowned = 0;
    loop {
        if instance.restarts >= max {
            let reason = format!("{how}; not restarted: {max} restarts in a row already");
            move_state(state, &mut instance, InstanceState::Lost, reason).await;
            return;
        }
        let pause = backoff(instance.restarts);
        tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => return,
            _ = tokio::time::sleep(pause) => {}
        }
        if *state.shutdown.borrow() {
            return;
        }
        let Some(record) = still_lost(state, &instance.id).await else {
            return;
        };
        // Only the replica that owns the instance runs a runtime for it: one that took it from
        // this one resumes the restart itself. (This one's lease may also be late in being
        // renewed: asked again after the next pauses, a few times.)
        if !state.replica.known_owned(&instance.id) {
            unowned += 1;
            if unowned >= UNOWNED_LOOKS {
                let why = "not restarted here: another replica owns the instance now";
                tracing::warn!(instance = %instance.id, "{why}");
                return;
            }
            continue;
        }
        unowned = 0;
        instance = record.instance.clone();
        instance.restarts += 1;
        let attempt = instance.restarts;
        let provider = match state.provider(instance.provider) {
            Ok(provider) => provider,
            Err(e) => {
                tracing::error!(instance = %instance.id, detail = %e.detail, "no provider");
                return;
            }
        };
        match provider.restart(&record).await {
            Ok(_) => {
                let reason = format!("restarted (restart {attempt} in a row) after: {how}");
                if !move_state(state, &mut instance, InstanceState::Ready, reason).await
                    && ready(state, &instance.id).await.is_none()
                {
                    // Being deleted since: what was started goes again. (Made `ready` by
                    // another restart meanwhile, it runs the runtime this one found.)
                    let _ = provider.stop(&instance.id).await;
                }
                state.metrics.runtime_restarted();
                tracing::info!(instance = %instance.id, attempt, "runtime restarted");
                return;
            }
            Err(e) => {
                tracing::warn!(instance = %instance.id, attempt, error = %e, "restart failed");
                let reason = format!("{how}; restart {attempt} failed: {e}");
                if !move_state(state, &mut instance, InstanceState::Lost, reason).await {
                    return;
                }
            }
        }
    }
}

/// 1 s before the first restart in a row, doubling, at most `MAX_BACKOFF`.
fn backoff(restarts_so_far: u32) -> Duration {
    Duration::from_secs(1 << restarts_so_far.min(5)).min(MAX_BACKOFF)
}

async fn still_lost(state: &AppState, id: &InstanceId) -> Option<edith_store::InstanceRecord> {
    record_in(state, id, InstanceState::Lost).await
}

/// The instance's record while it is in `wanted` (a failed read is logged, and is `None`).
async fn record_in(
    state: &AppState,
    id: &InstanceId,
    wanted: InstanceState,
) -> Option<edith_store::InstanceRecord> {
    match state.store.instance(id).await {
        Ok(Some(record)) if record.instance.state == wanted => Some(record),
        Ok(_) => None,
        Err(e) => {
            tracing::error!(instance = %id, error = %e, "cannot read an instance");
            None
        }
    }
}

async fn load(state: &AppState, id: &InstanceId) -> Option<Instance> {
    match state.store.instance(id).await {
        Ok(record) => record.map(|r| r.instance),
        Err(e) => {
            tracing::error!(instance = %id, error = %e, "cannot read a lost instance");
            None
        }
    }
}

/// Records `to` for an instance still in the state it was read in; returns false when it was in
/// another state by then (a delete began), which is left as it is.
async fn move_state(
    state: &AppState,
    instance: &mut Instance,
    to: InstanceState,
    reason: String,
) -> bool {
    let from = instance.state;
    instance.state = to;
    instance.state_reason = Some(reason);
    instance.updated_at = Timestamp::now();
    match state.store.update_instance_from(instance, from).await {
        Ok(moved) => moved,
        Err(e) => {
            tracing::error!(instance = %instance.id, error = %e, "cannot record an instance's state");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_before_a_restart_doubles_up_to_its_limit() {
        let pauses: Vec<u64> = (0..8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
