//! Three `edith serve` replicas on one PostgreSQL database (and one data dir, each with its own
//! `--replica`) act as one control plane: any replica answers any request, what touches an
//! instance's runtime is served by the replica owning it, event streams are served by any, and
//! when a replica is killed with SIGKILL the others take over what it owned — its instances,
//! the turns it drove, the jobs it ran — once its lease runs out.

use std::time::{Duration, Instant};

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::relay::{Socket, next as next_message, open_relay};
use crate::{ADMIN_KEY, client_with_key, edith_serve_with_env};

/// The lease the replicas run with: short, so that take-overs happen within the test.
const LEASE_SECONDS: &str = "3";

/// How long anything that waits on a lease running out may take here.
const TAKE_OVER_LIMIT: Duration = Duration::from_secs(30);

struct Replica {
    name: &'static str,
    url: String,
    process: Option<testkit::ReadyProcess>,
}

impl Replica {
    async fn start(dir: &std::path::Path, name: &'static str, database: &str) -> Self {
        let flags = [
            "--replica",
            name,
            "--lease-seconds",
            LEASE_SECONDS,
            "--sim-provider",
        ];
        let env = [("EDITH_DATABASE_URL", database)];
        let process = edith_serve_with_env(dir, "127.0.0.1:0", &flags, Some(ADMIN_KEY), &env).await;
        Self {
            name,
            url: process.ready_value("url"),
            process: Some(process),
        }
    }

    async fn kill(&mut self) {
        self.process.take().expect("running").kill().await;
    }
}

/// A request's status, the replica that answered (`edith-replica`) and its JSON body.
async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, String, Value) {
    let mut request = http.request(method, url).timeout(Duration::from_secs(30));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let replica = response.headers()["edith-replica"]
        .to_str()
        .unwrap()
        .to_owned();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, replica, body)
}

/// Sends until the answer is not a 503 (an instance whose owner died is unavailable until its
/// lease runs out), bounded by [`TAKE_OVER_LIMIT`].
async fn send_until_available(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, String, Value) {
    let deadline = Instant::now() + TAKE_OVER_LIMIT;
    loop {
        let answer = send(http, method.clone(), url.clone(), body.clone()).await;
        if answer.0 != 503 || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An SSE stream, opened.
async fn stream(http: &reqwest::Client, url: String) -> reqwest::Response {
    let response = http.get(url).send().await.expect("a stream");
    assert_eq!(response.status(), 200);
    response
}

/// The whole events in `text` so far: `(seq, data)`.
fn events_in(text: &str) -> Vec<(u64, Value)> {
    let whole = &text[..text.rfind("\n\n").map_or(0, |end| end + 2)];
    let (mut id, mut events) = (None, Vec::new());
    for line in whole.lines() {
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.parse().expect("a seq"));
        } else if let Some(data) = line.strip_prefix("data: ") {
            events.push((
                id.take().expect("an id first"),
                serde_json::from_str(data).unwrap(),
            ));
        }
    }
    events
}

/// Reads `response` until an event satisfies `wanted` (or the stream ends), within `limit`;
/// returns everything read so far.
async fn read_until(
    response: &mut reqwest::Response,
    text: &mut String,
    limit: Duration,
    wanted: impl Fn(&Value) -> bool,
) -> Vec<(u64, Value)> {
    let _ = tokio::time::timeout(limit, async {
        while !events_in(text).iter().any(|(_, event)| wanted(event)) {
            match response.chunk().await {
                Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return,
            }
        }
    })
    .await;
    events_in(text)
}

/// Opens the relay at `path` on `replica` with `key`, with the replica that answered; a
/// refusal is its status.
async fn relay(replica: &Replica, path: &str, key: Option<&str>) -> Result<(Socket, String), u16> {
    let url = format!("{}{path}", replica.url);
    match open_relay(&url, key).await {
        Ok((socket, headers)) => {
            let replica = headers["edith-replica"].to_str().unwrap().to_owned();
            Ok((socket, replica))
        }
        Err((status, _)) => Err(status),
    }
}

/// Each event once, numbered 1, 2, 3… with no gap.
fn assert_whole(events: &[(u64, Value)]) {
    let seqs: Vec<u64> = events.iter().map(|(seq, _)| *seq).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_act_as_one_control_plane_and_take_over_from_a_killed_one() {
    let database = testkit::postgres::database().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut replicas = Vec::new();
    for name in ["r1", "r2", "r3"] {
        replicas.push(Replica::start(dir.path(), name, database.url()).await);
    }
    let http = client_with_key(ADMIN_KEY);
    let at = |replica: &Replica, path: &str| format!("{}{path}", replica.url);
    let (get, post) = (reqwest::Method::GET, reqwest::Method::POST);

    // Made on r1, which owns it and runs its job; its job's stream read on r2.
    let (status, _, created) = send(
        &http,
        post.clone(),
        at(&replicas[0], "/v1/instances"),
        Some(json!({"name": "shared"})),
    )
    .await;
    assert_eq!(status, 202, "{created}");
    let iid = created["instance"]["id"].as_str().unwrap().to_owned();
    let job = created["job"]["id"].as_str().unwrap();
    let mut job_stream = stream(&http, at(&replicas[1], &format!("/v1/jobs/{job}/events"))).await;
    let job_events = read_until(&mut job_stream, &mut String::new(), TAKE_OVER_LIMIT, |e| {
        e["type"] == "job.finished"
    })
    .await;
    assert_eq!(
        job_events.last().unwrap().1["instance_state"],
        "ready",
        "{job_events:?}"
    );
    assert_whole(&job_events);

    // A profile and a session asked of r2 and r3: made by r1, the owner, whose answers come
    // back through them.
    let (status, replica, profile) = send(
        &http,
        post.clone(),
        at(&replicas[1], &format!("/v1/instances/{iid}/profiles")),
        Some(json!({"name": "p"})),
    )
    .await;
    assert_eq!((status, replica.as_str()), (201, "r1"), "{profile}");
    let sessions = format!(
        "/v1/instances/{iid}/profiles/{}/sessions",
        profile["id"].as_str().unwrap()
    );
    let (status, replica, session) = send(
        &http,
        post.clone(),
        at(&replicas[2], &sessions),
        Some(json!({})),
    )
    .await;
    assert_eq!((status, replica.as_str()), (201, "r1"), "{session}");
    let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    // A plain read is answered where it is asked.
    let (status, replica, _) = send(&http, get.clone(), at(&replicas[2], &turns), None).await;
    assert_eq!((status, replica.as_str()), (200, "r3"));

    // A turn streamed in its POST through r2: r1 starts it, its log comes back through r2; the
    // same request through r3 is the owner's 303 to that log, passed on, not fetched.
    let (_, _, streamed_session) = send(
        &http,
        post.clone(),
        at(&replicas[1], &sessions),
        Some(json!({})),
    )
    .await;
    let streamed_turns = format!(
        "{sessions}/{}/turns",
        streamed_session["id"].as_str().unwrap()
    );
    let start = |replica: &Replica| {
        http.post(at(replica, &format!("{streamed_turns}/stream")))
            .header("Idempotency-Key", "streamed-through")
            .json(&json!({"input": "hello"}))
            .timeout(Duration::from_secs(30))
            .send()
    };
    let started = start(&replicas[1]).await.expect("an answer");
    assert_eq!(started.status(), 201);
    assert_eq!(started.headers()["edith-replica"], "r1");
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let streamed = events_in(&started.text().await.unwrap());
    assert_eq!(
        streamed.last().unwrap().1["type"],
        "turn.finished",
        "{streamed:?}"
    );
    assert_whole(&streamed);
    let again = start(&replicas[2]).await.expect("an answer");
    assert_eq!(again.status(), 303);
    assert_eq!(again.headers()["edith-replica"], "r1");
    assert_eq!(again.headers()["location"].to_str().unwrap(), location);

    // A turn started through r2 and driven by r1 waits for an approval; r3 streams it.
    let input = json!({"input": "terminal {\"command\": \"rm -rf /tmp/edith-replicas-nothing\"}"});
    let (status, replica, turn) =
        send(&http, post.clone(), at(&replicas[1], &turns), Some(input)).await;
    assert_eq!((status, replica.as_str()), (202, "r1"), "{turn}");
    let events_path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
    let mut turn_stream = stream(&http, at(&replicas[2], &events_path)).await;
    let mut text = String::new();
    let before = read_until(&mut turn_stream, &mut text, TAKE_OVER_LIMIT, |e| {
        e["type"] == "approval.requested"
    })
    .await;
    assert!(
        before
            .iter()
            .any(|(_, e)| e["type"] == "approval.requested"),
        "r3 streams what r1 writes: {before:?}"
    );

    // And a turn streaming its answer, on a profile whose model answers slowly, also driven
    // by r1 and followed on r3.
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: Duration::from_millis(40),
        ..Default::default()
    })
    .await;
    let talker = json!({"name": "talker", "model": {"provider": "openai_compatible",
        "base_url": model.base_url(), "model": "fake-model", "api_key": "sk-fake-0123456789"}});
    let profiles = format!("/v1/instances/{iid}/profiles");
    let (status, _, talker) = send(
        &http,
        post.clone(),
        at(&replicas[2], &profiles),
        Some(talker),
    )
    .await;
    assert_eq!(status, 201, "{talker}");
    let talks = format!("{profiles}/{}/sessions", talker["id"].as_str().unwrap());
    let (_, _, talk) = send(
        &http,
        post.clone(),
        at(&replicas[2], &talks),
        Some(json!({})),
    )
    .await;
    let talk = format!("{talks}/{}/turns", talk["id"].as_str().unwrap());
    let long = (0..200)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let (status, _, streaming) = send(
        &http,
        post.clone(),
        at(&replicas[1], &talk),
        Some(json!({"input": long})),
    )
    .await;
    assert_eq!(status, 202, "{streaming}");
    let streaming_events = format!("{talk}/{}/events", streaming["id"].as_str().unwrap());
    let mut talk_stream = stream(&http, at(&replicas[2], &streaming_events)).await;
    let mut talk_text = String::new();
    let talking = read_until(&mut talk_stream, &mut talk_text, TAKE_OVER_LIMIT, |e| {
        e["type"] == "message.delta"
    })
    .await;
    assert!(
        talking.iter().any(|(_, e)| e["type"] == "message.delta"),
        "{talking:?}"
    );

    // r1 dies holding the instance and driving both turns, one of them mid-answer. r3's
    // streams go on: each turn ends interrupted once r1's lease runs out, nothing lost or
    // repeated; read again from r2 after what r3 had seen before the kill, each log gives
    // exactly the rest.
    replicas[0].kill().await;
    for (stream, text, path, seen) in [
        (&mut turn_stream, &mut text, &events_path, before.len()),
        (
            &mut talk_stream,
            &mut talk_text,
            &streaming_events,
            talking.len(),
        ),
    ] {
        let after = read_until(stream, text, TAKE_OVER_LIMIT, |e| {
            e["type"] == "turn.finished"
        })
        .await;
        let last = &after.last().unwrap().1;
        assert_eq!(
            (&last["type"], &last["state"]),
            (&json!("turn.finished"), &json!("interrupted")),
            "{after:?}"
        );
        assert_whole(&after);
        let resumed = http
            .get(at(&replicas[1], path))
            .header("Last-Event-ID", after[seen - 1].0.to_string())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(
            events_in(&resumed),
            after[seen..],
            "resumed on r2 after {seen}"
        );
    }

    // The instance moves to a live replica, which starts its runtime afresh from the shared
    // data dir: the session goes on there.
    let next = json!({"input": "hello again"});
    let (status, owner, turn) =
        send_until_available(&http, post.clone(), at(&replicas[1], &turns), Some(next)).await;
    assert_eq!(status, 202, "{turn}");
    assert!(["r2", "r3"].contains(&owner.as_str()), "{owner}");
    let events_path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
    let mut next_stream = stream(&http, at(&replicas[2], &events_path)).await;
    let events = read_until(&mut next_stream, &mut String::new(), TAKE_OVER_LIMIT, |e| {
        e["type"] == "turn.finished"
    })
    .await;
    assert_eq!(events.last().unwrap().1["state"], "completed", "{events:?}");
    assert_whole(&events);
    // The profile's gateway relay, a WebSocket, opened on the replica that does not own the
    // instance: it reaches the owner's relay, refusals included.
    let other = if owner == "r2" {
        &replicas[2]
    } else {
        &replicas[1]
    };
    let gateway = format!(
        "/v1/instances/{iid}/profiles/{}/gateway",
        profile["id"].as_str().unwrap()
    );
    assert_eq!(relay(other, &gateway, None).await.unwrap_err(), 401);
    let (mut socket, answered_by) = relay(other, &gateway, Some(ADMIN_KEY)).await.unwrap();
    assert_eq!(answered_by, owner);
    let attached = next_message(&mut socket).await;
    assert_eq!(attached["type"], "attached", "{attached}");
    let ask =
        json!({"jsonrpc": "2.0", "id": 3, "method": "config.get", "params": {"key": "mtime"}});
    socket
        .send(Message::Text(ask.to_string().into()))
        .await
        .unwrap();
    loop {
        let message = next_message(&mut socket).await;
        if message["type"] == "frame" && message["frame"]["id"] == 3 {
            assert!(message["frame"]["result"]["mtime"].is_number(), "{message}");
            break;
        }
    }
    drop(socket);

    let capabilities = format!("/v1/instances/{iid}/capabilities");
    for replica in &replicas[1..] {
        let (status, answered_by, _) =
            send(&http, get.clone(), at(replica, &capabilities), None).await;
        assert_eq!((status, answered_by.as_str()), (200, owner.as_str()));
    }

    // A job whose runner dies mid-step: a slow runtime start, run by the replica that takes
    // the new instance (the one asked), killed during the start; the other finishes the job.
    let (runner, survivor) = if owner == "r2" { (1, 2) } else { (2, 1) };
    let slow = json!({"name": "slow", "provider": "sim", "sim": {"start_delay_ms": 4000}});
    let (status, _, created) = send(
        &http,
        post.clone(),
        at(&replicas[runner], "/v1/instances"),
        Some(slow),
    )
    .await;
    assert_eq!(status, 202, "{created}");
    let job = created["job"]["id"].as_str().unwrap();
    let mut job_stream = stream(
        &http,
        at(&replicas[survivor], &format!("/v1/jobs/{job}/events")),
    )
    .await;
    let mut job_text = String::new();
    let starting = read_until(&mut job_stream, &mut job_text, TAKE_OVER_LIMIT, |e| {
        e["type"] == "step.started" && e["step"] == "start_runtime"
    })
    .await;
    assert!(
        starting.iter().any(|(_, e)| e["step"] == "start_runtime"),
        "{starting:?}"
    );
    replicas[runner].kill().await;
    let finished = read_until(&mut job_stream, &mut job_text, TAKE_OVER_LIMIT * 2, |e| {
        e["type"] == "job.finished"
    })
    .await;
    assert_eq!(
        finished.last().unwrap().1["instance_state"],
        "ready",
        "the job is finished by the survivor: {finished:?}"
    );
    assert_whole(&finished);
    let slow_id = created["instance"]["id"].as_str().unwrap();
    let (status, answered_by, _) = send(
        &http,
        get.clone(),
        at(
            &replicas[survivor],
            &format!("/v1/instances/{slow_id}/capabilities"),
        ),
        None,
    )
    .await;
    assert_eq!(
        (status, answered_by.as_str()),
        (200, replicas[survivor].name)
    );
    testkit::kill_processes_with_env_under("HERMES_HOME", dir.path());
}

/// A key revoked on one replica is refused by another at once, though that one had it kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_on_one_replica_is_refused_by_the_others() {
    let database = testkit::postgres::database().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let one = Replica::start(dir.path(), "one", database.url()).await;
    let two = Replica::start(dir.path(), "two", database.url()).await;
    let admin = client_with_key(ADMIN_KEY);
    let (status, _, created) = send(
        &admin,
        reqwest::Method::POST,
        format!("{}/v1/keys", one.url),
        Some(json!({"name": "k", "scope": "read"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let key = client_with_key(created["secret"].as_str().unwrap());
    let instances = format!("{}/v1/instances", two.url);
    let (status, _, _) = send(&key, reqwest::Method::GET, instances.clone(), None).await;
    assert_eq!(status, 200, "two keeps the key it found");

    let id = created["key"]["id"].as_str().unwrap();
    let (status, _, _) = send(
        &admin,
        reqwest::Method::DELETE,
        format!("{}/v1/keys/{id}", one.url),
        None,
    )
    .await;
    assert!(status < 300, "revoked: {status}");
    // Told at once; well within the 10 s a kept key is trusted without an announcement.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, _, _) = send(&key, reqwest::Method::GET, instances.clone(), None).await;
        if status == 401 {
            break;
        }
        assert!(Instant::now() < deadline, "two still takes the revoked key");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two live processes cannot go by one replica name; a name that is not one, or an advertised
/// URL that is not one, is refused; the other replicas reach a replica where it advertises.
#[tokio::test]
async fn a_replica_is_named_once_and_reached_where_it_advertises() {
    let database = testkit::postgres::database().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Replica::start(dir.path(), "same", database.url()).await;
    for (flags, says) in [
        (
            ["--replica", "same"],
            "another live replica is named `same`",
        ),
        (["--replica", "no spaces"], "is not a replica name"),
        (
            ["--advertise-url", "ftp://host/x"],
            "--advertise-url must be",
        ),
    ] {
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new(crate::edith_binary())
                .args(["serve", "--listen", "127.0.0.1:0"])
                .args(flags)
                .arg("--data-dir")
                .arg(dir.path())
                .env("EDITH_DATABASE_URL", database.url())
                .env("EDITH_API_KEY", ADMIN_KEY)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("refused at once")
        .expect("it runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }

    // A replica that advertises an address where nothing answers owns an instance: what
    // another replica forwards to it fails, saying so.
    let env = [("EDITH_DATABASE_URL", database.url())];
    let flags = [
        "--replica",
        "away",
        "--advertise-url",
        "http://127.0.0.1:9/",
    ];
    let away = edith_serve_with_env(dir.path(), "127.0.0.1:0", &flags, Some(ADMIN_KEY), &env).await;
    let http = client_with_key(ADMIN_KEY);
    let url = format!("{}/v1/instances", away.ready_value("url"));
    let (status, _, created) = send(
        &http,
        reqwest::Method::POST,
        url,
        Some(json!({"name": "a"})),
    )
    .await;
    assert_eq!(status, 202, "{created}");
    let iid = created["instance"]["id"].as_str().unwrap();
    let profiles = format!("{}/v1/instances/{iid}/profiles", first.url);
    let (status, _, refused) = send(
        &http,
        reqwest::Method::POST,
        profiles,
        Some(json!({"name": "p"})),
    )
    .await;
    assert_eq!(status, 503, "{refused}");
    let detail = refused["detail"].as_str().unwrap();
    assert!(
        detail.contains("replica `away`") && detail.contains("does not answer"),
        "{detail}"
    );
}
