//! The scheduler: every tick, the due jobs of every profile are claimed (their next run moved
//! on and the run counted first, so a job runs at most once per due time, as Hermes's) and each
//! runs as an agent turn in a new session of its profile (`cron_<job>_<time>`, source `cron`),
//! with its output saved under `cron/output/<job>/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_native::NativeEvent;
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::CronJob;
use hermes_native::events::CompletionStatus;
use hermes_native::profile::DEFAULT_PROFILE;
use tokio::sync::Notify;

use super::jobs;
use super::schedule::{self, iso, parse_iso};
use crate::runtime::Runtime;
use crate::session::{Detached, LiveSession};

/// How long one run may take before it is interrupted.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long an interrupted run has to wind down.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// Ticks until the runtime stops.
pub fn spawn(runtime: Arc<Runtime>, tick: Duration) {
    let mut stopping = runtime.stopping.clone();
    tokio::spawn(async move {
        for (_, home) in runtime.profile_homes() {
            forget_spent(&runtime, &home).await;
        }
        loop {
            tokio::select! {
                _ = stopping.wait_for(|stop| *stop) => return,
                () = tokio::time::sleep(tick) => {}
            }
            for (profile, home) in runtime.profile_homes() {
                for job in claim_due(&runtime, &home).await {
                    tokio::spawn(run(runtime.clone(), profile.clone(), home.clone(), job));
                }
            }
        }
    });
}

/// The jobs of `home` that are due, with their next run already moved on and saved.
async fn claim_due(runtime: &Runtime, home: &Path) -> Vec<CronJob> {
    let _writing = runtime.cron_lock.lock().await;
    let Ok(mut all) = jobs::load(home) else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut due = Vec::new();
    for job in &mut all {
        let is_due = job.enabled
            && job.state == "scheduled"
            && job
                .next_run_at
                .as_deref()
                .and_then(parse_iso)
                .is_some_and(|at| at <= now);
        if is_due {
            // The run counts from its claim, as Hermes counts it from its dispatch: one that a
            // crash cuts short is not made again.
            job.repeat.completed += 1;
            job.next_run_at = schedule::next_run(&job.schedule, now, job.repeat.completed).map(iso);
            due.push(job.clone());
        }
    }
    if !due.is_empty()
        && let Err(e) = jobs::save(home, &all)
    {
        tracing::error!(error = %e, "cannot claim due cron jobs");
        return Vec::new();
    }
    due
}

/// Whether every run the job may make has been claimed.
fn is_spent(job: &CronJob) -> bool {
    job.repeat
        .times
        .is_some_and(|times| job.repeat.completed >= times)
}

/// Removes the jobs of `home` whose last run was claimed but never recorded: at start no run is
/// in progress, so a runtime that stopped mid-run left them, and they would otherwise stay on
/// file for ever with nothing left to run (Hermes removes them too, once their claim expires).
async fn forget_spent(runtime: &Runtime, home: &Path) {
    let _writing = runtime.cron_lock.lock().await;
    let Ok(mut all) = jobs::load(home) else {
        return;
    };
    let before = all.len();
    all.retain(|job| {
        let spent = is_spent(job);
        if spent {
            tracing::warn!(job = %job.id, "a cron job's last run was cut short; it is removed");
        }
        !spent
    });
    if all.len() != before
        && let Err(e) = jobs::save(home, &all)
    {
        tracing::error!(error = %e, "cannot remove spent cron jobs");
    }
}

async fn run(runtime: Arc<Runtime>, profile: String, home: PathBuf, job: CronJob) {
    let started = Utc::now();
    let outcome = run_agent(&runtime, &profile, &home, &job, started).await;
    if let Err(e) = save_output(&home, &job, started, &outcome) {
        tracing::warn!(error = %e, job = %job.id, "cannot save cron output");
    }
    let _writing = runtime.cron_lock.lock().await;
    let Ok(mut all) = jobs::load(&home) else {
        return;
    };
    let Some(index) = all.iter().position(|j| j.id == job.id) else {
        return; // deleted while it ran
    };
    let record = &mut all[index];
    record.last_run_at = Some(iso(started));
    record.last_status = Some(if outcome.is_ok() { "ok" } else { "error" }.to_owned());
    record.last_error = outcome.as_ref().err().cloned();
    if is_spent(record) {
        all.remove(index);
    }
    if let Err(e) = jobs::save(&home, &all) {
        tracing::error!(error = %e, job = %job.id, "cannot record a cron run");
    }
}

/// Runs the job's prompt as one turn of a new session; its final answer, or why it failed.
async fn run_agent(
    runtime: &Arc<Runtime>,
    profile: &str,
    home: &Path,
    job: &CronJob,
    started: DateTime<Utc>,
) -> Result<String, String> {
    let config = HermesConfig::load(home).await.map_err(|e| e.to_string())?;
    let name: String = job.name.chars().take(60).collect();
    // Nobody watches a scheduled run: its events go nowhere.
    let opening = Detached {
        stored_id: format!("cron_{}_{}", job.id, started.format("%Y%m%d_%H%M%S")),
        home: home.to_path_buf(),
        profile: (profile != DEFAULT_PROFILE).then(|| profile.to_owned()),
        source: "cron".to_owned(),
        title: Some(format!("{name} · {}", started.format("%b %d %H:%M"))),
        model_name: job.model.clone(),
    };
    let session = LiveSession::detached(opening, &config);
    let prompt = format!(
        "[A scheduled run of the job '{}'. Nobody is watching: answer with the result \
         itself.]\n\n{}",
        job.name, job.prompt
    );
    let interrupt = Arc::new(Notify::new());
    let turn = crate::agent::run_turn(runtime.clone(), session.clone(), prompt, interrupt.clone());
    tokio::pin!(turn);
    let complete = match tokio::time::timeout(RUN_TIMEOUT, &mut turn).await {
        Ok(complete) => Some(complete),
        Err(_) => {
            interrupt.notify_one();
            tokio::time::timeout(WIND_DOWN, &mut turn).await.ok()
        }
    };
    if let Ok(db) = runtime.db(home).await {
        let _ = db.end_session(&session.stored_id, "cron_complete").await;
    }
    match complete {
        Some(NativeEvent::MessageComplete(done)) if done.status == CompletionStatus::Complete => {
            if done.text.trim().is_empty() {
                Err("Agent completed but produced empty response".to_owned())
            } else {
                Ok(done.text)
            }
        }
        Some(NativeEvent::MessageComplete(done)) => Err(done.text),
        Some(_) => Err("the run ended without an answer".to_owned()),
        None => Err(format!(
            "the run took longer than {} s and was interrupted",
            RUN_TIMEOUT.as_secs()
        )),
    }
}

/// `cron/output/<job>/<time>.md`: what ran and what came of it.
fn save_output(
    home: &Path,
    job: &CronJob,
    started: DateTime<Utc>,
    outcome: &Result<String, String>,
) -> std::io::Result<()> {
    let dir = home.join("cron").join("output").join(&job.id);
    std::fs::create_dir_all(&dir)?;
    let (heading, section, body) = match outcome {
        Ok(text) => ("", "Response", text.as_str()),
        Err(error) => (" (FAILED)", "Error", error.as_str()),
    };
    let text = format!(
        "# Cron Job: {}{heading}\n\n**Job ID:** {}\n**Run Time:** {}\n**Schedule:** {}\n\n\
         ## Prompt\n\n{}\n\n## {section}\n\n{body}\n",
        job.name,
        job.id,
        started.format("%Y-%m-%d %H:%M:%S"),
        job.schedule_display,
        job.prompt,
    );
    std::fs::write(
        dir.join(format!("{}.md", started.format("%Y-%m-%d_%H-%M-%S"))),
        text,
    )
}
