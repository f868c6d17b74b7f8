//! `cron.manage`, the gateway's door to the runtime's own (root profile's) jobs — the same
//! `jobs.json` the Desktop cron routes use. Refusals are results with `success: false`, as
//! Hermes answers them.

use chrono::Utc;
use hermes_native::config::HermesConfig;
use hermes_native::desktop::CronJobCreateBody;
use hermes_native::desktop::replies::CronJob;
use hermes_native::methods::CronManageParams;
use serde_json::{Value, json};

use super::jobs;
use crate::runtime::Runtime;

/// Why a call is not even a refusal: an action this method does not know.
pub struct UnknownAction(pub String);

fn refused(error: impl Into<String>) -> Value {
    json!({"success": false, "error": error.into()})
}

/// How often a job runs, in words.
fn repeat_text(job: &CronJob) -> String {
    match (job.repeat.times, job.repeat.completed) {
        (None, _) => "forever".to_owned(),
        (Some(1), 0) => "once".to_owned(),
        (Some(times), 0) => format!("{times} times"),
        (Some(times), done) => format!("{done}/{times}"),
    }
}

/// A job as the agent's cron tool shows it.
fn shown(job: &CronJob) -> Value {
    let preview = if job.prompt.chars().count() > 100 {
        format!("{}...", job.prompt.chars().take(100).collect::<String>())
    } else {
        job.prompt.clone()
    };
    let mut shown = json!({
        "job_id": job.id, "name": job.name, "skill": job.skill, "skills": job.skills,
        "prompt_preview": preview, "model": job.model, "provider": job.provider,
        "base_url": job.base_url, "schedule": job.schedule_display, "repeat": repeat_text(job),
        "deliver": job.deliver, "next_run_at": job.next_run_at, "last_run_at": job.last_run_at,
        "last_status": job.last_status, "last_delivery_error": job.last_delivery_error,
        "enabled": job.enabled, "state": job.state, "paused_at": job.paused_at,
        "paused_reason": job.paused_reason,
    });
    if let Some(toolsets) = &job.enabled_toolsets {
        shown["enabled_toolsets"] = json!(toolsets);
    }
    if let Some(workdir) = &job.workdir {
        shown["workdir"] = json!(workdir);
    }
    shown
}

pub async fn manage(runtime: &Runtime, p: CronManageParams) -> Result<Value, UnknownAction> {
    let action = p
        .action
        .as_deref()
        .filter(|a| !a.is_empty())
        .unwrap_or("list");
    let home = runtime.root.clone();
    let _writing = runtime.cron_lock.lock().await;
    let mut all = match jobs::load(&home) {
        Ok(all) => all,
        Err(e) => return Ok(refused(e)),
    };
    let reference = p.name.clone().filter(|n| !n.trim().is_empty());
    let now = Utc::now();
    let reply = match action {
        "list" => {
            let listed: Vec<Value> = all.iter().filter(|j| j.enabled).map(shown).collect();
            json!({"success": true, "count": listed.len(), "jobs": listed})
        }
        "add" => {
            let config = HermesConfig::load(&home).await.unwrap_or_default();
            let body = CronJobCreateBody {
                schedule: p.schedule.unwrap_or_default(),
                prompt: p.prompt,
                name: p.name,
                ..Default::default()
            };
            match jobs::create(&body, &config, now) {
                Ok(job) => {
                    let reply = json!({
                        "success": true, "job_id": job.id, "name": job.name, "skill": job.skill,
                        "skills": job.skills, "schedule": job.schedule_display,
                        "repeat": repeat_text(&job), "deliver": job.deliver,
                        "next_run_at": job.next_run_at, "job": shown(&job),
                        "message": format!("Cron job '{}' created.", job.name),
                    });
                    all.push(job);
                    saved(&home, &all, reply)
                }
                Err(e) => refused(e),
            }
        }
        "remove" | "pause" | "resume" => {
            let Some(reference) = reference else {
                return Ok(refused(format!("job_id is required for action '{action}'")));
            };
            let index = match jobs::find(&all, &reference, true) {
                Ok(Some(job)) => all.iter().position(|j| j.id == job.id).expect("found"),
                Ok(None) => {
                    return Ok(refused(format!(
                        "Job with ID or name '{reference}' not found. Use cronjob(action='list') \
                         to inspect jobs."
                    )));
                }
                Err(e) => return Ok(refused(e)),
            };
            if action == "remove" {
                let job = all.remove(index);
                let reply = json!({
                    "success": true,
                    "message": format!("Cron job '{}' removed.", job.name),
                    "removed_job": {"id": job.id, "name": job.name, "schedule": job.schedule_display},
                });
                saved(&home, &all, reply)
            } else {
                if action == "pause" {
                    jobs::pause(&mut all[index], now);
                } else {
                    jobs::resume(&mut all[index], now);
                }
                let reply = json!({"success": true, "job": shown(&all[index])});
                saved(&home, &all, reply)
            }
        }
        other => return Err(UnknownAction(other.to_owned())),
    };
    Ok(reply)
}

fn saved(home: &std::path::Path, all: &[CronJob], reply: Value) -> Value {
    match jobs::save(home, all) {
        Ok(()) => reply,
        Err(e) => refused(e),
    }
}
