//! Instances: made and removed by jobs, loaded by id.

use edith_store::InstanceRecord;
use edith_types::{
    Capabilities, CreateInstance, ErrorCode, Instance, InstanceCapabilities, InstanceId,
    InstanceState, InstanceWithJob, JobKind, ProviderKind, RestartPolicy, RuntimeInfo, RuntimeLog,
    Scope, SimFaults, Timestamp, rules,
};

use super::jobs;
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Records a `provisioning` instance and starts the job that brings it to `ready`.
pub async fn create(
    state: &AppState,
    caller: &Principal,
    body: CreateInstance,
) -> AppResult<InstanceWithJob> {
    if body.provider == ProviderKind::External {
        // It makes the control plane connect wherever the URL says: the operator's call.
        caller.require(Scope::Admin, "attaching an external runtime")?;
    }
    if !rules::is_display_name(&body.name) {
        return Err(AppError::invalid(format!(
            "`name` must be 1 to {} characters, not all blank",
            rules::NAME_MAX_CHARS
        )));
    }
    let name = body.name.trim();
    state.provider(body.provider)?;
    check_runtime(state, body.provider, body.runtime.as_deref())?;
    let token = check_external(&body)?;
    if let Some(url) = &body.url
        && !state.providers.external.allows(url)
    {
        return Err(AppError::new(
            ErrorCode::Forbidden,
            format!("the operator does not allow attaching runtimes at `{url}` (--external-host)"),
        ));
    }
    let max_restarts = check_restart(&body)?;
    let sim = check_sim(&body)?;
    check_labels(&body.labels)?;
    let now = Timestamp::now();
    let instance = Instance {
        id: InstanceId::generate(),
        name: name.to_owned(),
        provider: body.provider,
        runtime: body.runtime,
        url: body.url,
        state: InstanceState::Provisioning,
        state_reason: None,
        restart_policy: body.restart_policy,
        max_restarts,
        sim,
        labels: body.labels,
        restarts: 0,
        created_at: now.clone(),
        updated_at: now,
    };
    let record = InstanceRecord {
        instance: instance.clone(),
        runtime_token: token.unwrap_or_else(secret),
        mcp_token: secret(),
    };
    let job = jobs::new_job(&instance.id, JobKind::InstanceProvision);
    // Its maker owns it from the start, and so runs its job.
    let asked = std::time::Instant::now();
    let (_, until) = state.replica.lease_from_now();
    let owner = Some((state.replica.name(), until));
    state.store.insert_instance(&record, &job, owner).await?;
    state.replica.note_owned(&instance.id, asked);
    jobs::spawn(state.clone(), job.clone());
    Ok(InstanceWithJob { instance, job })
}

/// A `process` instance names one of the operator's runtimes; other providers take none.
fn check_runtime(state: &AppState, provider: ProviderKind, runtime: Option<&str>) -> AppResult<()> {
    let known = state.providers.process.runtimes();
    let names = || match known.keys().cloned().collect::<Vec<_>>().join(", ") {
        none if none.is_empty() => {
            "none (the operator adds them with `edith serve --runtime NAME=COMMAND`)".to_owned()
        }
        names => names,
    };
    match (provider, runtime) {
        (ProviderKind::Process, Some(name)) if known.contains_key(name) => Ok(()),
        (ProviderKind::Process, Some(name)) => Err(AppError::invalid(format!(
            "no runtime `{name}` on this control plane; known runtimes: {}",
            names()
        ))),
        (ProviderKind::Process, None) => Err(AppError::invalid(format!(
            "a `process` instance needs a `runtime`; known runtimes: {}",
            names()
        ))),
        (_, Some(_)) => Err(AppError::invalid(
            "`runtime` is only for `process` instances",
        )),
        (_, None) => Ok(()),
    }
}

/// An `external` instance names its runtime's URL and token (which becomes the runtime token);
/// other providers take neither.
fn check_external(body: &CreateInstance) -> AppResult<Option<String>> {
    match (body.provider, &body.url, &body.token) {
        (ProviderKind::External, Some(url), Some(token)) => {
            if crate::runtime::gateway_url(url).is_none() {
                return Err(AppError::invalid(format!(
                    "`url` `{url}` must be http://HOST:PORT (https is not supported yet)"
                )));
            }
            if token.chars().count() < rules::EXTERNAL_TOKEN_MIN_CHARS {
                return Err(AppError::invalid(format!(
                    "`token` must be at least {} characters",
                    rules::EXTERNAL_TOKEN_MIN_CHARS
                )));
            }
            Ok(Some(token.clone()))
        }
        (ProviderKind::External, _, _) => Err(AppError::invalid(
            "an `external` instance needs the runtime's `url` and `token`",
        )),
        (_, None, None) => Ok(None),
        (_, _, _) => Err(AppError::invalid(
            "`url` and `token` are only for `external` instances",
        )),
    }
}

/// Restarts are for `process` runtimes, the only ones the control plane starts that can exit
/// alone; returns the limit of restarts in a row.
fn check_restart(body: &CreateInstance) -> AppResult<Option<u32>> {
    match (body.restart_policy, body.max_restarts) {
        (RestartPolicy::Never, None) => Ok(None),
        (RestartPolicy::Never, Some(_)) => Err(AppError::invalid(
            "`max_restarts` is only for the `on_failure` restart policy",
        )),
        (RestartPolicy::OnFailure, _)
            if !matches!(body.provider, ProviderKind::Process | ProviderKind::Sim) =>
        {
            Err(AppError::invalid(
                "the `on_failure` restart policy is only for `process` (and `sim`) instances",
            ))
        }
        (RestartPolicy::OnFailure, Some(max)) if !(1..=100).contains(&max) => {
            Err(AppError::invalid("`max_restarts` must be 1 to 100"))
        }
        (RestartPolicy::OnFailure, max) => Ok(Some(max.unwrap_or(DEFAULT_MAX_RESTARTS))),
    }
}

/// Faults are for `sim` instances only; a step named must be a step of a job.
fn check_sim(body: &CreateInstance) -> AppResult<Option<SimFaults>> {
    match (body.provider, &body.sim) {
        (ProviderKind::Sim, sim) => {
            let sim = sim.clone().unwrap_or_default();
            if let Some(step) = &sim.fail_step
                && !jobs::is_step(step)
            {
                return Err(AppError::invalid(format!(
                    "`sim.fail_step` `{step}` is not a job step; steps: {}",
                    jobs::step_names().join(", ")
                )));
            }
            let too_long = |value: Option<u64>, max: u64| value.is_some_and(|ms| ms > max);
            let drop_after = sim.drop_connection_after_ms;
            if too_long(sim.start_delay_ms, rules::SIM_START_DELAY_MAX_MS)
                || too_long(sim.exit_after_ms, rules::SIM_EXIT_AFTER_MAX_MS)
                || too_long(drop_after, rules::SIM_DROP_CONNECTION_AFTER_MAX_MS)
            {
                return Err(AppError::invalid(format!(
                    "`sim.start_delay_ms` is at most {}, `sim.exit_after_ms` at most {} and \
                     `sim.drop_connection_after_ms` at most {}",
                    rules::SIM_START_DELAY_MAX_MS,
                    rules::SIM_EXIT_AFTER_MAX_MS,
                    rules::SIM_DROP_CONNECTION_AFTER_MAX_MS
                )));
            }
            Ok(Some(sim))
        }
        (_, Some(_)) => Err(AppError::invalid(
            "`sim` faults are only for `sim` instances",
        )),
        (_, None) => Ok(None),
    }
}

/// At most 32 labels; keys `^[a-z0-9][a-z0-9._/-]{0,62}$`, values up to 256 characters.
fn check_labels(labels: &std::collections::BTreeMap<String, String>) -> AppResult<()> {
    if labels.len() > rules::LABELS_MAX {
        return Err(AppError::invalid(format!(
            "at most {} `labels`",
            rules::LABELS_MAX
        )));
    }
    for (key, value) in labels {
        check_label_key(key)?;
        if value.chars().count() > rules::LABEL_VALUE_MAX_CHARS {
            return Err(AppError::invalid(format!(
                "label `{key}`: values are at most {} characters",
                rules::LABEL_VALUE_MAX_CHARS
            )));
        }
    }
    Ok(())
}

/// A label key: 1 to 63 lowercase letters, digits, `.`, `_`, `-` or `/`, starting with a letter
/// or digit.
pub fn check_label_key(key: &str) -> AppResult<()> {
    let first_ok = key
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = key
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._/-".contains(&b));
    if first_ok && rest_ok && key.len() <= 63 {
        return Ok(());
    }
    Err(AppError::invalid(format!(
        "label key `{key}` must match {}: 1 to 63 lowercase letters, digits, `.`, `_`, `-` or \
         `/`, starting with a letter or digit",
        rules::LABEL_KEY
    )))
}

/// Restarts in a row tried when the caller names no limit.
const DEFAULT_MAX_RESTARTS: u32 = 3;

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
    ready(load(state, id).await?)
}

/// The instance if it is `ready`; any other state is 409 `instance_not_ready`.
pub fn ready(record: InstanceRecord) -> AppResult<InstanceRecord> {
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
    // The reconciler may move the instance (`ready` → `lost`, say) between the read and the
    // write, which then finds another state; the deletion is checked again against the state
    // recorded by then. Another deletion that got there first makes this one a conflict.
    for _ in 0..DELETE_ATTEMPTS {
        let mut record = load(state, id).await?;
        let instance = &mut record.instance;
        let from = instance.state;
        let refused = match from {
            InstanceState::Deleting | InstanceState::Deleted => Some("is already being deleted"),
            InstanceState::Provisioning => {
                Some("is provisioning; it can be deleted once that ends")
            }
            _ => None,
        };
        if let Some(why) = refused {
            return Err(AppError::new(
                ErrorCode::Conflict,
                format!("instance `{}` {why}", instance.id),
            ));
        }
        instance.state = InstanceState::Deleting;
        instance.state_reason = None;
        instance.updated_at = Timestamp::now();
        let job = jobs::new_job(&instance.id, JobKind::InstanceDelete);
        let store = &state.store;
        if !store
            .update_instance_from_with_job(instance, from, &job)
            .await?
        {
            continue;
        }
        state.relays.end_for_instance(&instance.id);
        jobs::spawn(state.clone(), job.clone());
        return Ok(InstanceWithJob {
            instance: record.instance,
            job,
        });
    }
    Err(AppError::new(
        ErrorCode::Conflict,
        format!("instance `{id}` kept changing while it was being deleted; try again"),
    ))
}

/// How many times a deletion reads the instance again when it changed meanwhile.
const DELETE_ATTEMPTS: usize = 3;

/// The runtimes `process` instances may run, with the version each reports.
pub async fn runtimes(state: &AppState) -> Vec<RuntimeInfo> {
    let process = &state.providers.process;
    let mut listed = Vec::new();
    for (name, command) in process.runtimes() {
        listed.push(RuntimeInfo {
            name: name.clone(),
            program: command.program.display().to_string(),
            version: process.version(name).await,
        });
    }
    listed
}

/// The last `lines` lines its runtime wrote; only `process` instances keep a runtime log.
pub async fn log(state: &AppState, id: &InstanceId, lines: usize) -> AppResult<RuntimeLog> {
    let record = load(state, id).await?;
    if record.instance.provider != ProviderKind::Process {
        return Err(AppError::new(
            ErrorCode::Unsupported,
            format!(
                "`{}` instances keep no runtime log of their own",
                record.instance.provider.as_str()
            ),
        ));
    }
    let lines = state.providers.process.log_tail(id, lines).await;
    Ok(RuntimeLog { lines })
}

/// What this control plane offers.
pub fn capabilities(state: &AppState) -> Capabilities {
    Capabilities {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        providers: state.providers.kinds(),
        runtimes: state.providers.process.runtimes().keys().cloned().collect(),
        native_catalog: hermes_native::catalog::catalog()
            .hermes_agent_version
            .clone(),
    }
}

/// What an instance's runtime offers: ours says which it is when connected, and implements what
/// the pinned catalog marks; a runtime that does not say is taken for Hermes, which implements
/// the whole catalog.
pub async fn instance_capabilities(
    state: &AppState,
    id: &InstanceId,
) -> AppResult<InstanceCapabilities> {
    let record = load_ready(state, id).await?;
    let link = state.gateway(&record).await?;
    let said = link.gateway.ready_payload().runtime.clone();
    let ours = said
        .as_deref()
        .is_some_and(|name| name.starts_with(crate::BUILTIN_RUNTIME));
    let native_methods = hermes_native::catalog::catalog()
        .methods
        .iter()
        .filter(|method| !ours || method.implemented)
        .map(|method| method.name.clone())
        .collect();
    Ok(InstanceCapabilities {
        runtime: said.unwrap_or_else(|| "hermes".to_owned()),
        native_methods,
    })
}
