//! The HTTP layer: the REST + SSE surface under `/v1`, declared once for both the router and
//! the contract (`spec`), with the extractors, SSE streams and `Idempotency-Key` handling it
//! needs. Handlers are thin: they parse the request and call `crate::app`.

pub mod body;
mod console;
mod desktop;
pub mod extract;
pub mod forward;
mod gateway;
pub mod idempotency;
mod instances;
mod keys;
pub mod limits;
pub mod listener;
mod native;
mod resources;
mod spec;
mod sse;
mod turns;

use axum::Router;
use axum::extract::State;
use axum::http::Method;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use edith_types::{ErrorCode, Health};
use serde_json::Value;

use crate::error::AppError;
use crate::state::AppState;
use crate::tools::mcp_endpoint;
use spec::Api;

pub use spec::{Access, Op};

/// The router (without state), the OpenAPI document describing it and each route's access rule.
pub fn build() -> (Router<AppState>, Value, spec::Rules) {
    let mut api = Api::new();
    let op = Op::get("/healthz", "health_get")
        .public()
        .summary("Liveness: the server answers; the only operation that needs no key.")
        .returns::<Health>(&mut api, 200, "The server is up.");
    api.add(op, get(health));
    let op = Op::get("/v1/openapi.json", "openapi_get")
        .summary("This contract.")
        .returns::<Value>(&mut api, 200, "The OpenAPI document.");
    api.add(op, get(openapi_json));
    instances::routes(&mut api);
    keys::routes(&mut api);
    resources::routes(&mut api);
    turns::routes(&mut api);
    native::routes(&mut api);
    gateway::routes(&mut api);
    desktop::routes(&mut api);
    console::routes(&mut api);
    api.add_unlisted(
        "/metrics",
        &[(Method::GET, Access::Key(edith_types::Scope::Admin))],
        get(metrics),
    );
    api.add_unlisted(
        mcp_endpoint::PATH,
        &[
            (Method::POST, Access::OwnToken),
            (Method::GET, Access::OwnToken),
        ],
        post(mcp_endpoint::post).get(mcp_endpoint::get),
    );
    let (router, mut doc, rules) = api.finish();
    state_outside_rules(&mut doc);
    let router = router
        .fallback(|| async { AppError::new(ErrorCode::RouteNotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            AppError::new(
                ErrorCode::MethodNotAllowed,
                "this route does not take that method",
            )
        });
    (router, doc, rules)
}

/// Rules the contract's schemas carry that are declared outside the wire types: by
/// `hermes-native` (a profile's name is a native profile name, a native call names a method of
/// the pinned catalog) and by the server's jobs (the steps).
fn state_outside_rules(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    schemas["CreateProfile"]["properties"]["name"]["pattern"] =
        Value::from(hermes_native::profile::PROFILE_NAME_RULE);
    let methods = hermes_native::catalog::catalog()
        .methods
        .iter()
        .map(|method| Value::from(method.name.as_str()))
        .collect();
    schemas["NativeCall"]["properties"]["method"]["enum"] = Value::Array(methods);
    // And a step a `sim` instance may fail is a step of the server's jobs.
    let steps = crate::app::jobs::step_names().into_iter().map(Value::from);
    schemas["SimFaults"]["properties"]["fail_step"]["enum"] = steps.chain([Value::Null]).collect();
}

/// The contract as checked in at `contracts/control-plane.openapi.json`.
pub fn openapi() -> &'static Value {
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| build().1)
}

/// Who may call the route `path` (a route pattern, as `MatchedPath` gives it) with `method`;
/// `None` where no rule was declared (a method the route does not take).
pub fn access(method: &Method, path: &str) -> Option<Access> {
    let rules = rules();
    // Axum answers HEAD with the GET handler: the same rule applies.
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    rules.access.get(path)?.get(method).copied()
}

/// Whether the route `path` (a pattern) with `method` is served by the replica owning the
/// path's instance.
pub fn on_owner(method: &Method, path: &str) -> bool {
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    rules().on_owner.contains(&(path, method.clone()))
}

fn rules() -> &'static spec::Rules {
    static RULES: std::sync::OnceLock<spec::Rules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| build().2)
}

/// Every route and method served outside the contract, with who may call it (sorted): what a
/// test holds against the list it expects, so that no route is added open unnoticed.
pub fn unlisted_routes() -> Vec<(Method, &'static str, String)> {
    let contract = &openapi()["paths"];
    let mut routes: Vec<_> = rules()
        .access
        .iter()
        .flat_map(|(path, methods)| methods.iter().map(move |(m, a)| (m.clone(), *path, a)))
        .filter(|(method, path, _)| {
            let method = method.as_str().to_lowercase();
            contract[spec::contract_path(path)][method].is_null()
        })
        .map(|(method, path, access)| (method, path, access.to_string()))
        .collect();
    routes.sort_by(|a, b| (a.1, a.0.as_str()).cmp(&(b.1, b.0.as_str())));
    routes
}

/// `GET /metrics` (admin): the control plane's metrics for Prometheus (`crate::metrics`).
async fn metrics(State(state): State<AppState>) -> Result<axum::response::Response, AppError> {
    let instances = state.store.count_instances().await?;
    let followed = state.turn_events.followed() + state.job_events.followed();
    let links = state.gateways.open_links();
    let live = links.iter().map(|(_, link)| link.live.len()).sum();
    let text = (state.metrics).render(&instances, followed, live, state.store.turn_log_writes());
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        text,
    )
        .into_response())
}

/// When a request reached the control plane (before its key was checked and its body read):
/// a request extension.
#[derive(Clone, Copy)]
pub struct Arrived(pub std::time::Instant);

/// Counts each answered request by method, route (as declared, ids left out) and status, and
/// says when it arrived ([`Arrived`]).
pub async fn count_request(
    State(state): State<AppState>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let started = std::time::Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let response = next.run(request).await;
    let status = response.status().as_u16();
    state
        .metrics
        .request_answered(method.as_str(), &route, status, started.elapsed());
    response
}

async fn health() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

/// The contract, with this server's runtimes as the names a `process` instance may ask for.
async fn openapi_json(State(state): State<AppState>) -> axum::Json<Value> {
    let mut doc = openapi().clone();
    let runtimes = state
        .providers
        .process
        .runtimes()
        .keys()
        .map(|name| Value::from(name.as_str()));
    doc["components"]["schemas"]["CreateInstance"]["properties"]["runtime"]["enum"] =
        runtimes.chain([Value::Null]).collect();
    axum::Json(doc)
}

/// One log line per request: method, path, status and time taken — never a header (the
/// `Authorization` header carries a key), a query or a body. Its span is the root of what the request
/// does (a turn it starts, a job), or continues the caller's trace (`traceparent`).
pub fn request_log() -> RequestLog {
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(request_span as MakeRequestSpan)
        .on_request(())
        .on_response(request_answered as OnRequestAnswered)
}

type MakeRequestSpan = fn(&axum::extract::Request) -> tracing::Span;
type OnRequestAnswered = fn(&axum::response::Response, std::time::Duration, &tracing::Span);
pub type RequestLog = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    MakeRequestSpan,
    (),
    OnRequestAnswered,
>;

fn request_span(request: &axum::extract::Request) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        // The path, not the query: Desktop routes carry what a user searched or opened there.
        path = %request.uri().path(),
        version = ?request.version(),
        http.response.status_code = Empty,
        instance = Empty,
        profile = Empty,
        session = Empty,
        turn = Empty,
        job = Empty,
        otel.name = Empty,
        otel.kind = Empty,
        otel.status_code = Empty,
    );
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", axum::extract::MatchedPath::as_str);
    record_path_ids(&span, route, request.uri().path());
    // `otel.*` fields name and kind the span for an OpenTelemetry exporter (the route, not the
    // path, so that spans group by what was asked, not by ids); only then, as a log line has
    // no use for them, and a field left empty is not written.
    if crate::telemetry::exporting() {
        span.record("otel.name", format!("{} {route}", request.method()));
        span.record("otel.kind", "server");
        crate::telemetry::continue_trace(&span, request.headers());
    }
    span
}

/// Sets on a request's span the ids its path names (`{session_id}` → `session`), so that its
/// log line says what it is about under the same names as the lines of the turn or job it
/// starts. `route` is the path's template.
fn record_path_ids(span: &tracing::Span, route: &str, path: &str) {
    for (segment, value) in route.split('/').zip(path.split('/')) {
        let field = match segment {
            "{instance_id}" => "instance",
            "{profile_id}" => "profile",
            "{session_id}" => "session",
            "{turn_id}" => "turn",
            "{job_id}" => "job",
            _ => continue,
        };
        span.record(field, value);
    }
}

fn request_answered(
    response: &axum::response::Response,
    latency: std::time::Duration,
    span: &tracing::Span,
) {
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() && crate::telemetry::exporting() {
        span.record("otel.status_code", "ERROR");
    }
    tracing::info!(
        latency = %format_args!("{} ms", latency.as_millis()),
        status = status.as_u16(),
        "finished processing request"
    );
}
