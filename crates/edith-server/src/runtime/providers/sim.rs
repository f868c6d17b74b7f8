//! The `sim` provider: our runtime in-process, as `embedded` runs it, with the faults the
//! instance asks for (`SimFaults`): a slow start, a job step that fails after doing its work,
//! every step run twice, a runtime that exits on its own, a gateway that drops connections. It
//! exists to test the control plane itself — its jobs, undo and reconciler — and is offered
//! only when the operator enables it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use edith_store::InstanceRecord;
use edith_types::{Instance, InstanceId, SimFaults};
use hermes_native::config::HermesConfig;
use hermes_native::methods::{Method, PromptSubmit};
use tokio::sync::{Mutex, mpsc};

use super::{
    EmbeddedProvider, Exited, InProcessGateway, ProviderError, RunningNow, RuntimeEndpoint,
    RuntimeProvider,
};
use crate::runtime::homes::Homes;

/// The longest simulated start.
const MAX_START_DELAY: Duration = Duration::from_secs(60);

pub struct SimProvider {
    runtimes: EmbeddedProvider,
    /// When each running runtime started, and when it is to exit on its own.
    running: Mutex<HashMap<InstanceId, (Instant, Option<Duration>)>>,
    /// The step faults that fired already: each fires once.
    fired: std::sync::Mutex<HashSet<InstanceId>>,
}

impl SimProvider {
    pub fn new(homes: Homes) -> Self {
        Self {
            runtimes: EmbeddedProvider::new(homes),
            running: Mutex::new(HashMap::new()),
            fired: Default::default(),
        }
    }

    /// Whether the job step `step` of `instance` is to fail now (the first time it runs).
    pub fn step_fails(&self, instance: &Instance, step: &str) -> bool {
        let wanted = instance.sim.as_ref().and_then(|s| s.fail_step.as_deref());
        wanted == Some(step)
            && self
                .fired
                .lock()
                .expect("not poisoned")
                .insert(instance.id.clone())
    }

    /// Whether `instance`'s job steps each run twice.
    pub fn repeats_steps(instance: &Instance) -> bool {
        instance.sim.as_ref().is_some_and(|s| s.repeat_steps)
    }

    /// The runtimes whose time to exit has come: each is stopped and reported.
    pub async fn reap_exited(&self) -> Vec<Exited> {
        let due: Vec<(InstanceId, Duration)> = {
            let mut running = self.running.lock().await;
            let due: Vec<_> = running
                .iter()
                .filter(|(_, (started, exit))| exit.is_some_and(|e| started.elapsed() >= e))
                .map(|(id, (started, _))| (id.clone(), started.elapsed()))
                .collect();
            for (id, _) in &due {
                running.remove(id);
            }
            due
        };
        let mut exited = Vec::new();
        for (id, ran_for) in due {
            let _ = self.runtimes.stop(&id).await;
            exited.push(Exited {
                instance: id,
                how: format!(
                    "the simulated runtime exited after {} ms",
                    ran_for.as_millis()
                ),
                ran_for,
            });
        }
        exited
    }
}

/// The endpoint of a runtime with `faults`: its connections dropped when they ask for that.
fn with_faults(mut endpoint: RuntimeEndpoint, faults: &SimFaults) -> RuntimeEndpoint {
    if let Some(after) = faults.drop_connection_after_ms {
        let gateway = endpoint.in_process.take().expect("an in-process runtime");
        endpoint.in_process = Some(dropping(gateway, Duration::from_millis(after)));
    }
    endpoint
}

/// `gateway`, whose connections are each dropped `after` the first prompt sent on them: both
/// ends close, as when a socket is cut, and the runtime goes on.
fn dropping(gateway: InProcessGateway, after: Duration) -> InProcessGateway {
    Arc::new(move || {
        let (to_runtime, mut from_runtime) = gateway();
        let (requests, mut requested) = mpsc::unbounded_channel::<String>();
        let (to_client, frames) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut cut_at: Option<tokio::time::Instant> = None;
            loop {
                let cut = async {
                    match cut_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    request = requested.recv() => {
                        let Some(request) = request else { break };
                        if cut_at.is_none() && is_prompt(&request) {
                            cut_at = Some(tokio::time::Instant::now() + after);
                        }
                        if to_runtime.send(request).is_err() {
                            break;
                        }
                    }
                    frame = from_runtime.recv() => {
                        let Some(frame) = frame else { break };
                        if to_client.send(frame).is_err() {
                            break;
                        }
                    }
                    _ = cut => break,
                }
            }
        });
        (requests, frames)
    })
}

/// Whether a request frame is a `prompt.submit`.
fn is_prompt(frame: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(frame)
        .is_ok_and(|request| request["method"] == PromptSubmit::NAME)
}

#[async_trait]
impl RuntimeProvider for SimProvider {
    async fn provision(&self, instance: &InstanceRecord) -> Result<(), ProviderError> {
        self.runtimes.provision(instance).await
    }

    async fn start(&self, instance: &InstanceRecord) -> Result<RuntimeEndpoint, ProviderError> {
        let id = &instance.instance.id;
        let faults = instance.instance.sim.clone().unwrap_or_default();
        // The pause is taken without holding the lock: other instances (and the reconciler's
        // looks) go on meanwhile.
        if !self.running.lock().await.contains_key(id) {
            let delay = Duration::from_millis(faults.start_delay_ms.unwrap_or(0));
            tokio::time::sleep(delay.min(MAX_START_DELAY)).await;
        }
        let endpoint = with_faults(self.runtimes.start(instance).await?, &faults);
        let mut running = self.running.lock().await;
        running.entry(id.clone()).or_insert_with(|| {
            let exit = faults.exit_after_ms.map(Duration::from_millis);
            (Instant::now(), exit)
        });
        Ok(endpoint)
    }

    async fn running_now(&self, instance: &InstanceRecord) -> RunningNow {
        let faults = instance.instance.sim.clone().unwrap_or_default();
        match self.runtimes.running_now(instance).await {
            RunningNow::Running { endpoint, since } => RunningNow::Running {
                endpoint: with_faults(endpoint, &faults),
                since,
            },
            other => other,
        }
    }

    async fn stop(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        self.running.lock().await.remove(instance);
        self.runtimes.stop(instance).await
    }

    async fn destroy(&self, instance: &InstanceId) -> Result<(), ProviderError> {
        self.running.lock().await.remove(instance);
        self.runtimes.destroy(instance).await
    }

    async fn retarget_mcp_server(
        &self,
        instance: &InstanceId,
        native_name: &str,
        server: &str,
        url: &str,
    ) -> Result<bool, ProviderError> {
        self.runtimes
            .retarget_mcp_server(instance, native_name, server, url)
            .await
    }

    async fn configure_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
        config: &HermesConfig,
    ) -> Result<(), ProviderError> {
        self.runtimes
            .configure_profile(instance, native_name, config)
            .await
    }

    async fn remove_profile(
        &self,
        instance: &InstanceId,
        native_name: &str,
    ) -> Result<(), ProviderError> {
        self.runtimes.remove_profile(instance, native_name).await
    }

    async fn running_count(&self) -> usize {
        self.runtimes.running_count().await
    }

    async fn shutdown(&self) {
        self.running.lock().await.clear();
        self.runtimes.shutdown().await;
    }
}
