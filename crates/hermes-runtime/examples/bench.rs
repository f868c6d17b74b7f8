//! Benchmark: our `hermes-runtime` and the real `hermes serve` 0.19.0, side by side, on the same
//! fake model. Prints figures; asserts nothing. Run with `scripts/bench`.
//!
//! Usage: bench <hermes-runtime binary> <hermes binary>

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hermes_native::methods::{Method, PromptSubmit, PromptSubmitParams, SessionCreate};
use hermes_native::{GatewayClient, LiveSessionId, NativeEvent};
use serde_json::json;
use testkit::{FakeModel, ReadyProcess};

const TOKEN: &str = "bench-token-0123456789";
const STARTS: usize = 5;
const CREATES: usize = 20;
const WARM_TURNS: usize = 10;
const SESSIONS: usize = 100;

struct Figures {
    ready: Duration,
    create: Duration,
    first_delta_cold: Duration,
    complete_cold: Duration,
    first_delta_warm: Duration,
    complete_warm: Duration,
    rss_kib: u64,
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn launch(binary: &Path, home: &Path) -> ReadyProcess {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .current_dir(home)
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
        // Hermes pip-installs missing optional packages into its own venv at run time; every
        // peer shares one venv, so one must never change it under the others.
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1");
    ReadyProcess::spawn(
        command,
        "HERMES_BACKEND_READY port=",
        Duration::from_secs(120),
    )
    .await
}

fn write_config(home: &Path, model: &FakeModel) {
    let config = json!({"model": model.hermes_model_config(), "approvals": {"mode": "manual"}});
    std::fs::write(home.join("config.yaml"), config.to_string()).unwrap();
}

/// Resident memory of a process and its descendants, in KiB.
fn tree_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let own: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            children.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    own + children.into_iter().map(tree_rss_kib).sum::<u64>()
}

/// One turn: (time to the first delta, time to message.complete).
async fn turn(gateway: &GatewayClient, sid: &LiveSessionId, text: &str) -> (Duration, Duration) {
    let mut events = gateway.subscribe(sid);
    let started = Instant::now();
    let params = PromptSubmitParams {
        session_id: Some(sid.clone()),
        text: Some(text.to_owned()),
        ..Default::default()
    };
    gateway
        .request::<PromptSubmit>(&params)
        .await
        .expect(PromptSubmit::NAME);
    let mut first_delta = None;
    while let Some(event) = events.recv().await {
        match event {
            NativeEvent::MessageDelta(_) if first_delta.is_none() => {
                first_delta = Some(started.elapsed());
            }
            NativeEvent::MessageComplete(_) => break,
            _ => {}
        }
    }
    let complete = started.elapsed();
    gateway.unsubscribe(sid);
    (first_delta.unwrap_or(complete), complete)
}

async fn measure(binary: &Path, model: &FakeModel) -> Figures {
    let mut ready = Vec::new();
    for _ in 0..STARTS {
        let home = tempfile::tempdir().unwrap();
        write_config(home.path(), model);
        let started = Instant::now();
        let process = launch(binary, home.path()).await;
        ready.push(started.elapsed());
        process.stop(Duration::from_secs(30)).await;
    }

    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), model);
    let process = launch(binary, home.path()).await;
    let url = format!("ws://127.0.0.1:{}/api/ws", process.ready_value("port"));
    let gateway = GatewayClient::connect(&url, TOKEN, Duration::from_secs(120))
        .await
        .expect("connect");

    let mut creates = Vec::new();
    let mut sid = None;
    for _ in 0..CREATES {
        let started = Instant::now();
        let created = gateway
            .request::<SessionCreate>(&Default::default())
            .await
            .unwrap();
        creates.push(started.elapsed());
        sid = Some(created.session_id);
    }
    let sid = sid.expect("a session");
    let (first_delta_cold, complete_cold) = turn(&gateway, &sid, "hello there").await;
    let mut warm_first = Vec::new();
    let mut warm_complete = Vec::new();
    for i in 0..WARM_TURNS {
        let (first, complete) = turn(&gateway, &sid, &format!("warm turn {i}")).await;
        warm_first.push(first);
        warm_complete.push(complete);
    }
    for _ in CREATES..SESSIONS {
        gateway
            .request::<SessionCreate>(&Default::default())
            .await
            .unwrap();
    }
    // Let deferred work (Hermes builds agents after session.create) settle before reading.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_kib = tree_rss_kib(process.pid());
    drop(gateway);
    process.stop(Duration::from_secs(30)).await;
    Figures {
        ready: median(ready),
        create: median(creates),
        first_delta_cold,
        complete_cold,
        first_delta_warm: median(warm_first),
        complete_warm: median(warm_complete),
        rss_kib,
    }
}

/// The fake model's own time for a streamed reply, read to the end by a plain HTTP client.
async fn model_alone(model: &FakeModel) -> Duration {
    let http = reqwest::Client::new();
    let body = json!({"model": "fake-model", "stream": true,
                      "messages": [{"role": "user", "content": "warm turn 0"}]});
    let mut samples = Vec::new();
    for _ in 0..WARM_TURNS {
        let started = Instant::now();
        let response = http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        let mut stream = response.bytes_stream();
        while stream.next().await.is_some() {}
        samples.push(started.elapsed());
    }
    median(samples)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(ours: f64, theirs: f64) -> String {
    if ours > 0.0 {
        format!("{:.1}×", theirs / ours)
    } else {
        "—".to_owned()
    }
}

#[tokio::main]
async fn main() {
    testkit::stopping_on_signals(run()).await
}

async fn run() {
    // Absolute: the runtimes are started in their own home directories.
    let args: Vec<PathBuf> = std::env::args()
        .skip(1)
        .map(|a| std::fs::canonicalize(&a).unwrap_or_else(|e| panic!("{a}: {e}")))
        .collect();
    let [ours_bin, hermes_bin] = args.as_slice() else {
        eprintln!("usage: bench <hermes-runtime binary> <hermes binary>");
        std::process::exit(2);
    };
    let model = FakeModel::start().await;
    eprintln!("measuring hermes-runtime …");
    let ours = measure(ours_bin, &model).await;
    eprintln!("measuring hermes serve 0.19.0 …");
    let theirs = measure(hermes_bin, &model).await;
    let alone = model_alone(&model).await;

    println!(
        "{:<44} {:>16} {:>16} {:>10}",
        "metric", "hermes-runtime", "hermes 0.19.0", "hermes/ours"
    );
    let rows = [
        (
            format!("start → ready (median of {STARTS})"),
            ours.ready,
            theirs.ready,
        ),
        (
            format!("session.create (median of {CREATES})"),
            ours.create,
            theirs.create,
        ),
        (
            "first turn: first delta".to_owned(),
            ours.first_delta_cold,
            theirs.first_delta_cold,
        ),
        (
            "first turn: complete".to_owned(),
            ours.complete_cold,
            theirs.complete_cold,
        ),
        (
            format!("warm turn: first delta (median of {WARM_TURNS})"),
            ours.first_delta_warm,
            theirs.first_delta_warm,
        ),
        (
            format!("warm turn: complete (median of {WARM_TURNS})"),
            ours.complete_warm,
            theirs.complete_warm,
        ),
    ];
    for (name, a, b) in rows {
        println!(
            "{:<44} {:>16} {:>16} {:>10}",
            name,
            ms(a),
            ms(b),
            ratio(a.as_secs_f64(), b.as_secs_f64())
        );
    }
    println!(
        "{:<44} {:>16} {:>16} {:>10}",
        format!("resident memory after {SESSIONS} sessions"),
        format!("{:.1} MiB", ours.rss_kib as f64 / 1024.0),
        format!("{:.1} MiB", theirs.rss_kib as f64 / 1024.0),
        ratio(ours.rss_kib as f64, theirs.rss_kib as f64)
    );
    println!(
        "{:<44} {:>16}",
        format!("fake model alone, streamed (median of {WARM_TURNS})"),
        ms(alone)
    );
    println!(
        "{:<44} {:>16}",
        "warm turn overhead over the model (ours)",
        ms(ours.complete_warm.saturating_sub(alone))
    );
}
