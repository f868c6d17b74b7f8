//! What operators scrape at `GET /metrics` (the OpenMetrics text format, which Prometheus
//! reads): turns by final state and how long they took, the control plane's own time in a
//! turn, events appended, event streams open,
//! instances by provider and state, jobs by outcome and how long their steps took, runtime
//! restarts, and HTTP requests by route and status. Each is declared once here; the code that
//! does the work calls the method that counts it.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LegLabel {
    leg: &'static str,
}

/// Where in a turn the control plane works while the turn waits for it.
#[derive(Clone, Copy, Debug)]
pub enum TurnLeg {
    /// From the request that starts the turn reaching the control plane to its prompt sent to
    /// the runtime.
    ToRuntime,
    /// From the runtime's event that ends the turn being read to the turn's end written.
    FromRuntime,
}

impl TurnLeg {
    fn label(self) -> LegLabel {
        let leg = match self {
            TurnLeg::ToRuntime => "to_runtime",
            TurnLeg::FromRuntime => "from_runtime",
        };
        LegLabel { leg }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LogLabel {
    log: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabel {
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    provider: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// From 1 ms to about 16 minutes: a scripted turn takes milliseconds, a model's minutes.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 11))
}

/// From 50 µs to about 1.6 s: the control plane's own part of a turn.
fn short_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// The control plane's metrics.
pub struct Metrics {
    registry: Registry,
    turns: Family<StateLabel, Counter>,
    turn_seconds: Histograms<StateLabel>,
    leg_seconds: Histograms<LegLabel>,
    events: Family<LogLabel, Counter>,
    streams_open: Gauge,
    logs_followed: Gauge,
    live_sessions: Gauge,
    turn_log_writes: Counter,
    jobs: Family<JobLabels, Counter>,
    step_seconds: Histograms<StepLabel>,
    restarts: Counter,
    instances: Family<InstanceLabels, Gauge>,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("edith");
        let turns = Family::default();
        registry.register("turns", "Turns that ended, by final state", turns.clone());
        let turn_seconds: Histograms<StateLabel> = Family::new_with_constructor(seconds);
        registry.register(
            "turn_duration_seconds",
            "How long turns took, from being driven to their end, by final state",
            turn_seconds.clone(),
        );
        let leg_seconds: Histograms<LegLabel> = Family::new_with_constructor(short_seconds);
        registry.register(
            "turn_own_seconds",
            "The control plane's time in turns it drives, which the caller waits for: from \
             the request arriving to the prompt sent to the runtime (to_runtime), and from the \
             runtime's last event read to the turn's end written (from_runtime)",
            leg_seconds.clone(),
        );
        let events = Family::default();
        registry.register(
            "events_appended",
            "Events appended to turn and job logs",
            events.clone(),
        );
        let streams_open = Gauge::default();
        registry.register(
            "event_streams_open",
            "Event streams (SSE) and gateway relays open now",
            streams_open.clone(),
        );
        let logs_followed = Gauge::default();
        registry.register(
            "event_logs_followed",
            "Turn and job logs with a live channel now (each held by open streams of an \
             unfinished log)",
            logs_followed.clone(),
        );
        let live_sessions = Gauge::default();
        registry.register(
            "live_sessions",
            "Live sessions open on the runtimes this replica is connected to, those native calls \
             opened included (each closed once it has gone `Limits::live_session_idle` without a \
             turn or a native call; a connection being opened or checked by a turn at that moment \
             is left out)",
            live_sessions.clone(),
        );
        let turn_log_writes = Counter::default();
        registry.register(
            "turn_log_writes",
            "SQLite statements that appended turn events between a turn's changes of state; one \
             carries the events of every turn that waited for it (none on PostgreSQL)",
            turn_log_writes.clone(),
        );
        let jobs = Family::default();
        registry.register("jobs", "Jobs that ended, by kind and outcome", jobs.clone());
        let step_seconds: Histograms<StepLabel> = Family::new_with_constructor(seconds);
        registry.register(
            "job_step_duration_seconds",
            "How long job steps took, by step",
            step_seconds.clone(),
        );
        let restarts = Counter::default();
        registry.register(
            "runtime_restarts",
            "Runtimes started again after they exited on their own",
            restarts.clone(),
        );
        let instances = Family::default();
        registry.register(
            "instances",
            "Instances by provider and state (deleted ones aside)",
            instances.clone(),
        );
        let requests = Family::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        let request_seconds: Histograms<RouteLabels> = Family::new_with_constructor(seconds);
        registry.register(
            "http_request_duration_seconds",
            "How long HTTP requests took to answer (an event stream: until its head)",
            request_seconds.clone(),
        );
        Self {
            registry,
            turns,
            turn_seconds,
            leg_seconds,
            events,
            streams_open,
            logs_followed,
            live_sessions,
            turn_log_writes,
            jobs,
            step_seconds,
            restarts,
            instances,
            requests,
            request_seconds,
        }
    }
}

impl Metrics {
    /// A turn ended in `state` after `took` (unknown for a turn a previous process left).
    pub fn turn_ended(&self, state: &'static str, took: Option<Duration>) {
        let label = StateLabel { state };
        self.turns.get_or_create(&label).inc();
        if let Some(took) = took {
            self.turn_seconds
                .get_or_create(&label)
                .observe(took.as_secs_f64());
        }
    }

    /// The control plane spent `took` on `leg` of a turn.
    pub fn turn_leg_took(&self, leg: TurnLeg, took: Duration) {
        self.leg_seconds
            .get_or_create(&leg.label())
            .observe(took.as_secs_f64());
    }

    /// An event was appended to a turn's log.
    pub fn turn_event_appended(&self) {
        self.events.get_or_create(&LogLabel { log: "turn" }).inc();
    }

    /// An event was appended to a job's log.
    pub fn job_event_appended(&self) {
        self.events.get_or_create(&LogLabel { log: "job" }).inc();
    }

    /// The gauge of open event streams (kept by whoever holds a stream's place).
    pub fn streams_open(&self) -> Gauge {
        self.streams_open.clone()
    }

    pub fn job_ended(&self, kind: &'static str, succeeded: bool) {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        self.jobs.get_or_create(&JobLabels { kind, outcome }).inc();
    }

    pub fn job_step_took(&self, step: &str, took: Duration) {
        let label = StepLabel {
            step: step.to_owned(),
        };
        self.step_seconds
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    pub fn runtime_restarted(&self) {
        self.restarts.inc();
    }

    pub fn request_answered(&self, method: &str, route: &str, status: u16, took: Duration) {
        let (method, route) = (method.to_owned(), route.to_owned());
        let labels = RouteLabels { method, route };
        self.request_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        let labels = RequestLabels {
            method: labels.method,
            route: labels.route,
            status,
        };
        self.requests.get_or_create(&labels).inc();
    }

    /// The text a scrape gets, with the instance counts, the followed logs, the live sessions
    /// and the store's turn-log writes (`Store::turn_log_writes`) as they are now.
    pub fn render(
        &self,
        instances: &[(String, String, u64)],
        logs_followed: usize,
        live_sessions: usize,
        turn_log_writes: Option<u64>,
    ) -> String {
        self.logs_followed
            .set(i64::try_from(logs_followed).unwrap_or(i64::MAX));
        self.live_sessions
            .set(i64::try_from(live_sessions).unwrap_or(i64::MAX));
        // The store counts; the counter catches up with it.
        if let Some(writes) = turn_log_writes {
            self.turn_log_writes
                .inc_by(writes.saturating_sub(self.turn_log_writes.get()));
        }
        self.instances.clear();
        for (provider, state, count) in instances {
            let labels = InstanceLabels {
                provider: provider.clone(),
                state: state.clone(),
            };
            self.instances
                .get_or_create(&labels)
                .set(i64::try_from(*count).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String does not fail");
        text
    }
}
