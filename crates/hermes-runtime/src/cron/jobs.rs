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
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
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
    let temporary = dir.join(format!(".jobs.json.tmp-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, &path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {e}", path.display())
    })
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

/// Names from a list or a comma/newline-separated text; `None` when empty.
fn names(value: &Value) -> Option<Vec<String>> {
    let items: Vec<String> = match value {
        Value::String(text) => text.split([',', '\n']).map(str::to_owned).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let mut kept: Vec<String> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        if !kept.iter().any(|k| k == item) {
            kept.push(item.to_owned());
        }
    }
    (!kept.is_empty()).then_some(kept)
}

fn check_workdir(workdir: &Option<String>) -> Result<Option<String>, String> {
    let Some(dir) = trimmed(workdir) else {
        return Ok(None);
    };
    let path = Path::new(&dir);
    if !path.is_absolute() {
        return Err(format!(
            "Cron workdir must be an absolute path (got '{dir}'). Cron jobs run detached from \
             any shell cwd, so relative paths are ambiguous."
        ));
    }
    match std::fs::canonicalize(path) {
        Ok(real) if real.is_dir() => Ok(Some(real.to_string_lossy().into_owned())),
        Ok(_) => Err(format!("Cron workdir is not a directory: {dir}")),
        Err(_) => Err(format!("Cron workdir does not exist: {dir}")),
    }
}

/// What a job must have: something for the agent to do. Scripts (`no_agent`) are not run by
/// this runtime.
fn check_work(job: &CronJob) -> Result<(), String> {
    if job.script.is_some() || job.no_agent {
        return Err(if job.script.is_none() {
            "no_agent=True requires a script".to_owned()
        } else {
            "script jobs are not supported by hermes-runtime: give the job a prompt".to_owned()
        });
    }
    if job.prompt.trim().is_empty() && job.skills.is_empty() {
        return Err("agent cron jobs require a prompt, skill, or script".to_owned());
    }
    Ok(())
}

/// A new job from a create request; `existing` are the profile's jobs (for `context_from`).
pub fn create(
    body: &CronJobCreateBody,
    existing: &[CronJob],
    config: &HermesConfig,
    profile: &str,
    now: DateTime<Utc>,
) -> Result<CronJob, String> {
    let skills = body
        .skills
        .as_ref()
        .map(|s| names(&json!(s)).unwrap_or_default())
        .unwrap_or_default();
    let context_from = match body.context_from.as_ref().and_then(names) {
        Some(refs) => {
            if let Some(unknown) = refs.iter().find(|r| !existing.iter().any(|j| &j.id == *r)) {
                return Err(format!(
                    "context_from job '{unknown}' not found in profile '{profile}'"
                ));
            }
            Some(json!(refs))
        }
        None => None,
    };
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
        .or_else(|| skills.first().cloned())
        .unwrap_or_else(|| "cron job".to_owned());
    let (model, provider) = (trimmed(&body.model), trimmed(&body.provider));
    let once = schedule.kind == "once";
    let job = CronJob {
        id: uuid::Uuid::new_v4().simple().to_string()[..12].to_owned(),
        name,
        prompt,
        skill: skills.first().cloned(),
        skills,
        provider_snapshot: provider
            .is_none()
            .then(|| config.model.provider.clone())
            .flatten(),
        model_snapshot: model
            .is_none()
            .then(|| config.model.default.clone())
            .flatten(),
        model,
        provider,
        base_url: trimmed(&body.base_url).map(|u| u.trim_end_matches('/').to_owned()),
        script: trimmed(&body.script),
        no_agent: body.no_agent.unwrap_or(false),
        context_from,
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
        enabled_toolsets: body
            .enabled_toolsets
            .as_ref()
            .and_then(|t| names(&json!(t))),
        workdir: check_workdir(&body.workdir)?,
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
    let mut record = serde_json::to_value(job).expect("a job serializes");
    for (key, value) in updates {
        let value = match key.as_str() {
            "model" | "provider" | "workdir" | "script" => {
                json!(trimmed(&value.as_str().map(str::to_owned)))
            }
            "base_url" => json!(
                trimmed(&value.as_str().map(str::to_owned))
                    .map(|u| u.trim_end_matches('/').to_owned())
            ),
            "deliver" => json!(
                trimmed(&value.as_str().map(str::to_owned)).unwrap_or_else(|| "local".to_owned())
            ),
            "context_from" | "enabled_toolsets" => json!(names(value)),
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
    if updates.contains_key("workdir") {
        updated.workdir = check_workdir(&updated.workdir)?;
    }
    if updates.contains_key("schedule") && updated.state != "paused" {
        updated.next_run_at =
            schedule::next_run(&updated.schedule, now, updated.repeat.completed).map(iso);
    }
    if ["prompt", "skill", "skills", "script", "no_agent"]
        .iter()
        .any(|k| updates.contains_key(*k))
    {
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
