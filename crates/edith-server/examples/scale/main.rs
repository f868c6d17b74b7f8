//! Benchmark: one `edith serve` (embedded runtime, scripted model) under many sessions at once.
//! Prints, side by side: turns per second and the control plane's CPU per turn when every
//! session sends one turn at once (a session's first turn, then its next, then one more streamed
//! in the POST that starts it: one request instead of two, then two requests again), resident
//! memory per
//! idle session, and how many event streams it serves at once without an error. Then, when
//! `replica sessions` is not 0, the same turns and the fan-out of one turn's end to many
//! streams with one and with three replicas on PostgreSQL (`replicas`). Asserts nothing. Run
//! with `scripts/bench-scale`.
//!
//! Before the first round the client opens its connections (a health check per session, all
//! at once), as the next rounds find them open; what that costs is printed too. Beside each
//! round's CPU, its page faults per turn: a round after a pause faults in again the memory the
//! allocator gave back meanwhile, one right after another reuses it.
//!
//! Usage: scale <edith binary> [sessions = 2000] [streams = 10000] [replica sessions = 1000]
//! [fan-out streams = 3000]
//!
//! With `SCALE_AFTER_ROUND=<command>` in its environment, it runs `<command> <server pid>
//! <round>` once the server is quiet after opening its connections (`connections`) and after
//! each round (`first`, `next`, `streamed`, `again`), outside what the rounds measure:
//! `scripts/profile-turns` dumps a profiler's counts there.

mod replicas;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::ReadyProcess;
use tokio::sync::Semaphore;

const KEY: &str = "edk_bench_admin_key_0123456789abcdef";
/// Requests in flight while sessions are set up (the measured rounds send all at once).
const SETUP_IN_FLIGHT: usize = 128;
/// Bounds every wait of the benchmark.
const LIMIT: Duration = Duration::from_secs(600);
/// How long a round's background work may go on after its turns ended.
const QUIET_LIMIT: Duration = Duration::from_secs(30);
/// A command the runtime asks approval for: a turn with it waits, its stream open.
const WAITING_INPUT: &str = r#"terminal {"command": "rm -rf /tmp/edith-scale-nothing"}"#;

/// Bounds the command `SCALE_AFTER_ROUND` names.
const HOOK_LIMIT: Duration = Duration::from_secs(120);

/// How long the server is left idle before its resident memory is read again.
const SETTLE: Duration = Duration::from_secs(3);

/// The flags that lift `edith serve`'s per-key limits out of the benchmark's way.
const UNLIMITED: [&str; 8] = [
    "--requests-per-second",
    "1000000000",
    "--burst",
    "1000000000",
    "--streams-per-key",
    "1000000",
    "--max-connections",
    "1000000",
];

/// What `/proc` says of a process.
struct Usage {
    /// User + system CPU time so far.
    cpu: Duration,
    /// Page faults served without I/O so far (the server's own, not its children's): for the
    /// most part memory touched for the first time, or again after the allocator gave it back
    /// to the system.
    minor_faults: u64,
    /// Resident memory, in KiB.
    rss_kib: u64,
}

fn usage_of(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server runs");
    // Fields after the command name (in parentheses): state is the first, then utime, stime,
    // cutime and cstime from the 12th: the server's time and that of the processes it started
    // and waited for (a runtime's `git`, say), which are its work as much.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a stat line") + 2..]
        .split(' ')
        .collect();
    // minflt is the 8th of those fields.
    let minor_faults = fields[7].parse().expect("minflt");
    let ticks: u64 = fields[11..15]
        .iter()
        .map(|field| field.parse::<u64>().unwrap())
        .sum();
    let per_second = rustix::param::clock_ticks_per_second();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    Usage {
        cpu: Duration::from_secs_f64(ticks as f64 / per_second as f64),
        minor_faults,
        rss_kib,
    }
}

#[derive(Clone)]
struct ControlPlane {
    http: reqwest::Client,
    url: Arc<str>,
}

impl ControlPlane {
    fn new(url: String) -> Self {
        Self {
            // Every request, streams included, ends within the benchmark's bound.
            http: reqwest::Client::builder().timeout(LIMIT).build().unwrap(),
            url: url.into(),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(KEY)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| format!("{path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{path}: {status} {body}"));
        }
        Ok(body)
    }

    /// Reads a resource.
    async fn get(&self, path: &str) -> Result<Value, String> {
        let response = self.send_get(path).await?;
        response.json().await.map_err(|e| format!("{path}: {e}"))
    }

    /// A GET, its status checked; its reply's body (a resource, or an event stream opened) is
    /// not read yet.
    async fn send_get(&self, path: &str) -> Result<reqwest::Response, String> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(KEY)
            .send()
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{path}: {}", response.status()));
        }
        Ok(response)
    }

    /// Reads an event stream to its end; returns what it said.
    async fn read_stream(&self, path: &str) -> Result<String, String> {
        read_to_end(path, self.send_get(path).await?).await
    }

    /// A ready embedded instance; its profiles path.
    async fn instance(&self) -> String {
        let created = self
            .post("/v1/instances", json!({"name": "scale"}))
            .await
            .unwrap();
        let iid = created["instance"]["id"].as_str().unwrap().to_owned();
        let job = created["job"]["id"].as_str().unwrap();
        self.read_stream(&format!("/v1/jobs/{job}/events"))
            .await
            .unwrap();
        format!("/v1/instances/{iid}/profiles")
    }

    /// `count` new sessions of a new profile; the turns path of each.
    async fn sessions(&self, profiles: &str, name: &str, count: usize) -> Vec<String> {
        let profile = self.post(profiles, json!({"name": name})).await.unwrap();
        let sessions = format!("{profiles}/{}/sessions", profile["id"].as_str().unwrap());
        let made = bounded(count, |_| {
            let cp = self.clone();
            let sessions = sessions.clone();
            async move {
                let session = cp.post(&sessions, json!({})).await?;
                Ok(format!(
                    "{sessions}/{}/turns",
                    session["id"].as_str().unwrap()
                ))
            }
        })
        .await;
        made.into_iter().map(Result::unwrap).collect()
    }

    /// One turn, sent `way`, its stream read to the end; whether it completed.
    async fn turn(&self, turns: &str, input: &str, way: Way) -> Result<(), String> {
        let (path, events) = match way {
            Way::TwoRequests => {
                let turn = self.post(turns, json!({"input": input})).await?;
                let path = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
                let events = self.read_stream(&path).await?;
                (path, events)
            }
            Way::OneRequest => {
                let path = format!("{turns}/stream");
                let response = self
                    .http
                    .post(format!("{}{path}", self.url))
                    .bearer_auth(KEY)
                    .json(&json!({"input": input}))
                    .send()
                    .await
                    .map_err(|e| format!("{path}: {e}"))?;
                if response.status() != 201 {
                    return Err(format!("{path}: {}", response.status()));
                }
                let events = read_to_end(&path, response).await?;
                (path, events)
            }
        };
        if events.contains("\"state\":\"completed\"") {
            Ok(())
        } else {
            Err(format!("{path}: {events}"))
        }
    }
}

/// How a turn is sent.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// `turn_create`, then `turn_events`.
    TwoRequests,
    /// `turn_create_stream`: the events in the POST's reply.
    OneRequest,
}

/// Reads an event stream to its end; returns what it said.
async fn read_to_end(path: &str, response: reqwest::Response) -> Result<String, String> {
    match tokio::time::timeout(LIMIT, response.text()).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(format!("{path}: {e}")),
        Err(_) => Err(format!("{path}: still open after {LIMIT:?}")),
    }
}

/// Runs `work(i)` for `0..count`, [`SETUP_IN_FLIGHT`] at a time; the results in order.
async fn bounded<F, Fut, T>(count: usize, work: F) -> Vec<Result<T, String>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
    T: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(SETUP_IN_FLIGHT));
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let job = work(i);
        tasks.push(tokio::spawn(async move {
            let done = job.await;
            drop(permit);
            done
        }));
    }
    let mut results = Vec::with_capacity(count);
    for task in tasks {
        results.push(task.await.unwrap_or_else(|e| Err(e.to_string())));
    }
    results
}

/// What one round of turns (one per session, all sent at once) measured.
struct Round {
    wall: Duration,
    cpu: Duration,
    /// Page faults of the servers in the same span as `cpu`.
    minor_faults: u64,
    turns: usize,
    errors: Vec<String>,
    /// When each turn had ended, from the round's start, earliest first.
    ended: Vec<Duration>,
}

impl Round {
    fn turns_per_second(&self) -> f64 {
        self.turns as f64 / self.wall.as_secs_f64()
    }

    fn cpu_per_turn_ms(&self) -> f64 {
        self.cpu.as_secs_f64() * 1000.0 / self.turns as f64
    }

    /// When the given share of the turns (0 to 1) had ended, in milliseconds from the round's
    /// start: a round's turns/s is set by its last turn, and this tells a round slow all
    /// through from one whose last few turns came late.
    fn ended_by_ms(&self, share: f64) -> f64 {
        let Some(last) = self.ended.len().checked_sub(1) else {
            return 0.0;
        };
        let at = ((self.ended.len() as f64 * share).ceil() as usize).clamp(1, last + 1) - 1;
        self.ended[at].as_secs_f64() * 1000.0
    }
}

/// Every session sends one turn at once, `way`; waits for all of them to end.
async fn round(cp: &ControlPlane, pid: u32, sessions: &[String], way: Way) -> Round {
    let by_turn: Vec<_> = sessions
        .iter()
        .map(|turns| (cp.clone(), turns.clone()))
        .collect();
    round_over(&[pid], &by_turn, way).await
}

/// Every session sends one turn at once, `way`, each to the control plane paired with it;
/// waits for all of them to end. The CPU is that of all the `servers`, counted until they are
/// quiet again: what the turns set off in the background (a runtime asks the model for a new
/// session's title after its first exchanges) is theirs, not the next round's.
async fn round_over(servers: &[u32], by_turn: &[(ControlPlane, String)], way: Way) -> Round {
    let cpu = || {
        servers
            .iter()
            .map(|pid| usage_of(*pid).cpu)
            .sum::<Duration>()
    };
    let faults = || {
        servers
            .iter()
            .map(|pid| usage_of(*pid).minor_faults)
            .sum::<u64>()
    };
    let (before, faults_before) = (cpu(), faults());
    let started = Instant::now();
    let tasks: Vec<_> = by_turn
        .iter()
        .enumerate()
        .map(|(i, (cp, turns))| {
            let cp = cp.clone();
            let turns = turns.clone();
            // Each session says something of its own, as users do: the runtime titles a
            // session after its first exchange, and 2000 sessions of one title would make each
            // new one look through all the others for the next `… #N` (as Hermes does).
            let input = format!("hello from session {i}");
            tokio::spawn(async move {
                let result = cp.turn(&turns, &input, way).await;
                (result, started.elapsed())
            })
        })
        .collect();
    let mut errors = Vec::new();
    let mut ended = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok((result, at)) => {
                ended.push(at);
                if let Err(e) = result {
                    errors.push(e);
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    let wall = started.elapsed();
    ended.sort();
    let after = quiet(&cpu, servers.len()).await;
    Round {
        wall,
        cpu: after - before,
        minor_faults: faults() - faults_before,
        turns: by_turn.len(),
        errors,
        ended,
    }
}

/// Opens the client's connections before the first round: one request per session, all at once,
/// as the round's turns will be sent. The next rounds find their connections open; without this
/// the first round alone would pay for opening them, and its CPU per turn would not be that of a
/// first turn. The request is the health check, which reads nothing a turn reads (no session
/// is looked up ahead of its turn). Returns the server's CPU per request.
async fn open_connections(cp: &ControlPlane, pid: u32, count: usize) -> Duration {
    let cpu = || usage_of(pid).cpu;
    let before = cpu();
    let reads: Vec<_> = (0..count)
        .map(|_| {
            let cp = cp.clone();
            tokio::spawn(async move { cp.get("/healthz").await })
        })
        .collect();
    for read in reads {
        read.await
            .unwrap_or_else(|e| Err(e.to_string()))
            .expect("a health check");
    }
    (quiet(&cpu, 1).await - before) / count.max(1) as u32
}

/// Waits until `cpu`, the time of `servers` processes, grows by less than a tenth of the time
/// passing per process (at most [`QUIET_LIMIT`]); `cpu` then.
async fn quiet(cpu: &impl Fn() -> Duration, servers: usize) -> Duration {
    const STEP: Duration = Duration::from_millis(200);
    let deadline = Instant::now() + QUIET_LIMIT;
    let mut last = cpu();
    loop {
        tokio::time::sleep(STEP).await;
        let now = cpu();
        if now - last < STEP * servers.max(1) as u32 / 10 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// What holding one open stream per session measured.
struct Streams {
    open: usize,
    errors: Vec<String>,
    kib_per_session: f64,
    ended_after_cancel: usize,
}

/// `count` sessions each with a turn that waits for an approval and one open event stream on
/// it; every stream must show the request. Then every turn is cancelled and every stream must
/// end.
async fn streams(cp: &ControlPlane, pid: u32, profiles: &str, count: usize) -> Streams {
    let before = usage_of(pid).rss_kib;
    let sessions = cp.sessions(profiles, "streams", count).await;
    let waiting = bounded(count, |i| {
        let cp = cp.clone();
        let turns = sessions[i].clone();
        async move {
            let turn = cp.post(&turns, json!({"input": WAITING_INPUT})).await?;
            Ok(format!("{turns}/{}", turn["id"].as_str().unwrap()))
        }
    })
    .await;
    let mut errors: Vec<String> = Vec::new();
    let turns: Vec<String> = waiting
        .into_iter()
        .filter_map(|t| t.map_err(|e| errors.push(e)).ok())
        .collect();
    // All streams open at once, each read until it shows the approval request.
    let opened: Vec<_> = turns
        .iter()
        .map(|turn| {
            let cp = cp.clone();
            let path = format!("{turn}/events");
            tokio::spawn(async move {
                let mut response = cp.send_get(&path).await?;
                let mut seen = String::new();
                let asked = tokio::time::timeout(LIMIT, async {
                    while let Ok(Some(chunk)) = response.chunk().await {
                        seen.push_str(&String::from_utf8_lossy(&chunk));
                        if seen.contains("approval.requested") {
                            return true;
                        }
                    }
                    false
                })
                .await;
                match asked {
                    Ok(true) => Ok(response),
                    _ => Err(format!("{path}: no approval request in {seen:?}")),
                }
            })
        })
        .collect();
    let mut open = Vec::new();
    for task in opened {
        match task.await.unwrap_or_else(|e| Err(e.to_string())) {
            Ok(response) => open.push(response),
            Err(e) => errors.push(e),
        }
    }
    let kib_per_session = usage_of(pid).rss_kib.saturating_sub(before) as f64 / count as f64;
    let held = open.len();

    let cancels = bounded(turns.len(), |i| {
        let cp = cp.clone();
        let turn = turns[i].clone();
        async move {
            cp.post(&format!("{turn}/cancel"), json!({}))
                .await
                .map(drop)
        }
    })
    .await;
    errors.extend(cancels.into_iter().filter_map(Result::err));
    let ends: Vec<_> = open
        .into_iter()
        .map(|response| {
            tokio::spawn(async move {
                matches!(
                    tokio::time::timeout(LIMIT, response.text()).await,
                    Ok(Ok(text)) if text.contains("turn.finished")
                )
            })
        })
        .collect();
    let mut ended_after_cancel = 0;
    for end in ends {
        ended_after_cancel += usize::from(end.await.unwrap_or(false));
    }
    Streams {
        open: held,
        errors,
        kib_per_session,
        ended_after_cancel,
    }
}

/// Runs the command `SCALE_AFTER_ROUND` names, if any, with the server's pid and `round`.
async fn after_round(pid: u32, round: &str) {
    let Some(hook) = std::env::var_os("SCALE_AFTER_ROUND") else {
        return;
    };
    let mut command = tokio::process::Command::new(&hook);
    command.arg(pid.to_string()).arg(round).kill_on_drop(true);
    let status = tokio::time::timeout(HOOK_LIMIT, command.status())
        .await
        .unwrap_or_else(|_| panic!("SCALE_AFTER_ROUND still ran after {HOOK_LIMIT:?}"))
        .expect("SCALE_AFTER_ROUND runs");
    assert!(status.success(), "SCALE_AFTER_ROUND {round}: {status}");
}

fn report_errors(what: &str, errors: &[String]) {
    if let Some(first) = errors.first() {
        println!("  {what}: {} errors, the first: {first}", errors.len());
    }
}

#[tokio::main]
async fn main() {
    testkit::stopping_on_signals(run()).await
}

async fn run() {
    let mut args = std::env::args().skip(1);
    let edith = PathBuf::from(
        args.next()
            .expect("usage: scale <edith> [sessions] [streams]"),
    );
    let sessions: usize = args.next().map_or(2000, |n| n.parse().expect("a count"));
    let stream_count: usize = args.next().map_or(10_000, |n| n.parse().expect("a count"));
    let replica_sessions: usize = args.next().map_or(1000, |n| n.parse().expect("a count"));
    let fanout: usize = args.next().map_or(3000, |n| n.parse().expect("a count"));
    testkit::raise_open_files();

    let dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(&edith);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(UNLIMITED)
        .env("EDITH_API_KEY", KEY);
    let server = ReadyProcess::spawn(command, "EDITH_READY url=", Duration::from_secs(60)).await;
    let pid = server.pid();
    let cp = ControlPlane::new(server.ready_value("url"));
    let profiles = cp.instance().await;
    let turns = cp.sessions(&profiles, "turns", sessions).await;
    let idle_before = usage_of(pid).rss_kib;
    let connections = open_connections(&cp, pid, turns.len()).await;
    after_round(pid, "connections").await;
    let first = round(&cp, pid, &turns, Way::TwoRequests).await;
    after_round(pid, "first").await;
    let next = round(&cp, pid, &turns, Way::TwoRequests).await;
    after_round(pid, "next").await;
    let idle_after = usage_of(pid).rss_kib;
    // What the allocator hands back once the burst is over (jemalloc: after a second).
    tokio::time::sleep(SETTLE).await;
    let idle_settled = usage_of(pid).rss_kib;
    let streamed = round(&cp, pid, &turns, Way::OneRequest).await;
    after_round(pid, "streamed").await;
    // Two requests again: what the order of the rounds does to the figures.
    let again = round(&cp, pid, &turns, Way::TwoRequests).await;
    after_round(pid, "again").await;
    // The client's keep-alive connections (one per session at most) closed: what the sessions
    // themselves hold, apart from what the server kept for those connections.
    drop(cp);
    tokio::time::sleep(SETTLE).await;
    let idle_closed = usage_of(pid).rss_kib;
    let cp = ControlPlane::new(server.ready_value("url"));
    let held = streams(&cp, pid, &profiles, stream_count).await;

    println!("one edith serve, embedded runtime, scripted model; {sessions} sessions");
    println!(
        "| every session sends a turn at once | turns/s | CPU per turn | page faults per turn | \
         errors | half the turns ended | 99 % ended | all ended |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let rounds = [
        ("its first turn", &first),
        ("its next turn", &next),
        ("its next turn, streamed in its POST", &streamed),
        ("its next turn, two requests again", &again),
    ];
    for (name, round) in rounds {
        println!(
            "| {name} | {:.0} | {:.2} ms | {:.1} | {} | {:.0} ms | {:.0} ms | {:.0} ms |",
            round.turns_per_second(),
            round.cpu_per_turn_ms(),
            round.minor_faults as f64 / round.turns as f64,
            round.errors.len(),
            round.ended_by_ms(0.5),
            round.ended_by_ms(0.99),
            round.ended_by_ms(1.0),
        );
    }
    println!(
        "before the first round, the client's connections opened (a health check on each, all \
         at once): {:.2} ms of CPU per request",
        connections.as_secs_f64() * 1000.0
    );
    let per_session = |rss_kib: u64| rss_kib.saturating_sub(idle_before) as f64 / sessions as f64;
    println!(
        "resident memory per idle session: {:.1} KiB right after its two turns and {:.1} KiB \
         {} s later, the client's connections open; {:.1} KiB after its four, the client's \
         connections closed for {} s",
        per_session(idle_after),
        per_session(idle_settled),
        SETTLE.as_secs(),
        per_session(idle_closed),
        SETTLE.as_secs()
    );
    println!(
        "{stream_count} sessions, each with a waiting turn and its stream open: {} streams \
         served, {:.1} KiB per such session, {} errors, {} streams ended after the cancel",
        held.open,
        held.kib_per_session,
        held.errors.len(),
        held.ended_after_cancel
    );
    report_errors("first turns", &first.errors);
    report_errors("next turns", &next.errors);
    report_errors("streamed turns", &streamed.errors);
    report_errors("turns again", &again.errors);
    report_errors("streams", &held.errors);
    // Generous: under a profiler (`scripts/profile-turns`) stopping takes far longer.
    server.stop(Duration::from_secs(120)).await;
    if replica_sessions == 0 {
        return;
    }

    let mut deployments = Vec::new();
    for count in [1, 3] {
        deployments.push(replicas::measure(&edith, count, replica_sessions, fanout).await);
    }
    println!();
    println!(
        "replicas on one PostgreSQL database; {replica_sessions} sessions (each turn sent to the \
         next replica in turn), then {fanout} streams on one turn spread over the replicas"
    );
    println!(
        "| replicas | turns/s | CPU per turn, all replicas | errors | the turn's end reached \
         every stream after | stream errors |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for figures in &deployments {
        println!(
            "| {} | {:.0} | {:.2} ms | {} | {} ms | {} |",
            figures.replicas,
            figures.next.turns_per_second(),
            figures.next.cpu_per_turn_ms(),
            figures.next.errors.len(),
            figures.fanout.as_millis(),
            figures.stream_errors.len()
        );
        report_errors("turns", &figures.next.errors);
        report_errors("streams", &figures.stream_errors);
    }
}
