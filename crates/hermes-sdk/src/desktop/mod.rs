//! `HermesDesktop`: the Desktop REST routes of one Hermes runtime (`hermes serve`'s `/api/*`,
//! or our runtime's), a different endpoint with different operations from the control plane's.
//! Its operations (one method per route of `contracts/hermes-desktop.routes.json`) are generated
//! into `generated.rs`; this file has what they stand on.

mod capabilities;
#[rustfmt::skip]
mod generated;

pub use capabilities::DesktopCapabilities;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_native::desktop::{ParamIn, Route, TOKEN_HEADER, encode_segment};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::client::query_of;
use crate::error::{Error, Result};
use crate::transport::{Http, HttpRequest, HttpTransport};

/// How long one request may take before it is reported as hanging.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How requests are authenticated.
#[derive(Clone)]
enum Credential {
    /// Straight to a runtime: its session token.
    SessionToken(Arc<str>),
    /// Through a control plane's forwarding route: an API key of the control plane.
    ApiKey(Arc<str>),
}

/// A client for the Desktop routes of one runtime. Cheap to clone; clones share the HTTP client
/// and the closed state.
#[derive(Clone)]
pub struct HermesDesktop {
    http: Http,
    /// `http://host:port`, without a trailing slash.
    base: Arc<str>,
    credential: Option<Credential>,
    /// The profile every call acts on, for routes that take one; `None`: the runtime's own.
    profile: Option<Arc<str>>,
    /// Set by [`HermesDesktop::close`] on this client and its clones.
    closed: Arc<AtomicBool>,
    /// The closed states of what this client was made from (the client
    /// [`HermesDesktop::for_profile`] was called on, the SDK client it came through): when one
    /// of them closes, this one cannot go on.
    ancestors: Vec<Arc<AtomicBool>>,
}

impl std::fmt::Debug for HermesDesktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HermesDesktop")
            .field("base_url", &self.base)
            .field(
                "credential",
                &self.credential.as_ref().map(|_| "<redacted>"),
            )
            .field("profile", &self.profile)
            .finish()
    }
}

impl HermesDesktop {
    /// A client for the runtime at `base_url` (e.g. `http://127.0.0.1:9119`), authenticated with
    /// its session token, with an HTTP client of its own, which [`close`](Self::close) shuts
    /// down.
    pub fn remote(base_url: &str, token: Option<&str>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Self::with(base_url, token, Http::owned(http))
    }

    /// A client that sends through `http`. The SDK never closes or reconfigures it: it stays
    /// the caller's.
    pub fn with_http_client(base_url: &str, token: Option<&str>, http: reqwest::Client) -> Self {
        Self::with(base_url, token, Http::Reqwest(http))
    }

    /// A client that sends every request through `transport`, which stays the caller's.
    pub fn with_transport(
        base_url: &str,
        token: Option<&str>,
        transport: Arc<dyn HttpTransport>,
    ) -> Self {
        Self::with(base_url, token, Http::Custom(transport))
    }

    fn with(base_url: &str, token: Option<&str>, http: Http) -> Self {
        Self {
            http,
            base: base_url.trim_end_matches('/').into(),
            credential: token.map(|t| Credential::SessionToken(t.into())),
            profile: None,
            closed: Arc::new(AtomicBool::new(false)),
            ancestors: Vec::new(),
        }
    }

    /// Through a control plane (`EdithHermes::desktop`): `base` is its forwarding route, the
    /// key is the control plane's, and the client ends when `owner_closed` is set.
    pub(crate) fn through_control_plane(
        http: Http,
        base: &str,
        api_key: Option<&str>,
        owner_closed: Arc<AtomicBool>,
    ) -> Self {
        Self {
            http,
            base: base.into(),
            credential: api_key.map(|k| Credential::ApiKey(k.into())),
            profile: None,
            closed: Arc::new(AtomicBool::new(false)),
            ancestors: vec![owner_closed],
        }
    }

    /// Whether this client reaches the runtime through a control plane (with its API key).
    pub(crate) fn through_a_control_plane(&self) -> bool {
        matches!(self.credential, Some(Credential::ApiKey(_)))
    }

    /// A client for the runtime's profile `name`: every route that takes a profile acts on it.
    /// It shares this client's HTTP client without owning it: closing it leaves this client
    /// open, closing this client ends it too.
    pub fn for_profile(&self, name: &str) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            credential: self.credential.clone(),
            profile: Some(name.into()),
            closed: Arc::new(AtomicBool::new(false)),
            ancestors: self
                .ancestors
                .iter()
                .cloned()
                .chain([self.closed.clone()])
                .collect(),
        }
    }

    /// The profile this client acts on; `None`: the runtime's default.
    pub fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    /// The runtime's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Closes this client (and its clones, and the clients [`for_profile`](Self::for_profile)
    /// made from it): later calls fail with [`Error::Closed`]. Closing the client `remote`
    /// made drops its HTTP client with its pooled connections; a client made from another
    /// (`for_profile`, `instance.desktop()`) leaves the shared one to its owner, and an HTTP
    /// client the caller gave stays theirs and keeps working.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if self.ancestors.is_empty() {
            self.http.shut_down();
        }
    }

    fn check_open(&self) -> Result<()> {
        let ended = |flag: &Arc<AtomicBool>| flag.load(Ordering::SeqCst);
        if ended(&self.closed) || self.ancestors.iter().any(ended) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// `value` as a JSON object, with this client's profile added where the route takes one in
    /// `place` and the caller left it unset.
    fn with_profile<T: Serialize>(
        &self,
        route: Route,
        place: ParamIn,
        value: &T,
    ) -> Result<Map<String, Value>> {
        let mut object = match serde_json::to_value(value) {
            Ok(Value::Object(object)) => object,
            Ok(Value::Null) => Map::new(),
            Ok(other) => {
                return Err(Error::Decode {
                    detail: "a query or body must be an object".to_owned(),
                    body: other.to_string(),
                });
            }
            Err(e) => {
                return Err(Error::Decode {
                    detail: e.to_string(),
                    body: String::new(),
                });
            }
        };
        if let Some(profile) = &self.profile
            && route.profile_param() == Some(place)
            && object.get("profile").is_none_or(Value::is_null)
        {
            object.insert("profile".to_owned(), Value::String(profile.to_string()));
        }
        Ok(object)
    }

    /// Calls the route whose operation is `operation` (as `contracts/hermes-desktop.routes.json`
    /// names it) with its path `params`, a `query` and a `body` given as JSON objects; the
    /// reply as JSON. For bindings that generate their methods from the routes themselves (the
    /// Python package's `AsyncHermesDesktop`); the checks and the profile rule are those of the
    /// generated methods.
    pub async fn call_operation(
        &self,
        operation: &str,
        params: &[(&str, &str)],
        query: Option<&Value>,
        body: Option<&Value>,
    ) -> Result<Value> {
        let route = Route::ALL
            .iter()
            .copied()
            .find(|route| route.operation() == operation)
            .ok_or_else(|| Error::Unsupported {
                operation: operation.to_owned(),
            })?;
        let missing = route
            .path()
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .find(|name| !params.iter().any(|(given, _)| given == name));
        if let Some(name) = missing {
            return Err(Error::Decode {
                detail: format!("`{operation}` needs the path parameter `{name}`"),
                body: String::new(),
            });
        }
        let query = query.cloned().unwrap_or(Value::Object(Map::new()));
        self.call(route, params, Some(&query), body).await
    }

    /// Sends one request to `route` and reads its reply.
    async fn call<Q: Serialize, B: Serialize, R: DeserializeOwned>(
        &self,
        route: Route,
        params: &[(&str, &str)],
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<R> {
        // A value is one segment: URL parsers resolve `.` and `..`, which would reach another
        // route (`profile_delete("..")` would be `DELETE /api`).
        if let Some((name, _)) = params.iter().find(|(_, v)| v.trim_matches('.').is_empty()) {
            return Err(Error::Decode {
                detail: format!("`{name}` must name something, not `.`, `..` or nothing"),
                body: String::new(),
            });
        }
        let query = match query {
            Some(query) => Some(query_of(&self.with_profile(
                route,
                ParamIn::Query,
                query,
            )?)),
            None => None,
        };
        let body = match body {
            Some(body) => Some(Value::Object(self.with_profile(
                route,
                ParamIn::Body,
                body,
            )?)),
            None => None,
        };
        let target = Target {
            method: route.method(),
            path: route.fill(params),
            operation: route.operation().to_owned(),
            shown: format!("{} {}", route.method(), route.path()),
        };
        self.send(target, query, body).await
    }

    /// Sends one request and reads its reply as `R`.
    async fn send<R: DeserializeOwned>(
        &self,
        target: Target,
        query: Option<Vec<(String, String)>>,
        body: Option<Value>,
    ) -> Result<R> {
        self.check_open()?;
        let mut url = format!("{}{}", self.base, target.path);
        if let Some(query) = query.filter(|q| !q.is_empty()) {
            url = crate::client::with_query(&url, &query)?;
        }
        let mut headers = vec![("accept".to_owned(), "application/json".to_owned())];
        match &self.credential {
            Some(Credential::SessionToken(token)) => {
                headers.push((TOKEN_HEADER.to_owned(), token.to_string()));
            }
            Some(Credential::ApiKey(key)) => {
                headers.push(("authorization".to_owned(), format!("Bearer {key}")));
            }
            None => {}
        }
        let body = match body {
            Some(body) => {
                headers.push(("content-type".to_owned(), "application/json".to_owned()));
                Some(
                    serde_json::to_vec(&body)
                        .expect("JSON values serialise")
                        .into(),
                )
            }
            None => None,
        };
        let request = HttpRequest {
            method: target.method.to_owned(),
            url,
            headers,
            body,
            timeout: Some(REQUEST_TIMEOUT),
        };
        let reply = self.http.send(request).await?;
        let status = reply.status;
        // The control plane's own refusal (key, scope, instance, runtime unreachable) has
        // problem details; the runtime's comes through as the runtime wrote it.
        let from_control_plane = reply
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("application/problem+json"));
        let bytes = reply.bytes().await?;
        if !(200..300).contains(&status) {
            if from_control_plane {
                return Err(crate::client::problem_of(status, &bytes));
            }
            return Err(refusal(&target, status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            detail: e.to_string(),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    /// `GET /api/plugins/<plugin>/<path>`: a route a dashboard plugin serves (e.g. `kanban`'s
    /// `board`). The server is asked first whether it has the plugin with routes of its own;
    /// when it does not — or when this client goes through a control plane, which forwards
    /// only the pinned routes — the call is `Error::Unsupported` at once.
    pub async fn plugin_get(&self, plugin: &str, path: &str) -> Result<Value> {
        self.plugin_call("GET", plugin, path, None).await
    }

    /// `POST /api/plugins/<plugin>/<path>` with a JSON body; see [`Self::plugin_get`].
    pub async fn plugin_post(&self, plugin: &str, path: &str, body: &Value) -> Result<Value> {
        self.plugin_call("POST", plugin, path, Some(body.clone()))
            .await
    }

    async fn plugin_call(
        &self,
        method: &'static str,
        plugin: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let operation = format!("plugin `{plugin}`");
        let unsupported = || Error::Unsupported {
            operation: operation.clone(),
        };
        if self.through_a_control_plane() {
            return Err(unsupported());
        }
        let offered = self.plugin_list().await?;
        if !offered.iter().any(|p| p.name == plugin && p.has_api) {
            return Err(unsupported());
        }
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        if segments.iter().any(|s| matches!(*s, "" | "." | "..")) {
            return Err(Error::Decode {
                detail: "a plugin route's path is plain segments".to_owned(),
                body: path.to_owned(),
            });
        }
        let encoded: Vec<String> = segments.iter().map(|s| encode_segment(s)).collect();
        let target = Target {
            method,
            path: format!(
                "/api/plugins/{}/{}",
                encode_segment(plugin),
                encoded.join("/")
            ),
            shown: format!("{method} /api/plugins/{plugin}/{path}"),
            operation,
        };
        self.send(target, None, body).await
    }
}

/// Where one request goes, and how errors name it.
struct Target {
    method: &'static str,
    /// The path, parameters filled in.
    path: String,
    /// What `Error::Unsupported` names.
    operation: String,
    /// What `Error::Runtime` names (`METHOD /path`).
    shown: String,
}

/// The error for a refused request. A 404 without a detail or with FastAPI's own "Not Found"
/// (no route matched, as opposed to "Session not found") and a 405 mean the server lacks the
/// route.
fn refusal(target: &Target, status: u16, body: &[u8]) -> Error {
    let detail = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("detail").cloned());
    // Hermes's headless server answers unmatched paths with `{"error": …}` instead.
    let unmatched =
        detail.is_none() || detail.as_ref().and_then(Value::as_str) == Some("Not Found");
    if (status == 404 && unmatched) || status == 405 {
        return Error::Unsupported {
            operation: target.operation.clone(),
        };
    }
    Error::Runtime {
        route: target.shown.clone(),
        status,
        detail: match detail {
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
            None => String::from_utf8_lossy(body).into_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(status: u16, body: &str) -> String {
        let target = Target {
            method: "GET",
            path: "/api/sessions/x".to_owned(),
            operation: Route::SessionGet.operation().to_owned(),
            shown: "GET /api/sessions/{session_id}".to_owned(),
        };
        match refusal(&target, status, body.as_bytes()) {
            Error::Unsupported { operation } => format!("unsupported {operation}"),
            Error::Runtime { status, detail, .. } => format!("{status} {detail}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_route_the_server_lacks_is_unsupported_and_its_refusals_are_kept() {
        // FastAPI's own 404, Hermes's headless catch-all, and a wrong method: no such route.
        assert_eq!(
            kind(404, r#"{"detail":"Not Found"}"#),
            "unsupported session_get"
        );
        assert_eq!(
            kind(
                404,
                r#"{"error":"Headless backend (hermes serve): web UI disabled"}"#
            ),
            "unsupported session_get"
        );
        assert_eq!(
            kind(405, r#"{"detail":"Method Not Allowed"}"#),
            "unsupported session_get"
        );
        // The route's own refusals.
        assert_eq!(
            kind(404, r#"{"detail":"Session not found"}"#),
            "404 Session not found"
        );
        assert_eq!(
            kind(400, r#"{"detail":"Path is required"}"#),
            "400 Path is required"
        );
        let invalid = r#"{"detail":[{"type":"missing","loc":["query","path"]}]}"#;
        assert!(
            kind(422, invalid).starts_with("422 [{"),
            "{}",
            kind(422, invalid)
        );
        assert_eq!(
            kind(500, "Internal Server Error"),
            "500 Internal Server Error"
        );
    }

    #[tokio::test]
    async fn a_dot_segment_never_leaves_the_sdk() {
        // Nothing listens on port 9: a request would be a transport error, not this.
        let desktop = HermesDesktop::remote("http://127.0.0.1:9", Some("token"));
        for name in ["..", ".", ""] {
            let err = desktop.profile_delete(name).await.unwrap_err();
            assert!(matches!(err, Error::Decode { .. }), "{name:?}: {err}");
        }
        let err = desktop.profile_delete("work").await.unwrap_err();
        assert!(matches!(err, Error::Transport(_)), "{err}");
    }

    #[tokio::test]
    async fn closing_a_client_ends_its_profile_clients_and_leaves_the_callers_http_client() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let app = axum::Router::new()
                .fallback(|| async { axum::Json(serde_json::json!({"profiles": []})) });
            axum::serve(listener, app).await
        });
        let http = reqwest::Client::new();
        let desktop = HermesDesktop::with_http_client(&url, Some("token"), http.clone());
        let work = desktop.for_profile("work");
        let nested = work.for_profile("other");
        assert!(work.profile_list().await.is_ok(), "open before the close");

        desktop.close();
        for client in [&desktop, &work, &nested] {
            let err = client.profile_list().await.unwrap_err();
            assert!(matches!(err, Error::Closed), "{err}");
        }
        let reply = tokio::time::timeout(Duration::from_secs(10), http.get(&url).send())
            .await
            .expect("the stand-in answers")
            .expect("the caller's client still sends");
        assert_eq!(reply.status(), 200);
        server.abort();
    }
}
