//! Jobs that fail halfway, with the `sim` provider's faults: every step is idempotent (each
//! runs twice without harm) and a step that fails has everything its job made undone — no
//! runtime, no home directory — and the job says why.

use serde_json::{Value, json};

use crate::{Ctx, assert_problem};

impl Ctx {
    /// Creates a `sim` instance with `faults`; returns its id and its job's last event.
    async fn sim_instance(&self, faults: Value) -> (String, Value) {
        let body = json!({"name": "sim", "provider": "sim", "sim": faults});
        let (status, created) = self.post("/v1/instances", &body.to_string()).await;
        assert_eq!(status, 202, "{created}");
        let job = created["job"]["id"].as_str().unwrap();
        let events = self.sse(&format!("/v1/jobs/{job}/events"), None).await;
        let id = created["instance"]["id"].as_str().unwrap().to_owned();
        (id, events.last().cloned().unwrap())
    }

    /// The instance's directory under the data dir.
    fn instance_dir(&self, iid: &str) -> std::path::PathBuf {
        self.dir.path().join("instances").join(iid)
    }

    /// Deletes the instance; the deletion job's last event.
    async fn delete_job(&self, iid: &str) -> Value {
        let path = format!("/v1/instances/{iid}");
        let (status, deleting) = self.send(reqwest::Method::DELETE, &path, None).await;
        assert_eq!(status, 202, "{deleting}");
        let job = deleting["job"]["id"].as_str().unwrap();
        let events = self.sse(&format!("/v1/jobs/{job}/events"), None).await;
        events.last().cloned().unwrap()
    }
}

#[tokio::test]
async fn a_provisioning_step_that_fails_has_what_its_job_made_undone() {
    let ctx = Ctx::start_sim().await;
    // Each step failing in turn, run once and run twice (its undo then undoes both runs).
    let steps = ["prepare_home", "start_runtime", "connect_gateway"];
    let faults = [false, true].into_iter().flat_map(|twice| {
        (steps.iter()).map(move |step| (*step, json!({"fail_step": step, "repeat_steps": twice})))
    });
    for (step, fault) in faults {
        let (iid, last) = ctx.sim_instance(fault).await;
        assert_eq!(last["type"], "job.finished", "{last}");
        assert_eq!(last["state"], "failed", "{step}: {last}");
        assert_eq!(last["instance_state"], "failed");
        let error = last["error"].as_str().unwrap();
        assert!(error.starts_with(step), "names the step: {error}");
        assert!(error.contains("simulated failure"), "{error}");
        let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
        assert_eq!(instance["state"], "failed", "{instance}");
        assert_eq!(instance["state_reason"], last["error"]);
        assert!(!ctx.instance_dir(&iid).exists(), "{step}: the home is gone");
        assert_eq!(ctx.runtimes_running().await, 0, "{step}: no runtime runs");
        // Nothing half-made: no profile can be made on it, and it deletes cleanly.
        let refused = ctx
            .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
            .await;
        assert_problem(&refused, 409, "instance_not_ready");
        ctx.delete_instance_and_wait(&iid).await;
    }
}

#[tokio::test]
async fn a_deletion_step_that_fails_leaves_the_instance_failed_and_deleting_again_finishes() {
    let ctx = Ctx::start_sim().await;
    for step in ["disconnect", "destroy_runtime", "remove_records"] {
        let (iid, last) = ctx.sim_instance(json!({"fail_step": step})).await;
        assert_eq!(last["instance_state"], "ready", "{last}");
        let failed = ctx.delete_job(&iid).await;
        assert_eq!(failed["state"], "failed", "{step}: {failed}");
        assert!(failed["error"].as_str().unwrap().starts_with(step));
        let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
        assert_eq!(instance["state"], "failed", "{step}: {instance}");
        // The fault fires once: deleting again finishes the work.
        let done = ctx.delete_job(&iid).await;
        assert_eq!(done["state"], "succeeded", "{step}: {done}");
        assert_eq!(ctx.get(&format!("/v1/instances/{iid}")).await.0, 404);
        assert!(!ctx.instance_dir(&iid).exists());
        assert_eq!(ctx.runtimes_running().await, 0);
    }
}

#[tokio::test]
async fn every_step_run_twice_does_no_harm() {
    let ctx = Ctx::start_sim().await;
    let (iid, last) = ctx
        .sim_instance(json!({"repeat_steps": true, "start_delay_ms": 200}))
        .await;
    assert_eq!(last["state"], "succeeded", "{last}");
    assert_eq!(ctx.runtimes_running().await, 1);
    let turns = ctx.turns_path(&iid).await;
    let finished = ctx.turn_on(&turns, "twice").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let done = ctx.delete_job(&iid).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(!ctx.instance_dir(&iid).exists());
    assert_eq!(ctx.runtimes_running().await, 0);
}

#[tokio::test]
async fn of_deletions_sent_at_once_one_starts_a_job_and_the_others_are_conflicts() {
    let ctx = Ctx::start_sim().await;
    let (iid, _) = ctx.sim_instance(json!({})).await;
    let path = format!("/v1/instances/{iid}");
    let deletions = (0..8).map(|_| ctx.send(reqwest::Method::DELETE, &path, None));
    let answers = futures_util::future::join_all(deletions).await;
    let (started, refused): (Vec<_>, Vec<_>) =
        answers.into_iter().partition(|(status, _)| *status == 202);
    assert_eq!(started.len(), 1, "one deletion job: {started:?}");
    // One that comes after the job removed the instance finds none.
    for answer in &refused {
        match answer.0 {
            404 => assert_problem(answer, 404, "not_found"),
            _ => assert_problem(answer, 409, "conflict"),
        }
    }
    let job = started[0].1["job"]["id"].as_str().unwrap();
    let events = ctx.sse(&format!("/v1/jobs/{job}/events"), None).await;
    assert_eq!(events.last().unwrap()["instance_state"], "deleted");
    assert_eq!(ctx.get(&path).await.0, 404);
    assert!(!ctx.instance_dir(&iid).exists());
}

#[tokio::test]
async fn a_sim_runtime_that_exits_is_lost_and_restarted_by_its_policy() {
    let ctx = Ctx::start_sim().await;
    let body = json!({"name": "exits", "provider": "sim", "restart_policy": "on_failure",
        "max_restarts": 1, "sim": {"exit_after_ms": 300}});
    let iid = ctx.instance_from(body).await;
    let restarted = ctx
        .instance_when(&iid, |i| i["restarts"] == 1 && i["state"] == "ready")
        .await;
    assert!(
        restarted["state_reason"]
            .as_str()
            .unwrap()
            .contains("simulated runtime exited"),
        "{restarted}"
    );
    // It exits again: past its one restart, it stays lost.
    let lost = ctx
        .instance_when(&iid, |i| {
            i["state_reason"]
                .as_str()
                .is_some_and(|r| r.contains("not restarted"))
        })
        .await;
    assert_eq!(lost["state"], "lost", "{lost}");
    let metrics = crate::metrics::scrape(&ctx).await;
    let restarts = crate::metrics::sample(&metrics, "edith_runtime_restarts_total");
    assert_eq!(restarts, 1.0, "{metrics}");
}

#[tokio::test]
async fn sim_is_offered_only_when_the_operator_enables_it_and_its_faults_are_checked() {
    let plain = Ctx::start().await;
    let refused = plain
        .post("/v1/instances", r#"{"name": "s", "provider": "sim"}"#)
        .await;
    assert_problem(&refused, 400, "invalid_request");
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("--sim-provider")
    );
    let (_, caps) = plain.get("/v1/capabilities").await;
    assert!(
        !caps["providers"]
            .as_array()
            .unwrap()
            .contains(&json!("sim"))
    );

    let ctx = Ctx::start_sim().await;
    let (_, caps) = ctx.get("/v1/capabilities").await;
    assert!(
        caps["providers"]
            .as_array()
            .unwrap()
            .contains(&json!("sim"))
    );
    let unknown_step = json!({"name": "s", "provider": "sim", "sim": {"fail_step": "nap"}});
    let refused = ctx.post("/v1/instances", &unknown_step.to_string()).await;
    assert_problem(&refused, 400, "invalid_request");
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("start_runtime")
    );
    let too_long = json!({"name": "s", "provider": "sim",
        "sim": {"drop_connection_after_ms": edith_types::rules::SIM_DROP_CONNECTION_AFTER_MAX_MS + 1}});
    let refused = ctx.post("/v1/instances", &too_long.to_string()).await;
    assert_problem(&refused, 400, "invalid_request");
    let elsewhere = json!({"name": "s", "sim": {"repeat_steps": true}});
    let refused = ctx.post("/v1/instances", &elsewhere.to_string()).await;
    assert_problem(&refused, 400, "invalid_request");
}

/// A gateway that drops its connection in the middle of a turn (the runtime goes on): the turn
/// ends `failed` saying the connection was lost, the instance stays `ready` (the reconciler's
/// new connection is taken), and the next turn runs.
#[tokio::test]
async fn a_sim_gateway_that_drops_its_connection_mid_turn_fails_that_turn_only() {
    let ctx = Ctx::start_sim().await;
    let model = testkit::FakeModel::start().await;
    let (iid, last) = ctx
        .sim_instance(json!({"drop_connection_after_ms": 3000}))
        .await;
    assert_eq!(last["instance_state"], "ready", "{last}");
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "default"}))
        .await;
    let pid = profile["id"].as_str().unwrap();
    // 60 pieces 100 ms apart: 6 s, cut 3 s in.
    let (turn, events) = ctx.turn(&iid, pid, "SLOW").await;
    assert_eq!(turn["state"], "failed", "{turn}");
    let error = turn["error"].as_str().unwrap();
    assert!(
        error.contains("connection to the runtime was lost"),
        "{turn}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "message.delta"),
        "cut in the middle: {events:?}"
    );
    let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
    assert_eq!(instance["state"], "ready", "{instance}");
    let (turn, _) = ctx.turn(&iid, pid, "hello").await;
    assert_eq!(turn["state"], "completed", "{turn}");
    assert_eq!(turn["output"], "You said: hello");
}
