//! `EdithHermes`: the low-level control-plane client. Its operations (one method per
//! `operationId` of `contracts/control-plane.openapi.json`) are generated into `generated.rs`;
//! this file has what they stand on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::events::{EventStream, LogEvent};
use crate::gateway::{GatewayConnection, RelayTarget};
use crate::transport::{Http, HttpRequest, HttpResponse, HttpTransport, TransportFailure};

/// How often a POST is sent again after its connection failed (safe: it carries an
/// `Idempotency-Key`).
const MAX_POST_RETRIES: u64 = 2;

/// The low-level client. Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct EdithHermes {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    /// The caller's client or transport when one was given (it stays theirs), else one made
    /// here.
    http: Http,
    /// `http://host:port`, without a trailing slash.
    base: String,
    api_key: Option<String>,
    /// Set by [`EdithHermes::close`]: every later call fails with [`Error::Closed`].
    closed: Arc<AtomicBool>,
    /// Tells the gateway connections this client opened that it closed.
    closing: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for EdithHermes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdithHermes")
            .field("base_url", &self.inner.base)
            .field(
                "api_key",
                &self.inner.api_key.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Which page of a list to fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Items per page (1 to 200; the server's default is 50).
    pub limit: Option<usize>,
}

impl PageRequest {
    pub(crate) fn query(&self) -> Vec<(String, String)> {
        let mut query = Vec::new();
        if let Some(cursor) = &self.cursor {
            query.push(("cursor".to_owned(), cursor.clone()));
        }
        if let Some(limit) = self.limit {
            query.push(("limit".to_owned(), limit.to_string()));
        }
        query
    }
}

/// The query parameters a value stands for: its fields, as the server reads them (absent ones
/// left out).
pub(crate) fn query_of<T: Serialize>(value: &T) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(value) else {
        return Vec::new();
    };
    fields
        .into_iter()
        .filter_map(|(name, value)| match value {
            serde_json::Value::String(s) => Some((name, s)),
            serde_json::Value::Number(n) => Some((name, n.to_string())),
            serde_json::Value::Bool(b) => Some((name, b.to_string())),
            _ => None,
        })
        .collect()
}

impl EdithHermes {
    /// A client for the control plane at `base_url`, with an HTTP client of its own, which
    /// [`close`](Self::close) shuts down.
    pub fn remote(base_url: &str, api_key: Option<&str>) -> Self {
        // Redirects are not followed: the one this API sends (`303`, to a stream a retried
        // POST had started) is the SDK's to follow, with the stream's cursor.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client with the default TLS setup");
        Self::with(base_url, api_key, Http::owned(http))
    }

    /// A client that sends through `http`. The SDK never closes or reconfigures it: it stays
    /// the caller's.
    pub fn with_http_client(base_url: &str, api_key: Option<&str>, http: reqwest::Client) -> Self {
        Self::with(base_url, api_key, Http::Reqwest(http))
    }

    /// A client that sends every HTTP request through `transport` (gateway connections, which
    /// are WebSockets, still open their own). The SDK never closes it.
    pub fn with_transport(
        base_url: &str,
        api_key: Option<&str>,
        transport: Arc<dyn HttpTransport>,
    ) -> Self {
        Self::with(base_url, api_key, Http::Custom(transport))
    }

    fn with(base_url: &str, api_key: Option<&str>, http: Http) -> Self {
        Self {
            inner: Arc::new(ClientInner {
                http,
                base: base_url.trim_end_matches('/').to_owned(),
                api_key: api_key.map(str::to_owned),
                closed: Arc::new(AtomicBool::new(false)),
                closing: tokio::sync::watch::Sender::new(false),
            }),
        }
    }

    /// Closes this client (and its clones): later calls fail with [`Error::Closed`], the
    /// gateway connections it opened end, and an HTTP client it made is dropped with its
    /// pooled connections. An HTTP client the caller gave stays theirs and keeps working.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.closing.send_replace(true);
        self.inner.http.shut_down();
    }

    /// A client for the Desktop routes of `instance`'s runtime, through this control plane's
    /// forwarding route and with this client's key: it shares this client's HTTP client and
    /// ends when this client closes.
    pub fn desktop(&self, instance: &edith_types::InstanceId) -> crate::HermesDesktop {
        crate::HermesDesktop::through_control_plane(
            self.inner.http.clone(),
            &format!("{}/v1/instances/{instance}/desktop", self.inner.base),
            self.inner.api_key.as_deref(),
            self.inner.closed.clone(),
        )
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The control plane's base URL.
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// A request to `path` with this client's key and `accept`.
    fn request(&self, method: &Method, path: &str, accept: &str) -> HttpRequest {
        let mut headers = vec![(ACCEPT.to_string(), accept.to_owned())];
        if let Some(key) = &self.inner.api_key {
            headers.push((AUTHORIZATION.to_string(), format!("Bearer {key}")));
        }
        HttpRequest {
            method: method.to_string(),
            url: format!("{}{path}", self.inner.base),
            headers,
            body: None,
            timeout: None,
        }
    }

    /// Sends one request and reads the JSON reply (or the problem).
    ///
    /// Every POST carries a fresh `Idempotency-Key`, so when the connection fails before a
    /// reply arrives the SDK sends it again (up to twice) without risk of doing the work twice:
    /// the server replays its first reply.
    pub(crate) async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: Vec<(String, String)>,
        body: Option<&B>,
    ) -> Result<T> {
        self.check_open()?;
        let mut request = self.request(&method, path, "application/json");
        if !query.is_empty() {
            request.url = with_query(&request.url, &query)?;
        }
        if let Some(body) = body {
            with_json(&mut request, body)?;
        }
        if method == Method::POST {
            with_idempotency_key(&mut request);
        }
        let response = self.send(&request).await?;
        let status = response.status;
        let bytes = response.bytes().await?;
        if !(200..300).contains(&status) {
            return Err(problem_of(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            detail: e.to_string(),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    /// Sends `request`; a POST (which carries an `Idempotency-Key`) is sent again, up to twice,
    /// when its connection failed.
    async fn send(&self, request: &HttpRequest) -> Result<HttpResponse> {
        let retries = if request.method == Method::POST.as_str() {
            MAX_POST_RETRIES
        } else {
            0
        };
        let mut attempt = 0;
        loop {
            match self.inner.http.send(request.clone()).await {
                Ok(response) => return Ok(response),
                Err(e) if attempt < retries && (e.connect || e.request) => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// POSTs `body` to `path`, whose reply is the event log the request starts (`201`, with the
    /// log's `Location`), and follows that log to its end: resumed from its `Location` when the
    /// connection drops, or, where the reply did not say it, by sending the request again with
    /// its `Idempotency-Key` (the server then names the log with a `303` instead of starting
    /// anything again).
    pub(crate) async fn start_stream<B: Serialize + ?Sized, E: LogEvent>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<EventStream<E>> {
        self.check_open()?;
        let mut request = self.request(&Method::POST, path, "text/event-stream");
        with_json(&mut request, body)?;
        with_idempotency_key(&mut request);
        let opened = self.post_stream(&request).await?;
        Ok(EventStream::started(self.clone(), request, opened))
    }

    /// Sends a POST whose reply is an event stream (again, for a retry or a resume).
    pub(crate) async fn post_stream(&self, request: &HttpRequest) -> Result<Opened> {
        self.check_open()?;
        let response = self.send(request).await?;
        let location = response.location.as_deref().and_then(|l| self.path_of(l));
        match (response.status, location) {
            (303, Some(location)) => Ok(Opened::SeeOther(location)),
            (303, None) => Err(Error::Decode {
                detail: "a 303 See Other without a `Location` the SDK can read (a transport \
                         that hides it must follow redirects itself)"
                    .to_owned(),
                body: response.location.unwrap_or_default(),
            }),
            (200..300, location) => Ok(Opened::Stream {
                body: response.body,
                location,
            }),
            (status, _) => {
                let bytes = response.bytes().await?;
                Err(problem_of(status, &bytes))
            }
        }
    }

    /// A `Location` of this server as a path under the client's base URL: the server sends
    /// paths; a proxy may have made one absolute, under this base or under a public name of
    /// its own (whose path is then taken as this server's). `None` for what is not a URL.
    fn path_of(&self, location: &str) -> Option<String> {
        if location.starts_with('/') {
            return Some(location.to_owned());
        }
        if let Some(path) = location.strip_prefix(&self.inner.base)
            && path.starts_with('/')
        {
            return Some(path.to_owned());
        }
        let url = reqwest::Url::parse(location).ok()?;
        let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        Some(format!("{}{query}", url.path()))
    }

    /// Sends `method path` with `query` and a JSON `body`, and reads the JSON reply, as the
    /// generated operations do (retries of a POST included). For bindings that build an
    /// operation's path from the contract themselves (the Python package's `AsyncEdithHermes`).
    pub async fn call_path(
        &self,
        method: &str,
        path: &str,
        query: Vec<(String, String)>,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value> {
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| Error::Decode {
            detail: format!("`{method}` is not an HTTP method: {e}"),
            body: String::new(),
        })?;
        self.call(method, path, query, body).await
    }

    /// The event log at `path` after event `after`, followed and resumed as the generated
    /// operations do. For bindings, like [`EdithHermes::call_path`].
    pub fn events_at<E: LogEvent>(&self, path: &str, after: u64) -> EventStream<E> {
        self.stream(path.to_owned(), after)
    }

    /// POSTs `body` to `path` and follows the event log the reply starts, as the generated
    /// operations do. For bindings, like [`EdithHermes::call_path`].
    pub async fn start_events_at<E: LogEvent>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<EventStream<E>> {
        self.start_stream(path, body).await
    }

    /// Opens the gateway relay at `path`, as the generated operations do. For bindings, like
    /// [`EdithHermes::call_path`].
    pub async fn socket_at(&self, path: &str) -> Result<GatewayConnection> {
        self.socket(path).await
    }

    /// Opens an SSE response after event `after`.
    pub(crate) async fn open_stream(
        &self,
        path: &str,
        after: u64,
    ) -> Result<BoxStream<'static, std::result::Result<Bytes, TransportFailure>>> {
        self.check_open()?;
        let mut request = self.request(&Method::GET, path, "text/event-stream");
        if after > 0 {
            request
                .headers
                .push(("Last-Event-ID".to_owned(), after.to_string()));
        }
        let response = self.inner.http.send(request).await?;
        let status = response.status;
        if !(200..300).contains(&status) {
            let bytes = response.bytes().await?;
            return Err(problem_of(status, &bytes));
        }
        Ok(response.body)
    }

    /// Opens the WebSocket relay at `path` as a self-resuming gateway connection.
    pub(crate) async fn socket(&self, path: &str) -> Result<GatewayConnection> {
        self.check_open()?;
        let base = &self.inner.base;
        let ws_base = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            return Err(Error::Socket(format!("`{base}` is not an http(s) URL")));
        };
        let target = RelayTarget {
            url: format!("{ws_base}{path}"),
            api_key: self.inner.api_key.clone(),
        };
        GatewayConnection::open(target, self.inner.closing.subscribe()).await
    }

    pub(crate) fn stream<E: LogEvent>(&self, path: String, after: u64) -> EventStream<E> {
        EventStream::follow(self.clone(), path, after)
    }
}

/// What a POST answered by an event stream gave.
pub(crate) enum Opened {
    /// The stream, and where it is read again (its `Location`) if the reply said.
    Stream {
        body: BoxStream<'static, std::result::Result<Bytes, TransportFailure>>,
        location: Option<String>,
    },
    /// The request had been handled before (a retry with its `Idempotency-Key`): the stream it
    /// started is read at this path.
    SeeOther(String),
}

/// Puts `body` in `request` as JSON.
fn with_json<B: Serialize + ?Sized>(request: &mut HttpRequest, body: &B) -> Result<()> {
    let json = serde_json::to_vec(body).map_err(|e| Error::Decode {
        detail: format!("request body: {e}"),
        body: String::new(),
    })?;
    request
        .headers
        .push((CONTENT_TYPE.to_string(), "application/json".to_owned()));
    request.body = Some(json.into());
    Ok(())
}

/// A fresh `Idempotency-Key`, so that `request` may be sent again without doing its work twice.
fn with_idempotency_key(request: &mut HttpRequest) {
    let key = uuid::Uuid::new_v4().simple().to_string();
    request.headers.push(("Idempotency-Key".to_owned(), key));
}

/// `url` with `query` appended, encoded as a form.
pub(crate) fn with_query(url: &str, query: &[(String, String)]) -> Result<String> {
    let mut url = reqwest::Url::parse(url).map_err(|e| Error::Decode {
        detail: format!("`{url}` is not a URL: {e}"),
        body: String::new(),
    })?;
    url.query_pairs_mut().extend_pairs(query);
    Ok(url.into())
}

/// The error a reply with HTTP status `status` and `body` stands for.
pub(crate) fn problem_of(status: u16, body: &[u8]) -> Error {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    problem(status, body)
}

fn problem(status: StatusCode, body: &[u8]) -> Error {
    match serde_json::from_slice::<edith_types::Problem>(body) {
        Ok(problem) => Error::from_problem(problem),
        Err(_) if status == StatusCode::NOT_IMPLEMENTED => Error::Unsupported {
            operation: String::from_utf8_lossy(body).into_owned(),
        },
        Err(e) => Error::Decode {
            detail: format!("HTTP {status} without problem details: {e}"),
            body: String::from_utf8_lossy(body).into_owned(),
        },
    }
}
