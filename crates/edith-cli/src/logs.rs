//! What `edith` says about itself: its log on stderr and, with `edith serve --otlp-endpoint`,
//! its spans (requests, turns, gateway calls, tool calls) sent to an OpenTelemetry collector.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::serve::LogFormat;

/// How long the exporter may take to send what it holds when `edith` stops.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A request to the collector that takes longer than this fails (and its spans are dropped).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Spans on their way to a collector; [`Exporter::stop`] sends what is left.
pub struct Exporter(SdkTracerProvider);

impl Exporter {
    /// Sends the spans not sent yet, waiting at most [`FLUSH_TIMEOUT`] for the collector.
    pub async fn stop(self) {
        let provider = self.0;
        let stopped =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        match tokio::time::timeout(FLUSH_TIMEOUT + Duration::from_secs(1), stopped).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => eprintln!("edith: the last spans were not exported: {e}"),
            Ok(Err(_)) | Err(_) => eprintln!("edith: the last spans were not exported in time"),
        }
    }
}

/// Installs the log (`format`, at `INFO`) and, given a collector's base URL (`/v1/traces` is
/// added, as for `OTEL_EXPORTER_OTLP_ENDPOINT`), a span exporter beside it.
pub fn install(format: LogFormat, otlp_endpoint: Option<&str>) -> Result<Option<Exporter>, String> {
    // Colours only for a person at a terminal who did not ask for none (`NO_COLOR`), never in
    // a file or a log collector's pipe.
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()) && !no_color)
        .with_target(false);
    let log = match format {
        LogFormat::Text => lines.boxed(),
        // One JSON object a line, with the fields of every span it happened in (a turn's
        // instance, profile, session and turn ids; a request's method and URI).
        LogFormat::Json => lines.json().boxed(),
    };
    let provider = otlp_endpoint.map(tracer_provider).transpose()?;
    let spans = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("edith"))
            // The exporter's own HTTP requests and complaints are not part of any trace.
            .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
                !metadata.target().starts_with("opentelemetry")
            }))
    });
    tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(log)
        .with(spans)
        .init();
    if provider.is_some() {
        edith_server::export_spans();
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }
    Ok(provider.map(Exporter))
}

/// Spans batched and sent as OTLP/JSON over HTTP to `<endpoint>/v1/traces`.
fn tracer_provider(endpoint: &str) -> Result<SdkTracerProvider, String> {
    let traces = traces_url(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(traces)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("--otlp-endpoint: {e}"))?;
    // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (e.g. `service.instance.id=` the
    // replica's name) are honoured; without a name in either, the service is `edith`.
    let mut resource = opentelemetry_sdk::Resource::builder().with_attribute(
        opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
    );
    let named_in_attributes = std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attributes| {
        (attributes.split(','))
            .any(|pair| pair.split('=').next().map(str::trim) == Some("service.name"))
    });
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() && !named_in_attributes {
        resource = resource.with_service_name("edith");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// `<endpoint>/v1/traces`, for an `http://` endpoint; this build speaks no TLS, so a
/// collector elsewhere is reached through one on loopback (or a sidecar).
fn traces_url(endpoint: &str) -> Result<String, String> {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return Err(if endpoint.starts_with("https://") {
            format!(
                "--otlp-endpoint {endpoint}: this build sends spans over plain HTTP only; \
                 run a collector on this machine (e.g. http://127.0.0.1:4318) that forwards them"
            )
        } else {
            format!("--otlp-endpoint {endpoint} is not an http:// URL")
        });
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("--otlp-endpoint {endpoint} names no host"));
    }
    Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn the_traces_path_is_added_to_an_http_endpoint_and_others_are_refused() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/otlp/").unwrap(),
            "http://collector:4318/otlp/v1/traces"
        );
        assert!(
            traces_url("https://collector:4318")
                .unwrap_err()
                .contains("plain HTTP")
        );
        assert!(
            traces_url("collector:4318")
                .unwrap_err()
                .contains("not an http://")
        );
        assert!(traces_url("http://").unwrap_err().contains("no host"));
    }
}
