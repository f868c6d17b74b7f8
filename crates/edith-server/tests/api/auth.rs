//! Keys and scopes: no operation but `/healthz` answers without a key, a key reaches only what
//! its scope and instances allow, secrets are shown once and never again.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{ADMIN_KEY, Ctx, assert_problem, client_with_key, echo_tool_host, edith_serve};

impl Ctx {
    /// A new key with `scope` (and instance limits, if any); returns its secret.
    async fn key(&self, scope: &str, instances: Option<Vec<&str>>) -> String {
        let body = json!({"name": format!("{scope} key"), "scope": scope, "instances": instances});
        let (status, created) = self.post("/v1/keys", &body.to_string()).await;
        assert_eq!(status, 201, "{created}");
        created["secret"].as_str().unwrap().to_owned()
    }
}

/// A well-formed id for each path parameter (the resource need not exist: access is checked
/// before anything is looked up).
fn sample(param: &str) -> &'static str {
    match param {
        "instance_id" => "inst_0",
        "profile_id" => "prof_0",
        "session_id" => "sess_0",
        "turn_id" => "turn_0",
        "tool_id" => "tool_0",
        "tool_host_id" => "th_0",
        "job_id" => "job_0",
        "key_id" => "key_0",
        // A forwarded Desktop route.
        "path" => "api/status",
        other => panic!("no sample id for `{other}`: add one"),
    }
}

/// Every operation of the contract: (method, path with sample ids, scope it needs or `None`).
fn operations() -> Vec<(reqwest::Method, String, Option<String>)> {
    let contract = edith_server::openapi();
    let mut ops = Vec::new();
    for (path, methods) in contract["paths"].as_object().unwrap() {
        let concrete: Vec<String> = path
            .split('/')
            .map(
                |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(param) => sample(param).to_owned(),
                    None => segment.to_owned(),
                },
            )
            .collect();
        for (method, op) in methods.as_object().unwrap() {
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let scope = op["x-edith-scope"].as_str().map(str::to_owned);
            if scope.is_none() {
                assert_eq!(
                    op["security"],
                    json!([]),
                    "{path}: neither public nor scoped"
                );
            }
            ops.push((method, concrete.join("/"), scope));
        }
    }
    assert!(ops.len() > 20, "the contract's operations: {ops:?}");
    ops
}

#[tokio::test]
async fn every_operation_but_health_needs_a_key_with_its_scope() {
    let ctx = Ctx::start().await;
    let read = client_with_key(&ctx.key("read", None).await);
    let write = client_with_key(&ctx.key("write", None).await);
    let nobody = reqwest::Client::new();
    let stranger = client_with_key("edk_not_a_key_of_this_server_000000");
    let rank = |scope: &str| ["read", "write", "admin"].iter().position(|s| *s == scope);
    for (method, path, scope) in operations() {
        let body = matches!(method, reqwest::Method::POST | reqwest::Method::PUT).then_some("{}");
        let Some(scope) = scope else {
            assert_eq!(path, "/healthz", "the one operation that needs no key");
            let (status, _) = ctx.send_with(&nobody, method.clone(), &path, body).await;
            assert_eq!(status, 200, "{method} {path} is public");
            continue;
        };
        for client in [&nobody, &stranger] {
            let response = ctx.send_with(client, method.clone(), &path, body).await;
            assert_problem(&response, 401, "unauthorized");
        }
        if method == reqwest::Method::GET {
            // HEAD runs the GET handler: it needs the same key.
            let head = nobody.head(ctx.url(&path)).send().await.unwrap();
            assert_eq!(head.status(), 401, "HEAD {path}");
        }
        for (client, held) in [(&read, "read"), (&write, "write")] {
            let (status, body) = ctx.send_with(client, method.clone(), &path, body).await;
            if rank(held) < rank(&scope) {
                assert_eq!(status, 403, "{method} {path} with a {held} key: {body}");
                assert_eq!(body["code"], "forbidden", "{body}");
                let detail = body["detail"].as_str().unwrap();
                assert!(detail.contains(&format!("`{scope}`")), "{detail}");
            } else {
                assert!(
                    ![401, 403].contains(&status),
                    "{method} {path} with a {held} key: {body}"
                );
            }
        }
    }
    // No route at all: still nothing without a key.
    let response = ctx
        .send_with(&nobody, reqwest::Method::GET, "/v1/nothing", None)
        .await;
    assert_problem(&response, 401, "unauthorized");
}

#[tokio::test]
async fn every_route_outside_the_contract_has_its_own_rule_and_keeps_it() {
    // A route added outside the contract must say who may call it: this list is all of them.
    let unlisted: Vec<String> = edith_server::unlisted_routes()
        .into_iter()
        .map(|(method, path, access)| format!("{method} {path}: {access}"))
        .collect();
    let mcp = "/v1/instances/{instance_id}/profiles/{profile_id}/mcp";
    assert_eq!(
        unlisted,
        [
            "GET /console: anyone".to_owned(),
            "GET /console/console.css: anyone".to_owned(),
            "GET /console/console.js: anyone".to_owned(),
            "GET /metrics: a key with `admin`".to_owned(),
            format!("GET {mcp}: its own token"),
            format!("POST {mcp}: its own token"),
        ]
    );

    let ctx = Ctx::start().await;
    let nobody = reqwest::Client::new();
    for page in ["/console", "/console/console.js", "/console/console.css"] {
        let response = nobody.get(ctx.url(page)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{page}");
    }
    let write = client_with_key(&ctx.key("write", None).await);
    let metrics = |client: &reqwest::Client| client.get(ctx.url("/metrics")).send();
    assert_eq!(metrics(&nobody).await.unwrap().status(), 401);
    assert_eq!(metrics(&write).await.unwrap().status(), 403);
    assert_eq!(
        metrics(&client_with_key(ADMIN_KEY)).await.unwrap().status(),
        200
    );

    // The MCP endpoint takes only the instance's MCP token: no key, and not even an admin key,
    // and an unknown instance is refused the same way (nobody learns which instances exist).
    let iid = ctx.ready_instance().await;
    let (_, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    let pid = profile["id"].as_str().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let admin = client_with_key(ADMIN_KEY);
    for (client, instance) in [(&nobody, iid.as_str()), (&admin, &iid), (&admin, "inst_0")] {
        let path = format!("/v1/instances/{instance}/profiles/{pid}/mcp");
        let refused = ctx
            .send_with(client, reqwest::Method::POST, &path, Some(&list))
            .await;
        assert_problem(&refused, 401, "unauthorized");
        // Its event stream likewise.
        let refused = ctx
            .send_with(client, reqwest::Method::GET, &path, None)
            .await;
        assert_problem(&refused, 401, "unauthorized");
    }
    // With the instance's token it answers, for the instance's profiles only; the token
    // does not tell a holder about other instances either.
    let token = ctx.mcp_token(&iid).await;
    let with_token = reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        )]))
        .build()
        .unwrap();
    let mcp =
        |instance: &str, profile: &str| format!("/v1/instances/{instance}/profiles/{profile}/mcp");
    let (status, listed) = ctx
        .send_with(
            &with_token,
            reqwest::Method::POST,
            &mcp(&iid, pid),
            Some(&list),
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    let unknown = ctx
        .send_with(
            &with_token,
            reqwest::Method::POST,
            &mcp(&iid, "prof_0"),
            Some(&list),
        )
        .await;
    assert_problem(&unknown, 404, "not_found");
    let elsewhere = ctx
        .send_with(
            &with_token,
            reqwest::Method::POST,
            &mcp("inst_0", pid),
            Some(&list),
        )
        .await;
    assert_problem(&elsewhere, 401, "unauthorized");
    // An event stream is only for a session whose client lists again on a change (and this
    // request is in none); others are told the method is not served, as before.
    let refused = ctx
        .send_with(&with_token, reqwest::Method::GET, &mcp(&iid, pid), None)
        .await;
    assert_problem(&refused, 405, "method_not_allowed");

    // Nor is what it is sent kept for `Idempotency-Key` replay: nobody without a key may fill
    // the store. The same key with another body would be a 409 if the first had been kept.
    let path = format!("/v1/instances/{iid}/profiles/{pid}/mcp");
    for body in [list.clone(), list.replace("tools/list", "ping")] {
        let response = nobody
            .post(ctx.url(&path))
            .header("idempotency-key", "same-key")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
        assert!(response.headers().get("idempotent-replayed").is_none());
    }
    // A method it declared no rule for needs a key like an unknown route.
    let response = ctx
        .send_with(&nobody, reqwest::Method::DELETE, &path, None)
        .await;
    assert_problem(&response, 401, "unauthorized");
}

#[tokio::test]
async fn a_refused_request_says_how_to_authenticate() {
    let ctx = Ctx::start().await;
    let response = reqwest::Client::new()
        .get(ctx.url("/v1/instances"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
}

#[tokio::test]
async fn a_key_is_shown_once_listed_without_its_secret_and_revocable() {
    let ctx = Ctx::start().await;
    let (status, created) = ctx
        .post("/v1/keys", r#"{"name": "ci", "scope": "write"}"#)
        .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("edk_") && secret.len() >= 40, "{secret}");
    let id = created["key"]["id"].as_str().unwrap().to_owned();
    assert!(
        secret.starts_with(
            created["key"]["prefix"]
                .as_str()
                .unwrap()
                .trim_end_matches('…')
        )
    );

    let key = client_with_key(&secret);
    let (status, _) = ctx
        .send_with(&key, reqwest::Method::GET, "/v1/instances", None)
        .await;
    assert_eq!(status, 200);

    let (_, listed) = ctx.get("/v1/keys").await;
    let (_, fetched) = ctx.get(&format!("/v1/keys/{id}")).await;
    for body in [&listed, &fetched] {
        assert!(!body.to_string().contains(&secret), "{body}");
    }
    let shown = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap();
    assert_eq!(shown["scope"], "write");
    assert!(
        shown["last_used_at"].is_string(),
        "its use was recorded: {shown}"
    );

    let (status, revoked) = ctx
        .send(reqwest::Method::DELETE, &format!("/v1/keys/{id}"), None)
        .await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    let response = ctx
        .send_with(&key, reqwest::Method::GET, "/v1/instances", None)
        .await;
    assert_problem(&response, 401, "unauthorized");
    assert!(response.1["detail"].as_str().unwrap().contains("revoked"));
}

#[tokio::test]
async fn a_key_limited_to_an_instance_reaches_only_that_instance() {
    let ctx = Ctx::start().await;
    let mine = ctx.ready_instance().await;
    let other = ctx.ready_instance().await;
    let limited = client_with_key(&ctx.key("write", Some(vec![mine.as_str()])).await);
    let get = async |path: String| {
        ctx.send_with(&limited, reqwest::Method::GET, &path, None)
            .await
    };
    let (status, _) = get(format!("/v1/instances/{mine}/profiles")).await;
    assert_eq!(status, 200);
    assert_problem(
        &get(format!("/v1/instances/{other}/profiles")).await,
        403,
        "forbidden",
    );
    // Its instance's jobs are listed, shown and followed; another's are not.
    let (status, jobs) = get(format!("/v1/instances/{mine}/jobs")).await;
    assert_eq!(status, 200, "{jobs}");
    assert_eq!(jobs[0]["kind"], "instance.provision", "{jobs}");
    let job = jobs[0]["id"].as_str().unwrap();
    assert_eq!(get(format!("/v1/jobs/{job}")).await.0, 200);
    let (status, events) = get(format!("/v1/jobs/{job}/events")).await;
    assert_eq!(status, 200);
    assert!(events.to_string().contains("job.finished"), "{events}");
    assert_problem(
        &get(format!("/v1/instances/{other}/jobs")).await,
        403,
        "forbidden",
    );
    let (_, theirs) = ctx.get(&format!("/v1/instances/{other}/jobs")).await;
    let theirs = theirs[0]["id"].as_str().unwrap();
    assert_problem(&get(format!("/v1/jobs/{theirs}")).await, 403, "forbidden");
    assert_problem(
        &get(format!("/v1/jobs/{theirs}/events")).await,
        403,
        "forbidden",
    );
    assert_problem(
        &get("/v1/instances/inst_00000000000000000000000000000000/jobs".to_owned()).await,
        403,
        "forbidden",
    );
    let (status, _) = ctx
        .get("/v1/instances/inst_00000000000000000000000000000000/jobs")
        .await;
    assert_eq!(
        status, 404,
        "an unknown instance, to a key that reaches all"
    );
    // Routes not about one instance are beyond a limited key.
    assert_problem(&get("/v1/instances".to_owned()).await, 403, "forbidden");
    assert_problem(&get("/v1/tools".to_owned()).await, 403, "forbidden");
    // A limit must name instances that exist.
    let (status, body) = ctx
        .post(
            "/v1/keys",
            r#"{"name": "x", "scope": "read", "instances": ["inst_nope"]}"#,
        )
        .await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn native_methods_that_administer_a_runtime_need_the_admin_scope() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let path = format!("/v1/instances/{iid}/native/rpc");
    let write = client_with_key(&ctx.key("write", None).await);
    let admin_method =
        json!({"method": "config.set", "params": {"key": "x", "value": 1}}).to_string();
    let refused = ctx
        .send_with(&write, reqwest::Method::POST, &path, Some(&admin_method))
        .await;
    assert_problem(&refused, 403, "forbidden");
    assert!(
        refused.1["detail"].as_str().unwrap().contains("`admin`"),
        "{}",
        refused.1
    );
    // An admin key gets past the check, to the runtime's own answer (it has no key `x`).
    let answered = ctx.post(&path, &admin_method).await;
    assert_problem(&answered, 422, "native_error");
    assert_eq!(answered.1["native_code"], 4002, "{}", answered.1);
    // Methods that do not administer anything need only `write`.
    let list = json!({"method": "session.list"}).to_string();
    let (status, body) = ctx
        .send_with(&write, reqwest::Method::POST, &path, Some(&list))
        .await;
    assert_eq!(status, 200, "{body}");

    // The same through a profile handle; and reading the whole config file back (Hermes
    // returns its credentials as they are) needs `admin` too, unlike its other keys.
    let (_, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    let pid = profile["id"].as_str().unwrap();
    let through_profile = |method: &str, params: Value| {
        json!({"method": method, "params": params, "profile_id": pid}).to_string()
    };
    for refused in [
        through_profile("config.set", json!({"key": "x", "value": 1})),
        through_profile("config.get", json!({"key": "full"})),
        json!({"method": "config.get", "params": {"key": "full"}}).to_string(),
    ] {
        let answer = ctx
            .send_with(&write, reqwest::Method::POST, &path, Some(&refused))
            .await;
        assert_problem(&answer, 403, "forbidden");
    }
    let mtime = through_profile("config.get", json!({"key": "mtime"}));
    let (status, body) = ctx
        .send_with(&write, reqwest::Method::POST, &path, Some(&mtime))
        .await;
    assert_eq!(status, 200, "{body}");
    let full = through_profile("config.get", json!({"key": "full"}));
    let (status, body) = ctx.post(&path, &full).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn another_callers_idempotency_key_never_replays_this_callers_reply() {
    let ctx = Ctx::start().await;
    let other = client_with_key(&ctx.key("admin", None).await);
    let create = |http: &reqwest::Client| {
        http.post(ctx.url("/v1/keys"))
            .header("content-type", "application/json")
            .header("Idempotency-Key", "same-key")
            .body(r#"{"name": "k", "scope": "read"}"#)
            .send()
    };
    let first: Value = create(&ctx.http).await.unwrap().json().await.unwrap();
    let second = create(&other).await.unwrap();
    assert!(second.headers().get("idempotent-replayed").is_none());
    let second: Value = second.json().await.unwrap();
    assert_ne!(
        first["secret"], second["secret"],
        "each caller got its own key"
    );
}

#[tokio::test]
async fn edith_makes_its_first_admin_key_in_a_private_file_and_never_logs_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let start = || edith_serve(dir.path(), "127.0.0.1:0", &[], None);
    let process = start().await;
    let file = dir.path().join("admin.key");
    let key = std::fs::read_to_string(&file)
        .expect("admin.key")
        .trim()
        .to_owned();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let url = process.ready_value("url");
    let response = client_with_key(&key)
        .get(format!("{url}/v1/keys"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let keys: Value = response.json().await.unwrap();
    assert_eq!(keys["items"].as_array().unwrap().len(), 1);
    // The log says where the key is, and never the key.
    let mut said = String::new();
    for _ in 0..100 {
        said = process.stderr().join("\n");
        if said.contains("admin.key") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert!(!said.contains(&key), "the key is never logged");
    process.stop(Duration::from_secs(10)).await;

    // Started again, it keeps that key and makes no other.
    let again = start().await;
    let url = again.ready_value("url");
    let keys: Value = client_with_key(&key)
        .get(format!("{url}/v1/keys"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys["items"].as_array().unwrap().len(), 1, "{keys}");
    let stderr = again.stderr().join("\n");
    assert!(!stderr.contains(&key), "the key is never logged");
    again.stop(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn edith_refuses_to_listen_beyond_loopback_unless_tls_is_in_front() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = tokio::process::Command::new(crate::edith_binary())
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env("EDITH_API_KEY", ADMIN_KEY)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--behind-tls-proxy"), "{stderr}");

    let process = edith_serve(
        dir.path(),
        "0.0.0.0:0",
        &["--behind-tls-proxy"],
        Some(ADMIN_KEY),
    )
    .await;
    let port = process
        .ready_value("url")
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    process.stop(Duration::from_secs(10)).await;
}

/// A whole session through the `edith` binary logging JSON — an API key, a tool host's secret,
/// a model key, the runtime's and the MCP endpoint's tokens all in use, on an embedded and on a
/// `process` instance, and requests that fail — and not one of them in any reply, event, metric,
/// runtime log or line the server logged.
#[tokio::test]
async fn no_secret_appears_in_a_reply_an_event_or_the_log() {
    const TOOL_HOST_SECRET: &str = "tool-host-secret-0123456789";
    const MODEL_KEY: &str = "sk-model-secret-0123456789";
    const WRONG_KEY: &str = "edk_wrong-key-secret-0123456789";
    let dir = tempfile::tempdir().expect("temp dir");
    let json_logs = ["--log-format", "json"];
    let process = edith_serve(dir.path(), "127.0.0.1:0", &json_logs, Some(ADMIN_KEY)).await;
    let url = process.ready_value("url");
    let model = testkit::FakeModel::start().await;
    let tool_host = echo_tool_host(TOOL_HOST_SECRET).await;

    let mut seen: Vec<String> = Vec::new();
    let admin = client_with_key(ADMIN_KEY);
    let call = async |http: &reqwest::Client, method: reqwest::Method, path: &str, body: Value| {
        let mut request = http.request(method, format!("{url}{path}"));
        if !body.is_null() {
            request = request.json(&body);
        }
        let text = request.send().await.unwrap().text().await.unwrap();
        serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text))
    };
    // The whole body of a stream that ends (bounded).
    let stream = async |http: &reqwest::Client, path: &str| {
        let response = http.get(format!("{url}{path}")).send().await.unwrap();
        tokio::time::timeout(Duration::from_secs(60), response.text())
            .await
            .expect("the stream ends")
            .unwrap()
    };
    use reqwest::Method;
    let created = call(
        &admin,
        Method::POST,
        "/v1/keys",
        json!({"name": "app", "scope": "write"}),
    )
    .await;
    let app_key = created["secret"].as_str().unwrap().to_owned();
    let app = client_with_key(&app_key);
    let host = call(
        &app,
        Method::POST,
        "/v1/tool-hosts",
        json!({"url": tool_host, "secret": TOOL_HOST_SECRET}),
    )
    .await;
    let tool = call(
        &app,
        Method::POST,
        "/v1/tools",
        json!({"name": "echo", "description": "Echo",
        "input_schema": {"type": "object"}, "host_id": host["id"]}),
    )
    .await;
    seen.extend([host.to_string(), tool.to_string()]);

    let mut instances = Vec::new();
    for body in [
        json!({"name": "embedded"}),
        json!({"name": "process", "provider": "process", "runtime": "hermes-runtime"}),
    ] {
        let instance = call(&app, Method::POST, "/v1/instances", body).await;
        let iid = instance["instance"]["id"].as_str().unwrap().to_owned();
        let job = instance["job"]["id"].as_str().unwrap();
        seen.push(stream(&app, &format!("/v1/jobs/{job}/events")).await);
        let profile = call(&app, Method::POST, &format!("/v1/instances/{iid}/profiles"), json!({
            "name": "scan",
            "model": {"provider": "openai_compatible", "base_url": model.base_url(), "model": "fake-model", "api_key": MODEL_KEY},
            "tools": [tool["id"]],
        })).await;
        let pid = profile["id"].as_str().unwrap().to_owned();
        let sessions = format!("/v1/instances/{iid}/profiles/{pid}/sessions");
        let session = call(&app, Method::POST, &sessions, json!({})).await;
        let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
        let turn = call(
            &app,
            Method::POST,
            &turns,
            json!({"input": r#"CALL echo {"text": "scanned"}"#}),
        )
        .await;
        let turn_id = turn["id"].as_str().unwrap();
        let events = stream(&app, &format!("{turns}/{turn_id}/events")).await;
        assert!(events.contains("scanned"), "the tool ran: {events}");
        assert!(events.contains("turn.finished"), "{events}");
        seen.extend([events, instance.to_string(), profile.to_string()]);
        seen.extend([session.to_string(), turn.to_string()]);
        for path in [
            format!("/v1/instances/{iid}"),
            format!("/v1/instances/{iid}/profiles/{pid}"),
            format!("{turns}/{turn_id}"),
        ] {
            seen.push(
                call(&app, Method::GET, &path, Value::Null)
                    .await
                    .to_string(),
            );
        }
        // The runtime's own routes, through the control plane: its config holds the model key
        // and the MCP endpoint's token, which are shown masked; the runtime's token stays inside.
        let native = profile["native_name"].as_str().unwrap();
        let desktop = format!("/v1/instances/{iid}/desktop/api");
        for path in [
            format!("{desktop}/status"),
            format!("{desktop}/sessions?profile={native}"),
            format!("{desktop}/config?profile={native}"),
            format!("{desktop}/profiles"),
        ] {
            let reply = call(&admin, Method::GET, &path, Value::Null).await;
            assert!(!reply.is_string(), "{path} answered JSON: {reply}");
            if path.contains("/config") {
                // The credentials are there, masked (the scan below shows none in clear).
                assert!(reply["mcp_servers"].is_object(), "{reply}");
                assert!(reply.to_string().contains("***"), "{reply}");
            }
            seen.push(reply.to_string());
        }
        // Through the gateway relay and a native call: frames and replies carry no token.
        let gateway = format!("{url}/v1/instances/{iid}/profiles/{pid}/gateway");
        seen.push(relayed(&gateway.replacen("http", "ws", 1), &app_key).await);
        let native = json!({"method": "config.get", "params": {"key": "full"}, "profile_id": pid});
        let reply = call(
            &admin,
            Method::POST,
            &format!("/v1/instances/{iid}/native/rpc"),
            native,
        )
        .await;
        assert!(reply["result"]["config"].is_object(), "{reply}");
        seen.push(reply.to_string());
        instances.push(iid);
    }
    let process_instance = &instances[1];
    let log = call(
        &app,
        Method::GET,
        &format!("/v1/instances/{process_instance}/log?lines=10000"),
        Value::Null,
    )
    .await;
    assert!(!log["lines"].as_array().unwrap().is_empty(), "{log}");
    seen.push(log.to_string());
    assert_eq!(
        model.authorizations()[0],
        format!("Bearer {MODEL_KEY}"),
        "the model got its key"
    );

    // What fails: a model that cannot be reached, a tool host refused for its URL, a wrong key.
    let embedded = &instances[0];
    let profile = call(&app, Method::POST, &format!("/v1/instances/{embedded}/profiles"), json!({
        "name": "unreachable",
        "model": {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "fake-model", "api_key": MODEL_KEY},
    })).await;
    let sessions = format!(
        "/v1/instances/{embedded}/profiles/{}/sessions",
        profile["id"].as_str().unwrap()
    );
    let session = call(&app, Method::POST, &sessions, json!({})).await;
    let turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    let turn = call(&app, Method::POST, &turns, json!({"input": "hello"})).await;
    let turn_id = turn["id"].as_str().unwrap();
    let events = stream(&app, &format!("{turns}/{turn_id}/events")).await;
    assert!(events.contains(r#""state":"failed""#), "{events}");
    seen.push(events);
    let failed = call(
        &app,
        Method::GET,
        &format!("{turns}/{turn_id}"),
        Value::Null,
    )
    .await;
    assert_eq!(failed["state"], "failed", "{failed}");
    // The runtime's own words say why, after its three attempts.
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .starts_with("API call failed after 3 retries: model endpoint unreachable"),
        "{failed}"
    );
    seen.push(failed.to_string());
    let refused = call(
        &app,
        Method::POST,
        "/v1/tool-hosts",
        json!({"url": "ftp://127.0.0.1/mcp", "secret": TOOL_HOST_SECRET}),
    )
    .await;
    assert_eq!(refused["status"], 400, "{refused}");
    seen.push(refused.to_string());
    let wrong = call(
        &client_with_key(WRONG_KEY),
        Method::GET,
        "/v1/instances",
        Value::Null,
    )
    .await;
    assert_eq!(wrong["status"], 401, "{wrong}");
    seen.push(wrong.to_string());
    for path in ["/v1/tools", "/v1/instances", "/v1/tool-hosts"] {
        seen.push(call(&app, Method::GET, path, Value::Null).await.to_string());
    }
    for path in ["/v1/keys", "/metrics"] {
        seen.push(
            call(&admin, Method::GET, path, Value::Null)
                .await
                .to_string(),
        );
    }

    // The tokens the control plane made for the runtimes and their MCP endpoints.
    let db = format!("sqlite://{}", dir.path().join("edith.db").display());
    let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db)
        .await
        .unwrap();
    let tokens: Vec<(String, String)> =
        sqlx::query_as("SELECT runtime_token, mcp_token FROM instances")
            .fetch_all(&mut db)
            .await
            .unwrap();
    assert_eq!(tokens.len(), 2);
    let log = process.stderr().join("\n");
    process.stop(Duration::from_secs(10)).await;
    for line in log.lines() {
        let _: Value = serde_json::from_str(line).expect("a JSON log line");
    }
    assert!(log.contains("turn"), "the server logged its turns: {log}");
    seen.push(log);
    let mut secrets = vec![
        ADMIN_KEY,
        app_key.as_str(),
        TOOL_HOST_SECRET,
        MODEL_KEY,
        WRONG_KEY,
    ];
    for (runtime, mcp) in &tokens {
        secrets.extend([runtime.as_str(), mcp.as_str()]);
    }
    for secret in secrets {
        for text in &seen {
            assert!(
                !text.contains(secret),
                "a secret in a reply or the log: {text}"
            );
        }
    }
}

/// Everything the gateway relay at `url` sends `key`'s client while it opens a session and
/// reads a config value (bounded).
async fn relayed(url: &str, key: &str) -> String {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    let bearer = format!("Bearer {key}").parse().unwrap();
    request.headers_mut().insert("authorization", bearer);
    let (mut socket, _) = tokio::time::timeout(
        Duration::from_secs(30),
        tokio_tungstenite::connect_async(request),
    )
    .await
    .expect("a handshake within 30 s")
    .expect("the relay opens");
    let mut seen = String::new();
    for (id, method, params) in [
        (1, "session.create", json!({})),
        (2, "config.get", json!({"key": "mtime"})),
    ] {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        socket
            .send(Message::Text(request.to_string().into()))
            .await
            .unwrap();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), socket.next())
                .await
                .expect("a frame within 30 s")
                .expect("open")
                .expect("a frame");
            let Message::Text(text) = message else {
                continue;
            };
            seen.push_str(&text);
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["frame"]["id"] == id {
                assert!(frame["frame"]["result"].is_object(), "{frame}");
                break;
            }
        }
    }
    socket.close(None).await.unwrap();
    seen
}
