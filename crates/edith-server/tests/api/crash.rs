//! `edith serve` killed with SIGKILL while it works: when it starts again on the same data
//! directory, nothing it logged is lost or changed, every turn and job has an end, the runtimes
//! it had started are not left running beside new ones, and work goes on.

use std::time::Duration;

use serde_json::{Value, json};

use crate::Ctx;

/// Whether the process `pid` still runs (a zombie does not).
pub(crate) fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

impl Ctx {
    /// The pid of the runtime the instance started last (from its runtime log).
    pub(crate) async fn runtime_pid(&self, iid: &str) -> Option<String> {
        let (_, log) = self.get(&format!("/v1/instances/{iid}/log")).await;
        log["lines"].as_array()?.iter().rev().find_map(|line| {
            line.as_str()?
                .strip_prefix(edith_server::RUNTIME_STARTED)
                .map(|pid| pid.trim().to_owned())
        })
    }
}

#[tokio::test]
async fn runtimes_left_by_a_killed_control_plane_are_stopped_when_it_starts_again() {
    let ctx = Ctx::serve(tempfile::tempdir().expect("temp dir")).await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let before = ctx.runtime_pid(&iid).await.expect("a runtime pid");
    assert!(alive(&before));

    let dir = ctx.crash().await;
    assert!(
        alive(&before),
        "the runtime outlives the control plane's crash"
    );

    let ctx = Ctx::serve(dir).await;
    assert!(
        !alive(&before),
        "stopped before the control plane serves: never two runtimes for one instance"
    );
    // The instance is still ready and starts a fresh runtime on next use.
    let turns = ctx.turns_path(&iid).await;
    let finished = ctx.turn_on(&turns, "again").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let after = ctx.runtime_pid(&iid).await.expect("a new runtime");
    assert_ne!(after, before);
    assert!(alive(&after));

    // A clean stop leaves no runtime behind.
    let dir = ctx.stop().await;
    let left = testkit::kill_processes_with_env_under("HERMES_HOME", dir.path());
    assert_eq!(left, 0, "a clean stop stops every runtime it started");
}

/// A small, seeded generator of kill moments, so a failing run can be repeated.
struct Moments(u64);

impl Moments {
    fn next_millis(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// Reads a turn's event stream for `for_how_long`; returns the `(id, data)` of each whole
/// event seen by then.
pub(crate) async fn events_for(
    ctx: &Ctx,
    path: &str,
    for_how_long: Duration,
) -> Vec<(String, Value)> {
    let mut seen = Vec::new();
    let Ok(mut response) = ctx.http.get(ctx.url(path)).send().await else {
        return seen;
    };
    let mut text = String::new();
    let _ = tokio::time::timeout(for_how_long, async {
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    // Only events whose blank line arrived are whole.
    let whole = &text[..text.rfind("\n\n").map_or(0, |end| end + 2)];
    let (mut id, mut data) = (None, None);
    for line in whole.lines() {
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str(value).expect("JSON event"));
        } else if line.is_empty()
            && let (Some(id), Some(data)) = (id.take(), data.take())
        {
            seen.push((id, data));
        }
    }
    seen
}

#[tokio::test]
async fn twenty_kills_during_streaming_turns_lose_nothing_and_work_goes_on() {
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: Duration::from_millis(8),
        ..Default::default()
    })
    .await;
    let mut ctx = Ctx::serve(tempfile::tempdir().expect("temp dir")).await;
    let mut sessions = Vec::new();
    for iid in [
        ctx.ready_instance().await,
        ctx.process_instance("hermes-runtime").await,
    ] {
        let created = ctx
            .profile_on(&iid, &model, json!({"name": "talker"}))
            .await;
        let path = format!(
            "/v1/instances/{iid}/profiles/{}/sessions",
            created["id"].as_str().unwrap()
        );
        let (_, session) = ctx.post(&path, "{}").await;
        sessions.push(format!("{path}/{}/turns", session["id"].as_str().unwrap()));
    }
    // About 60 pieces: half a second of streaming, so kills land before, during and after.
    let long_input = (0..60)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    // Other moments each run; a failing run's seed, printed, repeats them
    // (`EDITH_CRASH_SEED=0x…`).
    let seed = match std::env::var("EDITH_CRASH_SEED") {
        Ok(given) => u64::from_str_radix(given.trim_start_matches("0x"), 16)
            .expect("EDITH_CRASH_SEED is a hexadecimal number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64,
    };
    eprintln!("kill moments seeded with {seed:#x} (EDITH_CRASH_SEED={seed:#x} repeats them)");
    let mut moments = Moments(seed);
    let mut cut_mid_stream = 0;

    for round in 0..20 {
        let turns = &sessions[round % sessions.len()];
        let body = json!({"input": long_input}).to_string();
        let (status, turn) = ctx.post(turns, &body).await;
        assert_eq!(status, 202, "{turn}");
        let events_path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
        let wait = Duration::from_millis(moments.next_millis(700));
        let seen = events_for(&ctx, &events_path, wait).await;
        // Every fourth round also has a provisioning job just begun at the kill, of an
        // `embedded` and a `process` instance in turn.
        let job = if round % 4 == 3 {
            let body = match round % 8 {
                3 => json!({"name": "mid-kill"}),
                _ => {
                    json!({"name": "mid-kill", "provider": "process", "runtime": "hermes-runtime"})
                }
            };
            let (_, created) = ctx.post("/v1/instances", &body.to_string()).await;
            Some(created["job"]["id"].as_str().unwrap().to_owned())
        } else {
            None
        };

        ctx = Ctx::serve(ctx.crash().await).await;

        let reading = std::time::Instant::now();
        let after = events_for(&ctx, &events_path, Duration::from_secs(60)).await;
        let took = reading.elapsed();
        assert!(
            after.len() >= seen.len() && after[..seen.len()] == seen[..],
            "round {round}: what was served before the kill is served again unchanged\n\
             before: {seen:?}\nafter: {after:?}"
        );
        let last = &after.last().expect("a final event").1;
        match last["state"].as_str() {
            Some("completed") => {}
            Some("interrupted") => {
                assert!(
                    last["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "round {round}: an interrupted turn says why: {last}"
                );
                cut_mid_stream += usize::from(!seen.is_empty());
            }
            _ => {
                let turn_path = events_path.trim_end_matches("/events");
                let (_, turn) = ctx.get(turn_path).await;
                panic!(
                    "round {round}: the turn has an end (the stream was read for {took:?}, \
                     after a kill {wait:?} into it; the turn now: {turn}): {after:?}"
                )
            }
        }
        if let Some(job) = job {
            let events = ctx.sse(&format!("/v1/jobs/{job}/events"), None).await;
            let finished = events.last().unwrap();
            assert_eq!(
                finished["type"], "job.finished",
                "round {round}: {events:?}"
            );
            assert_eq!(finished["state"], "succeeded", "round {round}: {events:?}");
        }
        let finished = ctx.turn_on(turns, "still there").await;
        assert_eq!(finished["state"], "completed", "round {round}: {finished}");
        // A prompt the kill left unanswered goes to the model with this one, before it.
        let output = finished["output"].as_str().unwrap();
        assert!(
            output.starts_with("You said: ") && output.ends_with("still there"),
            "round {round}: {finished}"
        );
    }
    eprintln!("{cut_mid_stream} of 20 kills cut a turn whose events were being streamed");
    // Half a second of streaming against kills spread over 0.7 s: most land mid-stream.
    assert!(cut_mid_stream >= 3, "the kills missed the streams");
    // No job stays running: every job of every instance has ended, each one provisioning an
    // instance that is ready (the two streamed on, and the five made at kills, two of them
    // `process` instances).
    let (_, instances) = ctx.get("/v1/instances?limit=100").await;
    let instances = instances["items"].as_array().unwrap();
    assert_eq!(instances.len(), 7, "{instances:?}");
    for instance in instances {
        assert_eq!(instance["state"], "ready", "{instance}");
        let iid = instance["id"].as_str().unwrap();
        let (_, jobs) = ctx.get(&format!("/v1/instances/{iid}/jobs")).await;
        let states: Vec<&str> = jobs
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["succeeded"], "{iid}: {jobs}");
    }
    let dir = ctx.stop().await;
    let left = testkit::kill_processes_with_env_under("HERMES_HOME", dir.path());
    assert_eq!(left, 0, "a clean stop stops every runtime it started");
}

#[tokio::test]
async fn a_restart_due_when_the_control_plane_was_killed_still_happens() {
    let sim = ["--sim-provider"];
    let ctx = Ctx::serve_with(tempfile::tempdir().expect("temp dir"), &sim).await;
    // Exits 300 ms after each start; restarted after 1 s, then 2 s.
    let body = json!({"name": "flaky", "provider": "sim", "restart_policy": "on_failure",
        "max_restarts": 2, "sim": {"exit_after_ms": 300}});
    let iid = ctx.instance_from(body).await;
    let lost = ctx.instance_when(&iid, |i| i["state"] == "lost").await;
    assert_eq!(lost["restarts"], 0, "{lost}");

    // Killed during the pause before the restart.
    let ctx = Ctx::serve_with(ctx.crash().await, &sim).await;
    let restarted = ctx
        .instance_when(&iid, |i| i["restarts"] == 1 && i["state"] == "ready")
        .await;
    assert!(
        restarted["state_reason"]
            .as_str()
            .unwrap()
            .starts_with("restarted"),
        "{restarted}"
    );
    ctx.stop().await;
}

/// A finished turn whose log lacks its end (an earlier version recorded the two apart, and a
/// kill between them — seen once in twenty kills — left a stream waiting for ever): the next
/// start adds the end, and the stream ends with it.
#[tokio::test]
async fn a_finished_turn_whose_log_lost_its_end_gets_it_on_the_next_start() {
    let ctx = Ctx::serve(tempfile::tempdir().expect("temp dir")).await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let finished = ctx.turn_on(&turns, "hello").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let tid = finished["turn_id"].as_str().unwrap().to_owned();
    let dir = ctx.crash().await;

    // The log as that version could leave it: everything but the end.
    let db = format!("sqlite://{}", dir.path().join("edith.db").display());
    let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db)
        .await
        .unwrap();
    let removed = sqlx::query(
        "DELETE FROM turn_events WHERE turn_id = ? AND json_extract(body, '$.type') = 'turn.finished'",
    )
    .bind(&tid)
    .execute(&mut db)
    .await
    .unwrap();
    assert_eq!(removed.rows_affected(), 1);
    drop(db);

    let ctx = Ctx::serve(dir).await;
    let events = ctx.sse(&format!("{turns}/{tid}/events"), None).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn.finished", "{events:?}");
    assert_eq!(last["state"], "completed");
    assert!(last["output"].as_str().unwrap().contains("hello"), "{last}");
    ctx.stop().await;
}

/// `--sqlite-sync full`: commits wait for the disk, so nothing answered is lost to a power cut
/// either; the control plane says so when it opens its store, and serves as usual.
#[tokio::test]
async fn a_sqlite_file_that_syncs_every_commit_serves_as_usual() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ctx = Ctx::serve_with(dir, &["--sqlite-sync", "full"]).await;
    let opened = ctx.server_log();
    let opened = opened.iter().find(|line| line.contains("store opened"));
    assert!(
        opened.is_some_and(|line| line.contains("sqlite_sync=\"FULL\"")),
        "{opened:?}"
    );
    let turns = ctx.turns_path(&ctx.ready_instance().await).await;
    let finished = ctx.turn_on(&turns, "hello").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    ctx.stop().await;
}
