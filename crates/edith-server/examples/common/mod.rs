//! What the benchmarks that run the control plane in their own process share (`overhead`,
//! `detection`): the control plane with the runtimes it may start, a client of its REST API, the
//! fake model in a process of its own, and runtime processes the benchmark starts itself.

// Each benchmark uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use edith_server::{RuntimeCommand, ServerConfig};
use serde_json::{Value, json};
use testkit::{ReadyProcess, hermes_model_config_at};

/// The gateway token of the runtimes a benchmark starts itself.
pub const TOKEN: &str = "bench-token-0123456789";
/// The control plane's admin key.
pub const KEY: &str = "edk_bench_admin_key_0123456789abcdef";
/// The longest request to the control plane, a provisioning job's stream included.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(300);

/// Starts the control plane in this process, on a store in `dir`, with the `process` runtimes
/// `ours` (our runtime's binary) and, when given, `hermes` (the real Hermes's); and a client
/// of it.
pub async fn start_control_plane(
    dir: &Path,
    ours: &Path,
    hermes: Option<&Path>,
) -> (edith_server::RunningServer, ControlPlane) {
    let mut runtimes = BTreeMap::from([(
        "ours".to_owned(),
        RuntimeCommand {
            program: ours.to_path_buf(),
            args: Vec::new(),
        },
    )]);
    if let Some(hermes) = hermes {
        let env = RuntimeCommand {
            program: PathBuf::from("env"),
            args: vec![
                "HERMES_DISABLE_LAZY_INSTALLS=1".to_owned(),
                hermes.display().to_string(),
            ],
        };
        runtimes.insert("hermes".to_owned(), env);
    }
    let config = ServerConfig {
        admin_key: Some(KEY.to_owned()),
        runtimes,
        // Turns one after the other, up to two requests each: more than the default rate allows.
        limits: edith_server::Limits {
            requests_per_second: 10_000.0,
            burst: 10_000.0,
            ..Default::default()
        },
        // As `edith serve` takes it from the environment.
        sqlite_synchronous: std::env::var(edith_server::SQLITE_SYNC_VARIABLE)
            .map_or(Ok(Default::default()), |mode| mode.parse())
            .unwrap_or_else(|e| panic!("{}: {e}", edith_server::SQLITE_SYNC_VARIABLE)),
        ..ServerConfig::local(dir.to_path_buf())
    };
    let server = edith_server::start(config).await.expect("control plane");
    let plane = ControlPlane {
        // Every request bounded: a runtime that hangs is reported, not waited on.
        http: reqwest::Client::builder()
            .timeout(REQUEST_LIMIT)
            .build()
            .unwrap(),
        url: server.url().to_owned(),
    };
    (server, plane)
}

/// A client of the control plane's REST API, with its admin key.
pub struct ControlPlane {
    pub http: reqwest::Client,
    pub url: String,
}

impl ControlPlane {
    /// A request to `path` with the admin key.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(KEY)
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
        let request = self.request(reqwest::Method::POST, path).json(&body);
        succeeded(path, request).await
    }

    pub async fn get(&self, path: &str) -> Value {
        succeeded(path, self.request(reqwest::Method::GET, path)).await
    }

    /// Reads an SSE stream to its end.
    pub async fn read_stream(&self, path: &str) {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        read_to_end(response).await;
    }

    /// An instance made from `body`, ready; its id.
    pub async fn instance(&self, body: Value) -> String {
        let created = self.post("/v1/instances", body).await;
        let job = created["job"]["id"].as_str().unwrap();
        self.read_stream(&format!("/v1/jobs/{job}/events")).await;
        created["instance"]["id"].as_str().unwrap().to_owned()
    }

    /// An instance made from `body`, ready, with a session of its profile `name` using `model`
    /// (`None`: the profile's native home is used as it is); the session's turns path.
    pub async fn session(&self, body: Value, name: &str, model: Option<&Model>) -> String {
        let iid = self.instance(body).await;
        let mut profile = json!({"name": name});
        if let Some(model) = model {
            profile["model"] = json!({"provider": "openai_compatible",
                "base_url": model.base_url(), "model": "fake-model", "api_key": "sk-bench"});
        }
        let profile = self
            .post(&format!("/v1/instances/{iid}/profiles"), profile)
            .await;
        let sessions = format!(
            "/v1/instances/{iid}/profiles/{}/sessions",
            profile["id"].as_str().unwrap()
        );
        let session = self.post(&sessions, json!({})).await;
        format!("{sessions}/{}/turns", session["id"].as_str().unwrap())
    }
}

/// The JSON body of `request`'s reply, which must be a success.
async fn succeeded(path: &str, request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    let status = response.status();
    assert!(status.is_success(), "{path}: {status}");
    response.json().await.unwrap()
}

/// The binaries named on the command line, made absolute: the runtimes start in their homes.
pub fn binaries() -> Vec<PathBuf> {
    std::env::args_os()
        .skip(1)
        .map(|arg| std::fs::canonicalize(&arg).expect("a runtime binary"))
        .collect()
}

/// Reads a reply's SSE stream to its end.
pub async fn read_to_end(response: reqwest::Response) {
    let body = tokio::time::timeout(REQUEST_LIMIT, response.text()).await;
    body.expect("the stream ends").unwrap();
}

/// The fake model, served by a process of its own.
pub struct Model {
    pub process: ReadyProcess,
    base_url: String,
}

impl Model {
    pub async fn start(binary: &Path, args: &[&str]) -> Self {
        let mut command = tokio::process::Command::new(binary);
        command.args(args);
        let process =
            ReadyProcess::spawn(command, "FAKE_MODEL_READY url=", Duration::from_secs(60)).await;
        let base_url = process.ready_value("url");
        Self { process, base_url }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn hermes_model_config(&self) -> Value {
        hermes_model_config_at(&self.base_url)
    }

    pub async fn stop(self) {
        self.process.stop(Duration::from_secs(10)).await;
    }
}

/// A runtime binary serving `home`, whose root and native profile `profile` are configured for
/// `model`, started by the benchmark itself (as an `external` instance's runtime is by its
/// owner).
pub async fn launch(binary: &Path, home: &Path, profile: &str, model: &Model) -> ReadyProcess {
    let config = json!({"model": model.hermes_model_config(), "approvals": {"mode": "manual"}});
    std::fs::write(home.join("config.yaml"), config.to_string()).unwrap();
    let profile = home.join("profiles").join(profile);
    std::fs::create_dir_all(&profile).unwrap();
    std::fs::write(profile.join("config.yaml"), config.to_string()).unwrap();
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .current_dir(home)
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1");
    let ready = "HERMES_BACKEND_READY port=";
    ReadyProcess::spawn(command, ready, Duration::from_secs(120)).await
}
