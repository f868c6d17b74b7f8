//! Runtimes behind the control plane other than the embedded one: `process` instances run a
//! command the operator configured — our `hermes-runtime`, or the real `hermes serve` 0.19.0.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use edith_server::RuntimeCommand;
use serde_json::{Value, json};

use crate::{Ctx, assert_problem};

impl Ctx {
    /// A `process` instance of `runtime` that finished provisioning.
    pub(crate) async fn process_instance(&self, runtime: &str) -> String {
        let body = json!({"name": runtime, "provider": "process", "runtime": runtime});
        self.instance_from(body).await
    }

    /// A profile of instance `iid` made from `body`, its model the fake `model`; as created.
    pub(crate) async fn profile_on(
        &self,
        iid: &str,
        model: &testkit::FakeModel,
        body: Value,
    ) -> Value {
        let mut body = body;
        body["model"] = json!({"provider": "openai_compatible", "base_url": model.base_url(),
            "model": "fake-model", "api_key": "sk-fake-0123456789"});
        let path = format!("/v1/instances/{iid}/profiles");
        let (status, profile) = self.post(&path, &body.to_string()).await;
        assert_eq!(status, 201, "{profile}");
        profile
    }

    /// An instance made from `body` that finished provisioning.
    pub(crate) async fn instance_from(&self, body: Value) -> String {
        let (status, created) = self.post("/v1/instances", &body.to_string()).await;
        assert_eq!(status, 202, "{created}");
        let job = created["job"]["id"].as_str().unwrap();
        let events = self.sse(&format!("/v1/jobs/{job}/events"), None).await;
        let last = events.last().unwrap();
        assert_eq!(last["instance_state"], "ready", "{events:?}");
        created["instance"]["id"].as_str().unwrap().to_owned()
    }

    /// Runs one turn on a new session of `profile`; returns the finished turn and its log.
    pub(crate) async fn turn(&self, iid: &str, pid: &str, input: &str) -> (Value, Vec<Value>) {
        let sessions = format!("/v1/instances/{iid}/profiles/{pid}/sessions");
        let (_, session) = self.post(&sessions, "{}").await;
        let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
        let (status, turn) = self
            .post(&turns, &json!({"input": input}).to_string())
            .await;
        assert_eq!(status, 202, "{turn}");
        let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
        // The real Hermes builds its agent and connects MCP servers first: seconds.
        let events = self
            .sse_within(
                &format!("{turn_path}/events"),
                None,
                Duration::from_secs(120),
            )
            .await;
        let (_, turn) = self.get(&turn_path).await;
        (turn, events)
    }

    /// Kills the instance's runtime process (its pid is in the runtime log) with SIGKILL.
    pub(crate) async fn kill_runtime(&self, iid: &str) {
        let (_, log) = self.get(&format!("/v1/instances/{iid}/log")).await;
        let pid = log["lines"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find_map(|line| line.as_str()?.strip_prefix(edith_server::RUNTIME_STARTED))
            .expect("the pid in the runtime log")
            .trim()
            .to_owned();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// The port its runtime announced, read from the runtime log.
    async fn runtime_port(&self, iid: &str) -> u16 {
        let (status, log) = self.get(&format!("/v1/instances/{iid}/log")).await;
        assert_eq!(status, 200, "{log}");
        log["lines"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find_map(|line| line.as_str()?.strip_prefix("HERMES_BACKEND_READY port="))
            .expect("a ready line in the runtime log")
            .trim()
            .parse()
            .unwrap()
    }
}

#[tokio::test]
async fn a_process_instance_runs_our_runtime_as_a_child_process_until_deleted() {
    let ctx = Ctx::start().await;
    let (status, runtimes) = ctx.get("/v1/runtimes").await;
    assert_eq!(status, 200, "{runtimes}");
    let ours = runtimes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "hermes-runtime")
        .expect("our runtime is always there");
    assert!(
        ours["version"]
            .as_str()
            .unwrap()
            .starts_with("hermes-runtime "),
        "{ours}"
    );

    let iid = ctx.process_instance("hermes-runtime").await;
    let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
    assert_eq!(instance["runtime"], "hermes-runtime");
    let (_, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    let (turn, _) = ctx
        .turn(&iid, profile["id"].as_str().unwrap(), "hello process")
        .await;
    assert_eq!(turn["state"], "completed", "{turn}");
    assert_eq!(turn["output"], "You said: hello process");

    // The runtime is a process of its own, listening on the port it announced.
    let port = ctx.runtime_port(&iid).await;
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    );

    ctx.delete_instance_and_wait(&iid).await;
    let mut gone = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "deleting the instance stops its runtime");
    assert!(!ctx.dir.path().join("instances").join(&iid).exists());
}

#[tokio::test]
async fn process_instances_name_a_runtime_the_operator_configured() {
    let ctx = Ctx::start().await;
    let refused = ctx
        .post(
            "/v1/instances",
            r#"{"name": "x", "provider": "process", "runtime": "rm -rf /"}"#,
        )
        .await;
    assert_problem(&refused, 400, "invalid_request");
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("hermes-runtime"),
        "the known runtimes are listed: {}",
        refused.1
    );
    assert_problem(
        &ctx.post("/v1/instances", r#"{"name": "x", "provider": "process"}"#)
            .await,
        400,
        "invalid_request",
    );
    assert_problem(
        &ctx.post(
            "/v1/instances",
            r#"{"name": "x", "runtime": "hermes-runtime"}"#,
        )
        .await,
        400,
        "invalid_request",
    );
    // The embedded runtime keeps no log of its own.
    let iid = ctx.ready_instance().await;
    assert_problem(
        &ctx.get(&format!("/v1/instances/{iid}/log")).await,
        501,
        "unsupported",
    );
}

/// The real Hermes, installed by `scripts/test` into `target/hermes-venv`.
pub(crate) fn real_hermes() -> RuntimeCommand {
    let (program, args) = testkit::real_hermes_command();
    RuntimeCommand { program, args }
}

/// The real `hermes serve` 0.19.0 as a `process` instance: a profile with an OpenAI-compatible
/// model, and a streamed turn. (Callback tools on a profile made after Hermes started are not
/// offered to its first session: see `docs/runtimes.md`.)
#[tokio::test]
async fn the_real_hermes_runs_a_turn_behind_the_control_plane() {
    let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
    let (_, runtimes) = ctx.get("/v1/runtimes").await;
    let hermes = runtimes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "hermes")
        .unwrap();
    assert!(
        hermes["version"].as_str().unwrap().contains("0.19.0"),
        "{hermes}"
    );

    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "assistant"}))
        .await;
    let (turn, events) = ctx
        .turn(&iid, profile["id"].as_str().unwrap(), "hello real hermes")
        .await;
    assert_eq!(turn["state"], "completed", "{turn} {events:?}");
    assert_eq!(turn["output"], "You said: hello real hermes");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "message.delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "You said: hello real hermes");
    assert_eq!(
        model.authorizations().last().unwrap(),
        "Bearer sk-fake-0123456789",
        "the profile's model and key reached Hermes"
    );
    // Hermes's own log lands in the instance's runtime log.
    assert!(ctx.runtime_port(&iid).await > 0);
    // It does not say which runtime it is: taken for Hermes, with the whole catalog.
    let (_, caps) = ctx.get(&format!("/v1/instances/{iid}/capabilities")).await;
    assert_eq!(caps["runtime"], "hermes", "{caps}");
    let methods = caps["native_methods"].as_array().unwrap();
    assert!(methods.iter().any(|m| m == "reload.env"), "{caps}");
}

/// The control plane's count of live sessions open on runtimes (`edith_live_sessions`).
async fn live_sessions(ctx: &Ctx) -> f64 {
    crate::metrics::sample(&crate::metrics::scrape(ctx).await, "edith_live_sessions")
}

/// Waits up to 30 s for `live_sessions` to be `count`.
async fn live_sessions_become(ctx: &Ctx, count: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while live_sessions(ctx).await != count {
        assert!(
            std::time::Instant::now() < deadline,
            "live sessions: {} after 30 s, not {count}",
            live_sessions(ctx).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A live session no turn has used for `--live-session-idle` is closed on its runtime; the
/// session's next turn resumes its stored session.
#[tokio::test]
async fn an_idle_live_session_is_closed_and_the_next_turn_resumes_it() {
    let flags = ["--live-session-idle", "1"];
    let ctx = Ctx::serve_with(tempfile::tempdir().expect("temp dir"), &flags).await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    assert_eq!(ctx.turn_on(&turns, "hello").await["state"], "completed");
    let session_path = turns.trim_end_matches("/turns");
    let (_, session) = ctx.get(session_path).await;
    let native = session["native_session_id"].clone();
    assert!(native.is_string(), "{session}");

    live_sessions_become(&ctx, 0.0).await;
    // Closed on the runtime too: it lists no live session (its `session.active_list`).
    let rpc = format!("/v1/instances/{iid}/native/rpc");
    let active = json!({"method": "session.active_list", "params": {}}).to_string();
    let (status, listed) = ctx.post(&rpc, &active).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    let again = ctx.turn_on(&turns, "again").await;
    assert_eq!(again["state"], "completed", "{again}");
    assert_eq!(again["output"], "You said: again");
    let (_, session) = ctx.get(session_path).await;
    assert_eq!(
        session["native_session_id"], native,
        "the same stored session"
    );
}

/// The live sessions `session.active_list` shows on the instance's runtime, through a native call.
async fn active_live_sessions(ctx: &Ctx, iid: &str) -> Value {
    let rpc = format!("/v1/instances/{iid}/native/rpc");
    let active = json!({"method": "session.active_list", "params": {}}).to_string();
    let (status, listed) = ctx.post(&rpc, &active).await;
    assert_eq!(status, 200, "{listed}");
    listed["result"]["sessions"].clone()
}

/// A live session an application opened through a native call and then left unused is closed
/// on its runtime as the control plane's own are: nothing else would close it while the control
/// plane's connection, which the native calls share, stays open. One closed by a native call is
/// no longer counted.
#[tokio::test]
async fn a_live_session_a_native_call_opened_and_left_unused_is_closed() {
    let flags = ["--live-session-idle", "1"];
    let ctx = Ctx::serve_with(tempfile::tempdir().expect("temp dir"), &flags).await;
    let iid = ctx.ready_instance().await;
    let rpc = format!("/v1/instances/{iid}/native/rpc");
    let create = json!({"method": "session.create", "params": {}}).to_string();
    let (status, created) = ctx.post(&rpc, &create).await;
    assert_eq!(status, 200, "{created}");
    let sid = created["result"]["session_id"].as_str().unwrap().to_owned();

    live_sessions_become(&ctx, 0.0).await;
    assert_eq!(active_live_sessions(&ctx, &iid).await, json!([]));
    // Its next use finds it closed, as on a runtime that reaped it; the caller resumes it.
    let usage = json!({"method": "session.usage", "params": {"session_id": sid}}).to_string();
    let (status, refused) = ctx.post(&rpc, &usage).await;
    assert_ne!(status, 200, "{refused}");

    // Closed by the application: forgotten, nothing left to close.
    let (_, created) = ctx.post(&rpc, &create).await;
    let sid = created["result"]["session_id"].as_str().unwrap().to_owned();
    let close = json!({"method": "session.close", "params": {"session_id": sid}}).to_string();
    let (status, closed) = ctx.post(&rpc, &close).await;
    assert_eq!(status, 200, "{closed}");
    assert_eq!(live_sessions(&ctx).await, 0.0);
}

/// The processes the real Hermes runs for its live sessions (`tui_gateway.slash_worker`, one a
/// session) whose home is under `dir`.
fn slash_workers_under(dir: &std::path::Path) -> usize {
    testkit::processes_with_env_under("HERMES_HOME", dir)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains("slash_worker"))
        })
        .count()
}

/// Waits up to 30 s for the real Hermes's slash workers under `dir` to end.
async fn slash_workers_end(dir: &std::path::Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while slash_workers_under(dir) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A control plane that closes live sessions idle for 5 s, with a real Hermes `process`
/// instance and its profile `name` on the fake model (kept running while the test holds it).
async fn real_hermes_closing_idle_live_sessions(
    name: &str,
) -> (Ctx, testkit::FakeModel, String, Value) {
    let ctx = Ctx::start_from(|config| {
        config.limits.live_session_idle = Duration::from_secs(5);
        config.runtimes.insert("hermes".to_owned(), real_hermes());
    })
    .await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let profile = ctx.profile_on(&iid, &model, json!({"name": name})).await;
    (ctx, model, iid, profile)
}

/// On the real Hermes each live session runs a Python process of its own (about 50 MB), which
/// Hermes keeps while the control plane's connection is open: the idle live session's is gone
/// once the control plane closes it, and the next turn gets one again.
#[tokio::test]
async fn the_real_hermes_lets_an_idle_live_sessions_process_go_when_it_is_closed() {
    let (ctx, _model, iid, profile) = real_hermes_closing_idle_live_sessions("idler").await;
    let pid = profile["id"].as_str().unwrap();
    let (turn, _) = ctx.turn(&iid, pid, "hello").await;
    assert_eq!(turn["state"], "completed", "{turn}");
    let homes = ctx.dir.path();
    // Its worker runs while the live session is open (5 s after the turn, at least).
    assert!(
        slash_workers_under(homes) >= 1,
        "a worker for the live session"
    );

    live_sessions_become(&ctx, 0.0).await;
    slash_workers_end(homes).await;
    let (turn, _) = ctx.turn(&iid, pid, "again").await;
    assert_eq!(turn["state"], "completed", "{turn}");
    assert_eq!(turn["output"], "You said: again");
}

/// On the real Hermes, a live session opened through a native call runs a process of its own
/// as the control plane's do; left unused, it is closed and its process goes.
#[tokio::test]
async fn the_real_hermes_lets_a_native_calls_idle_live_sessions_process_go() {
    let (ctx, _model, iid, profile) = real_hermes_closing_idle_live_sessions("native").await;
    let rpc = format!("/v1/instances/{iid}/native/rpc");
    let create = json!({"method": "session.create", "params": {},
        "profile_id": profile["id"]});
    let (status, created) = ctx.post(&rpc, &create.to_string()).await;
    assert_eq!(status, 200, "{created}");
    let homes = ctx.dir.path();
    // Its worker runs while the live session is open (5 s after it opened, at least).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while slash_workers_under(homes) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no worker for the live session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    live_sessions_become(&ctx, 0.0).await;
    slash_workers_end(homes).await;
    assert_eq!(active_live_sessions(&ctx, &iid).await, json!([]));
}

/// A turn on a session whose live session runs a turn a native call started (the application
/// resumed the session's stored session through `/native/rpc`, which gives back the same live
/// session, and sent it a prompt): the runtime queues the turn's prompt behind that turn, which
/// it interrupts; the turn passes over that one's end and completes with its own answer. (Both
/// runtimes send the model a prompt the interrupt left unanswered together with the next:
/// `You said: <that prompt>` then a blank line, then `and now`.)
async fn a_turn_queued_behind_a_native_turn_completes_with_its_own_answer(runtime: &str) {
    // The native turn runs for seconds.
    let slow = SlowSession::start(runtime).await;
    let (rpc, live) = slow.resumed_natively().await;
    let SlowSession {
        ctx, model, turns, ..
    } = slow;
    let words = "one two three four five six seven eight nine ten eleven twelve";
    let submit = json!({"method": "prompt.submit",
        "params": {"session_id": live, "text": words}});
    let (status, submitted) = ctx.post(&rpc, &submit.to_string()).await;
    assert_eq!(status, 200, "{submitted}");
    assert_eq!(submitted["result"]["status"], "streaming", "{submitted}");
    // Running by then: its model call is made, so its `message.start` has gone out. (A turn
    // sent before that start goes out would take it for its own: not covered.)
    model_called_with(&model, words).await;

    let turn = ctx.turn_on(&turns, "and now").await;
    assert_eq!(turn["state"], "completed", "{turn}");
    let output = turn["output"].as_str().unwrap();
    assert!(
        output.starts_with("You said: ") && output.ends_with("and now"),
        "{turn}"
    );
}

/// A session that has had a turn, on a `process` instance of `runtime` whose model says a word
/// every 200 ms (a turn of a dozen words runs for seconds).
struct SlowSession {
    ctx: Ctx,
    model: testkit::FakeModel,
    iid: String,
    profile: Value,
    /// The session's turns.
    turns: String,
    /// The session, as read after its turn (its native session id known).
    session: Value,
}

impl SlowSession {
    async fn start(runtime: &str) -> Self {
        let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
        let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
            piece_delay: Duration::from_millis(200),
            ..Default::default()
        })
        .await;
        let iid = ctx.process_instance(runtime).await;
        let profile = ctx.profile_on(&iid, &model, json!({"name": "slow"})).await;
        let turns = ctx.new_session_turns(&iid, &profile).await;
        assert_eq!(ctx.turn_on(&turns, "hello").await["state"], "completed");
        let (_, session) = ctx.get(turns.trim_end_matches("/turns")).await;
        Self {
            ctx,
            model,
            iid,
            profile,
            turns,
            session,
        }
    }

    /// The session's stored session resumed through `/native/rpc`: that path, and the live
    /// session the runtime gave back (the session's own, as both runtimes give back one open).
    async fn resumed_natively(&self) -> (String, Value) {
        let rpc = format!("/v1/instances/{}/native/rpc", self.iid);
        let resume = json!({"method": "session.resume", "profile_id": self.profile["id"],
            "params": {"session_id": self.session["native_session_id"]}});
        let (status, resumed) = self.ctx.post(&rpc, &resume.to_string()).await;
        assert_eq!(status, 200, "{resumed}");
        (rpc, resumed["result"]["session_id"].clone())
    }
}

/// Waits (up to 30 s) until the fake model has been called with a prompt holding `words`.
async fn model_called_with(model: &testkit::FakeModel, words: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !model
        .streamed_requests()
        .iter()
        .any(|request| request.to_string().contains(words))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the model was never called with {words:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_turn_queued_behind_a_native_turn_completes_with_its_own_answer_on_our_runtime() {
    a_turn_queued_behind_a_native_turn_completes_with_its_own_answer("hermes-runtime").await;
}

#[tokio::test]
async fn a_turn_queued_behind_a_native_turn_completes_with_its_own_answer_on_the_real_hermes() {
    a_turn_queued_behind_a_native_turn_completes_with_its_own_answer("hermes").await;
}

/// Two control-plane sessions continuing one stored session: the runtime gives both the same
/// live session, which runs one turn at a time. A turn on the second waits, `queued`, while the
/// first's runs (sent at once, its prompt would interrupt that turn and take its events); a
/// cancel ends it at once and leaves the other turn alone; sent again, it runs once the first
/// has ended. Each turn ends with its own answer.
async fn turns_of_two_sessions_continuing_one_stored_session_take_turns(runtime: &str) {
    // The first session's turn runs for seconds.
    let SlowSession {
        ctx,
        model,
        iid,
        profile,
        turns: first,
        session,
    } = SlowSession::start(runtime).await;
    let sessions = format!(
        "/v1/instances/{iid}/profiles/{}/sessions",
        profile["id"].as_str().unwrap()
    );
    let body = json!({"resume_native_session_id": session["native_session_id"]});
    let (status, second) = ctx.post(&sessions, &body.to_string()).await;
    assert_eq!(status, 201, "{second}");
    let second = format!("{sessions}/{}/turns", second["id"].as_str().unwrap());
    // Its live session open too: the runtime's, shared.
    assert_eq!(ctx.turn_on(&second, "hi").await["state"], "completed");

    let words = "one two three four five six seven eight nine ten eleven twelve";
    let (status, long) = ctx.post(&first, &json!({"input": words}).to_string()).await;
    assert_eq!(status, 202, "{long}");
    let long = format!("{first}/{}", long["id"].as_str().unwrap());
    // Running by then: its model call is made.
    model_called_with(&model, words).await;

    let waiting = |input: &str| json!({"input": input}).to_string();
    let (status, cancelled) = ctx.post(&second, &waiting("never mind")).await;
    assert_eq!(status, 202, "{cancelled}");
    let cancelled = format!("{second}/{}", cancelled["id"].as_str().unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ctx.get(&cancelled).await.1["state"], "queued");
    ctx.cancel_turn(&cancelled).await;
    let (_, ended) = ctx.get(&cancelled).await;
    assert_eq!(ended["state"], "cancelled", "{ended}");
    assert_eq!(ctx.get(&long).await.1["state"], "running", "left alone");

    let (status, after) = ctx.post(&second, &waiting("and now")).await;
    assert_eq!(status, 202, "{after}");
    let after = format!("{second}/{}", after["id"].as_str().unwrap());
    let long = ctx.sse(&format!("{long}/events"), None).await;
    let long = long.last().unwrap();
    assert_eq!(long["state"], "completed", "{long}");
    assert_eq!(long["output"], format!("You said: {words}"), "{long}");
    let after = ctx.sse(&format!("{after}/events"), None).await;
    let after = after.last().unwrap();
    assert_eq!(after["state"], "completed", "{after}");
    assert_eq!(after["output"], "You said: and now", "{after}");
    let prompts: Vec<String> = model
        .streamed_requests()
        .iter()
        .map(|request| request.to_string())
        .collect();
    assert!(
        !prompts.iter().any(|prompt| prompt.contains("never mind")),
        "the cancelled turn's prompt never reached the runtime: {prompts:?}"
    );
}

#[tokio::test]
async fn turns_of_two_sessions_continuing_one_stored_session_take_turns_on_our_runtime() {
    turns_of_two_sessions_continuing_one_stored_session_take_turns("hermes-runtime").await;
}

#[tokio::test]
async fn turns_of_two_sessions_continuing_one_stored_session_take_turns_on_the_real_hermes() {
    turns_of_two_sessions_continuing_one_stored_session_take_turns("hermes").await;
}

/// A native `session.close` of the live session a control-plane turn runs on is refused: a
/// runtime sends nothing more of a session it closed, not even the end of its turn (both
/// runtimes: conformance `turns::a_session_closed_mid_turn_sends_nothing_more`), so the turn would
/// wait out its silence limit. Once the turn has ended the close goes through, and the session's
/// next turn resumes its stored session.
#[tokio::test]
async fn a_native_close_of_a_live_session_a_turn_runs_on_is_refused_while_it_runs() {
    let slow = SlowSession::start("hermes-runtime").await;
    let (rpc, live) = slow.resumed_natively().await;
    let SlowSession {
        ctx, model, turns, ..
    } = slow;
    let close = json!({"method": "session.close", "params": {"session_id": live}}).to_string();

    let words = "one two three four five six";
    let (status, turn) = ctx.post(&turns, &json!({"input": words}).to_string()).await;
    assert_eq!(status, 202, "{turn}");
    let turn = format!("{turns}/{}", turn["id"].as_str().unwrap());
    model_called_with(&model, words).await;
    let refused = ctx.post(&rpc, &close).await;
    assert_problem(&refused, 409, "conflict");
    let ended = ctx.sse(&format!("{turn}/events"), None).await;
    let ended = ended.last().unwrap();
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["output"], format!("You said: {words}"), "{ended}");

    let (status, closed) = ctx.post(&rpc, &close).await;
    assert_eq!(status, 200, "{closed}");
    assert_eq!(closed["result"]["closed"], true, "{closed}");
    let next = ctx.turn_on(&turns, "again").await;
    assert_eq!(next["state"], "completed", "{next}");
}

/// Turns sent on one session the moment the one before ended: the real Hermes is not done with a
/// turn when it sends its `message.complete` (it writes the session's title, say), and a prompt
/// sent then is answered `queued` with nothing left to pass over; each turn still ends with its
/// own answer.
#[tokio::test]
async fn the_real_hermes_takes_turns_sent_the_moment_the_last_one_ended() {
    let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let profile = ctx.profile_on(&iid, &model, json!({"name": "quick"})).await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    for n in 0..4 {
        let input = format!("turn {n}");
        let turn = ctx.turn_on(&turns, &input).await;
        assert_eq!(turn["state"], "completed", "{turn}");
        assert_eq!(turn["output"], format!("You said: {input}"), "{turn}");
    }
}

/// Someone else's runtime: our `hermes-runtime` started by the test, not by the control plane.
/// Our runtime, run as someone else would: on `port` (0: any free one).
async fn someone_elses_runtime(
    home: &std::path::Path,
    token: &str,
    port: u16,
) -> testkit::ReadyProcess {
    let ours = &edith_server::builtin_runtimes()[edith_server::BUILTIN_RUNTIME];
    let mut command = tokio::process::Command::new(&ours.program);
    let port = port.to_string();
    command
        .args(["serve", "--host", "127.0.0.1", "--port", &port])
        .env("HERMES_HOME", home)
        .env("HERMES_DASHBOARD_SESSION_TOKEN", token);
    testkit::ReadyProcess::spawn(
        command,
        "HERMES_BACKEND_READY port=",
        Duration::from_secs(30),
    )
    .await
}

#[tokio::test]
async fn an_external_runtime_is_used_as_it_is_and_only_forgotten_on_delete() {
    const TOKEN: &str = "someone-elses-token-0123456789";
    let ctx = Ctx::start().await;
    let home = tempfile::tempdir().expect("temp dir");
    let runtime = someone_elses_runtime(home.path(), TOKEN, 0).await;
    let port = runtime.ready_value("port");
    let url = format!("http://127.0.0.1:{port}");

    let body = json!({"name": "theirs", "provider": "external", "url": url, "token": TOKEN});
    // It makes the control plane connect where the URL says: an admin's call.
    let writer = crate::client_with_key(&ctx.key_with("write").await);
    let refused = ctx
        .send_with(
            &writer,
            reqwest::Method::POST,
            "/v1/instances",
            Some(&body.to_string()),
        )
        .await;
    assert_problem(&refused, 403, "forbidden");
    let (status, created) = ctx.post("/v1/instances", &body.to_string()).await;
    assert_eq!(status, 202, "{created}");
    let iid = created["instance"]["id"].as_str().unwrap().to_owned();
    let job = created["job"]["id"].as_str().unwrap();
    let events = ctx.sse(&format!("/v1/jobs/{job}/events"), None).await;
    assert_eq!(
        events.last().unwrap()["instance_state"],
        "ready",
        "{events:?}"
    );
    let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
    assert_eq!(instance["url"], url.as_str());

    // Its configuration is its owner's: a profile can use it, not change it.
    let profiles = format!("/v1/instances/{iid}/profiles");
    let refused = ctx
        .post(
            &profiles,
            r#"{"name": "default", "model": {"provider": "scripted"}}"#,
        )
        .await;
    assert_problem(&refused, 400, "invalid_request");
    let (status, profile) = ctx.post(&profiles, r#"{"name": "default"}"#).await;
    assert_eq!(status, 201, "{profile}");
    assert_eq!(profile["model"], json!({"provider": "runtime"}));
    assert!(
        !home.path().join("config.yaml").exists(),
        "nothing was written there"
    );
    let (turn, _) = ctx
        .turn(&iid, profile["id"].as_str().unwrap(), "hello theirs")
        .await;
    assert_eq!(turn["state"], "completed", "{turn}");
    assert_eq!(turn["output"], "You said: hello theirs");

    for reply in [&created, &instance, &profile, &turn] {
        assert!(!reply.to_string().contains(TOKEN), "{reply}");
    }
    ctx.delete_instance_and_wait(&iid).await;
    let port: u16 = port.parse().unwrap();
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok(),
        "the runtime is still there: deleting only forgets it"
    );
    runtime.stop(Duration::from_secs(10)).await;
}

/// The token of the runtimes the tests below run as someone else would.
const THEIR_TOKEN: &str = "someone-elses-token-0123456789";

/// Our runtime run as someone else would, on any free port, and attached as an `external`
/// instance; the runtime, its port and the instance's id.
async fn attached_runtime(
    ctx: &Ctx,
    home: &std::path::Path,
) -> (testkit::ReadyProcess, u16, String) {
    let runtime = someone_elses_runtime(home, THEIR_TOKEN, 0).await;
    let port: u16 = runtime.ready_value("port").parse().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let body = json!({"name": "theirs", "provider": "external", "url": url, "token": THEIR_TOKEN});
    let iid = ctx.instance_from(body).await;
    (runtime, port, iid)
}

/// An `external` runtime that goes away is noticed through its gateway connection: its instance
/// turns `lost` saying so, new work is refused, and it is `ready` again once the runtime
/// answers again, its sessions going on.
#[tokio::test]
async fn an_external_runtime_that_goes_away_is_lost_and_ready_again_once_it_is_back() {
    let ctx = Ctx::start().await;
    let home = tempfile::tempdir().expect("temp dir");
    let (runtime, port, iid) = attached_runtime(&ctx, home.path()).await;
    let profiles = format!("/v1/instances/{iid}/profiles");
    let (_, profile) = ctx.post(&profiles, r#"{"name": "default"}"#).await;
    let sessions = format!("{profiles}/{}/sessions", profile["id"].as_str().unwrap());
    let (_, session) = ctx.post(&sessions, "{}").await;
    let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    assert_eq!(ctx.turn_on(&turns, "hello").await["state"], "completed");

    // Its owner stops it, with nothing sent to it meanwhile.
    runtime.stop(Duration::from_secs(10)).await;
    let instance = instance_becomes(&ctx, &iid, "lost", 30).await;
    let reason = instance["state_reason"].as_str().unwrap();
    assert!(reason.contains("gateway"), "{instance}");
    let refused = ctx.post(&turns, r#"{"input": "anyone there?"}"#).await;
    assert_problem(&refused, 409, "instance_not_ready");

    // Back where it was: the instance is ready again, and the session goes on.
    let runtime = someone_elses_runtime(home.path(), THEIR_TOKEN, port).await;
    let instance = instance_becomes(&ctx, &iid, "ready", 30).await;
    let reason = instance["state_reason"].as_str().unwrap();
    assert!(reason.contains("answers again"), "{instance}");
    assert_eq!(ctx.turn_on(&turns, "again").await["state"], "completed");
    runtime.stop(Duration::from_secs(10)).await;
}

/// A control plane that starts again watches the `external` runtimes it takes from then on: one
/// that went away while it was down is found `lost` with nothing using it, and is `ready` again
/// once it answers.
#[tokio::test]
async fn an_external_runtime_gone_while_the_control_plane_was_down_is_found_lost_unused() {
    let ctx = Ctx::serve(tempfile::tempdir().expect("temp dir")).await;
    let home = tempfile::tempdir().expect("temp dir");
    let (runtime, port, iid) = attached_runtime(&ctx, home.path()).await;
    let dir = ctx.crash().await;
    runtime.stop(Duration::from_secs(10)).await;

    let ctx = Ctx::serve(dir).await;
    let instance = instance_becomes(&ctx, &iid, "lost", 30).await;
    let reason = instance["state_reason"].as_str().unwrap();
    assert!(reason.contains("took no connection"), "{instance}");
    let runtime = someone_elses_runtime(home.path(), THEIR_TOKEN, port).await;
    instance_becomes(&ctx, &iid, "ready", 30).await;
    runtime.stop(Duration::from_secs(10)).await;
}

/// A runtime that hangs (stopped, its socket left open) is noticed by the gateway connection's
/// heartbeat, which closes the connection; one that cannot be opened again makes the instance
/// `lost`. Once the runtime goes on, the instance is `ready` again.
#[tokio::test]
async fn an_external_runtime_that_hangs_is_lost_and_ready_again_once_it_goes_on() {
    let ctx = Ctx::start().await;
    let home = tempfile::tempdir().expect("temp dir");
    let (runtime, _, iid) = attached_runtime(&ctx, home.path()).await;
    let (_, profile) = ctx
        .post(
            &format!("/v1/instances/{iid}/profiles"),
            r#"{"name": "default"}"#,
        )
        .await;
    let pid = profile["id"].as_str().unwrap();
    assert_eq!(ctx.turn(&iid, pid, "hello").await.0["state"], "completed");

    let process = rustix::process::Pid::from_raw(runtime.pid() as i32).expect("a pid");
    rustix::process::kill_process(process, rustix::process::Signal::STOP).expect("stopped");
    // 20 s of silence at most, pinged every 5 s, then 2 s to connect again.
    let instance = instance_becomes(&ctx, &iid, "lost", 60).await;
    let reason = instance["state_reason"].as_str().unwrap();
    assert!(reason.contains("gateway"), "{instance}");

    rustix::process::kill_process(process, rustix::process::Signal::CONT).expect("continued");
    instance_becomes(&ctx, &iid, "ready", 30).await;
    assert_eq!(ctx.turn(&iid, pid, "again").await.0["state"], "completed");
    runtime.stop(Duration::from_secs(10)).await;
}

/// When process `pid` started (`/proc/<pid>/stat`, field 22), while there is one: with the pid,
/// it names one process, whatever gets the pid later.
fn started_at(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name, in parentheses, field 3 comes first.
    let fields = &stat[stat.rfind(')')? + 1..];
    fields.split_whitespace().nth(19).map(str::to_owned)
}

/// The instance once it is in `state`; fails after `seconds` (the reconciler looks every
/// 500 ms, and tries a lost `external` runtime again every 5 s).
async fn instance_becomes(ctx: &Ctx, iid: &str, state: &str, seconds: u64) -> Value {
    ctx.instance_within(iid, seconds, |i| i["state"] == state)
        .await
}

/// A `process` runtime that hangs is found by its gateway connection's heartbeat: its instance
/// is lost saying so, the hung process is stopped (SIGKILL after the grace, as it cannot act on
/// SIGTERM), and the restart policy brings a new one, on which the session goes on.
#[tokio::test]
async fn a_process_runtime_that_hangs_is_stopped_and_restarted_by_its_policy() {
    let ctx = Ctx::start().await;
    let body = json!({"name": "hangs", "provider": "process", "runtime": "hermes-runtime",
        "restart_policy": "on_failure", "max_restarts": 1});
    let iid = ctx.instance_from(body).await;
    let turns = ctx.turns_path(&iid).await;
    assert_eq!(ctx.turn_on(&turns, "hello").await["state"], "completed");
    let hung: i32 = ctx.runtime_pid(&iid).await.unwrap().parse().unwrap();
    let hung_since = started_at(hung).expect("it runs");
    let process = rustix::process::Pid::from_raw(hung).expect("a pid");
    rustix::process::kill_process(process, rustix::process::Signal::STOP).expect("stopped");
    // 20 to 25 s of silence, 2 s to connect again, 10 s of grace, 1 s before the restart.
    let restarted = ctx
        .instance_within(&iid, 90, |i| i["restarts"] == 1 && i["state"] == "ready")
        .await;
    let reason = restarted["state_reason"].as_str().unwrap();
    assert!(reason.contains("gateway"), "{restarted}");
    let now: i32 = ctx.runtime_pid(&iid).await.unwrap().parse().unwrap();
    assert_ne!(now, hung, "a new runtime");
    assert_ne!(started_at(hung), Some(hung_since), "the hung one is gone");
    assert_eq!(ctx.turn_on(&turns, "again").await["state"], "completed");
}

#[tokio::test]
async fn external_instances_need_a_plain_url_and_a_token() {
    let ctx = Ctx::start().await;
    for body in [
        json!({"name": "x", "provider": "external", "url": "http://127.0.0.1:1"}),
        json!({"name": "x", "provider": "external", "token": "0123456789"}),
        json!({"name": "x", "provider": "external", "url": "https://h:1", "token": "0123456789"}),
        json!({"name": "x", "provider": "external", "url": "http://h:1", "token": "short"}),
        json!({"name": "x", "url": "http://h:1", "token": "0123456789"}),
    ] {
        assert_problem(
            &ctx.post("/v1/instances", &body.to_string()).await,
            400,
            "invalid_request",
        );
    }
    // Unreachable: the provisioning job fails and says why.
    let body = json!({"name": "gone", "provider": "external", "url": "http://127.0.0.1:9", "token": "0123456789"});
    let (_, created) = ctx.post("/v1/instances", &body.to_string()).await;
    let job = created["job"]["id"].as_str().unwrap();
    let events = ctx.sse(&format!("/v1/jobs/{job}/events"), None).await;
    let last = events.last().unwrap();
    assert_eq!(last["instance_state"], "failed", "{events:?}");
    assert!(
        last["error"].as_str().unwrap().contains("connect_gateway"),
        "{last}"
    );
}

#[tokio::test]
async fn a_runtime_that_dies_is_noticed_and_its_turn_ends_saying_why() {
    let ctx = Ctx::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let turns = ctx.turns_path(&iid).await;
    // A turn that waits for an approval: it is in flight when the runtime dies.
    let input = r#"{"input": "terminal {\"command\": \"rm -rf /tmp/edith-reconciler-nothing\"}"}"#;
    let (_, turn) = ctx.post(&turns, input).await;
    let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    for _ in 0..200 {
        if ctx.get(&turn_path).await.1["state"] == "requires_action" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // Killed behind the control plane's back.
    ctx.kill_runtime(&iid).await;

    let events = ctx.sse(&format!("{turn_path}/events"), None).await;
    let finished = events.last().unwrap();
    assert_eq!(finished["state"], "failed", "{events:?}");
    assert!(
        finished["error"]
            .as_str()
            .unwrap()
            .contains("runtime exited"),
        "{finished}"
    );
    let (_, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
    assert_eq!(instance["state"], "lost", "{instance}");
    assert!(
        instance["state_reason"]
            .as_str()
            .unwrap()
            .contains("exited")
    );
    // New work is refused until it is dealt with; deleting it works.
    let refused = ctx.post(&turns, r#"{"input": "once more"}"#).await;
    assert_problem(&refused, 409, "instance_not_ready");
    let (status, _) = ctx
        .send(
            reqwest::Method::DELETE,
            &format!("/v1/instances/{iid}"),
            None,
        )
        .await;
    assert_eq!(status, 202);
}

/// The real Hermes killed in the middle of a turn: its sockets close a moment before its exit
/// can be seen (a large process takes tens of milliseconds to end), and the turn still says that
/// the runtime exited, not merely that its connection was lost.
#[tokio::test]
async fn the_real_hermes_killed_during_a_turn_ends_it_saying_the_runtime_exited() {
    let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "victim"}))
        .await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    // `SLOW`: the fake model streams for 6 s.
    let (_, turn) = ctx.post(&turns, r#"{"input": "SLOW"}"#).await;
    let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    let mut stream = ctx
        .http
        .get(ctx.url(&format!("{turn_path}/events")))
        .send()
        .await
        .unwrap();
    // Killed once the answer streams, well before its end.
    let mut text = String::new();
    let streaming = tokio::time::timeout(Duration::from_secs(60), async {
        while !text.contains("event: message.delta") {
            let chunk = stream.chunk().await.unwrap().expect("the turn goes on");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    });
    streaming.await.expect("the answer streams within a minute");

    ctx.kill_runtime(&iid).await;

    let events = ctx.sse(&format!("{turn_path}/events"), None).await;
    let finished = events.last().unwrap();
    assert_eq!(finished["state"], "failed", "{events:?}");
    let error = finished["error"].as_str().unwrap();
    assert!(error.contains("runtime exited"), "{finished}");
    let instance = ctx.instance_when(&iid, |i| i["state"] == "lost").await;
    assert!(
        instance["state_reason"]
            .as_str()
            .unwrap()
            .contains("exited"),
        "{instance}"
    );
}

impl Ctx {
    /// The instance, once `done` says so of it (bounded: 30 s).
    pub(crate) async fn instance_when(&self, iid: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.instance_within(iid, 30, done).await
    }

    /// The instance once `done` holds for it; fails after `seconds`.
    pub(crate) async fn instance_within(
        &self,
        iid: &str,
        seconds: u64,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut instance = Value::Null;
        for _ in 0..seconds * 10 {
            instance = self.get(&format!("/v1/instances/{iid}")).await.1;
            if done(&instance) {
                return instance;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("not there within {seconds} s: {instance}");
    }

    /// Runs a turn with `input` on the session whose turns are at `turns`; its last event.
    pub(crate) async fn turn_on(&self, turns: &str, input: &str) -> Value {
        let body = json!({"input": input}).to_string();
        let (status, turn) = self.post(turns, &body).await;
        assert_eq!(status, 202, "{turn}");
        let path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
        self.sse(&path, None).await.pop().expect("a final event")
    }
}

#[tokio::test]
async fn an_on_failure_instance_gets_its_runtime_back_until_its_limit_and_sessions_go_on() {
    let ctx = Ctx::start().await;
    let iid = ctx
        .instance_from(json!({
            "name": "restarted", "provider": "process", "runtime": "hermes-runtime",
            "restart_policy": "on_failure", "max_restarts": 2
        }))
        .await;
    let turns = ctx.turns_path(&iid).await;
    let session_path = turns.trim_end_matches("/turns").to_owned();
    let finished = ctx.turn_on(&turns, "before").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let native = ctx.get(&session_path).await.1["native_session_id"].clone();
    assert!(native.is_string());

    for restart in 1..=2 {
        ctx.kill_runtime(&iid).await;
        let instance = ctx
            .instance_when(&iid, |i| i["restarts"] == restart && i["state"] == "ready")
            .await;
        let reason = instance["state_reason"].as_str().unwrap();
        assert!(reason.starts_with("restarted"), "{instance}");
        assert!(
            reason.contains("signal: 9"),
            "says what happened: {instance}"
        );
        // The session goes on, on its stored native session, in the new runtime.
        let finished = ctx.turn_on(&turns, "after").await;
        assert_eq!(finished["state"], "completed", "{finished}");
        assert_eq!(finished["output"], "You said: after");
        assert_eq!(ctx.get(&session_path).await.1["native_session_id"], native);
    }

    // A third exit in a row is past the limit: the instance stays lost.
    ctx.kill_runtime(&iid).await;
    let instance = ctx
        .instance_when(&iid, |i| {
            i["state_reason"]
                .as_str()
                .is_some_and(|r| r.contains("not restarted"))
        })
        .await;
    assert_eq!(instance["state"], "lost", "{instance}");
    assert!(
        instance["state_reason"]
            .as_str()
            .unwrap()
            .contains("2 restarts in a row"),
        "{instance}"
    );
    ctx.delete_instance_and_wait(&iid).await;
}

#[tokio::test]
async fn restart_policies_are_checked() {
    let ctx = Ctx::start().await;
    let refused = |body: Value| {
        let ctx = &ctx;
        async move {
            let response = ctx.post("/v1/instances", &body.to_string()).await;
            assert_problem(&response, 400, "invalid_request");
            response.1["detail"].as_str().unwrap().to_owned()
        }
    };
    let embedded = refused(json!({"name": "e", "restart_policy": "on_failure"})).await;
    assert!(embedded.contains("only for `process`"), "{embedded}");
    let process = json!({"name": "p", "provider": "process", "runtime": "hermes-runtime"});
    let mut without_policy = process.clone();
    without_policy["max_restarts"] = json!(2);
    let detail = refused(without_policy).await;
    assert!(detail.contains("only for the `on_failure`"), "{detail}");
    for max in [0, 101] {
        let mut body = process.clone();
        body["restart_policy"] = json!("on_failure");
        body["max_restarts"] = json!(max);
        let detail = refused(body).await;
        assert!(detail.contains("1 to 100"), "{detail}");
    }
    let mut unknown = process.clone();
    unknown["restart_policy"] = json!("always");
    let response = ctx.post("/v1/instances", &unknown.to_string()).await;
    assert_problem(&response, 400, "invalid_body");

    // Absent, the limit is 3; `never` is the default.
    let mut body = process.clone();
    body["restart_policy"] = json!("on_failure");
    let (status, created) = ctx.post("/v1/instances", &body.to_string()).await;
    assert_eq!(status, 202, "{created}");
    assert_eq!(created["instance"]["max_restarts"], 3);
    assert_eq!(created["instance"]["restarts"], 0);
    let (_, plain) = ctx.post("/v1/instances", r#"{"name": "plain"}"#).await;
    assert_eq!(plain["instance"]["restart_policy"], "never");
}

#[tokio::test]
async fn an_idle_runtime_that_dies_turns_its_instance_lost() {
    let ctx = Ctx::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    // A session that ran turns before: the control plane may know its path by heart (its first
    // turn recorded its native session; the second read the path after that).
    let turns = ctx.turns_path(&iid).await;
    for input in ["hello", "again"] {
        assert_eq!(ctx.turn_on(&turns, input).await["state"], "completed");
    }
    ctx.kill_runtime(&iid).await;
    let mut instance = Value::Null;
    for _ in 0..100 {
        instance = ctx.get(&format!("/v1/instances/{iid}")).await.1;
        if instance["state"] == "lost" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        instance["state"], "lost",
        "noticed without any traffic: {instance}"
    );
    assert!(
        instance["state_reason"]
            .as_str()
            .unwrap()
            .contains("signal: 9"),
        "{instance}"
    );
    // A turn on it now is refused, and the runtime is not started again for it.
    let refused = ctx.post(&turns, r#"{"input": "once more"}"#).await;
    assert_problem(&refused, 409, "instance_not_ready");
    let (_, log) = ctx.get(&format!("/v1/instances/{iid}/log")).await;
    let starts = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|line| {
            line.as_str()
                .is_some_and(|l| l.starts_with("edith: started the runtime"))
        })
        .count();
    assert_eq!(starts, 1, "{log}");
}

/// The control plane's admin key never reaches a runtime it starts.
#[tokio::test]
async fn a_runtime_the_control_plane_starts_does_not_inherit_its_admin_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let process = crate::edith_serve(dir.path(), "127.0.0.1:0", &[], Some(crate::ADMIN_KEY)).await;
    let url = process.ready_value("url");
    let admin = crate::client_with_key(crate::ADMIN_KEY);
    let created: Value = admin
        .post(format!("{url}/v1/instances"))
        .json(&json!({"name": "p", "provider": "process", "runtime": "hermes-runtime"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let iid = created["instance"]["id"].as_str().unwrap().to_owned();
    let mut pid = None;
    for _ in 0..200 {
        let log: Value = admin
            .get(format!("{url}/v1/instances/{iid}/log"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        pid = log["lines"].as_array().and_then(|lines| {
            lines.iter().find_map(|line| {
                line.as_str()?
                    .strip_prefix(edith_server::RUNTIME_STARTED)
                    .map(|p| p.trim().to_owned())
            })
        });
        if pid.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = pid.expect("the runtime started");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("its environment");
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("HERMES_HOME="), "the environment was read");
    assert!(
        !environ.contains(crate::ADMIN_KEY),
        "the admin key reached the runtime"
    );
    process.stop(Duration::from_secs(10)).await;
}

/// The real Hermes as a `process` instance, with a profile `name` on the fake model offering the
/// test's `echo` callback tool: the control plane, the model, the instance's id, the profile.
async fn real_hermes_profile_with_echo(name: &str) -> (Ctx, testkit::FakeModel, String, Value) {
    let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance("hermes").await;
    let tool = ctx.echo_tool().await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": name, "tools": [tool]}))
        .await;
    (ctx, model, iid, profile)
}

/// A callback tool on the real Hermes: 0.19 offers only the root (`default`) profile's MCP
/// tools, read when it starts, so the control plane restarts the runtime when that profile's
/// tools change (see `docs/runtimes.md`).
#[tokio::test]
async fn the_real_hermes_calls_a_callback_tool_of_the_default_profile() {
    let (ctx, _model, iid, profile) = real_hermes_profile_with_echo("default").await;
    let pid = profile["id"].as_str().unwrap();
    let (turn, events) = ctx.turn(&iid, pid, r#"CALL echo {"text": "hi"}"#).await;
    assert_eq!(turn["state"], "completed", "{turn} {events:?}");
    let completed = events
        .iter()
        .find(|e| e["type"] == "tool.completed")
        .unwrap_or_else(|| panic!("the tool was called: {events:?}"));
    // Named as the application registered it, as on our runtime.
    assert_eq!(completed["name"], "echo", "{completed}");
    assert_eq!(completed["result"], "hi", "{completed}");
    assert_eq!(turn["output"], r#"Tool result: {"result": "hi"}"#);
}

/// What `docs/runtimes.md` states of named profiles on the real Hermes 0.19: the control plane
/// writes the profile's `mcp_servers` (its tool relay), but Hermes offers the model only the root
/// profile's MCP tools, so a named profile's callback tool is never offered, and the turn goes on
/// without it. When a later Hermes offers them, this test fails and the docs need changing.
#[tokio::test]
async fn the_real_hermes_does_not_offer_a_named_profiles_callback_tools() {
    let (ctx, model, iid, profile) = real_hermes_profile_with_echo("other").await;
    let native = profile["native_name"].as_str().unwrap();
    let config = (ctx.dir.path().join("instances").join(&iid))
        .join(format!("home/profiles/{native}/config.yaml"));
    let config = std::fs::read_to_string(&config).expect("the profile's config.yaml");
    assert!(config.contains("mcp_servers"), "{config}");
    let pid = profile["id"].as_str().unwrap();
    let (turn, events) = ctx.turn(&iid, pid, r#"CALL echo {"text": "hi"}"#).await;
    assert_eq!(turn["state"], "completed", "{turn} {events:?}");
    assert!(
        events.iter().all(|e| e["type"] != "tool.started"),
        "no tool was called: {events:?}"
    );
    let offered: Vec<String> = model
        .streamed_requests()
        .iter()
        .flat_map(|request| request["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(!offered.is_empty(), "Hermes's own tools are offered");
    assert!(
        offered.iter().all(|name| !name.ends_with("__echo")),
        "{offered:?}"
    );
}

impl Ctx {
    /// Makes the instance's `default` profile (scripted model); its id.
    async fn default_profile(&self, iid: &str) -> String {
        let path = format!("/v1/instances/{iid}/profiles");
        let (status, profile) = self.post(&path, r#"{"name": "default"}"#).await;
        assert_eq!(status, 201, "{profile}");
        profile["id"].as_str().unwrap().to_owned()
    }

    /// An `echo` tool served by a tool host of the test; its id.
    pub(crate) async fn echo_tool(&self) -> String {
        let secret = "0123456789abcdef";
        let url = crate::echo_tool_host(secret).await;
        let body = json!({"url": url, "secret": secret}).to_string();
        let (status, host) = self.post("/v1/tool-hosts", &body).await;
        assert_eq!(status, 201, "{host}");
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let body = json!({"name": "echo", "description": "Echoes its text",
            "input_schema": schema, "host_id": host["id"]});
        let (status, tool) = self.post("/v1/tools", &body.to_string()).await;
        assert_eq!(status, 201, "{tool}");
        tool["id"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn changing_the_default_profiles_tools_restarts_a_process_runtime_unless_turns_run() {
    let ctx = Ctx::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let tool = ctx.echo_tool().await;
    let before = ctx.runtime_pid(&iid).await;
    let pid = ctx.default_profile(&iid).await;
    // A turn waiting for an approval keeps the runtime busy: the change is refused.
    let sessions = format!("/v1/instances/{iid}/profiles/{pid}/sessions");
    let (_, session) = ctx.post(&sessions, "{}").await;
    let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    let input = r#"{"input": "terminal {\"command\": \"rm -rf /tmp/edith-restart-nothing\"}"}"#;
    let (_, turn) = ctx.post(&turns, input).await;
    let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    let mut waiting = false;
    for _ in 0..200 {
        if ctx.get(&turn_path).await.1["state"] == "requires_action" {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(waiting, "the turn waits for an approval");
    assert_ne!(
        ctx.runtime_pid(&iid).await,
        before,
        "made the default profile: restarted"
    );
    let attach = format!("/v1/instances/{iid}/profiles/{pid}/tools/{tool}");
    let busy = ctx.send(reqwest::Method::PUT, &attach, None).await;
    assert_problem(&busy, 409, "conflict");
    assert!(
        busy.1["detail"]
            .as_str()
            .unwrap()
            .contains("turns are running")
    );
    ctx.post(&format!("{turn_path}/cancel"), "{}").await;
    ctx.sse(&format!("{turn_path}/events"), None).await;
    let running = ctx.runtime_pid(&iid).await;
    let (status, attached) = ctx.send(reqwest::Method::PUT, &attach, None).await;
    assert_eq!(status, 200, "{attached}");
    // The next turn runs on a fresh runtime that read the new configuration.
    let finished = ctx.turn_on(&turns, "after").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    assert_ne!(ctx.runtime_pid(&iid).await, running);
}

/// A change of the `default` profile's tools and a turn started at the same moment: the change
/// either sees the turn and is refused, or restarts the runtime before the turn is stored.
/// Never is the turn stored after the change looked for running turns and then cut short by
/// the restart. (On two threads: on one, the test and the in-process control plane would take
/// turns, and the two requests never meet.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_started_beside_a_restarting_change_is_refused_by_it_or_runs_after_it() {
    let ctx = Ctx::start().await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let tool = ctx.echo_tool().await;
    let pid = ctx.default_profile(&iid).await;
    let (_, session) = ctx
        .post(
            &format!("/v1/instances/{iid}/profiles/{pid}/sessions"),
            "{}",
        )
        .await;
    let turns = format!(
        "/v1/instances/{iid}/profiles/{pid}/sessions/{}/turns",
        session["id"].as_str().unwrap()
    );
    let attachment = format!("/v1/instances/{iid}/profiles/{pid}/tools/{tool}");
    // Long enough for a restart to cut it short.
    let input = json!({"input": r#"terminal {"command": "sleep 0.2"}"#}).to_string();
    let mut restarted = 0;
    // Each side on a connection of its own, open before the round: neither waits for the
    // other's or for a connection to be made.
    let changes = crate::client_with_key(crate::ADMIN_KEY);
    let instance = format!("/v1/instances/{iid}");
    let warmed = ctx.send_with(&changes, reqwest::Method::GET, &instance, None);
    assert_eq!(warmed.await.0, 200);
    const ROUNDS: u64 = 24;
    for round in 0..ROUNDS {
        // Attached in even rounds, detached in odd ones.
        let method = || match round % 2 {
            0 => reqwest::Method::PUT,
            _ => reqwest::Method::DELETE,
        };
        // From the change sent 0.24 ms before the turn to 0.24 ms after it, in steps finer
        // than the timer's: the window that counts is a store read and write apart.
        let lead = Duration::from_micros(round.abs_diff(ROUNDS / 2) * 20);
        let (change_after, turn_after) = if round < ROUNDS / 2 {
            (Duration::ZERO, lead)
        } else {
            (lead, Duration::ZERO)
        };
        let change = async {
            spin(change_after).await;
            ctx.send_with(&changes, method(), &attachment, None).await
        };
        let turn = async {
            spin(turn_after).await;
            ctx.post(&turns, &input).await
        };
        let ((changed, detail), (status, turn)) = tokio::join!(change, turn);
        assert_eq!(status, 202, "{turn}");
        match changed {
            200 => restarted += 1,
            409 => {}
            other => panic!("round {round}: the change answered {other}: {detail}"),
        }
        let path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
        let last = ctx.sse(&path, None).await.pop().expect("a final event");
        assert_eq!(
            last["state"], "completed",
            "round {round}, the change answered {changed}: {last}"
        );
        if changed == 409 {
            // Refused: it is made now that nothing runs, for the next round to undo.
            let (status, detail) = ctx.send(method(), &attachment, None).await;
            assert_eq!(status, 200, "{detail}");
        }
    }
    assert!(
        restarted > 0,
        "no round restarted the runtime beside a turn"
    );
}

/// Lets `wait` pass without the timer's millisecond steps, yielding to other tasks meanwhile.
async fn spin(wait: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        tokio::task::yield_now().await;
    }
}

/// A conversation on a new session of the `default` profile of a new `runtime` instance, then
/// that stored native session listed, resumed through the control plane in a new session, and
/// a turn there that the model answers with the earlier conversation in front of it.
async fn resume_a_native_session(ctx: &Ctx, runtime: &str) {
    let model = testkit::FakeModel::start().await;
    let iid = ctx.process_instance(runtime).await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "default"}))
        .await;
    let pid = profile["id"].as_str().unwrap();
    let sessions = format!("/v1/instances/{iid}/profiles/{pid}/sessions");
    let (_, first) = ctx.post(&sessions, "{}").await;
    let first_turns = format!("{sessions}/{}/turns", first["id"].as_str().unwrap());
    let finished = ctx.turn_on(&first_turns, "my name is Ada").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let (_, first) = ctx
        .get(&format!("{sessions}/{}", first["id"].as_str().unwrap()))
        .await;
    let native = first["native_session_id"].as_str().unwrap().to_owned();

    // The native list shows it.
    let native_list = async |profile: &Value| {
        let list = json!({"method": "session.list", "params": {}, "profile_id": profile});
        let (status, listed) = ctx
            .post(
                &format!("/v1/instances/{iid}/native/rpc"),
                &list.to_string(),
            )
            .await;
        assert_eq!(status, 200, "{listed}");
        listed
    };
    let listed = native_list(&profile["id"]).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(ids.contains(&native.as_str()), "{native} in {listed}");
    // Another profile's list is its own (Hermes 0.19's gateway lists only the root's: the
    // control plane reads a profile's from the runtime's Desktop route).
    let other = ctx.profile_on(&iid, &model, json!({"name": "other"})).await;
    let listed = native_list(&other["id"]).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");

    // Resumed in a new control-plane session: the next turn sees the earlier conversation.
    let body = json!({"resume_native_session_id": native}).to_string();
    let (status, resumed) = ctx.post(&sessions, &body).await;
    assert_eq!(status, 201, "{resumed}");
    assert_eq!(resumed["native_session_id"], native.as_str());
    let turns = format!("{sessions}/{}/turns", resumed["id"].as_str().unwrap());
    let finished = ctx.turn_on(&turns, "what is my name?").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let asked = model.streamed_requests().last().cloned().unwrap();
    let history = asked["messages"].to_string();
    assert!(
        history.contains("my name is Ada") && history.contains("what is my name?"),
        "the model saw the earlier conversation: {history}"
    );

    // Ids that are not a stored native session of this runtime are refused at once.
    let unknown = json!({"resume_native_session_id": "20200101_000000_abcdef"}).to_string();
    assert_problem(&ctx.post(&sessions, &unknown).await, 404, "not_found");
    let ours = json!({"resume_native_session_id": resumed["id"]}).to_string();
    let refused = ctx.post(&sessions, &ours).await;
    assert_problem(&refused, 400, "invalid_request");
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("a session id of the control plane"),
        "{}",
        refused.1
    );
}

#[tokio::test]
async fn a_stored_native_session_is_resumed_through_the_control_plane_on_our_runtime() {
    let ctx = Ctx::start().await;
    resume_a_native_session(&ctx, "hermes-runtime").await;
}

#[tokio::test]
async fn a_stored_native_session_is_resumed_through_the_control_plane_on_the_real_hermes() {
    let ctx = Ctx::start_with(BTreeMap::from([("hermes".to_owned(), real_hermes())])).await;
    resume_a_native_session(&ctx, "hermes").await;
}

#[tokio::test]
async fn a_runtimes_version_is_asked_once() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("asked");
    let script = format!(
        "echo asked >> {}; echo counted-runtime 1.0",
        count.display()
    );
    let counted = RuntimeCommand {
        program: PathBuf::from("sh"),
        args: vec!["-c".to_owned(), script, "sh".to_owned()],
    };
    let ctx = Ctx::start_with(BTreeMap::from([("counted".to_owned(), counted)])).await;
    for _ in 0..3 {
        let (status, runtimes) = ctx.get("/v1/runtimes").await;
        assert_eq!(status, 200);
        let counted = runtimes
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "counted")
            .unwrap()
            .clone();
        assert_eq!(counted["version"], "counted-runtime 1.0");
    }
    let asked = std::fs::read_to_string(&count).unwrap();
    assert_eq!(asked.lines().count(), 1, "{asked}");
}

#[tokio::test]
async fn the_operator_decides_where_external_runtimes_may_be() {
    let ctx = Ctx::start_from(|config| {
        config.external_hosts = Some(vec!["127.0.0.2".to_owned(), "127.0.0.1:9".to_owned()])
    })
    .await;
    let attach = |url: &str| {
        json!({"name": "x", "provider": "external", "url": url,
        "token": "0123456789abcdef"})
        .to_string()
    };
    let refused = ctx
        .post("/v1/instances", &attach("http://127.0.0.1:8000"))
        .await;
    assert_problem(&refused, 403, "forbidden");
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("--external-host")
    );
    for allowed in ["http://127.0.0.2:8000", "http://127.0.0.1:9"] {
        let (status, body) = ctx.post("/v1/instances", &attach(allowed)).await;
        assert_eq!(status, 202, "{allowed}: {body}");
    }
}
