//! `edith serve --otlp-endpoint`: a turn's spans reach an OTLP collector (one the test runs) as
//! one trace that continues the caller's `traceparent`: the request that started the turn, the
//! turn, its calls on the runtime's gateway, and the callback tool's call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{ADMIN_KEY, Ctx};

/// The caller's trace and span, sent as `traceparent` with the turn's request.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP collector on loopback that keeps every span it is sent (JSON bodies).
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

/// A span as exported, with the resource it came from.
#[derive(Clone, Debug)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    kind: i64,
    attributes: Value,
    service: String,
}

impl Span {
    /// The value of attribute `key`, as text (OTLP/JSON writes 64-bit integers as strings).
    fn attribute(&self, key: &str) -> Option<String> {
        let found = self
            .attributes
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)?;
        let value = found["value"].as_object()?.values().next()?;
        Some(
            value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned),
        )
    }
}

impl Collector {
    async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let kept = kept.clone();
                async move {
                    assert_eq!(headers["content-type"], "application/json");
                    let export: Value = serde_json::from_str(&body).expect("an OTLP/JSON body");
                    kept.lock().unwrap().extend(spans_of(&export));
                    axum::Json(json!({}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, spans }
    }

    /// The spans of `trace` once as many of each name as `names` holds arrived (bounded).
    async fn trace_with(&self, trace: &str, names: &[&str]) -> Vec<Span> {
        for _ in 0..300 {
            let spans: Vec<Span> = (self.spans.lock().unwrap().iter())
                .filter(|span| span.trace == trace)
                .cloned()
                .collect();
            // A name given n times needs n spans of that name.
            let count = |name: &&str, among: &mut dyn Iterator<Item = &str>| {
                among.filter(|n| n == name).count()
            };
            if names.iter().all(|name| {
                count(name, &mut spans.iter().map(|s| s.name.as_str()))
                    >= count(name, &mut names.iter().copied())
            }) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "not all of {names:?} in trace {trace} within 15 s: {:#?}",
            self.spans.lock().unwrap()
        );
    }
}

fn spans_of(export: &Value) -> Vec<Span> {
    let mut spans = Vec::new();
    for resource in export["resourceSpans"].as_array().expect("resourceSpans") {
        let service = resource["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "service.name")
            .map(|a| a["value"]["stringValue"].as_str().unwrap().to_owned())
            .unwrap_or_default();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                let text = |key: &str| span[key].as_str().unwrap_or_default().to_owned();
                spans.push(Span {
                    trace: text("traceId"),
                    id: text("spanId"),
                    parent: text("parentSpanId"),
                    name: text("name"),
                    kind: span["kind"].as_i64().unwrap_or_default(),
                    attributes: span["attributes"].clone(),
                    service: service.clone(),
                });
            }
        }
    }
    spans
}

/// The one span of `spans` named `name`.
fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let mut found = spans.iter().filter(|span| span.name == name);
    let span = found
        .next()
        .unwrap_or_else(|| panic!("no `{name}` span: {spans:#?}"));
    assert!(found.next().is_none(), "one `{name}` span: {spans:#?}");
    span
}

#[tokio::test]
async fn a_turns_spans_follow_it_from_the_request_through_the_gateway_to_the_tool_call() {
    let collector = Collector::start().await;
    let ctx = Ctx::serve_with_env(
        tempfile::tempdir().unwrap(),
        &["--otlp-endpoint", &collector.url],
        // Batches leave every 100 ms rather than every 5 s.
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let model = testkit::FakeModel::start().await;
    let iid = ctx.ready_instance().await;
    let tool = ctx.echo_tool().await;
    let profile = ctx
        .profile_on(&iid, &model, json!({"name": "traced", "tools": [tool]}))
        .await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    let response = ctx
        .http
        .post(ctx.url(&turns))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"input": r#"CALL echo {"text": "hi"}"#}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let turn: Value = response.json().await.unwrap();
    let tid = turn["id"].as_str().unwrap();
    let events = ctx.sse(&format!("{turns}/{tid}/events"), None).await;
    assert_eq!(events.last().unwrap()["state"], "completed", "{events:?}");
    assert!(
        events.iter().any(|e| e["type"] == "tool.completed"),
        "{events:?}"
    );

    let route = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns";
    let request_name = format!("POST {route}");
    let names = [request_name.as_str(), "turn", "prompt.submit", "tool.call"];
    let spans = collector.trace_with(TRACE, &names).await;
    let request = named(&spans, &request_name);
    assert_eq!(request.parent, CALLER_SPAN, "the caller's trace goes on");
    assert_eq!(request.kind, 2, "a server span");
    assert_eq!(
        request.attribute("http.response.status_code"),
        Some("202".to_owned())
    );
    assert_eq!(request.service, "edith");

    let driven = named(&spans, "turn");
    assert_eq!(driven.parent, request.id, "the turn is the request's");
    assert_eq!(driven.attribute("turn"), Some(tid.to_owned()));

    let submitted = named(&spans, "prompt.submit");
    assert_eq!(
        submitted.parent, driven.id,
        "the gateway call is the turn's"
    );
    assert_eq!(submitted.kind, 3, "a client span");

    let called = named(&spans, "tool.call");
    assert_eq!(called.parent, driven.id, "the tool call is the turn's");
    assert_eq!(called.attribute("tool"), Some("echo".to_owned()));

    // A request without `traceparent` starts a trace of its own.
    let others: Vec<Span> = collector.spans.lock().unwrap().clone();
    let tool_made = others
        .iter()
        .find(|span| span.name == "POST /v1/tools")
        .expect("the tool's request was traced");
    assert_ne!(tool_made.trace, TRACE);
    assert!(tool_made.parent.is_empty(), "{tool_made:?}");
}

#[tokio::test]
async fn an_otlp_endpoint_that_is_not_plain_http_is_refused_at_start() {
    for (endpoint, says) in [
        ("https://collector:4318", "plain HTTP"),
        ("collector:4318", "not an http:// URL"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let output = tokio::process::Command::new(crate::edith_binary())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--otlp-endpoint",
                endpoint,
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(30), output)
            .await
            .expect("edith exits")
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{endpoint}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{endpoint}: {stderr}");
    }
}

/// Two replicas on one database: a turn asked of the one that does not own the instance is
/// forwarded to the owner, and the owner's spans go on in the trace of the replica that
/// forwarded it, which goes on in the caller's.
#[tokio::test]
async fn a_request_forwarded_to_the_owning_replica_stays_in_the_callers_trace() {
    let database = testkit::postgres::database().await;
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("EDITH_DATABASE_URL", database.url()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let mut replicas = Vec::new();
    for name in ["owner", "other"] {
        let flags = ["--replica", name, "--otlp-endpoint", collector.url.as_str()];
        let process =
            crate::edith_serve_with_env(dir.path(), "127.0.0.1:0", &flags, Some(ADMIN_KEY), &env)
                .await;
        replicas.push(process);
    }
    let (owner, other) = (
        replicas[0].ready_value("url"),
        replicas[1].ready_value("url"),
    );
    let http = crate::client_with_key(ADMIN_KEY);
    let post = async |url: String, body: Value| {
        let answer = http.post(url).json(&body).send().await.unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
        answer.json::<Value>().await.unwrap()
    };
    let created = post(format!("{owner}/v1/instances"), json!({"name": "i"})).await;
    let iid = created["instance"]["id"].as_str().unwrap().to_owned();
    let mut ready = false;
    for _ in 0..600 {
        let answer = http.get(format!("{owner}/v1/instances/{iid}")).send().await;
        let instance: Value = answer.unwrap().json().await.unwrap();
        if instance["state"] == "ready" {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "the instance was made within 30 s");
    let profile = post(
        format!("{owner}/v1/instances/{iid}/profiles"),
        json!({"name": "p"}),
    )
    .await;
    let sessions = format!(
        "/v1/instances/{iid}/profiles/{}/sessions",
        profile["id"].as_str().unwrap()
    );
    let session = post(format!("{owner}{sessions}"), json!({})).await;
    let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    let answer = http
        .post(format!("{other}{turns}"))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    assert_eq!(answer.headers()["edith-replica"], "owner", "forwarded");

    let route = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns";
    let request_name = format!("POST {route}");
    // The forwarding replica's request and the owner's (each replica exports its own).
    let spans = (collector)
        .trace_with(TRACE, &[&request_name, &request_name, "turn"])
        .await;
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == request_name).collect();
    let forwarding = requests
        .iter()
        .find(|span| span.parent == CALLER_SPAN)
        .unwrap_or_else(|| panic!("the forwarding replica's request: {spans:#?}"));
    let owning = requests
        .iter()
        .find(|span| span.parent == forwarding.id)
        .unwrap_or_else(|| panic!("the owner's request, under the forwarding one: {spans:#?}"));
    assert_eq!(
        named(&spans, "turn").parent,
        owning.id,
        "the turn is the owner's request's"
    );
    for replica in replicas {
        replica.stop(Duration::from_secs(30)).await;
    }
}
