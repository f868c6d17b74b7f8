//! `<home>/cron/jobs.json`: a profile's scheduled jobs, in Hermes's file format (so a home
//! moves between runtimes with its jobs), and the rules for making and changing one.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::CronJobCreateBody;
use hermes_native::desktop::replies::{CronJob, CronRepeat};
use serde_json::{Map, Value, json};

use super::schedule::{self, iso};

/// Fields an update may not change.
const FIXED: &[&str] = &["id"];
/// Settings of a job that this runtime's runs would not honour (they use the profile's model
/// and tools, load no skills, run no scripts, feed no earlier output): refused, not ignored.
const NOT_HONOURED: &[&str] = &[
    "skills",
    "skill",
    "model",
    "provider",
    "base_url",
    "script",
    "no_agent",
    "context_from",
    "enabled_toolsets",
    "workdir",
];

fn not_honoured(field: &str) -> String {
    format!(
        "`{field}` is not supported by hermes-runtime: its cron runs use the profile's model and \
         tools, with the job's prompt"
    )
}

fn file(home: &Path) -> PathBuf {
    home.join("cron").join("jobs.json")
}

/// The jobs of a home (none when it has no file). A file that is a bare list is read too.
pub fn load(home: &Path) -> Result<Vec<CronJob>, String> {
    let path = file(home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let jobs = match value {
        Value::Array(jobs) => Value::Array(jobs),
        mut object => object["jobs"].take(),
    };
    serde_json::from_value(jobs).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the jobs at once (a temporary file renamed over the old one), readable only by
/// the owner.
pub fn save(home: &Path, jobs: &[CronJob]) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let path = file(home);
    let dir = path.parent().expect("a file in cron/");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let stored: Vec<CronJob> = jobs.iter().map(without_annotations).collect();
    let text =
        serde_json::to_string_pretty(&json!({"jobs": stored, "updated_at": iso(Utc::now())}))
            .expect("jobs serialize");
    hermes_native::config::write_atomically(&path, text.as_bytes(), 0o600)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A job as it is stored: without the profile facts replies add.
fn without_annotations(job: &CronJob) -> CronJob {
    let mut job = job.clone();
    job.profile = None;
    job.profile_name = None;
    job.hermes_home = None;
    job.is_default_profile = None;
    job.extra.remove("latest_execution");
    job
}

fn trimmed(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// What a job must have: something for the agent to do.
fn check_work(job: &CronJob) -> Result<(), String> {
    if job.prompt.trim().is_empty() {
        return Err("agent cron jobs require a prompt, skill, or script".to_owned());
    }
    Ok(())
}

/// A new job from a create request; `existing` are the profile's jobs (for `context_from`).
pub fn create(
    body: &CronJobCreateBody,
    config: &HermesConfig,
    now: DateTime<Utc>,
) -> Result<CronJob, String> {
    let given = serde_json::to_value(body).expect("a body serializes");
    if let Some(field) = NOT_HONOURED.iter().find(|f| {
        !matches!(&given[**f], Value::Null | Value::Bool(false))
            && given[**f] != json!([])
            && given[**f] != json!("")
    }) {
        return Err(not_honoured(field));
    }
    let schedule = schedule::parse(&body.schedule, now)?;
    let prompt = body.prompt.clone().unwrap_or_default();
    let name = trimmed(&body.name)
        .or_else(|| {
            Some(
                prompt
                    .chars()
                    .take(50)
                    .collect::<String>()
                    .trim()
                    .to_owned(),
            )
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "cron job".to_owned());
    let once = schedule.kind == "once";
    let job = CronJob {
        id: uuid::Uuid::new_v4().simple().to_string()[..12].to_owned(),
        name,
        prompt,
        skill: None,
        skills: Vec::new(),
        provider_snapshot: config.model.provider.clone(),
        model_snapshot: config.model.default.clone(),
        model: None,
        provider: None,
        base_url: None,
        script: None,
        no_agent: false,
        context_from: None,
        next_run_at: schedule::next_run(&schedule, now, 0).map(iso),
        schedule_display: schedule.display.clone(),
        schedule,
        repeat: CronRepeat {
            times: once.then_some(1),
            completed: 0,
        },
        enabled: true,
        state: "scheduled".to_owned(),
        paused_at: None,
        paused_reason: None,
        created_at: iso(now),
        last_run_at: None,
        last_status: None,
        last_error: None,
        last_delivery_error: None,
        deliver: trimmed(&body.deliver).unwrap_or_else(|| "local".to_owned()),
        origin: None,
        enabled_toolsets: None,
        workdir: None,
        profile: None,
        profile_name: None,
        hermes_home: None,
        is_default_profile: None,
        extra: Map::new(),
    };
    check_work(&job)?;
    Ok(job)
}

/// `job` with `updates` merged in (any key is kept, as Hermes keeps it); known keys are tidied
/// as at creation, a new schedule is read and the next run computed from `now`.
pub fn update(
    job: &CronJob,
    updates: &Map<String, Value>,
    now: DateTime<Utc>,
) -> Result<CronJob, String> {
    let fixed: Vec<&str> = FIXED
        .iter()
        .copied()
        .filter(|k| updates.contains_key(*k))
        .collect();
    if !fixed.is_empty() {
        return Err(format!(
            "Cron job field(s) cannot be updated: {}",
            fixed.join(", ")
        ));
    }
    if let Some(field) = NOT_HONOURED.iter().find(|f| updates.contains_key(**f)) {
        return Err(not_honoured(field));
    }
    let mut record = serde_json::to_value(job).expect("a job serializes");
    for (key, value) in updates {
        let value = match key.as_str() {
            "deliver" => json!(
                trimmed(&value.as_str().map(str::to_owned)).unwrap_or_else(|| "local".to_owned())
            ),
            "schedule" if value.is_string() => {
                let parsed = schedule::parse(value.as_str().unwrap_or_default(), now)?;
                record["schedule_display"] = json!(parsed.display);
                json!(parsed)
            }
            _ => value.clone(),
        };
        record[key] = value;
    }
    let mut updated: CronJob =
        serde_json::from_value(record).map_err(|e| format!("invalid update: {e}"))?;
    if updates.contains_key("schedule") && updated.state != "paused" {
        updated.next_run_at =
            schedule::next_run(&updated.schedule, now, updated.repeat.completed).map(iso);
    }
    if updates.contains_key("prompt") {
        check_work(&updated)?;
    }
    Ok(updated)
}

pub fn pause(job: &mut CronJob, now: DateTime<Utc>) {
    job.enabled = false;
    job.state = "paused".to_owned();
    job.paused_at = Some(iso(now));
    job.paused_reason = None;
}

pub fn resume(job: &mut CronJob, now: DateTime<Utc>) {
    job.enabled = true;
    job.state = "scheduled".to_owned();
    job.paused_at = None;
    job.paused_reason = None;
    job.next_run_at = schedule::next_run(&job.schedule, now, job.repeat.completed).map(iso);
}

/// Makes the job due now: the scheduler runs it at its next tick.
pub fn trigger(job: &mut CronJob, now: DateTime<Utc>) {
    job.enabled = true;
    job.state = "scheduled".to_owned();
    job.paused_at = None;
    job.paused_reason = None;
    job.next_run_at = Some(iso(now));
}

/// The job `reference` names: its id, else (case-insensitively) its name.
pub fn find<'a>(
    jobs: &'a [CronJob],
    reference: &str,
    by_name: bool,
) -> Result<Option<&'a CronJob>, String> {
    if let Some(job) = jobs.iter().find(|j| j.id == reference) {
        return Ok(Some(job));
    }
    if !by_name {
        return Ok(None);
    }
    let named: Vec<&CronJob> = jobs
        .iter()
        .filter(|j| j.name.eq_ignore_ascii_case(reference))
        .collect();
    match named.as_slice() {
        [] => Ok(None),
        [job] => Ok(Some(job)),
        _ => Err(format!(
            "'{reference}' names {} jobs: use the id of one",
            named.len()
        )),
    }
}
