//! Traces across process boundaries. The control plane's spans are plain `tracing` spans (a
//! request, the turn it starts, each call on a runtime's gateway, a tool call); they leave the
//! process only when the program installs an OpenTelemetry layer (`edith serve
//! --otlp-endpoint`). Two links the span tree cannot make on its own are made here: a request
//! that carries a W3C `traceparent` continues the caller's trace, and a tool call (which the
//! runtime makes on a request of its own) is a child of the turn that asked for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::http::HeaderMap;
use edith_types::{InstanceId, ProfileId};
use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans leave the process: set once by the program that installs an OpenTelemetry
/// layer. Fields only an exporter reads (`otel.*`) are left out of spans otherwise, where they
/// would only lengthen every log line.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Says that spans are exported from now on ([`exporting`]).
pub fn export_spans() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether an OpenTelemetry layer sends spans out of the process.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Makes `span` a child of the span named by `headers`' trace context, if they carry one (and
/// an exporter is installed, which reads it with its propagator).
pub fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
    let context = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Headers(headers))
    });
    if context.span().span_context().is_valid() {
        // Without an OpenTelemetry layer there is no trace to continue, which is no error.
        let _ = span.set_parent(context);
    }
}

/// Writes the current span's trace context into `headers` (`traceparent`, `tracestate`), over
/// any the caller sent: a request passed on to another replica continues this one's trace.
/// Without an exporter there is none, and `headers` stay as they are.
pub fn pass_on_trace(headers: &mut HeaderMap) {
    let context = tracing::Span::current().context();
    if context.span().span_context().is_valid() {
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut HeadersMut(headers));
        });
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl opentelemetry::propagation::Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(key.as_bytes()),
            axum::http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct Headers<'a>(&'a HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

/// The spans of the turns running in this process, by the profile they run on. A runtime calls
/// a profile's tools on its own request, which says nothing of the turn; while one turn runs on
/// the profile, that call belongs to it.
#[derive(Default)]
pub struct RunningTurns {
    by_profile: Mutex<HashMap<(InstanceId, ProfileId), Vec<RunningTurn>>>,
    /// Tells apart the places given out, whatever turn they are for.
    places: AtomicU64,
}

/// A place in [`RunningTurns`] and the span of the turn holding it.
type RunningTurn = (u64, tracing::Span);

/// A turn's place in [`RunningTurns`], given up when dropped.
pub struct Running<'a> {
    turns: &'a RunningTurns,
    key: (InstanceId, ProfileId),
    place: u64,
}

impl RunningTurns {
    /// Notes that a turn, in `span`, runs on `profile` until the returned guard is dropped.
    pub fn started(
        &self,
        instance: &InstanceId,
        profile: &ProfileId,
        span: tracing::Span,
    ) -> Running<'_> {
        let key = (instance.clone(), profile.clone());
        let place = self.places.fetch_add(1, Ordering::Relaxed);
        self.by_profile
            .lock()
            .expect("not poisoned")
            .entry(key.clone())
            .or_default()
            .push((place, span));
        Running {
            turns: self,
            key,
            place,
        }
    }

    /// The span of the one turn running on `profile`; `None` when none runs, or when several
    /// do and a call cannot be told apart.
    pub fn only_one(&self, instance: &InstanceId, profile: &ProfileId) -> Option<tracing::Span> {
        let by_profile = self.by_profile.lock().expect("not poisoned");
        match by_profile
            .get(&(instance.clone(), profile.clone()))?
            .as_slice()
        {
            [(_, span)] => Some(span.clone()),
            _ => None,
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut by_profile = self.turns.by_profile.lock().expect("not poisoned");
        if let Some(running) = by_profile.get_mut(&self.key) {
            running.retain(|(place, _)| *place != self.place);
            if running.is_empty() {
                by_profile.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiles_tool_calls_belong_to_its_turn_only_while_it_is_the_only_one() {
        let turns = RunningTurns::default();
        let instance = InstanceId::generate();
        let profile = ProfileId::generate();
        assert!(turns.only_one(&instance, &profile).is_none());
        let running = turns.started(&instance, &profile, tracing::Span::none());
        assert!(turns.only_one(&instance, &profile).is_some());
        assert!(turns.only_one(&instance, &ProfileId::generate()).is_none());
        let other = turns.started(&instance, &profile, tracing::Span::none());
        assert!(turns.only_one(&instance, &profile).is_none(), "two run");
        drop(running);
        assert!(turns.only_one(&instance, &profile).is_some());
        drop(other);
        assert!(turns.only_one(&instance, &profile).is_none());
        assert!(turns.by_profile.lock().unwrap().is_empty(), "nothing left");
    }
}
