//! Benchmark: what the control plane adds to a turn, per provider. For each target the same warm
//! turn (same fake model, a one-line answer) runs straight on a runtime's native gateway and
//! through the control plane, both ways an application can (POST the turn, then read its SSE
//! stream to the end; or POST it to `…/turns/stream` and read the reply's stream); the medians
//! and their differences are printed side by side. Asserts nothing. Run with `scripts/bench`.
//!
//! The `embedded` and `process` rows time the straight turns on a runtime of their own, started
//! for that, in its root home; the control plane's turns there are in its `default` profile,
//! which is a runtime's root home too (a named profile costs the real Hermes milliseconds more
//! per turn, whoever sends it). The `external` rows time all three ways alternated on one
//! runtime process and one profile home, which the control plane attaches to: the difference is
//! the control plane's alone, not that of another home (a `process` profile's home also names
//! the control plane's MCP endpoint) or of another moment.
//!
//! The ways take turns in an order that rotates every round, so that each follows each of the
//! others as often: a runtime may still be busy with the end of the turn before (the real
//! Hermes is, after `message.complete`, which ends a straight turn), and the turn after it pays
//! for that.
//! The `external` rows also give the median of each turn less the straight one of its round,
//! with that median's 95 % confidence interval: one run's median moves by tenths of a
//! millisecond with the real Hermes's pace, and the interval says by how much.
//!
//! Last, the control plane's own time in those turns, from its metrics: from a turn's request to
//! its prompt sent to the runtime, and from the runtime's last event to the turn's end written
//! and shown. It is what the control plane adds where a runtime's own pace, which moves by more
//! than a millisecond between runs (the real Hermes's), cannot blur it; the loopback requests
//! and the SSE's delivery are left out of it.
//!
//! Then the CPU used per turn: by this process (the control plane and its client) in each way,
//! and by the runtime itself in the `external` rows. Beside a runtime that needs more than the
//! machine has to spare, what the control plane uses meanwhile lengthens the runtime's turn.
//!
//! The fake model is a process of its own (`fake-openai`), as a real model is never in the
//! control plane's process: here it would answer a runtime's call only when the control
//! plane's threads, busy with the turn's other events, let it, and so stretch the turns sent
//! through the control plane alone.
//!
//! One more `external` row runs our runtime on a slow fake model, its turn as long as the real
//! Hermes's, right after the same runtime on the fast one: the control plane waits idle
//! through most of such a turn, and what a turn's length does to its share is then told apart
//! from what the real Hermes does.
//!
//! The last row runs the real Hermes again, on a CPU of its own: the last CPU this process may
//! use for it alone, the others for this process (the control plane and its client) and the
//! fake models, as with a runtime on a machine or a pod of its own (the `process` rows'
//! runtimes, idle by then, stay where they are). On a small machine the real Hermes keeps
//! a core busy through its turn; sharing the cores, the control plane's work slows it down, and
//! the row tells that apart from the control plane's own share. It needs two CPUs or more.
//!
//! Usage: [OVERHEAD_TURNS=300] [OVERHEAD_ROWS=<label>;…] [EDITH_SQLITE_SYNC=full]
//! overhead <fake-openai binary> <hermes-runtime binary> [<hermes binary>]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{ControlPlane, Model, TOKEN, read_to_end};
use hermes_native::methods::{
    PromptSubmit, PromptSubmitParams, SessionCreate, SessionCreateParams,
};
use hermes_native::{GatewayClient, LiveSessionId, NativeEvent};
use rustix::thread::CpuSet;
use serde_json::json;
use testkit::{ReadyProcess, metric_sample};

const WARMUP: usize = 10;
/// Measured turns per way unless `OVERHEAD_TURNS` says otherwise: the real Hermes's turns vary
/// by milliseconds, and the median of a few hundred is what places the control plane's
/// sub-millisecond share within a fraction of a millisecond (see the interval printed beside
/// it); more turns narrow the interval.
const TURNS: usize = 300;

/// The fewest measured turns `OVERHEAD_TURNS` may ask for: fewer give no 95 % interval.
const FEWEST_TURNS: usize = 10;

/// Whether the row labelled `label` runs: every row, unless `OVERHEAD_ROWS` lists the labels of
/// those to run, separated by `;` (as the tables print them), to measure a row with more turns
/// in the time all of them take.
fn runs(label: &str) -> bool {
    std::env::var("OVERHEAD_ROWS").map_or(true, |rows| rows.split(';').any(|row| row == label))
}

/// [`TURNS`], or the count `OVERHEAD_TURNS` gives.
fn measured_turns() -> usize {
    std::env::var("OVERHEAD_TURNS").map_or(TURNS, |n| {
        n.parse()
            .ok()
            .filter(|n| *n >= FEWEST_TURNS)
            .unwrap_or_else(|| panic!("OVERHEAD_TURNS: a count of turns, {FEWEST_TURNS} or more"))
    })
}

/// The native profile of the `external` rows, made in the runtime's home before it starts.
const PROFILE: &str = "bench";
/// The profile of the `embedded` and `process` rows: the runtime's root home.
const DEFAULT_PROFILE: &str = "default";
/// Sessions per way, its turns taken from each in turn: the real Hermes's pace differs by
/// several milliseconds from one session to another, and this spreads it over every way alike
/// (and keeps each session's history, which slows a turn down, as short on every way).
const SESSIONS_PER_WAY: usize = 4;
/// The slow model's pause before each piece of its answer: a turn of our runtime on it takes
/// about what a turn of the real Hermes takes on the fast one here (45 to 60 ms).
const SLOW_PIECE_MS: u64 = 12;
/// A warm turn of the fake model's one-line answer takes milliseconds.
const TURN_LIMIT: Duration = Duration::from_secs(60);

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `through` less `straight`, negative when the control plane's way was the faster.
fn overhead(through: Duration, straight: Duration) -> String {
    let difference = through.as_secs_f64() - straight.as_secs_f64();
    format!("{:.2} ms", difference * 1000.0)
}

/// One turn straight on a gateway: `prompt.submit` to `message.complete`.
async fn direct_turn(gateway: &GatewayClient, sid: &LiveSessionId) -> Duration {
    let mut events = gateway.subscribe(sid);
    let started = Instant::now();
    let params = PromptSubmitParams {
        session_id: Some(sid.clone()),
        text: Some("hello".to_owned()),
        ..Default::default()
    };
    gateway.request::<PromptSubmit>(&params).await.unwrap();
    let completed = async {
        while let Some(event) = events.recv().await {
            if matches!(event, NativeEvent::MessageComplete(_)) {
                break;
            }
        }
    };
    // A runtime that hangs (the real Hermes sometimes does) is reported, not waited on.
    tokio::time::timeout(TURN_LIMIT, completed)
        .await
        .unwrap_or_else(|_| panic!("the runtime did not finish a turn in {TURN_LIMIT:?}"));
    let took = started.elapsed();
    gateway.unsubscribe(sid);
    took
}

/// Sessions straight on a runtime's gateway.
struct Straight {
    gateway: GatewayClient,
    sessions: Vec<LiveSessionId>,
}

impl Straight {
    /// Sessions on the gateway at `ws_url`, in the native profile `profile` (`None`: the
    /// runtime's root home).
    async fn open(ws_url: &str, profile: Option<&str>) -> Self {
        let gateway = GatewayClient::connect(ws_url, TOKEN, Duration::from_secs(120))
            .await
            .expect("connect");
        let params = SessionCreateParams {
            profile: profile.map(str::to_owned),
            ..Default::default()
        };
        let mut sessions = Vec::new();
        for _ in 0..SESSIONS_PER_WAY {
            let created = gateway.request::<SessionCreate>(&params).await.unwrap();
            sessions.push(created.session_id);
        }
        Self { gateway, sessions }
    }

    /// The `i`th turn, on the session whose turn it is.
    async fn turn(&self, i: usize) -> Duration {
        let session = &self.sessions[i % self.sessions.len()];
        direct_turn(&self.gateway, session).await
    }
}

/// Warm turns straight on the gateway at `ws_url`, root home.
async fn direct(ws_url: &str) -> Duration {
    let straight = Straight::open(ws_url, None).await;
    for i in 0..WARMUP {
        straight.turn(i).await;
    }
    let mut samples = Vec::new();
    for i in 0..measured_turns() {
        samples.push(straight.turn(i).await);
    }
    median(samples)
}

/// A runtime binary serving a home whose root and native profile `bench` are configured for
/// `model`.
async fn launch(binary: &Path, home: &Path, model: &Model, cpus: Option<&CpuSet>) -> ReadyProcess {
    let process = common::launch(binary, home, PROFILE, model).await;
    if let Some(cpus) = cpus {
        keep_on(Some(process.pid()), cpus);
    }
    process
}

impl ControlPlane {
    /// The control plane's own time in the turns it drove so far, by leg: the sum and count of
    /// each (`edith_turn_own_seconds`, to the runtime then from it).
    async fn own_time(&self) -> [(f64, f64); 2] {
        let text = self
            .request(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let sample = |name: &str| metric_sample(&text, name);
        ["to_runtime", "from_runtime"].map(|leg| {
            (
                sample(&format!("edith_turn_own_seconds_sum{{leg=\"{leg}\"}}")),
                sample(&format!("edith_turn_own_seconds_count{{leg=\"{leg}\"}}")),
            )
        })
    }

    /// `binary` started in a home of its own on `model` and attached to as the `external`
    /// instance `name`; its turns straight on the gateway alternated with the control plane's
    /// ([`ControlPlane::warm_turns`]), on one native profile; the runtime kept on `cpus` (on
    /// any CPU when `None`).
    async fn external(
        &self,
        name: &str,
        binary: &Path,
        model: &Model,
        cpus: Option<&CpuSet>,
    ) -> (Duration, Through) {
        let home = tempfile::tempdir().unwrap();
        let process = launch(binary, home.path(), model, cpus).await;
        let port = process.ready_value("port");
        let body = json!({"name": name, "provider": "external",
            "url": format!("http://127.0.0.1:{port}"), "token": TOKEN});
        let turns = self.session(body, PROFILE, None).await;
        let url = format!("ws://127.0.0.1:{port}/api/ws");
        let straight = Straight::open(&url, Some(PROFILE)).await;
        let runtime = Some(process.pid());
        let (through, straight) = self.warm_turns(&turns, Some(&straight), runtime).await;
        process.stop(Duration::from_secs(30)).await;
        (straight.expect("straight turns were taken"), through)
    }

    /// One turn streamed in the POST that starts it.
    async fn streamed_turn(&self, turns: &str) -> Duration {
        let started = Instant::now();
        let response = self
            .request(reqwest::Method::POST, &format!("{turns}/stream"))
            .json(&json!({"input": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        read_to_end(response).await;
        started.elapsed()
    }

    /// One turn through the control plane: POST it, then its event stream to the end. Returns
    /// the POST's round trip and the whole.
    async fn turn(&self, turns: &str) -> (Duration, Duration) {
        let started = Instant::now();
        let turn = self.post(turns, json!({"input": "hello"})).await;
        let posted = started.elapsed();
        let id = turn["id"].as_str().unwrap();
        self.read_stream(&format!("{turns}/{id}/events")).await;
        (posted, started.elapsed())
    }

    /// `count` new sessions beside the one whose turns are at `turns`; their turns paths.
    async fn other_sessions(&self, turns: &str, count: usize) -> Vec<String> {
        let sessions = &turns[..turns.rfind("/sessions/").expect("a session's turns")];
        let sessions = format!("{sessions}/sessions");
        let mut paths = Vec::new();
        for _ in 0..count {
            let session = self.post(&sessions, json!({})).await;
            paths.push(format!(
                "{sessions}/{}/turns",
                session["id"].as_str().unwrap()
            ));
        }
        paths
    }

    /// Medians of the POST alone, of the whole turn, and of a turn streamed in its POST (the
    /// two ways alternated, so that they share the machine's moods). Each way has sessions of
    /// its own with as many turns as the straight ones: a runtime's turn grows with its
    /// session's history (the real Hermes's by tens of milliseconds over a hundred turns). With
    /// `straight`, its turns go in the same alternation; the median of those comes back too.
    /// With `runtime`, the CPU that process used through the measured turns is told too.
    async fn warm_turns(
        &self,
        turns: &str,
        straight: Option<&Straight>,
        runtime: Option<u32>,
    ) -> (Through, Option<Duration>) {
        let mut sessions = self.other_sessions(turns, 2 * SESSIONS_PER_WAY - 1).await;
        sessions.push(turns.to_owned());
        let (two_requests, one_request) = sessions.split_at(SESSIONS_PER_WAY);
        let (mut posts, mut wholes, mut streamed) = (Vec::new(), Vec::new(), Vec::new());
        let mut straights = Vec::new();
        let mut ways = vec![Way::TwoRequests, Way::OneRequest];
        if straight.is_some() {
            ways.push(Way::Straight);
        }
        let mut own_before = None;
        let mut runtime_before = None;
        let mut cpu = CpuUsed::default();
        for i in 0..WARMUP + measured_turns() {
            let measured = i >= WARMUP;
            if i == WARMUP {
                own_before = Some(self.own_time().await);
                runtime_before = runtime.map(|pid| (runtime_cpu(pid), Instant::now()));
            }
            let session = i % SESSIONS_PER_WAY;
            // Each round starts with the next way: each follows each of the others as often.
            for way in (0..ways.len()).map(|w| ways[(w + i) % ways.len()]) {
                let cpu_before = process_cpu();
                match (way, straight) {
                    (Way::Straight, Some(straight)) => {
                        let took = straight.turn(i).await;
                        if measured {
                            straights.push(took);
                        }
                    }
                    (Way::TwoRequests, _) => {
                        let (post, whole) = self.turn(&two_requests[session]).await;
                        if measured {
                            posts.push(post);
                            wholes.push(whole);
                        }
                    }
                    (Way::OneRequest, _) => {
                        let took = self.streamed_turn(&one_request[session]).await;
                        if measured {
                            streamed.push(took);
                        }
                    }
                    (Way::Straight, None) => unreachable!("only with straight turns"),
                }
                if measured {
                    cpu.add(way, process_cpu() - cpu_before);
                }
            }
        }
        // Each round's turns against its straight one: the median of a turn's own overhead.
        let paired = |through: &[Duration]| {
            let differences = through
                .iter()
                .zip(&straights)
                .map(|(through, straight)| through.as_secs_f64() - straight.as_secs_f64())
                .collect();
            Paired::of(differences)
        };
        let paired = straight.map(|_| (paired(&wholes), paired(&streamed)));
        let own_before = own_before.expect("taken before the measured turns");
        cpu.runtime = runtime.zip(runtime_before).map(|(pid, (before, since))| {
            let used = (runtime_cpu(pid) - before).as_secs_f64();
            let turns = ways.len() * measured_turns();
            RuntimeCpu {
                per_turn: used * 1000.0 / turns as f64,
                cores: used / since.elapsed().as_secs_f64(),
            }
        });
        let own_after = self.own_time().await;
        // The mean of each leg over the measured turns, in milliseconds.
        let own = [0, 1].map(|leg| {
            let (sum, count) = own_after[leg];
            let (sum_before, count_before) = own_before[leg];
            (sum - sum_before) / (count - count_before) * 1000.0
        });
        let through = Through {
            own,
            post: median(posts),
            two_requests: median(wholes),
            one_request: median(streamed),
            paired,
            cpu,
        };
        let straight = straight.map(|_| median(straights));
        (through, straight)
    }
}

/// Of the CPUs this process may run on, the last one, for a runtime alone, and the others;
/// `None` with fewer than two.
fn cpus_apart() -> Option<(CpuSet, CpuSet)> {
    let allowed = rustix::thread::sched_getaffinity(None).expect("this process's CPUs");
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|cpu| allowed.is_set(*cpu))
        .collect();
    let (&last, rest) = cpus.split_last()?;
    if rest.is_empty() {
        return None;
    }
    let (mut runtime, mut others) = (CpuSet::new(), CpuSet::new());
    runtime.set(last);
    rest.iter().for_each(|cpu| others.set(*cpu));
    Some((runtime, others))
}

/// Keeps every thread of process `pid` (this one when `None`) on `cpus`; the threads they start
/// later inherit it. Panics when a thread cannot be moved, rather than let a row claim a
/// placement it did not have.
fn keep_on(pid: Option<u32>, cpus: &CpuSet) {
    let tasks = match pid {
        Some(pid) => format!("/proc/{pid}/task"),
        None => "/proc/self/task".to_owned(),
    };
    let mut kept = std::collections::HashSet::new();
    // Until a pass finds no thread it had not moved: one started during a pass may be missed.
    for _ in 0..100 {
        let mut moved = 0;
        for task in std::fs::read_dir(&tasks).expect("the process's threads") {
            let tid: i32 = task.unwrap().file_name().to_str().unwrap().parse().unwrap();
            if !kept.insert(tid) {
                continue;
            }
            moved += 1;
            let thread = rustix::process::Pid::from_raw(tid).expect("a thread id");
            match rustix::thread::sched_setaffinity(Some(thread), cpus) {
                // A thread that ended meanwhile is no matter.
                Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                Err(e) => panic!("thread {tid} of {tasks} could not be moved: {e}"),
            }
        }
        if moved == 0 {
            return;
        }
    }
    panic!("{tasks} kept starting threads while they were moved");
}

/// How a turn is sent.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// Straight on the runtime's gateway.
    Straight,
    /// `turn_create`, then `turn_events`.
    TwoRequests,
    /// `turn_create_stream`.
    OneRequest,
}

/// A target's turn through the control plane, medians.
struct Through {
    /// The POST of `turn_create` alone.
    post: Duration,
    /// `turn_create`, then `turn_events` to the end.
    two_requests: Duration,
    /// `turn_create_stream`, read to the end.
    one_request: Duration,
    /// With straight turns in the same rounds: the median over rounds of each way's turn less
    /// the round's straight one, in milliseconds (two requests, one request).
    paired: Option<(Paired, Paired)>,
    /// The control plane's own time per turn, from its metrics: the mean over both ways of
    /// each leg, in milliseconds (request to prompt sent; runtime's last event to the turn's
    /// end written and shown).
    own: [f64; 2],
    /// The CPU this process used through each way's turns.
    cpu: CpuUsed,
}

/// The CPU time of this process (the control plane, its client and the straight turns'
/// client; in the `embedded` row the runtime too), summed by the way of the turn it was used
/// during. It tells what a runtime's turn costs the control plane's machine, where the turn's
/// length moves with what else runs there.
#[derive(Default)]
struct CpuUsed {
    /// Per way (straight, two requests, one request): the sum and the count of turns.
    ways: [(Duration, u32); 3],
    /// The runtime's own CPU through the measured turns: the `external` rows', whose runtime is
    /// a process of its own here.
    runtime: Option<RuntimeCpu>,
}

/// What a runtime process used through the measured turns.
struct RuntimeCpu {
    /// Per turn, every way's turns alike, in milliseconds.
    per_turn: f64,
    /// The cores it kept busy on average from the first measured turn to the last.
    cores: f64,
}

impl CpuUsed {
    fn add(&mut self, way: Way, used: Duration) {
        let (sum, count) = &mut self.ways[way as usize];
        *sum += used;
        *count += 1;
    }

    /// The mean per turn of `way`, in milliseconds; `None` when it took no turns here.
    fn mean(&self, way: Way) -> Option<f64> {
        let (sum, count) = self.ways[way as usize];
        (count > 0).then(|| sum.as_secs_f64() * 1000.0 / f64::from(count))
    }
}

/// The CPU time process `pid` has used so far, all its threads and the children it waited for
/// (a child still running is left out).
fn runtime_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the runtime's stat");
    // The fields after the command's name, which ends with the last `)`: state is field 3, so
    // utime, stime, cutime and cstime (14 to 17) are the 12th to the 15th.
    let (_, fields) = stat.rsplit_once(')').expect("a stat line");
    let ticks: u64 = fields
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|ticks| ticks.parse::<u64>().expect("a count of clock ticks"))
        .sum();
    let per_second = rustix::param::clock_ticks_per_second();
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// The CPU time this process has used so far, all its threads.
fn process_cpu() -> Duration {
    let used = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(used.tv_sec as u64, used.tv_nsec as u32)
}

/// The median of each round's turn less its straight one, in milliseconds, with the 95 %
/// confidence interval of that median: the order statistics of 1-based ranks `n/2 − 0.98·√n`
/// and `n/2 + 1 + 0.98·√n` of the sorted differences (the binomial interval, which asks of the
/// differences only that the rounds be alike and independent of each other).
struct Paired {
    median: f64,
    low: f64,
    high: f64,
}

impl Paired {
    fn of(mut seconds: Vec<f64>) -> Self {
        seconds.sort_by(f64::total_cmp);
        let n = seconds.len() as f64;
        let half_width = 0.98 * n.sqrt();
        let low_rank = (n / 2.0 - half_width).round() as usize;
        let high_rank = (n / 2.0 + 1.0 + half_width).round() as usize;
        assert!(
            low_rank >= 1 && high_rank <= seconds.len(),
            "{n} rounds are too few for a 95 % interval of their median"
        );
        let ms = |index: usize| seconds[index] * 1000.0;
        Self {
            median: ms(seconds.len() / 2),
            low: ms(low_rank - 1),
            high: ms(high_rank - 1),
        }
    }
}

impl std::fmt::Display for Paired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} ms ({:.2} to {:.2})",
            self.median, self.low, self.high
        )
    }
}

/// The allocator of the `edith` binary, so the control plane here runs as it does there.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    testkit::stopping_on_signals(run()).await
}

async fn run() {
    let args = common::binaries();
    let usage = "usage: [OVERHEAD_TURNS=300] [OVERHEAD_ROWS=<label>;…] overhead \
                 <fake-openai> <hermes-runtime> [<hermes>]";
    // A count it cannot use is told before any row runs.
    measured_turns();
    let model_binary = args.first().expect(usage);
    let model = Model::start(model_binary, &[]).await;
    let ours = args.get(1).expect(usage);
    let hermes = args.get(2);

    let dir = tempfile::tempdir().unwrap();
    let (server, plane) =
        common::start_control_plane(dir.path(), ours, hermes.map(PathBuf::as_path)).await;

    let mut rows = Vec::new();
    // Embedded: the runtime in this process, as the embedded provider runs it.
    if runs("embedded") {
        let home = tempfile::tempdir().unwrap();
        let config = json!({"model": model.hermes_model_config()});
        std::fs::write(home.path().join("config.yaml"), config.to_string()).unwrap();
        let runtime = hermes_runtime::serve(hermes_runtime::RuntimeConfig::new(
            home.path().to_path_buf(),
            TOKEN.to_owned(),
            ([127, 0, 0, 1], 0).into(),
        ))
        .await
        .unwrap();
        let straight = direct(&runtime.ws_url()).await;
        runtime.shutdown().await;
        let turns = plane
            .session(json!({"name": "embedded"}), DEFAULT_PROFILE, Some(&model))
            .await;
        let (through, _) = plane.warm_turns(&turns, None, None).await;
        rows.push(("embedded".to_owned(), straight, through));
    }
    let mut process_targets = vec![("hermes-runtime", "ours", ours.clone())];
    if let Some(hermes) = hermes {
        process_targets.push(("hermes 0.19.0", "hermes", hermes.clone()));
    }
    for (label, runtime, binary) in &process_targets {
        let label = format!("process: {label}");
        if !runs(&label) {
            continue;
        }
        let home = tempfile::tempdir().unwrap();
        let process = launch(binary, home.path(), &model, None).await;
        let url = format!("ws://127.0.0.1:{}/api/ws", process.ready_value("port"));
        let straight = direct(&url).await;
        process.stop(Duration::from_secs(30)).await;
        let body = json!({"name": runtime, "provider": "process", "runtime": runtime});
        let turns = plane.session(body, DEFAULT_PROFILE, Some(&model)).await;
        let (through, _) = plane.warm_turns(&turns, None, None).await;
        rows.push((label, straight, through));
    }
    // Our runtime on a model as slow as the real Hermes's turn is here, right after the same
    // runtime on the fast one: what the turn's length does to the control plane's share, told
    // apart from what the real Hermes does.
    let slow = Model::start(
        model_binary,
        &["--piece-delay-ms", &SLOW_PIECE_MS.to_string()],
    )
    .await;
    let slow_label = format!("hermes-runtime, model {SLOW_PIECE_MS} ms a piece");
    let mut external_targets = vec![
        ("hermes-runtime", "ours-external", ours, &model),
        (slow_label.as_str(), "ours-slow-model", ours, &slow),
    ];
    if let Some(hermes) = hermes {
        external_targets.push(("hermes 0.19.0", "hermes-external", hermes, &model));
    }
    for (label, name, binary, model) in external_targets {
        let label = format!("external: {label}");
        if !runs(&label) {
            continue;
        }
        let (straight, through) = plane.external(name, binary, model, None).await;
        rows.push((label, straight, through));
    }
    // Last, the real Hermes on a CPU of its own, as a runtime on a machine or a pod of its own
    // would be: this process (the control plane and the client) and the fake model are moved
    // off that CPU for good, so this row comes after all the others.
    // The `process` rows' runtimes, idle since their rows, are left where they are.
    let apart = "external: hermes 0.19.0, on a CPU of its own";
    if let (Some(hermes), Some((runtime_cpus, other_cpus))) = (hermes, cpus_apart())
        && runs(apart)
    {
        keep_on(None, &other_cpus);
        for model in [&model, &slow] {
            keep_on(Some(model.process.pid()), &other_cpus);
        }
        let (straight, through) = plane
            .external("hermes-apart", hermes, &model, Some(&runtime_cpus))
            .await;
        rows.push((apart.to_owned(), straight, through));
    }
    server.shutdown().await;
    model.stop().await;
    slow.stop().await;
    assert!(
        !rows.is_empty(),
        "OVERHEAD_ROWS named no row (the labels are those the tables print)"
    );

    println!(
        "warm turn, one-line answer from the fake model; medians of {} after {WARMUP}",
        measured_turns()
    );
    println!(
        "| target | straight on the gateway | POST, then its stream | of which the POST | \
         streamed in its POST | overhead, two requests | overhead, one request |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut paired_rows = Vec::new();
    let mut own_rows = Vec::new();
    let mut cpu_rows = Vec::new();
    for (label, straight, through) in rows {
        if let Some((two, one)) = through.paired {
            paired_rows.push(format!("| {label} | {two} | {one} |"));
        }
        let [to, from] = through.own;
        let cpu = |way| {
            through
                .cpu
                .mean(way)
                .map_or_else(String::new, |used| format!("{used:.3} ms"))
        };
        let runtime = (through.cpu.runtime)
            .as_ref()
            .map_or_else(String::new, |used| {
                format!("{:.1} ms, {:.2} cores", used.per_turn, used.cores)
            });
        cpu_rows.push(format!(
            "| {label} | {} | {} | {} | {runtime} |",
            cpu(Way::Straight),
            cpu(Way::TwoRequests),
            cpu(Way::OneRequest)
        ));
        own_rows.push(format!(
            "| {label} | {to:.3} ms | {from:.3} ms | {:.3} ms |",
            to + from
        ));
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} |",
            ms(straight),
            ms(through.two_requests),
            ms(through.post),
            ms(through.one_request),
            overhead(through.two_requests, straight),
            overhead(through.one_request, straight),
        );
    }
    println!();
    println!(
        "each turn against the straight one of its round, median and its 95 % confidence \
         interval (same runtime and home)"
    );
    println!("| target | overhead, two requests | overhead, one request |");
    println!("|---|---:|---:|");
    for row in paired_rows {
        println!("{row}");
    }
    println!();
    println!(
        "the control plane's own time per turn, from its metrics (edith_turn_own_seconds), \
         mean of both ways"
    );
    println!("| target | request to prompt sent | last event to end shown | both |");
    println!("|---|---:|---:|---:|");
    for row in own_rows {
        println!("{row}");
    }
    println!();
    println!(
        "the CPU this process (the control plane and its client; in the embedded row the \
         runtime too) used per turn, mean by way"
    );
    println!(
        "| target | straight on the gateway | two requests | one request | the runtime's own, \
         every way (external rows) |"
    );
    println!("|---|---:|---:|---:|---:|");
    for row in cpu_rows {
        println!("{row}");
    }
}
