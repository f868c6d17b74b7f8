//! `edith serve` on PostgreSQL (`EDITH_DATABASE_URL`): the same control plane, its data in the
//! database instead of `<data-dir>/edith.db`; killed and started again, it loses nothing; the
//! URL's password is never written out. (Several on one database: `replicas`.)

use std::time::Duration;

use serde_json::json;

use crate::Ctx;
use crate::crash::events_for;

/// `url` with a password in it (trust authentication, as tests use, ignores it), and that
/// password.
fn with_password(url: &str) -> (String, String) {
    let password = "pg-password-never-shown-0123".to_owned();
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, host) = rest.split_once('@').expect("a user in the URL");
    match user.split_once(':') {
        Some((_, given)) => (url.to_owned(), given.to_owned()),
        None => (format!("{scheme}://{user}:{password}@{host}"), password),
    }
}

/// `edith serve` on `dir` with its data in the database `url`.
async fn serve_on(dir: tempfile::TempDir, url: &str) -> Ctx {
    Ctx::serve_with_env(dir, &[], &[("EDITH_DATABASE_URL", url)]).await
}

#[tokio::test]
async fn on_postgres_a_killed_control_plane_loses_nothing_and_work_goes_on() {
    let database = testkit::postgres::database().await;
    let (url, password) = with_password(database.url());
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: Duration::from_millis(8),
        ..Default::default()
    })
    .await;
    let mut ctx = serve_on(tempfile::tempdir().expect("temp dir"), &url).await;
    let iid = ctx.ready_instance().await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "talker"}))
        .await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    let finished = ctx.turn_on(&turns, "hello").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let mut log = ctx.server_log();

    let long_input = (0..60)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cut_mid_stream = 0;
    for (round, kill_after_ms) in [150u64, 300, 450].into_iter().enumerate() {
        let body = json!({"input": long_input}).to_string();
        let (status, turn) = ctx.post(&turns, &body).await;
        assert_eq!(status, 202, "{turn}");
        let events_path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
        let seen = events_for(&ctx, &events_path, Duration::from_millis(kill_after_ms)).await;

        let dir = ctx.crash().await;
        ctx = serve_on(dir, &url).await;

        let after = events_for(&ctx, &events_path, Duration::from_secs(60)).await;
        assert!(
            after.len() >= seen.len() && after[..seen.len()] == seen[..],
            "round {round}: what was served before the kill is served again unchanged\n\
             before: {seen:?}\nafter: {after:?}"
        );
        let last = &after.last().expect("a final event").1;
        assert!(
            last["state"] == "completed" || last["state"] == "interrupted",
            "round {round}: the turn has an end: {last}"
        );
        cut_mid_stream += usize::from(!seen.is_empty() && last["state"] == "interrupted");
        let again = ctx.turn_on(&turns, "still there").await;
        assert_eq!(again["state"], "completed", "round {round}: {again}");
        log.extend(ctx.server_log());
    }
    // Half a second of streaming, killed 150 to 450 ms into it.
    assert!(cut_mid_stream >= 1, "the kills missed the streams");
    let (_, listed) = ctx.get(&format!("{turns}?limit=100")).await;
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        7,
        "every turn is kept: {listed}"
    );

    let dir = ctx.stop().await;
    assert!(
        !dir.path().join("edith.db").exists(),
        "nothing went to a SQLite file"
    );
    assert!(
        log.iter().all(|line| !line.contains(&password)),
        "the database password is never logged"
    );
}

/// `--database-url` does what `EDITH_DATABASE_URL` does, and wins over it.
#[tokio::test]
async fn the_database_may_be_named_by_a_flag() {
    let database = testkit::postgres::database().await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The environment names a database that cannot be reached: the flag's is used.
    let unreachable = [("EDITH_DATABASE_URL", "postgres://edith@127.0.0.1:1/edith")];
    let flag = ["--database-url", database.url()];
    let ctx = Ctx::serve_with_env(dir, &flag, &unreachable).await;
    let iid = ctx.ready_instance().await;
    let dir = ctx.stop().await;
    assert!(
        !dir.path().join("edith.db").exists(),
        "nothing went to a SQLite file"
    );

    // The instance is in that database: a control plane started on it by the environment
    // finds it.
    let ctx = serve_on(dir, database.url()).await;
    let (status, instance) = ctx.get(&format!("/v1/instances/{iid}")).await;
    assert_eq!(status, 200, "{instance}");
    assert_eq!(instance["id"], iid.as_str(), "{instance}");
    ctx.stop().await;
}

#[tokio::test]
async fn a_database_that_cannot_be_reached_is_said_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Nothing listens on port 1; the password must not be echoed in the error.
    let url = "postgres://edith:unreachable-secret@127.0.0.1:1/edith";
    let stderr = refused_at_start(&dir, url, &[]).await;
    assert!(stderr.contains("cannot open the store"), "{stderr}");
    assert!(!stderr.contains("unreachable-secret"), "{stderr}");

    let stderr = refused_at_start(&dir, "mysql://root@127.0.0.1/edith", &[]).await;
    assert!(stderr.contains("must start with postgres://"), "{stderr}");

    // SQLite's sync setting names no PostgreSQL setting: refused, not ignored.
    let url = "postgres://edith@127.0.0.1:1/edith";
    let stderr = refused_at_start(&dir, url, &["--sqlite-sync", "full"]).await;
    assert!(
        stderr.contains("applies to a SQLite database only"),
        "{stderr}"
    );
}

/// What `edith serve` with the database `url` and `extra` flags says as it fails to start,
/// within 30 s.
async fn refused_at_start(dir: &tempfile::TempDir, url: &str, extra: &[&str]) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(crate::edith_binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(extra)
            .env("EDITH_DATABASE_URL", url)
            .env_remove(edith_server::SQLITE_SYNC_VARIABLE)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("a database it cannot use is reported, not waited on")
    .expect("it runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{stderr}");
    stderr
}

/// The runtimes a control plane starts run agents and the commands they choose: they never get
/// the database URL or its password from its environment.
#[tokio::test]
async fn a_runtime_never_sees_the_database_url() {
    let database = testkit::postgres::database().await;
    let (url, password) = with_password(database.url());
    let ctx = serve_on(tempfile::tempdir().expect("temp dir"), &url).await;
    let iid = ctx.process_instance("hermes-runtime").await;
    let pid = ctx.runtime_pid(&iid).await.expect("a runtime pid");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("its environment");
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("HERMES_HOME="), "the environment was read");
    assert!(!environ.contains(edith_server::DATABASE_URL_VARIABLE));
    assert!(
        !environ.contains(&password),
        "the password reached the runtime"
    );
    ctx.stop().await;
}

/// The database refuses writes to turns for a while (a trigger stands in for an outage): the
/// driver writes a turn's end again until it is taken, rather than leaving the turn unfinished
/// until the control plane restarts; and while it does, the turn takes no answer.
#[tokio::test]
async fn a_turns_end_the_database_refused_for_a_while_is_written_once_it_takes_it() {
    let outage = Outage::start().await;
    let ctx = &outage.ctx;
    let turns = ctx.turns_path(&ctx.ready_instance().await).await;

    // Only the turn's end is refused: the cancel is seen, and the turn ends cancelled.
    let waiting = ctx.waiting_turn(&turns).await;
    let ends = "WHEN (NEW.state IN ('completed', 'failed', 'cancelled', 'interrupted'))";
    outage.refuse_updates_of_turns(ends).await;
    let (status, body) = ctx.post(&format!("{waiting}/cancel"), "{}").await;
    assert_eq!(status, 202, "{body}");
    outage.refused_at_least(1).await;
    let unfinished = ctx.get(&waiting).await.1;
    assert!(
        ["requires_action", "running"].contains(&unfinished["state"].as_str().unwrap()),
        "{unfinished}"
    );
    outage.end().await;
    let ended = ctx.ended(&waiting).await;
    assert_eq!(ended["state"], "cancelled", "{ended}");

    // Every write to turns is refused: the driver gives the turn up as failed, and while it
    // writes that end, the turn (still `requires_action` in the store) takes no answer.
    let waiting = ctx.waiting_turn(&turns).await;
    outage.refuse_updates_of_turns("").await;
    let before = outage.refusals();
    let (status, body) = ctx.post(&format!("{waiting}/cancel"), "{}").await;
    assert_eq!(status, 202, "{body}");
    outage.refused_at_least(before + 2).await;
    assert_eq!(ctx.get(&waiting).await.1["state"], "requires_action");
    let answer = json!({"type": "approval", "choice": "once"}).to_string();
    let refused = ctx.post(&format!("{waiting}/actions"), &answer).await;
    assert_eq!(refused.0, 409, "{}", refused.1);
    let detail = refused.1["detail"].as_str().unwrap();
    assert!(detail.contains("is ending"), "{detail}");
    outage.end().await;
    let ended = ctx.ended(&waiting).await;
    assert_eq!(ended["state"], "failed", "{ended}");

    // The session goes on.
    let next = ctx.turn_on(&turns, "after").await;
    assert_eq!(next["state"], "completed", "{next}");
}

/// A turn whose log cannot be written while the runtime runs it is given up, and stopped on
/// the runtime too: the session's next turn is its own. (Left running, the turn given up
/// would go on streaming into the live session the next turn follows, until that turn's
/// prompt interrupted it and met its end.)
#[tokio::test]
async fn a_turn_given_up_is_stopped_on_the_runtime_before_the_sessions_next_one() {
    let outage = Outage::start().await;
    let ctx = &outage.ctx;
    let (_model, turns) = outage.session_on_a_fake_model().await;
    let warm = ctx.turn_on(&turns, "hello").await;
    assert_eq!(warm["state"], "completed", "{warm}");

    outage.refuse_updates_of_turns("").await;
    // Twenty seconds of streamed pieces: longer than the driver waits for a turn it gave up
    // to end, so only the interrupt ends it in time.
    let (status, turn) = ctx.post(&turns, r#"{"input": "SLOWEST"}"#).await;
    assert_eq!(status, 202, "{turn}");
    let path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    // Its start is refused, then its end.
    outage.refused_at_least(2).await;
    outage.end().await;
    let ended = ctx.ended(&path).await;
    assert_eq!(ended["state"], "failed", "{ended}");

    let (status, next) = ctx.post(&turns, r#"{"input": "after"}"#).await;
    assert_eq!(status, 202, "{next}");
    let events = ctx
        .sse(
            &format!("{turns}/{}/events", next["id"].as_str().unwrap()),
            None,
        )
        .await;
    let last = events.last().expect("a final event");
    assert_eq!(last["state"], "completed", "{events:?}");
    // Interrupted before it answered, the prompt given up goes to the model with this one.
    let output = last["output"].as_str().unwrap();
    assert!(
        output.starts_with("You said: ") && output.ends_with("after"),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.to_string().contains("tick")),
        "the turn given up streamed into the next one: {events:?}"
    );
}

#[tokio::test]
async fn a_replica_taken_for_gone_while_it_drives_a_turn_goes_on_driving_it() {
    let outage = Outage::start().await;
    let ctx = &outage.ctx;
    let (_model, turns) = outage.session_on_a_fake_model().await;
    // Twenty seconds of streamed pieces: it runs through what follows.
    let (status, turn) = ctx.post(&turns, r#"{"input": "SLOWEST"}"#).await;
    assert_eq!(status, 202, "{turn}");
    let path = format!("{turns}/{}", turn["id"].as_str().unwrap());

    // The replica looks gone (as after an outage longer than its lease) and cannot say
    // otherwise: its own look for turns nobody drives finds this one, which it still drives.
    outage
        .run("UPDATE replicas SET alive_until = 0".to_owned())
        .await;
    outage.refuse_updates_of("replicas", "").await;
    // Two renewals refused are a renewal period apart: the look for what dead replicas left,
    // which runs as often, has run since the first.
    outage.refused_at_least(2).await;
    let (_, running) = ctx.get(&path).await;
    assert_eq!(running["state"], "running", "{running}");

    outage.end_refusals_of("replicas").await;
    // Still driven here: a cancel reaches it, and its driver ends it (or, on a machine slow
    // enough for its twenty seconds to have run out, its driver completed it).
    let (status, cancelled) = ctx.post(&format!("{path}/cancel"), "").await;
    let ended = ctx.ended(&path).await;
    match (status, ended["state"].as_str()) {
        (202, Some("cancelled")) | (200, Some("completed")) => {}
        _ => panic!("the cancel answered {status} {cancelled}, the turn ended {ended}"),
    }
}

/// A control plane on PostgreSQL, and a connection of the test's own to refuse its writes.
struct Outage {
    ctx: Ctx,
    db: tokio::sync::Mutex<sqlx::PgConnection>,
    _database: testkit::postgres::TestDatabase,
}

impl Outage {
    async fn start() -> Self {
        let database = testkit::postgres::database().await;
        let ctx = serve_on(tempfile::tempdir().expect("temp dir"), database.url()).await;
        let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(database.url())
            .await
            .expect("the test's own connection");
        sqlx::query(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             RAISE EXCEPTION 'the test refuses this write'; END $$",
        )
        .execute(&mut db)
        .await
        .unwrap();
        Self {
            ctx,
            db: tokio::sync::Mutex::new(db),
            _database: database,
        }
    }

    /// A new session's turns path, on a profile of the fake model (which the caller keeps).
    async fn session_on_a_fake_model(&self) -> (testkit::FakeModel, String) {
        let model = testkit::FakeModel::start().await;
        let iid = self.ctx.ready_instance().await;
        let profile = (self.ctx)
            .profile_on(&iid, &model, json!({"name": "slow"}))
            .await;
        let turns = self.ctx.new_session_turns(&iid, &profile).await;
        (model, turns)
    }

    /// From now on, updates of turns are refused (those `when` says, if it says).
    async fn refuse_updates_of_turns(&self, when: &str) {
        self.refuse_updates_of("turns", when).await;
    }

    /// From now on, updates of `table`'s rows are refused (those `when` says, if it says).
    async fn refuse_updates_of(&self, table: &str, when: &str) {
        let trigger = format!(
            "CREATE TRIGGER refuse BEFORE UPDATE ON {table} FOR EACH ROW {when} \
             EXECUTE FUNCTION refuse()"
        );
        // `table` and `when` are the test's own text.
        self.run(trigger).await;
    }

    /// Updates of turns are taken again.
    async fn end(&self) {
        self.end_refusals_of("turns").await;
    }

    async fn end_refusals_of(&self, table: &str) {
        self.run(format!("DROP TRIGGER refuse ON {table}")).await;
    }

    /// Runs `sql`, the test's own, on the test's connection.
    async fn run(&self, sql: String) {
        let mut db = self.db.lock().await;
        let statement = sqlx::query(sqlx::AssertSqlSafe(sql));
        statement.execute(&mut *db).await.unwrap();
    }

    /// How many refusals the control plane's log tells of.
    fn refusals(&self) -> usize {
        let log = self.ctx.server_log();
        log.iter()
            .filter(|line| line.contains("the test refuses this write"))
            .count()
    }

    /// Waits up to 20 s for the log to tell of `count` refusals.
    async fn refused_at_least(&self, count: usize) {
        for _ in 0..800 {
            if self.refusals() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{count} refusals not logged within 20 s");
    }
}

impl Ctx {
    /// The turn at `path`'s last event, once it has ended (within 20 s), and the turn then.
    async fn ended(&self, path: &str) -> serde_json::Value {
        let events =
            (self.sse_within(&format!("{path}/events"), None, Duration::from_secs(20))).await;
        let last = events.last().expect("a final event");
        assert_eq!(last["type"], "turn.finished", "{events:?}");
        assert_eq!(self.get(path).await.1["state"], last["state"]);
        last.clone()
    }
}
