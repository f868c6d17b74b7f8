//! What one caller may ask of the server: request bodies and turn inputs of bounded size, a
//! bounded number of open event streams, and a request rate (a token bucket per key). A caller
//! over a limit is refused with a clear error; other callers are not slowed down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use edith_types::{ApiKeyId, ErrorCode};
use prometheus_client::metrics::gauge::Gauge;

use crate::error::{AppError, AppResult};

/// The limits, set per server (`ServerConfig::limits`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest request body taken, in bytes.
    pub max_body_bytes: usize,
    /// The longest turn input taken, in characters.
    pub max_input_chars: usize,
    /// How many event streams one key may hold open at once.
    pub streams_per_key: usize,
    /// Requests one key may make per second, on average…
    pub requests_per_second: f64,
    /// …and at once, after a quiet spell.
    pub burst: f64,
    /// How many frames a gateway relay keeps for a client that drops to resume from…
    pub relay_kept_frames: usize,
    /// …and how many bytes of them, at most (the newest frame is kept whatever its size).
    pub relay_kept_bytes: usize,
    /// How long a relay client may stay silent (no pong to the pings it is sent a third of
    /// this apart, no request) before its socket counts as dropped.
    pub relay_silence: std::time::Duration,
    /// How long a client may take to send a request's head, and how long a keep-alive
    /// connection may stay idle, before it is disconnected.
    pub header_timeout: std::time::Duration,
    /// How long a request's body may take to arrive, once its head has.
    pub body_timeout: std::time::Duration,
    /// How many connections are served at once; more wait to be accepted until one ends
    /// (slow and idle ones end at the header timeout).
    pub max_connections: usize,
    /// How large a `process` runtime's log grows before it is rotated (one older file kept).
    pub runtime_log_bytes: u64,
    /// How long a session's live session on its runtime stays open after its last turn (at
    /// least a second: less is taken as a second); then it is closed, within a quarter of this
    /// more (a minute at most), and the session's next turn resumes its stored session. (The
    /// real Hermes holds a Python process of about 50 MB for each live session.) One a native
    /// call opened is closed this long after the last native call that named it, once it has
    /// sent no event for this long either.
    pub live_session_idle: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_input_chars: 100_000,
            streams_per_key: 64,
            requests_per_second: 50.0,
            burst: 200.0,
            relay_kept_frames: 4096,
            relay_kept_bytes: 1 << 20,
            relay_silence: std::time::Duration::from_secs(45),
            header_timeout: std::time::Duration::from_secs(30),
            body_timeout: std::time::Duration::from_secs(30),
            max_connections: 4096,
            runtime_log_bytes: 10 * 1024 * 1024,
            live_session_idle: std::time::Duration::from_secs(10 * 60),
        }
    }
}

/// A key's request allowance.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Keeps the per-key counts the limits need.
pub struct Gate {
    limits: Limits,
    buckets: Mutex<HashMap<ApiKeyId, Bucket>>,
    streams: Arc<Mutex<HashMap<ApiKeyId, usize>>>,
    open: Gauge,
}

/// An open event stream counted against its key; dropping it (the stream ends or the client
/// goes) gives the place back.
pub struct StreamPermit {
    key: ApiKeyId,
    streams: Arc<Mutex<HashMap<ApiKeyId, usize>>>,
    open: Gauge,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.open.dec();
        let mut streams = self.streams.lock().expect("not poisoned");
        if let Some(open) = streams.get_mut(&self.key) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                streams.remove(&self.key);
            }
        }
    }
}

impl Gate {
    /// `open` counts the streams open, for `/metrics`.
    pub fn new(limits: Limits, open: Gauge) -> Self {
        Self {
            limits,
            buckets: Mutex::new(HashMap::new()),
            streams: Arc::default(),
            open,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Takes one request from `key`'s allowance, or refuses with the seconds until the next.
    pub fn admit(&self, key: &ApiKeyId) -> AppResult<()> {
        let (rate, burst) = (self.limits.requests_per_second, self.limits.burst);
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("not poisoned");
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refill = now.duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - bucket.tokens) / rate).ceil().max(1.0) as u64;
        Err(too_many(
            format!(
                "this key made more than {rate} requests a second (bursts of {burst}); retry in \
                 {wait} s"
            ),
            wait,
        ))
    }

    /// Forgets a key's allowance (it was revoked).
    pub fn forget(&self, key: &ApiKeyId) {
        self.buckets.lock().expect("not poisoned").remove(key);
    }

    /// Counts a new event stream against `key`, or refuses when it holds as many as it may.
    pub fn open_stream(&self, key: &ApiKeyId) -> AppResult<StreamPermit> {
        let mut streams = self.streams.lock().expect("not poisoned");
        let open = streams.entry(key.clone()).or_insert(0);
        if *open >= self.limits.streams_per_key {
            return Err(too_many(
                format!(
                    "this key holds {} open event streams, as many as it may; close one",
                    self.limits.streams_per_key
                ),
                1,
            ));
        }
        *open += 1;
        self.open.inc();
        Ok(StreamPermit {
            key: key.clone(),
            streams: self.streams.clone(),
            open: self.open.clone(),
        })
    }
}

fn too_many(detail: String, retry_after: u64) -> AppError {
    AppError {
        retry_after: Some(retry_after),
        ..AppError::new(ErrorCode::TooManyRequests, detail)
    }
}
