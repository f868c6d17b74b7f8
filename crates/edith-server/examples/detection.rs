//! Benchmark: how soon the control plane notices a runtime gone behind its back. For each
//! target (our runtime and, when given, the real Hermes; as `process` instances, which the
//! control plane starts and watches as its children, and as `external` ones, which it knows only
//! through their gateway), runtimes are killed with SIGKILL, every other one while a turn
//! streams on it and the others idle after a turn; then one is stopped with SIGSTOP, a runtime
//! that hangs. Each kill is on an instance of its own, made for it (a `never` restart policy, so
//! that it stays `lost`), and deleted after.
//!
//! Measured from the signal: when a client polling the instance every 5 ms first sees it `lost`,
//! and, for a kill during a turn, when the turn's event stream shows its end. Prints the median
//! and the largest of each, and the reasons the instance and the turn give. Asserts nothing
//! about the times; a runtime never found lost within a minute ends the run with that said.
//! Run with `scripts/bench`.
//!
//! Usage: [DETECTION_KILLS=10] detection <fake-openai binary> <hermes-runtime binary>
//! [<hermes binary>]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{ControlPlane, Model};
use edith_types::{TurnEvent, TurnEventKind};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};
use testkit::ReadyProcess;

/// Kills per target unless `DETECTION_KILLS` says otherwise.
const KILLS: usize = 10;
/// How often the client looks at the instance.
const POLL: Duration = Duration::from_millis(5);
/// The longest anything here waits for the control plane to notice a runtime gone (a hang is
/// noticed 20 to 25 s after the runtime's last frame).
const NOTICE_LIMIT: Duration = Duration::from_secs(60);
/// The native profile of the `external` targets, made in the runtime's home before it starts.
const PROFILE: &str = "bench";

/// [`KILLS`], or the count `DETECTION_KILLS` gives.
fn kills() -> usize {
    std::env::var("DETECTION_KILLS").map_or(KILLS, |n| {
        n.parse()
            .ok()
            .filter(|n| *n >= 2)
            .unwrap_or_else(|| panic!("DETECTION_KILLS: a count of kills, 2 or more"))
    })
}

/// Where a target's runtimes come from.
enum Target<'a> {
    /// A `process` instance of the runtime so named in the control plane's configuration.
    Process { runtime: &'static str },
    /// An `external` instance attached to this binary, started here.
    External { binary: &'a Path },
}

/// An instance made for one kill: its runtime, ready after a turn on its session.
struct Victim {
    iid: String,
    turns: String,
    runtime: Runtime,
}

/// The runtime behind an instance.
enum Runtime {
    /// The control plane started it: this is its pid.
    Child(Pid),
    /// Started here, in `_home` (removed when dropped).
    Ours {
        process: Box<ReadyProcess>,
        _home: tempfile::TempDir,
    },
}

impl Runtime {
    fn pid(&self) -> Pid {
        match self {
            Runtime::Child(pid) => *pid,
            Runtime::Ours { process, .. } => Pid::from_raw(process.pid() as i32).expect("a pid"),
        }
    }

    /// Sends `signal` to the runtime's main process, as a crash or a hang would hit it.
    fn signal(&self, signal: Signal) {
        rustix::process::kill_process(self.pid(), signal).expect("the runtime is signalled");
    }
}

impl ControlPlane {
    /// A new instance of `target`, its runtime having run a turn, so that the control plane's
    /// connection to its gateway is open, as it is for a runtime in use.
    async fn victim(&self, target: &Target<'_>, model: &Model, n: usize) -> Victim {
        let (turns, ours) = match target {
            Target::Process { runtime } => {
                let body = json!({"name": format!("{runtime}-{n}"), "provider": "process",
                    "runtime": runtime});
                (self.session(body, "default", Some(model)).await, None)
            }
            Target::External { binary } => {
                let home = tempfile::tempdir().unwrap();
                let process = common::launch(binary, home.path(), PROFILE, model).await;
                let port = process.ready_value("port");
                let body = json!({"name": format!("external-{n}"), "provider": "external",
                    "url": format!("http://127.0.0.1:{port}"), "token": common::TOKEN});
                (
                    self.session(body, PROFILE, None).await,
                    Some((process, home)),
                )
            }
        };
        let iid = turns
            .strip_prefix("/v1/instances/")
            .and_then(|rest| rest.split('/').next())
            .expect("an instance's turns path")
            .to_owned();
        let turn = self.post(&turns, json!({"input": "hello"})).await;
        let id = turn["id"].as_str().unwrap();
        self.read_stream(&format!("{turns}/{id}/events")).await;
        let runtime = match ours {
            Some((process, home)) => Runtime::Ours {
                process: Box::new(process),
                _home: home,
            },
            None => Runtime::Child(self.runtime_pid(&iid).await),
        };
        Victim {
            iid,
            turns,
            runtime,
        }
    }

    /// The pid of the runtime the control plane last started for `iid`, from its log.
    async fn runtime_pid(&self, iid: &str) -> Pid {
        let log = self.get(&format!("/v1/instances/{iid}/log")).await;
        let pid = log["lines"]
            .as_array()
            .expect("the log's lines")
            .iter()
            .rev()
            .find_map(|line| line.as_str()?.strip_prefix(edith_server::RUNTIME_STARTED))
            .expect("the pid in the runtime log");
        Pid::from_raw(pid.trim().parse().expect("a pid")).expect("a pid")
    }

    /// The instance once a client polling it sees it `lost`, and how long after `since`.
    async fn seen_lost(&self, iid: &str, since: Instant) -> (Duration, Value) {
        let path = format!("/v1/instances/{iid}");
        loop {
            let instance = self.get(&path).await;
            if instance["state"] == "lost" {
                return (since.elapsed(), instance);
            }
            assert!(
                since.elapsed() < NOTICE_LIMIT,
                "{iid} was not lost within {NOTICE_LIMIT:?} of its runtime's signal: {instance}"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes the instance and waits for its job.
    async fn delete(&self, victim: Victim) {
        let response = self
            .request(
                reqwest::Method::DELETE,
                &format!("/v1/instances/{}", victim.iid),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202, "deleting {}", victim.iid);
        let deleting: Value = response.json().await.unwrap();
        let job = deleting["job"]["id"].as_str().unwrap();
        self.read_stream(&format!("/v1/jobs/{job}/events")).await;
        if let Runtime::Ours { process, .. } = victim.runtime {
            process.kill().await;
        }
    }
}

/// What one target's kills showed.
#[derive(Default)]
struct Findings {
    /// Idle runtimes killed: until seen lost.
    idle_lost: Vec<Duration>,
    /// Runtimes killed during a turn: until the turn's end shows on its stream.
    turn_ended: Vec<Duration>,
    /// Runtimes killed during a turn: until seen lost.
    turn_lost: Vec<Duration>,
    /// The runtime stopped: until seen lost.
    hung_lost: Option<Duration>,
    /// The reasons given, each once: the instance's and the turn's.
    reasons: Vec<String>,
}

impl Findings {
    fn reason(&mut self, reason: String) {
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }
}

/// A turn's event stream being read, and what it has brought and not yet been looked at.
struct Stream {
    response: reqwest::Response,
    text: String,
}

impl Stream {
    /// Reads until the stream shows an event that `wanted` picks (`what` names it); that event.
    async fn until(
        &mut self,
        what: &str,
        wanted: impl Fn(&TurnEventKind) -> bool,
    ) -> TurnEventKind {
        let read = tokio::time::timeout(NOTICE_LIMIT, async {
            loop {
                while let Some(end) = self.text.find("\n\n") {
                    let block: String = self.text.drain(..end + 2).collect();
                    let Some(data) = block.lines().find_map(|line| line.strip_prefix("data: "))
                    else {
                        continue;
                    };
                    let event: TurnEvent = serde_json::from_str(data).expect("a turn event");
                    if wanted(&event.kind) {
                        return event.kind;
                    }
                }
                let chunk = self.response.chunk().await.expect("the stream reads");
                let chunk = chunk.unwrap_or_else(|| panic!("the stream ended before {what}"));
                self.text.push_str(&String::from_utf8_lossy(&chunk));
            }
        });
        read.await
            .unwrap_or_else(|_| panic!("no {what} within {NOTICE_LIMIT:?}"))
    }
}

/// One kill: an idle runtime, or one in the middle of a turn.
async fn kill(plane: &ControlPlane, victim: &Victim, during_turn: bool, found: &mut Findings) {
    if !during_turn {
        let killed = Instant::now();
        victim.runtime.signal(Signal::KILL);
        let (lost, instance) = plane.seen_lost(&victim.iid, killed).await;
        found.idle_lost.push(lost);
        found.reason(format!("instance: {}", instance["state_reason"]));
        return;
    }
    // The fake model streams `SLOW` for 6 s: the turn is running when it is hit.
    let turn = plane.post(&victim.turns, json!({"input": "SLOW"})).await;
    let id = turn["id"].as_str().unwrap();
    let response = plane
        .request(
            reqwest::Method::GET,
            &format!("{}/{id}/events", victim.turns),
        )
        .send()
        .await
        .unwrap();
    let mut stream = Stream {
        response,
        text: String::new(),
    };
    let streaming = |kind: &TurnEventKind| matches!(kind, TurnEventKind::MessageDelta { .. });
    stream.until("a piece of the answer", streaming).await;
    let killed = Instant::now();
    victim.runtime.signal(Signal::KILL);
    let finished = |kind: &TurnEventKind| matches!(kind, TurnEventKind::TurnFinished { .. });
    let TurnEventKind::TurnFinished { state, error, .. } =
        stream.until("the turn's end", finished).await
    else {
        unreachable!("picked as the turn's end");
    };
    found.turn_ended.push(killed.elapsed());
    let (lost, instance) = plane.seen_lost(&victim.iid, killed).await;
    found.turn_lost.push(lost);
    let error = error.unwrap_or_default();
    found.reason(format!("turn: {} \"{error}\"", state.as_str()));
    found.reason(format!("instance: {}", instance["state_reason"]));
}

/// The runtime stopped with SIGSTOP: alive, its sockets open, answering nothing.
async fn hang(plane: &ControlPlane, victim: &Victim, found: &mut Findings) {
    let stopped = Instant::now();
    victim.runtime.signal(Signal::STOP);
    let (lost, instance) = plane.seen_lost(&victim.iid, stopped).await;
    found.hung_lost = Some(lost);
    found.reason(format!("hang, instance: {}", instance["state_reason"]));
    // Then it goes as any other: the control plane stops a `process` runtime it found lost,
    // and the deletion kills an `external` one's group (a stopped process takes a SIGKILL).
}

async fn measure(plane: &ControlPlane, target: &Target<'_>, model: &Model) -> Findings {
    let mut found = Findings::default();
    for n in 0..kills() {
        let victim = plane.victim(target, model, n).await;
        kill(plane, &victim, n % 2 == 1, &mut found).await;
        plane.delete(victim).await;
    }
    let victim = plane.victim(target, model, kills()).await;
    hang(plane, &victim, &mut found).await;
    plane.delete(victim).await;
    found
}

/// `samples`' median and largest, in milliseconds.
fn spread(samples: &[Duration]) -> String {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    match (sorted.get(sorted.len() / 2), sorted.last()) {
        (Some(median), Some(largest)) => format!("{:.0} ms ({:.0})", ms(median), ms(largest)),
        _ => String::new(),
    }
}

#[tokio::main]
async fn main() {
    testkit::stopping_on_signals(run()).await
}

async fn run() {
    let args = common::binaries();
    let usage = "usage: [DETECTION_KILLS=10] detection <fake-openai> <hermes-runtime> [<hermes>]";
    kills();
    let model = Model::start(args.first().expect(usage), &[]).await;
    let ours = args.get(1).expect(usage);
    let hermes = args.get(2);
    let dir = tempfile::tempdir().unwrap();
    let (server, plane) =
        common::start_control_plane(dir.path(), ours, hermes.map(PathBuf::as_path)).await;

    let mut targets = vec![
        (
            "process: hermes-runtime",
            Target::Process { runtime: "ours" },
        ),
        (
            "external: hermes-runtime",
            Target::External { binary: ours },
        ),
    ];
    if let Some(hermes) = hermes {
        targets.push((
            "process: hermes 0.19.0",
            Target::Process { runtime: "hermes" },
        ));
        targets.push((
            "external: hermes 0.19.0",
            Target::External { binary: hermes },
        ));
    }
    let mut rows = Vec::new();
    for (label, target) in &targets {
        eprintln!("{label}…");
        rows.push((label, measure(&plane, target, &model).await));
    }
    server.shutdown().await;
    model.stop().await;

    println!(
        "a runtime killed (SIGKILL) behind the control plane's back, {} times per target, every \
         other one during a streaming turn; then one stopped (SIGSTOP). From the signal: median \
         (largest)",
        kills()
    );
    println!(
        "| target | idle: seen lost | in a turn: its end on its stream | in a turn: seen lost | \
         hung: seen lost |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (label, found) in &rows {
        println!(
            "| {label} | {} | {} | {} | {} |",
            spread(&found.idle_lost),
            spread(&found.turn_ended),
            spread(&found.turn_lost),
            spread(found.hung_lost.as_slice()),
        );
    }
    println!();
    for (label, found) in &rows {
        println!("{label}:");
        for reason in &found.reasons {
            println!("- {reason}");
        }
    }
}
