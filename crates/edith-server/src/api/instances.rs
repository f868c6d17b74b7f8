//! Instances and their provisioning jobs.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, response::IntoResponse};
use edith_store::InstanceRecord;
use edith_types::{
    CreateInstance, ErrorCode, Instance, InstanceId, InstanceState, InstanceWithJob, Job, JobEvent,
    JobId, JobKind, Page, Timestamp,
};

use super::extract::{AfterParams, ApiJson, ApiQuery, Ids, PageParams};
use super::spec::{Api, Op};
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::{jobs, sse};

pub fn routes(api: &mut Api) {
    let create = Op::post("/v1/instances", "instance_create")
        .summary("Create an instance; a provisioning job brings it to `ready`.")
        .body::<CreateInstance>(api)
        .returns::<InstanceWithJob>(api, 202, "The instance (provisioning) and its job.");
    let list = Op::get("/v1/instances", "instance_list")
        .summary("List instances.")
        .paginated()
        .returns::<Page<Instance>>(api, 200, "A page of instances.");
    api.add(create, axum::routing::post(create_instance));
    api.add(list, get(list_instances));

    let get_op = Op::get("/v1/instances/{instance_id}", "instance_get")
        .summary("Get an instance.")
        .returns::<Instance>(api, 200, "The instance.");
    let delete = Op::delete("/v1/instances/{instance_id}", "instance_delete")
        .summary("Delete an instance: a job stops and destroys its runtime, then forgets it.")
        .returns::<InstanceWithJob>(api, 202, "The instance (deleting) and its job.");
    api.add(get_op, get(get_instance));
    api.add(delete, axum::routing::delete(delete_instance));

    let job = Op::get("/v1/jobs/{job_id}", "job_get")
        .summary("Get a provisioning job.")
        .returns::<Job>(api, 200, "The job.");
    api.add(job, get(get_job));
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
    ApiJson(body): ApiJson<CreateInstance>,
) -> AppResult<impl IntoResponse> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 128 {
        return Err(AppError::invalid("`name` must be 1 to 128 characters"));
    }
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
    jobs::spawn(state, job.clone());
    Ok((
        StatusCode::ACCEPTED,
        Json(InstanceWithJob { instance, job }),
    ))
}

/// 256 random bits, hex.
fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

async fn list_instances(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<Instance>>> {
    let page = state
        .store
        .list_instances(params.cursor::<InstanceId>()?.as_ref(), params.limit()?)
        .await?;
    Ok(Json(page))
}

pub async fn load_instance(state: &AppState, id: &InstanceId) -> AppResult<InstanceRecord> {
    state
        .store
        .instance(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("instance `{id}`")))
}

/// An instance that is `ready`; any other state is 409 `instance_not_ready`.
pub async fn load_ready_instance(state: &AppState, id: &InstanceId) -> AppResult<InstanceRecord> {
    let record = load_instance(state, id).await?;
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

async fn get_instance(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Instance>> {
    let record = load_instance(&state, &ids.get("instance_id")?).await?;
    Ok(Json(record.instance))
}

async fn delete_instance(State(state): State<AppState>, ids: Ids) -> AppResult<impl IntoResponse> {
    let mut record = load_instance(&state, &ids.get("instance_id")?).await?;
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
    jobs::spawn(state, job.clone());
    Ok((
        StatusCode::ACCEPTED,
        Json(InstanceWithJob {
            instance: record.instance,
            job,
        }),
    ))
}

async fn load_job(state: &AppState, id: &JobId) -> AppResult<Job> {
    state
        .store
        .job(id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("job `{id}`")))
}

async fn get_job(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Job>> {
    Ok(Json(load_job(&state, &ids.get("job_id")?).await?))
}

async fn job_events(
    State(state): State<AppState>,
    ids: Ids,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<AfterParams>,
) -> AppResult<impl IntoResponse> {
    let job = load_job(&state, &ids.get("job_id")?).await?;
    let after = sse::resume_cursor(&headers, params.after)?;
    let live = state.job_events.subscribe(job.id.as_str());
    let store = state.store.clone();
    let id = job.id.clone();
    let replay = move |after: u64| {
        let (store, id) = (store.clone(), id.clone());
        async move { Ok(store.job_events_after(&id, after).await?) }
    };
    Ok(sse::follow(live, replay, after, state.shutdown.clone()))
}
