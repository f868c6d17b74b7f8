//! The reconciler: notices within a second that a runtime the control plane started has
//! exited on its own, and turns its instance `lost` with the reason, so the turns it was
//! running end `failed` saying why and new work on it is refused until it is dealt with.

use std::time::Duration;

use edith_types::{InstanceId, InstanceState, Timestamp};

use crate::state::AppState;

/// How often runtimes are looked at.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Runs until the server stops.
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let mut stopping = state.shutdown.clone();
        let mut tick = tokio::time::interval(CHECK_EVERY);
        loop {
            let stop = tokio::select! {
                _ = stopping.wait_for(|stop| *stop) => true,
                _ = tick.tick() => false,
            };
            if stop {
                break;
            }
            check(&state).await;
        }
    });
}

/// Marks every runtime that exited since the last look as lost. One look at a time: whoever
/// asks while another look runs waits for it, and then finds the instance already marked.
pub async fn check(state: &AppState) {
    let _one_at_a_time = state.reconciling.lock().await;
    for (id, how) in state.providers.process.reap_exited().await {
        mark_lost(state, &id, &how).await;
    }
}

async fn mark_lost(state: &AppState, id: &InstanceId, how: &str) {
    state.gateways.forget(id).await;
    let record = match state.store.instance(id).await {
        Ok(Some(record)) => record,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(instance = %id, error = %e, "cannot read a lost instance");
            return;
        }
    };
    let mut instance = record.instance;
    if instance.state != InstanceState::Ready {
        return;
    }
    tracing::warn!(instance = %id, reason = how, "runtime lost");
    instance.state = InstanceState::Lost;
    instance.state_reason = Some(how.to_owned());
    instance.updated_at = Timestamp::now();
    if let Err(e) = state.store.update_instance(&instance).await {
        tracing::error!(instance = %id, error = %e, "cannot record a lost instance");
    }
}
