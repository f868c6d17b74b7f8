//! `/api/cron/jobs…`: each profile's scheduled jobs, as Hermes's cron routes answer. Without
//! `?profile=`, a job is looked for in every profile.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{CronDeleted, CronJob, CronRuns};
use hermes_native::desktop::{
    CronJobCreateBody, CronJobCreateQuery, CronJobDeleteQuery, CronJobGetQuery, CronJobListQuery,
    CronJobPauseQuery, CronJobResumeQuery, CronJobRunsQuery, CronJobTriggerQuery,
    CronJobUpdateBody, CronJobUpdateQuery,
};
use hermes_native::profile::DEFAULT_PROFILE;
use serde_json::Value;

use super::profiles::home_of;
use crate::cron::jobs;
use crate::http::extract::{Body, Params};
use crate::http::reply::{Refusal, internal, refuse};
use crate::runtime::Runtime;

/// The profiles a request reaches: the one it names, else all of them.
fn homes(runtime: &Runtime, profile: Option<&str>) -> Result<Vec<(String, PathBuf)>, Refusal> {
    match profile.filter(|p| !p.trim().is_empty() && !p.eq_ignore_ascii_case("all")) {
        None => Ok(runtime.profile_homes()),
        Some(named) => {
            let (home, name) = home_of(runtime, Some(named))?;
            Ok(vec![(
                name.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
                home,
            )])
        }
    }
}

/// The job as replies show it: with the profile it belongs to.
fn annotated(mut job: CronJob, profile: &str, home: &std::path::Path) -> CronJob {
    job.profile = Some(profile.to_owned());
    job.profile_name = Some(profile.to_owned());
    job.hermes_home = Some(home.to_string_lossy().into_owned());
    job.is_default_profile = Some(profile == DEFAULT_PROFILE);
    job
}

fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "Job not found")
}

pub async fn list(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<CronJobListQuery>,
) -> Response {
    let homes = match homes(&runtime, query.profile.as_deref()) {
        Ok(homes) => homes,
        Err(refused) => return refused.into_response(),
    };
    let mut listed = Vec::new();
    for (profile, home) in homes {
        match jobs::load(&home) {
            Ok(all) => listed.extend(all.into_iter().map(|mut job| {
                // This runtime keeps no execution ledger.
                job.extra.insert("latest_execution".to_owned(), Value::Null);
                annotated(job, &profile, &home)
            })),
            Err(e) => tracing::warn!(error = %e, %profile, "cannot read cron jobs"),
        }
    }
    Json(listed).into_response()
}

pub async fn create(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<CronJobCreateQuery>,
    Body(body): Body<CronJobCreateBody>,
) -> Response {
    let (home, named) = match home_of(&runtime, query.profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let profile = named.unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
    let config = HermesConfig::load(&home).await.unwrap_or_default();
    let _writing = runtime.cron_lock.lock().await;
    let mut all = match jobs::load(&home) {
        Ok(all) => all,
        Err(e) => return internal("reading cron jobs", e),
    };
    let job = match jobs::create(&body, &config, Utc::now()) {
        Ok(job) => job,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    all.push(job.clone());
    match jobs::save(&home, &all) {
        Ok(()) => Json(annotated(job, &profile, &home)).into_response(),
        Err(e) => internal("saving cron jobs", e),
    }
}

/// What a request does to the job it names (`None`: delete it).
enum Change {
    Read,
    Update(serde_json::Map<String, Value>),
    Pause,
    Resume,
    Trigger,
    Delete,
}

/// Finds the job (`by_name`: its name names it too), changes it, saves, and answers it.
async fn change(
    runtime: &Runtime,
    profile: Option<&str>,
    reference: &str,
    by_name: bool,
    change: Change,
) -> Response {
    let homes = match homes(runtime, profile) {
        Ok(homes) => homes,
        Err(refused) => return refused.into_response(),
    };
    let _writing = runtime.cron_lock.lock().await;
    for (profile, home) in homes {
        let mut all = match jobs::load(&home) {
            Ok(all) => all,
            Err(e) => return internal("reading cron jobs", e),
        };
        let index = match jobs::find(&all, reference, by_name) {
            Ok(Some(job)) => all.iter().position(|j| j.id == job.id).expect("found"),
            Ok(None) => continue,
            Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
        };
        let now = Utc::now();
        match &change {
            Change::Read => {
                return Json(annotated(all.remove(index), &profile, &home)).into_response();
            }
            Change::Update(updates) => match jobs::update(&all[index], updates, now) {
                Ok(updated) => all[index] = updated,
                Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
            },
            Change::Pause => jobs::pause(&mut all[index], now),
            Change::Resume => jobs::resume(&mut all[index], now),
            Change::Trigger => jobs::trigger(&mut all[index], now),
            Change::Delete => {
                let removed = all.remove(index);
                let _ = std::fs::remove_dir_all(home.join("cron").join("output").join(&removed.id));
            }
        }
        let reply = match change {
            Change::Delete => Json(CronDeleted { ok: true }).into_response(),
            _ => Json(annotated(all[index].clone(), &profile, &home)).into_response(),
        };
        return match jobs::save(&home, &all) {
            Ok(()) => reply,
            Err(e) => internal("saving cron jobs", e),
        };
    }
    not_found()
}

pub async fn get(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobGetQuery>,
) -> Response {
    change(&runtime, query.profile.as_deref(), &id, false, Change::Read).await
}

pub async fn update(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobUpdateQuery>,
    Body(body): Body<CronJobUpdateBody>,
) -> Response {
    let Value::Object(updates) = body.updates else {
        return refuse(StatusCode::BAD_REQUEST, "updates must be an object");
    };
    change(
        &runtime,
        query.profile.as_deref(),
        &id,
        false,
        Change::Update(updates),
    )
    .await
}

pub async fn pause(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobPauseQuery>,
) -> Response {
    change(&runtime, query.profile.as_deref(), &id, true, Change::Pause).await
}

pub async fn resume(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobResumeQuery>,
) -> Response {
    change(
        &runtime,
        query.profile.as_deref(),
        &id,
        true,
        Change::Resume,
    )
    .await
}

pub async fn trigger(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobTriggerQuery>,
) -> Response {
    change(
        &runtime,
        query.profile.as_deref(),
        &id,
        true,
        Change::Trigger,
    )
    .await
}

pub async fn delete(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobDeleteQuery>,
) -> Response {
    change(
        &runtime,
        query.profile.as_deref(),
        &id,
        true,
        Change::Delete,
    )
    .await
}

/// The sessions the job's runs made, newest first (none for an unknown job).
pub async fn runs(
    State(runtime): State<Arc<Runtime>>,
    Path(id): Path<String>,
    Params(query): Params<CronJobRunsQuery>,
) -> Response {
    let limit = query.limit.unwrap_or(20).clamp(1, 100);
    let homes = match homes(&runtime, query.profile.as_deref()) {
        Ok(homes) => homes,
        Err(refused) => return refused.into_response(),
    };
    let mut runs = Vec::new();
    for (profile, home) in homes {
        let found = match runtime.db(&home).await {
            Ok(db) => db.cron_runs(&id, limit).await,
            Err(e) => Err(e),
        };
        match found {
            Ok(found) => runs.extend(found.into_iter().map(|mut run| {
                run.profile = Some(profile.clone());
                run
            })),
            Err(e) => return internal("reading cron runs", e),
        }
    }
    runs.truncate(limit as usize);
    Json(CronRuns { runs, limit }).into_response()
}
