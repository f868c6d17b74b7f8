//! Instances and their provisioning jobs.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, response::IntoResponse};
use edith_types::{
    Capabilities, CreateInstance, Instance, InstanceCapabilities, InstanceFilter, InstanceId,
    InstanceWithJob, Job, JobEvent, Page, RuntimeInfo, RuntimeLog,
};
use serde_json::json;

use super::extract::{AfterParams, ApiJson, ApiQuery, Ids, PageParams};
use super::spec::{Api, Op};
use super::sse;
use crate::app::{instances, jobs};
use crate::auth::Principal;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

pub fn routes(api: &mut Api) {
    let create = Op::post("/v1/instances", "instance_create")
        .summary("Create an instance; a provisioning job brings it to `ready`.")
        .body::<CreateInstance>(api)
        .returns::<InstanceWithJob>(api, 202, "The instance (provisioning) and its job.");
    let list = Op::get("/v1/instances", "instance_list")
        .summary("List instances, optionally only those in a state or with a label.")
        .paginated::<edith_types::InstanceId>(api)
        .filtered::<InstanceFilter>(api)
        .returns::<Page<Instance>>(api, 200, "A page of instances.");
    api.add(create, axum::routing::post(create_instance));
    api.add(list, get(list_instances));

    let get_op = Op::get("/v1/instances/{instance_id}", "instance_get")
        .summary("Get an instance.")
        .returns::<Instance>(api, 200, "The instance.");
    let delete = Op::delete("/v1/instances/{instance_id}", "instance_delete")
        .on_owner()
        .summary("Delete an instance: a job stops and destroys its runtime, then forgets it.")
        .returns::<InstanceWithJob>(api, 202, "The instance (deleting) and its job.");
    api.add(get_op, get(get_instance));
    api.add(delete, axum::routing::delete(delete_instance));

    let op = Op::get("/v1/instances/{instance_id}/log", "instance_log")
        .on_owner()
        .summary("The last lines its runtime wrote (`process` instances).")
        .query(
            "lines",
            "How many lines, 1 to 10000 (default 200).",
            json!({"type": "integer", "minimum": 1, "maximum": 10000}),
        )
        .returns::<RuntimeLog>(api, 200, "The lines, oldest first.");
    api.add(op, get(instance_log));
    let op = Op::get("/v1/capabilities", "capabilities_get")
        .summary("What this control plane offers: providers, runtimes, the pinned native catalog.")
        .returns::<Capabilities>(api, 200, "The capabilities.");
    api.add(op, get(get_capabilities));
    let op = Op::get("/v1/instances/{instance_id}/capabilities", "instance_capabilities")
        .on_owner()
        .summary("What the instance's runtime offers: which runtime it is, the native methods it implements.")
        .returns::<InstanceCapabilities>(api, 200, "The runtime's capabilities.");
    api.add(op, get(get_instance_capabilities));
    let op = Op::get("/v1/runtimes", "runtime_list")
        .summary("The runtimes `process` instances may run (the operator's choice), with the version each reports.")
        .returns::<Vec<RuntimeInfo>>(api, 200, "The runtimes.");
    api.add(op, get(list_runtimes));

    let job = Op::get("/v1/jobs/{job_id}", "job_get")
        .summary("Get a provisioning job.")
        .returns::<Job>(api, 200, "The job.");
    api.add(job, get(get_job));
    let op = Op::get("/v1/instances/{instance_id}/jobs", "instance_jobs")
        .summary("The instance's jobs (its provisioning, its deletion), oldest first: follow an unfinished one's events to watch its steps.")
        .returns::<Vec<Job>>(api, 200, "The jobs.");
    api.add(op, get(instance_jobs));
    let events = Op::get("/v1/jobs/{job_id}/events", "job_events")
        .summary("Stream a job's events (SSE), from the start or after a sequence number.")
        .streams::<JobEvent>(
            api,
            "The job's event log, then live events until it finishes.",
        );
    api.add(events, get(job_events));
}

async fn create_instance(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ApiJson(body): ApiJson<CreateInstance>,
) -> AppResult<impl IntoResponse> {
    let created = instances::create(&state, &caller, body).await?;
    Ok((StatusCode::ACCEPTED, Json(created)))
}

async fn list_instances(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
    ApiQuery(filter): ApiQuery<InstanceFilter>,
) -> AppResult<Json<Page<Instance>>> {
    let label = match &filter.label {
        Some(label) => {
            let (key, value) = label
                .split_once('=')
                .ok_or_else(|| AppError::invalid(format!("`label` `{label}` must be key=value")))?;
            instances::check_label_key(key)?;
            Some((key, value))
        }
        None => None,
    };
    let cursor = params.cursor::<InstanceId>()?;
    let page = state
        .store
        .list_instances(cursor.as_ref(), params.limit()?, filter.state, label)
        .await?;
    Ok(Json(page))
}

async fn get_instance(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Instance>> {
    let record = instances::load(&state, &ids.get("instance_id")?).await?;
    Ok(Json(record.instance))
}

async fn delete_instance(State(state): State<AppState>, ids: Ids) -> AppResult<impl IntoResponse> {
    let deleting = instances::delete(&state, &ids.get("instance_id")?).await?;
    Ok((StatusCode::ACCEPTED, Json(deleting)))
}

/// `?lines=`
#[derive(Debug, serde::Deserialize)]
struct LogParams {
    lines: Option<usize>,
}

async fn instance_log(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<LogParams>,
) -> AppResult<Json<RuntimeLog>> {
    let lines = match params.lines {
        None => 200,
        Some(n @ 1..=10_000) => n,
        Some(n) => {
            return Err(AppError::invalid(format!(
                "`lines` must be between 1 and 10000, got {n}"
            )));
        }
    };
    Ok(Json(
        instances::log(&state, &ids.get("instance_id")?, lines).await?,
    ))
}

async fn get_capabilities(State(state): State<AppState>) -> Json<Capabilities> {
    Json(instances::capabilities(&state))
}

async fn get_instance_capabilities(
    State(state): State<AppState>,
    ids: Ids,
) -> AppResult<Json<InstanceCapabilities>> {
    let id = ids.get("instance_id")?;
    Ok(Json(instances::instance_capabilities(&state, &id).await?))
}

async fn list_runtimes(State(state): State<AppState>) -> Json<Vec<RuntimeInfo>> {
    Json(instances::runtimes(&state).await)
}

async fn get_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
) -> AppResult<Json<Job>> {
    let job = jobs::load(&state, &ids.get("job_id")?).await?;
    caller.require_reach(&job.instance_id)?;
    Ok(Json(job))
}

async fn instance_jobs(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Vec<Job>>> {
    let record = instances::load(&state, &ids.get("instance_id")?).await?;
    Ok(Json(
        state.store.jobs_of_instance(&record.instance.id).await?,
    ))
}

async fn job_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<AfterParams>,
) -> AppResult<impl IntoResponse> {
    let job = jobs::load(&state, &ids.get("job_id")?).await?;
    caller.require_reach(&job.instance_id)?;
    let live = state.job_events.subscribe(job.id.as_str());
    let store = state.store.clone();
    let id = job.id.clone();
    let replay = move |after: u64| {
        let (store, id) = (store.clone(), id.clone());
        async move { Ok(store.job_events_after(&id, after).await?) }
    };
    let log = if job.state.is_terminal() {
        sse::Log::Ended
    } else {
        sse::Log::Open
    };
    sse::serve_log(&state, &caller, &headers, params.after, live, replay, log)
}
