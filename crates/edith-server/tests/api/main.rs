//! The control plane over real HTTP on loopback: bad input gets problem details with stable
//! codes (never a 500), streams resume, and the `edith` binary keeps its launch contract.

mod auth;
mod console;
mod crash;
mod jobs;
mod limits;
mod logs;
mod metrics;
mod postgres;
mod providers;
mod relay;
mod replicas;
mod resources;
mod telemetry;
mod tool_lists;

use std::time::Duration;

use edith_server::{RunningServer, ServerConfig};
use serde_json::{Value, json};

/// The admin key every test context starts its control plane with.
const ADMIN_KEY: &str = "edk_test_admin_key_0123456789abcdef";

/// An HTTP client that sends `key` with every request.
fn client_with_key(key: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {key}").parse().expect("a header value");
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    // Redirects reach the test as the server sent them.
    reqwest::Client::builder()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

/// The `edith` binary (crate `edith-cli`), built beside the tests by `cargo build --workspace`.
pub fn edith_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target dir");
    let edith = dir.join("edith");
    assert!(
        edith.is_file(),
        "the edith binary is built beside the tests (`cargo build --workspace`): {}",
        edith.display()
    );
    edith
}

/// `edith serve` on `dir` with `listen`, `extra` flags and `EDITH_API_KEY` = `key` (unset when
/// `None`), once it printed its ready line.
async fn edith_serve(
    dir: &std::path::Path,
    listen: &str,
    extra: &[&str],
    key: Option<&str>,
) -> testkit::ReadyProcess {
    edith_serve_with_env(dir, listen, extra, key, &[]).await
}

/// Like `edith_serve`, with the variables `env` set for it.
async fn edith_serve_with_env(
    dir: &std::path::Path,
    listen: &str,
    extra: &[&str],
    key: Option<&str>,
    env: &[(&str, &str)],
) -> testkit::ReadyProcess {
    let mut command = tokio::process::Command::new(crate::edith_binary());
    command
        .args(["serve", "--listen", listen])
        .args(extra)
        .arg("--data-dir")
        .arg(dir)
        // What a test does not say is the default, whatever the shell running it exports.
        .env_remove(edith_server::SQLITE_SYNC_VARIABLE)
        .envs(env.iter().copied());
    match key {
        Some(key) => command.env("EDITH_API_KEY", key),
        None => command.env_remove("EDITH_API_KEY"),
    };
    testkit::ReadyProcess::spawn(command, "EDITH_READY url=", Duration::from_secs(30)).await
}

/// A tool host serving `echo`, guarded by `secret`; returns its MCP URL.
pub async fn echo_tool_host(secret: &'static str) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use edith_mcp::server::{ToolCallError, ToolService, bearer_matches, handle_post};
    use edith_mcp::{ToolDescriptor, ToolOutput};

    struct Echo;
    impl ToolService for Echo {
        async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
            Ok(vec![ToolDescriptor {
                name: "echo".to_owned(),
                description: "Echoes its text".to_owned(),
                input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            }])
        }
        async fn call_tool(&self, _: &str, args: Value) -> Result<ToolOutput, ToolCallError> {
            Ok(ToolOutput::value(args["text"].clone()))
        }
    }
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| async move {
            if !bearer_matches(&headers, secret) {
                return StatusCode::UNAUTHORIZED.into_response();
            }
            handle_post(&Echo, &body).await
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

struct Ctx {
    server: Server,
    /// Sends the admin key.
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// The control plane a test talks to.
enum Server {
    InProcess(RunningServer),
    /// `edith serve`, a process of its own (which tests may kill).
    Binary {
        process: Box<testkit::ReadyProcess>,
        url: String,
    },
    /// Killed.
    Gone,
}

impl Drop for Ctx {
    /// Runtimes a killed control plane left behind go with the test, also when it fails.
    fn drop(&mut self) {
        testkit::kill_processes_with_env_under("HERMES_HOME", self.dir.path());
    }
}

impl Ctx {
    async fn start() -> Self {
        Self::start_with(Default::default()).await
    }

    /// A control plane that may also run `runtimes` (besides our own `hermes-runtime`).
    async fn start_with(
        runtimes: std::collections::BTreeMap<String, edith_server::RuntimeCommand>,
    ) -> Self {
        Self::start_from(|config| config.runtimes.extend(runtimes)).await
    }

    /// A control plane with `limits`.
    async fn start_limited(limits: edith_server::Limits) -> Self {
        Self::start_from(|config| config.limits = limits).await
    }

    /// A control plane that offers the `sim` provider.
    async fn start_sim() -> Self {
        Self::start_from(|config| config.sim_provider = true).await
    }

    /// A control plane configured by `adjust` (from a local one with the test admin key).
    pub(crate) async fn start_from(adjust: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig {
            admin_key: Some(ADMIN_KEY.to_owned()),
            ..ServerConfig::local(dir.path().to_path_buf())
        };
        assert!(
            config.runtimes.contains_key(edith_server::BUILTIN_RUNTIME),
            "the hermes-runtime binary is built beside the tests (`cargo build --workspace`)"
        );
        adjust(&mut config);
        let server = edith_server::start(config).await.expect("start");
        Self {
            server: Server::InProcess(server),
            http: client_with_key(ADMIN_KEY),
            dir,
        }
    }

    /// `edith serve` on `dir` (with the admin key), as a process of its own.
    async fn serve(dir: tempfile::TempDir) -> Self {
        Self::serve_with(dir, &[]).await
    }

    /// Like `serve`, with `extra` flags.
    async fn serve_with(dir: tempfile::TempDir, extra: &[&str]) -> Self {
        Self::serve_with_env(dir, extra, &[]).await
    }

    /// Like `serve_with`, with the variables `env` set for `edith serve`.
    async fn serve_with_env(dir: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let process =
            edith_serve_with_env(dir.path(), "127.0.0.1:0", extra, Some(ADMIN_KEY), env).await;
        let url = process.ready_value("url");
        Self {
            server: Server::Binary {
                process: Box::new(process),
                url,
            },
            http: client_with_key(ADMIN_KEY),
            dir,
        }
    }

    /// What `edith serve` wrote to stderr so far (its log).
    fn server_log(&self) -> Vec<String> {
        match &self.server {
            Server::Binary { process, .. } => process.stderr(),
            _ => panic!("only a control plane of its own has a log of its own"),
        }
    }

    /// Kills `edith serve` with SIGKILL; returns its data directory, as it left it.
    async fn crash(mut self) -> tempfile::TempDir {
        let Server::Binary { process, .. } = std::mem::replace(&mut self.server, Server::Gone)
        else {
            panic!("only a control plane of its own can be killed");
        };
        process.kill().await;
        self.take_dir()
    }

    /// Stops `edith serve` with SIGTERM and checks it ended cleanly; returns its data
    /// directory, as it left it.
    async fn stop(mut self) -> tempfile::TempDir {
        let Server::Binary { process, .. } = std::mem::replace(&mut self.server, Server::Gone)
        else {
            panic!("only a control plane of its own is stopped this way");
        };
        let status = process.stop(Duration::from_secs(30)).await;
        assert!(status.success(), "SIGTERM is a clean stop: {status}");
        self.take_dir()
    }

    fn take_dir(mut self) -> tempfile::TempDir {
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"))
    }

    /// How many runtimes the control plane runs now (an in-process one only).
    async fn runtimes_running(&self) -> usize {
        match &self.server {
            Server::InProcess(server) => server.runtimes_running().await,
            _ => panic!("only an in-process control plane is asked"),
        }
    }

    fn url(&self, path: &str) -> String {
        let base = match &self.server {
            Server::InProcess(server) => server.url(),
            Server::Binary { url, .. } => url,
            Server::Gone => panic!("the control plane is gone"),
        };
        format!("{base}{path}")
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, Value) {
        self.send_with(&self.http, method, path, body).await
    }

    /// Sends through `http` (which carries some key, or none).
    async fn send_with(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        let mut request = http.request(method, self.url(path));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        let response = request.send().await.expect("send");
        let status = response.status().as_u16();
        if status >= 400 {
            let content_type = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned();
            assert_eq!(content_type, "application/problem+json", "{path}");
        }
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// Deletes instance `iid` (202) and waits, bounded, until it is gone (404).
    async fn delete_instance_and_wait(&self, iid: &str) {
        let path = format!("/v1/instances/{iid}");
        let (status, body) = self.send(reqwest::Method::DELETE, &path, None).await;
        assert_eq!(status, 202, "{body}");
        for _ in 0..200 {
            if self.get(&path).await.0 == 404 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("instance {iid} was still there 10 s after its delete was accepted");
    }

    /// The turns of a new session of a new profile `p` of instance `iid`.
    async fn turns_path(&self, iid: &str) -> String {
        let (_, profile) = self
            .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
            .await;
        self.new_session_turns(iid, &profile).await
    }

    /// The turns of a new session of `profile` (as created) of instance `iid`.
    async fn new_session_turns(&self, iid: &str, profile: &Value) -> String {
        let sessions = format!(
            "/v1/instances/{iid}/profiles/{}/sessions",
            profile["id"].as_str().unwrap()
        );
        let (_, session) = self.post(&sessions, "{}").await;
        format!("{sessions}/{}/turns", session["id"].as_str().unwrap())
    }

    /// A new key's secret, with `scope`.
    async fn key_with(&self, scope: &str) -> String {
        self.key_and_id(scope).await.1
    }

    /// A new key with `scope`: its id and its secret.
    async fn key_and_id(&self, scope: &str) -> (String, String) {
        let body = json!({"name": "k", "scope": scope}).to_string();
        let (status, created) = self.post("/v1/keys", &body).await;
        assert_eq!(status, 201, "{created}");
        let id = created["key"]["id"].as_str().unwrap().to_owned();
        (id, created["secret"].as_str().unwrap().to_owned())
    }

    /// The MCP token of instance `iid`, as this in-process control plane stored it.
    async fn mcp_token(&self, iid: &str) -> String {
        let db = format!("sqlite://{}", self.dir.path().join("edith.db").display());
        let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db)
            .await
            .unwrap();
        sqlx::query_scalar("SELECT mcp_token FROM instances WHERE id = $1")
            .bind(iid)
            .fetch_one(&mut db)
            .await
            .unwrap()
    }

    /// An instance that finished provisioning.
    async fn ready_instance(&self) -> String {
        let (status, created) = self.post("/v1/instances", r#"{"name": "t"}"#).await;
        assert_eq!(status, 202, "{created}");
        let id = created["instance"]["id"].as_str().unwrap().to_owned();
        let job = created["job"]["id"].as_str().unwrap().to_owned();
        let events = self.sse(&format!("/v1/jobs/{job}/events"), None).await;
        assert_eq!(
            events.last().unwrap()["instance_state"],
            "ready",
            "{events:?}"
        );
        id
    }

    /// Reads a whole SSE response; returns the `data:` payloads.
    async fn sse(&self, path: &str, last_event_id: Option<u64>) -> Vec<Value> {
        self.sse_within(path, last_event_id, Duration::from_secs(30))
            .await
    }

    /// Like `sse`, allowing the stream `limit` to end.
    async fn sse_within(
        &self,
        path: &str,
        last_event_id: Option<u64>,
        limit: Duration,
    ) -> Vec<Value> {
        let mut request = self.http.get(self.url(path));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("stream");
        read_sse(response, limit).await
    }
}

/// Reads a whole SSE reply, allowing it `limit` to end; returns the `data:` payloads.
async fn read_sse(response: reqwest::Response, limit: Duration) -> Vec<Value> {
    {
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let text = tokio::time::timeout(limit, response.text())
            .await
            .expect("the stream ends after the final event")
            .expect("body");
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).expect("JSON event"))
            .collect();
        // Each SSE event is named by its entry's type.
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(names, types, "{text}");
        events
    }
}

fn assert_problem(response: &(u16, Value), status: u16, code: &str) {
    let (got, body) = response;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["status"], status, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn unknown_ids_are_404_problems() {
    let ctx = Ctx::start().await;
    assert_problem(
        &ctx.get("/v1/instances/inst_doesnotexist").await,
        404,
        "not_found",
    );
    assert_problem(&ctx.get("/v1/jobs/job_nope").await, 404, "not_found");
    assert_problem(&ctx.get("/v1/tools/tool_nope").await, 404, "not_found");
    let iid = ctx.ready_instance().await;
    assert_problem(
        &ctx.get(&format!("/v1/instances/{iid}/profiles/prof_nope"))
            .await,
        404,
        "not_found",
    );
    assert_problem(&ctx.get("/no/such/route").await, 404, "route_not_found");
    assert_problem(
        &ctx.send(reqwest::Method::PATCH, "/v1/instances", None)
            .await,
        405,
        "method_not_allowed",
    );
}

#[tokio::test]
async fn an_id_of_the_wrong_kind_is_named_in_a_400() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let (_, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    let pid = profile["id"].as_str().unwrap();

    // A profile id where a session id belongs.
    let response = ctx
        .get(&format!(
            "/v1/instances/{iid}/profiles/{pid}/sessions/{pid}"
        ))
        .await;
    assert_problem(&response, 400, "invalid_id");
    let detail = response.1["detail"].as_str().unwrap();
    assert!(
        detail.contains("expected a session id") && detail.contains("got a profile id"),
        "{detail}"
    );
    // An instance id where a job id belongs, and a malformed id.
    assert_problem(
        &ctx.get(&format!("/v1/jobs/{iid}")).await,
        400,
        "invalid_id",
    );
    assert_problem(&ctx.get("/v1/instances/x").await, 400, "invalid_id");
    // A wrong kind inside a body.
    let response = ctx
        .post(
            "/v1/tools",
            &json!({"name": "t", "description": "", "input_schema": {"type": "object"}, "host_id": iid})
                .to_string(),
        )
        .await;
    assert_problem(&response, 400, "invalid_id");
}

#[tokio::test]
async fn malformed_bodies_are_400s_that_name_the_problem() {
    let ctx = Ctx::start().await;
    let response = ctx.post("/v1/instances", r#"{"name": "#).await;
    assert_problem(&response, 400, "invalid_body");
    assert!(
        response.1["detail"]
            .as_str()
            .unwrap()
            .contains("malformed JSON")
    );

    let response = ctx.post("/v1/instances", r#"{"nam": "x"}"#).await;
    assert_problem(&response, 400, "invalid_body");
    assert!(
        response.1["detail"]
            .as_str()
            .unwrap()
            .contains("unknown field `nam`")
    );

    let response = ctx
        .post("/v1/instances", r#"{"name": "x", "provider": "docker"}"#)
        .await;
    assert_problem(&response, 400, "invalid_body");

    let response = ctx
        .http
        .post(ctx.url("/v1/instances"))
        .body(r#"{"name": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400, "a body without a JSON content type");

    assert_problem(
        &ctx.post("/v1/instances", r#"{"name": "  "}"#).await,
        400,
        "invalid_request",
    );
    assert_problem(
        &ctx.get("/v1/instances?limit=0").await,
        400,
        "invalid_request",
    );
    let iid = ctx.ready_instance().await;
    assert_problem(
        &ctx.post(
            &format!("/v1/instances/{iid}/profiles"),
            r#"{"name": "Bad Name"}"#,
        )
        .await,
        400,
        "invalid_request",
    );
    for (model, code) in [
        (
            r#"{"provider": "openai_compatible", "base_url": "ftp://x", "model": "m"}"#,
            "invalid_request",
        ),
        (
            r#"{"provider": "openai_compatible", "base_url": "http://x/v1", "model": " "}"#,
            "invalid_request",
        ),
        (r#"{"provider": "mystery"}"#, "invalid_body"),
    ] {
        let body = format!(r#"{{"name": "m", "model": {model}}}"#);
        assert_problem(
            &ctx.post(&format!("/v1/instances/{iid}/profiles"), &body)
                .await,
            400,
            code,
        );
    }
    let (status, _) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    assert_eq!(status, 201);
    assert_problem(
        &ctx.post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
            .await,
        409,
        "conflict",
    );
}

#[tokio::test]
async fn job_streams_resume_after_last_event_id_and_lists_paginate() {
    let ctx = Ctx::start().await;
    let (_, created) = ctx.post("/v1/instances", r#"{"name": "a"}"#).await;
    let job = created["job"]["id"].as_str().unwrap();
    let all = ctx.sse(&format!("/v1/jobs/{job}/events"), None).await;
    let steps: Vec<(&str, &str)> = all
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["step"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("step.started", "prepare_home"),
            ("step.completed", "prepare_home"),
            ("step.started", "start_runtime"),
            ("step.completed", "start_runtime"),
            ("step.started", "connect_gateway"),
            ("step.completed", "connect_gateway"),
            ("job.finished", ""),
        ]
    );
    let tail = ctx.sse(&format!("/v1/jobs/{job}/events"), Some(5)).await;
    assert_eq!(tail, all[5..]);
    let (_, job_body) = ctx.get(&format!("/v1/jobs/{job}")).await;
    assert_eq!(job_body["state"], "succeeded");

    for name in ["b", "c"] {
        ctx.post("/v1/instances", &json!({"name": name}).to_string())
            .await;
    }
    let (_, first) = ctx.get("/v1/instances?limit=2").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = ctx
        .get(&format!("/v1/instances?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(second["items"].as_array().unwrap().len(), 1);
    assert_eq!(second["next_cursor"], Value::Null);
}

#[tokio::test]
async fn secrets_are_never_returned() {
    let ctx = Ctx::start().await;
    let secret = "s3cret-s3cret-s3cret";
    let (status, host) = ctx
        .post(
            "/v1/tool-hosts",
            &json!({"url": "http://127.0.0.1:9/mcp", "secret": secret}).to_string(),
        )
        .await;
    assert_eq!(status, 201);
    let (_, fetched) = ctx
        .get(&format!("/v1/tool-hosts/{}", host["id"].as_str().unwrap()))
        .await;
    for body in [host, fetched] {
        assert!(!body.to_string().contains(secret), "{body}");
    }
    assert_problem(
        &ctx.post(
            "/v1/tool-hosts",
            r#"{"url": "ftp://x", "secret": "0123456789abcdef"}"#,
        )
        .await,
        400,
        "invalid_request",
    );
}

#[tokio::test]
async fn the_edith_binary_prints_its_ready_line_and_serves_its_contract() {
    let dir = tempfile::tempdir().expect("temp dir");
    let process = edith_serve(dir.path(), "127.0.0.1:0", &[], Some(ADMIN_KEY)).await;
    let url = process.ready_value("url");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let http = client_with_key(ADMIN_KEY);
    let health: Value = http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let served: Value = http
        .get(format!("{url}/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The contract, naming this server's runtimes.
    let runtimes: Value = http
        .get(format!("{url}/v1/runtimes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<Value> = runtimes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].clone())
        .collect();
    assert!(!names.is_empty(), "{runtimes}");
    names.push(Value::Null);
    let mut expected = edith_server::openapi().clone();
    expected["components"]["schemas"]["CreateInstance"]["properties"]["runtime"]["enum"] =
        Value::Array(names);
    assert_eq!(served, expected);
    assert!(dir.path().join("edith.db").is_file());
    let status = process.stop(Duration::from_secs(10)).await;
    assert!(status.success(), "SIGTERM is a clean stop: {status}");
}

#[tokio::test]
async fn the_edith_binary_refuses_bad_arguments() {
    let output = tokio::process::Command::new(crate::edith_binary())
        .args(["serve", "--listen", "nowhere"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`--listen nowhere` is not an address"),
        "{stderr}"
    );
}

#[tokio::test]
async fn native_calls_are_checked_against_the_pinned_catalog() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let path = format!("/v1/instances/{iid}/native/rpc");
    let (status, listed) = ctx
        .post(
            &path,
            r#"{"method": "session.list", "params": {"limit": 3}}"#,
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["result"]["sessions"], json!([]));
    assert_problem(
        &ctx.post(&path, r#"{"method": "no.such.method"}"#).await,
        400,
        "invalid_request",
    );
    assert_problem(
        &ctx.post(&path, r#"{"method": "delegation.status"}"#).await,
        501,
        "unsupported",
    );
    assert_problem(
        &ctx.post(&path, r#"{"method": "session.list", "params": [1]}"#)
            .await,
        400,
        "invalid_request",
    );
    let refused = ctx
        .post(
            &path,
            r#"{"method": "session.history", "params": {"session_id": "nope"}}"#,
        )
        .await;
    assert_problem(&refused, 422, "native_error");
    assert_eq!(refused.1["native_code"], 4001);
    assert_problem(
        &ctx.post(
            "/v1/instances/inst_nope/native/rpc",
            r#"{"method": "session.list"}"#,
        )
        .await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn an_idempotency_key_makes_a_retried_post_do_the_work_once() {
    let ctx = Ctx::start().await;
    let send = |key: &'static str, body: &'static str| {
        ctx.http
            .post(ctx.url("/v1/instances"))
            .header("content-type", "application/json")
            .header("Idempotency-Key", key)
            .body(body)
            .send()
    };
    let first = send("k-1", r#"{"name": "once"}"#).await.unwrap();
    assert_eq!(first.status(), 202);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    let again = send("k-1", r#"{"name": "once"}"#).await.unwrap();
    assert_eq!(again.status(), 202);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["instance"]["id"], first["instance"]["id"]);

    let other = send("k-1", r#"{"name": "twice"}"#).await.unwrap();
    assert_eq!(other.status(), 409, "the same key for another request");
    // A refused request is replayed as refused, too.
    let bad = send("k-2", r#"{"name": ""}"#).await.unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(send("k-2", r#"{"name": ""}"#).await.unwrap().status(), 400);

    let (_, listed) = ctx.get("/v1/instances").await;
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["once"], "one instance for two identical POSTs");
    let empty = ctx
        .http
        .post(ctx.url("/v1/instances"))
        .header("content-type", "application/json")
        .header("Idempotency-Key", "")
        .body(r#"{"name": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 400);
}

#[tokio::test]
async fn a_turn_streamed_in_its_post_is_its_log_and_a_retry_is_sent_to_it() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let start = |key: &'static str, input: &'static str| {
        ctx.http
            .post(ctx.url(&format!("{turns}/stream")))
            .header("content-type", "application/json")
            .header("Idempotency-Key", key)
            .body(json!({"input": input}).to_string())
            .send()
    };
    let first = start("t-1", "hello").await.unwrap();
    assert_eq!(first.status(), 201);
    let location = first.headers()["location"].to_str().unwrap().to_owned();
    let streamed = read_sse(first, Duration::from_secs(30)).await;
    let turn_id = streamed[0]["turn_id"].as_str().unwrap();
    assert_eq!(location, format!("{turns}/{turn_id}/events"));
    let seqs: Vec<u64> = streamed
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=streamed.len() as u64).collect::<Vec<_>>());
    assert_eq!(streamed.last().unwrap()["type"], "turn.finished");
    assert_eq!(streamed.last().unwrap()["output"], "You said: hello");
    assert_eq!(
        ctx.sse(&location, None).await,
        streamed,
        "the log, as stored"
    );

    // The same request again: no second turn, sent on to the first one's log.
    let again = start("t-1", "hello").await.unwrap();
    assert_eq!(again.status(), 303);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["location"].to_str().unwrap(), location);
    let (_, listed) = ctx.get(&turns).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        start("t-1", "other").await.unwrap().status(),
        409,
        "the same key for another request"
    );

    // Refusals come before any stream, as problems.
    let blank = start("t-2", " ").await.unwrap();
    assert_eq!(blank.status(), 400);
    let waiting = ctx.waiting_turn(&turns).await;
    let refused = start("t-3", "meanwhile").await.unwrap();
    assert_eq!(refused.status(), 409, "one turn at a time");
    ctx.cancel_turn(&waiting).await;
}

#[tokio::test]
async fn an_event_cursor_beyond_what_a_log_can_hold_is_a_400() {
    let ctx = Ctx::start().await;
    let (_, created) = ctx.post("/v1/instances", r#"{"name": "a"}"#).await;
    let events = format!("/v1/jobs/{}/events", created["job"]["id"].as_str().unwrap());
    for after in ["9223372036854775808", "18446744073709551615"] {
        let response = ctx.get(&format!("{events}?after={after}")).await;
        assert_problem(&response, 400, "invalid_request");
        assert!(response.1["detail"].as_str().unwrap().contains("`after`"));
        let response = ctx
            .http
            .get(ctx.url(&events))
            .header("Last-Event-ID", after)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "invalid_request", "{body}");
    }
    // The largest cursor a log can hold is fine: nothing comes after it.
    let tail = ctx.sse(&format!("{events}?after={}", i64::MAX), None).await;
    assert!(tail.is_empty(), "{tail:?}");
    // `after` is checked even when `Last-Event-ID` (which wins) is sent too; the header takes
    // what the contract says, at most 18 digits.
    for (after, header) in [("9223372036854775808", "1"), ("1", "1000000000000000000")] {
        let response = ctx
            .http
            .get(ctx.url(&format!("{events}?after={after}")))
            .header("Last-Event-ID", header)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            400,
            "after={after} Last-Event-ID: {header}"
        );
    }
}

#[tokio::test]
async fn bodies_are_read_as_the_contract_says() {
    let ctx = Ctx::start().await;
    // A JSON array is not an object, though serde would read a struct from it.
    let (status, body) = ctx.post("/v1/keys", r#"["k", "read", null]"#).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_body")),
        "{body}"
    );
    // A number with a zero fraction is an integer, as JSON Schema has it; sim faults are bounded.
    let sim_ctx = Ctx::start_sim().await;
    let sim = r#"{"name": "s", "provider": "sim", "sim": {"start_delay_ms": 5.0}}"#;
    let (status, body) = sim_ctx.post("/v1/instances", sim).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["instance"]["sim"]["start_delay_ms"], 5, "{body}");
    let long = r#"{"name": "s", "provider": "sim", "sim": {"exit_after_ms": 86400001}}"#;
    assert_problem(
        &sim_ctx.post("/v1/instances", long).await,
        400,
        "invalid_request",
    );
    let (status, body) = ctx
        .post(
            "/v1/keys",
            r#"{"name": "k", "scope": "read", "instances": []}"#,
        )
        .await;
    assert_problem(&(status, body), 400, "invalid_request");
    // A field the contract does not have is refused, in every variant of a model too.
    let iid = ctx.ready_instance().await;
    let profiles = format!("/v1/instances/{iid}/profiles");
    let unknown = r#"{"name": "p", "model": {"provider": "scripted", "colour": "red"}}"#;
    let (status, body) = ctx.post(&profiles, unknown).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_body")),
        "{body}"
    );
    // Names: not all blank, at most 128 characters (not bytes).
    for name in ["   ", &"é".repeat(129)] {
        let body = serde_json::json!({"name": name}).to_string();
        assert_problem(
            &ctx.post("/v1/instances", &body).await,
            400,
            "invalid_request",
        );
    }
    let body = serde_json::json!({"name": "é".repeat(128)}).to_string();
    assert_eq!(ctx.post("/v1/instances", &body).await.0, 202);
}

#[tokio::test]
async fn a_profile_whose_runtime_configuration_fails_leaves_nothing_behind() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    // Where the profile's home must go, a file: the runtime cannot be configured.
    let home = ctx
        .dir
        .path()
        .join(format!("instances/{iid}/home/profiles/blocked"));
    std::fs::write(&home, "not a directory").unwrap();
    let profiles = format!("/v1/instances/{iid}/profiles");
    assert_problem(
        &ctx.post(&profiles, r#"{"name": "blocked"}"#).await,
        503,
        "runtime_unavailable",
    );
    let (_, listed) = ctx.get(&profiles).await;
    assert_eq!(listed["items"], json!([]), "{listed}");

    std::fs::remove_file(&home).unwrap();
    let (status, profile) = ctx.post(&profiles, r#"{"name": "blocked"}"#).await;
    assert_eq!(status, 201, "a retry after the failure succeeds: {profile}");
    // It holds the MCP token (and a model key when there is one): the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.join("config.yaml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn tools_in_use_are_not_deleted_and_say_what_uses_them() {
    let ctx = Ctx::start().await;
    let (_, host) = ctx
        .post(
            "/v1/tool-hosts",
            &json!({"url": "http://127.0.0.1:9/mcp", "secret": "0123456789abcdef"}).to_string(),
        )
        .await;
    let host_id = host["id"].as_str().unwrap().to_owned();
    let (_, tool) = ctx
        .post(
            "/v1/tools",
            &json!({"name": "t", "description": "d", "input_schema": {"type": "object"},
                "host_id": host_id})
            .to_string(),
        )
        .await;
    let tool_id = tool["id"].as_str().unwrap().to_owned();
    let iid = ctx.ready_instance().await;
    let (_, profile) = ctx
        .post(
            &format!("/v1/instances/{iid}/profiles"),
            &json!({"name": "p", "tools": [tool_id]}).to_string(),
        )
        .await;
    let pid = profile["id"].as_str().unwrap().to_owned();
    let delete = async |path: String| ctx.send(reqwest::Method::DELETE, &path, None).await;

    let in_use = delete(format!("/v1/tools/{tool_id}")).await;
    assert_problem(&in_use, 409, "conflict");
    assert!(
        in_use.1["detail"].as_str().unwrap().contains(&pid),
        "{}",
        in_use.1
    );
    let serving = delete(format!("/v1/tool-hosts/{host_id}")).await;
    assert_problem(&serving, 409, "conflict");
    assert!(
        serving.1["detail"].as_str().unwrap().contains(&tool_id),
        "{}",
        serving.1
    );

    let attached = format!("/v1/instances/{iid}/profiles/{pid}/tools/{tool_id}");
    let (status, detached) = delete(attached.clone()).await;
    assert_eq!(status, 200, "{detached}");
    assert_eq!(detached["tools"], json!([]));
    assert_problem(&delete(attached).await, 404, "not_found");
    let (status, _) = delete(format!("/v1/tools/{tool_id}")).await;
    assert_eq!(status, 200);
    let (status, _) = delete(format!("/v1/tool-hosts/{host_id}")).await;
    assert_eq!(status, 200);
    assert_problem(
        &ctx.get(&format!("/v1/tools/{tool_id}")).await,
        404,
        "not_found",
    );
    assert_problem(
        &ctx.get(&format!("/v1/tool-hosts/{host_id}")).await,
        404,
        "not_found",
    );
}
