//! The client side: one MCP server over Streamable HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt, stream};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::protocol::{PROTOCOL_VERSIONS, RELISTS_ON_CHANGE, ToolDescriptor, ToolOutput};
use crate::server::SESSION_HEADER;
use crate::tool_list::ToolList;

/// `tools/list` pages followed at most (a server that pages forever is refused, not followed).
pub const MAX_PAGES: usize = 100;
/// How long telling the server about a cancelled call may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("MCP server {url} unreachable: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("MCP server {url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("MCP server {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("MCP server {url} sent an unreadable reply: {detail}")]
    Protocol { url: String, detail: String },
    #[error("MCP server {url} refused `{method}`: {message} ({code})")]
    Rpc {
        url: String,
        method: String,
        code: i64,
        message: String,
    },
}

impl ClientError {
    /// The server could not be reached at all (nothing listens, or the connection failed),
    /// as opposed to a server that answered badly.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Transport { source, .. } if source.is_connect())
    }
}

/// A connection to one MCP server. When the server announces changes to its tools, the tools it
/// listed are kept until it says they changed (see [`crate::RELISTS_ON_CHANGE`]).
#[derive(Debug)]
pub struct McpClient {
    connection: Arc<Connection>,
    /// `Some` when the server announces changes to its tools.
    pub(crate) tools: Option<Arc<ToolList>>,
}

impl McpClient {
    /// Connects: `initialize`, then the `notifications/initialized` notification.
    pub async fn connect(
        http: reqwest::Client,
        url: impl Into<String>,
        headers: HeaderMap,
        connect_timeout: Duration,
        call_timeout: Duration,
    ) -> Result<Self, ClientError> {
        let (connection, announces) =
            Connection::open(http, url.into(), headers, connect_timeout, call_timeout).await?;
        Ok(Self {
            connection: Arc::new(connection),
            tools: announces.then(|| Arc::new(ToolList::default())),
        })
    }

    pub fn url(&self) -> &str {
        &self.connection.url
    }

    /// Every tool the server offers: as last listed while the server has not said they changed
    /// since, or else listed now (following its pages, at most [`MAX_PAGES`]).
    pub async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, ClientError> {
        match &self.tools {
            Some(tools) => tools.list(&self.connection).await,
            None => self.connection.list_tools().await,
        }
    }

    /// Calls a tool. When the call takes longer than the call deadline, the server is told the
    /// request is cancelled (best effort) before the timeout is returned.
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ClientError> {
        self.connection.call_tool(name, args).await
    }
}

impl Drop for McpClient {
    /// The server's event stream is read while the client lives.
    fn drop(&mut self) {
        if let Some(tools) = &self.tools {
            tools.stop_watching();
        }
    }
}

/// One MCP session with a server.
#[derive(Debug)]
pub(crate) struct Connection {
    http: reqwest::Client,
    url: String,
    /// Extra headers on every request (credentials).
    headers: HeaderMap,
    /// Per-request deadline for `tools/call`; listing uses the connect deadline.
    call_timeout: Duration,
    connect_timeout: Duration,
    /// The session the server assigned at `initialize`, sent back on every request.
    session: Mutex<Option<HeaderValue>>,
    protocol_version: Mutex<String>,
    next_id: AtomicU64,
}

impl Connection {
    /// `initialize`, then the `notifications/initialized` notification; whether the server
    /// announces changes to its tools.
    async fn open(
        http: reqwest::Client,
        url: String,
        mut headers: HeaderMap,
        connect_timeout: Duration,
        call_timeout: Duration,
    ) -> Result<(Self, bool), ClientError> {
        // The extra headers carry credentials: keep them out of any Debug output.
        for value in headers.values_mut() {
            value.set_sensitive(true);
        }
        let connection = Self {
            http,
            url,
            headers,
            call_timeout,
            connect_timeout,
            session: Mutex::new(None),
            protocol_version: Mutex::new(PROTOCOL_VERSIONS[0].to_owned()),
            next_id: AtomicU64::new(1),
        };
        let init = connection
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSIONS[0],
                    // This client lists the tools again as soon as a server says they changed.
                    "capabilities": {"experimental": {RELISTS_ON_CHANGE: {}}},
                    "clientInfo": {"name": "edith", "version": env!("CARGO_PKG_VERSION")},
                }),
                connect_timeout,
            )
            .await?;
        if let Some(version) = init["protocolVersion"].as_str() {
            *connection.protocol_version.lock().expect("not poisoned") = version.to_owned();
        }
        connection
            .notify("notifications/initialized", connect_timeout)
            .await?;
        // Kept only for a server that said it takes the capability into account: one that
        // merely says `listChanged` may announce late or never (or sit behind a proxy that
        // holds its stream back), and is asked at every listing as before.
        let capabilities = &init["capabilities"];
        let announces = capabilities["tools"]["listChanged"] == json!(true)
            && capabilities["experimental"]
                .get(RELISTS_ON_CHANGE)
                .is_some();
        Ok((connection, announces))
    }

    /// Every tool the server offers, following its pages (at most [`MAX_PAGES`]).
    pub(crate) async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result = self
                .request("tools/list", params, self.connect_timeout)
                .await?;
            let page: Vec<ToolDescriptor> = serde_json::from_value(result["tools"].clone())
                .map_err(|e| ClientError::Protocol {
                    url: self.url.clone(),
                    detail: format!("tools/list result: {e}"),
                })?;
            tools.extend(page);
            cursor = result["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(ClientError::Protocol {
            url: self.url.clone(),
            detail: format!("tools/list had more than {MAX_PAGES} pages"),
        })
    }

    /// Opens the server's event stream (`GET`); `None` when the server offers none. Only the
    /// reply's head is waited for within the connect deadline: the stream itself lasts.
    pub(crate) async fn open_events(&self) -> Result<Option<reqwest::Response>, ClientError> {
        let mut request = self
            .http
            .get(&self.url)
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(
                "mcp-protocol-version",
                self.protocol_version.lock().expect("not poisoned").as_str(),
            );
        if let Some(session) = self.session.lock().expect("not poisoned").clone() {
            request = request.header(SESSION_HEADER, session);
        }
        let timeout = self.connect_timeout;
        let response = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| ClientError::Timeout {
                url: self.url.clone(),
                timeout,
            })?
            .map_err(|source| self.transport(source, timeout))?;
        let status = response.status();
        if status.is_server_error() {
            let error = tokio::time::timeout(timeout, self.http_error(response)).await;
            return Err(error.unwrap_or_else(|_| ClientError::Timeout {
                url: self.url.clone(),
                timeout,
            }));
        }
        Ok((status.is_success() && is_event_stream(&response)).then_some(response))
    }

    async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let params = json!({"name": name, "arguments": args});
        match self
            .request_with_id(id, "tools/call", params, self.call_timeout)
            .await
        {
            Ok(result) => Ok(ToolOutput::from_result(&result)),
            Err(e @ ClientError::Timeout { .. }) => {
                let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "the call timed out"}});
                let _ = self.post(cancelled, CANCEL_TIMEOUT).send().await;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn post(&self, body: Value, timeout: Duration) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .header(
                "mcp-protocol-version",
                self.protocol_version.lock().expect("not poisoned").as_str(),
            )
            .timeout(timeout)
            .body(body.to_string());
        if let Some(session) = self.session.lock().expect("not poisoned").clone() {
            request = request.header(SESSION_HEADER, session);
        }
        request
    }

    async fn notify(&self, method: &str, timeout: Duration) -> Result<(), ClientError> {
        let response = self
            .post(json!({"jsonrpc": "2.0", "method": method}), timeout)
            .send()
            .await
            .map_err(|source| self.transport(source, timeout))?;
        if !response.status().is_success() {
            return Err(self.http_error(response).await);
        }
        Ok(())
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.request_with_id(id, method, params, timeout).await
    }

    async fn request_with_id(
        &self,
        id: u64,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let response = self
            .post(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                timeout,
            )
            .send()
            .await
            .map_err(|source| self.transport(source, timeout))?;
        if !response.status().is_success() {
            return Err(self.http_error(response).await);
        }
        if let Some(session) = response.headers().get(SESSION_HEADER) {
            *self.session.lock().expect("not poisoned") = Some(session.clone());
        }
        let message = if is_event_stream(&response) {
            self.reply_in_stream(response, id, method, timeout).await?
        } else {
            let body = response
                .text()
                .await
                .map_err(|source| self.transport(source, timeout))?;
            serde_json::from_str(&body).map_err(|_| ClientError::Protocol {
                url: self.url.clone(),
                detail: format!("no JSON-RPC reply to `{method}` in: {}", truncate(&body)),
            })?
        };
        if let Some(error) = message.get("error") {
            return Err(ClientError::Rpc {
                url: self.url.clone(),
                method: method.to_owned(),
                code: error["code"].as_i64().unwrap_or_default(),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
            });
        }
        Ok(message.get("result").cloned().unwrap_or(Value::Null))
    }

    /// Reads an SSE reply until the message answering `id` (the server may send other messages
    /// first); stops there rather than waiting for the stream to end.
    async fn reply_in_stream(
        &self,
        response: reqwest::Response,
        id: u64,
        method: &str,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let mut events = std::pin::pin!(without_bom(response.bytes_stream()).eventsource());
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| match e {
                EventStreamError::Transport(source) => self.transport(source, timeout),
                other => ClientError::Protocol {
                    url: self.url.clone(),
                    detail: format!("unreadable event stream: {other}"),
                },
            })?;
            if let Ok(message) = serde_json::from_str::<Value>(&event.data)
                && message["id"].as_u64() == Some(id)
            {
                return Ok(message);
            }
        }
        Err(ClientError::Protocol {
            url: self.url.clone(),
            detail: format!("the event stream ended without a reply to `{method}`"),
        })
    }

    fn transport(&self, source: reqwest::Error, timeout: Duration) -> ClientError {
        if source.is_timeout() {
            return ClientError::Timeout {
                url: self.url.clone(),
                timeout,
            };
        }
        ClientError::Transport {
            url: self.url.clone(),
            source,
        }
    }

    async fn http_error(&self, response: reqwest::Response) -> ClientError {
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        ClientError::Http {
            url: self.url.clone(),
            status,
            body: truncate(&body),
        }
    }
}

/// The body with one leading byte order mark taken off, and an empty line (which dispatches
/// nothing) put first. The SSE format allows a BOM first; eventsource-stream 0.2.3, the latest,
/// panics on one (it cuts a single byte off the three-byte character, upstream PR
/// jpopesculian/eventsource-stream#10). After the empty line it never sees a BOM first, even
/// when the body starts with two.
pub(crate) fn without_bom<E>(
    body: impl Stream<Item = Result<Bytes, E>>,
) -> impl Stream<Item = Result<Bytes, E>> {
    const BOM: &[u8] = "\u{feff}".as_bytes();
    // The first bytes, held while they may still be a BOM; `None` once passed on.
    let held: Option<Vec<u8>> = Some(Vec::new());
    let rest = stream::unfold(
        (Box::pin(body.fuse()), held),
        |(mut body, mut held)| async move {
            loop {
                let Some(head) = held.as_mut() else {
                    let item = body.next().await?;
                    return Some((item, (body, None)));
                };
                match body.next().await {
                    Some(Ok(chunk)) => {
                        head.extend_from_slice(&chunk);
                        if head.len() < BOM.len() && BOM.starts_with(head) {
                            continue;
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (body, held))),
                    None if head.is_empty() => return None,
                    None => {}
                }
                let head = held.take().unwrap_or_default();
                let head = head.strip_prefix(BOM).unwrap_or(&head);
                return Some((Ok(Bytes::copy_from_slice(head)), (body, None)));
            }
        },
    );
    stream::once(async { Ok(Bytes::from_static(b"\n")) }).chain(rest)
}

fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

fn truncate(body: &str) -> String {
    const MAX: usize = 500;
    match body.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use axum::Json;
    use axum::extract::State;
    use axum::response::{IntoResponse, Response};

    /// Every message the test server received.
    type Seen = Arc<std::sync::Mutex<Vec<Value>>>;

    /// A scripted MCP server: `tools/list` in three pages (the second as SSE, after an unrelated
    /// notification; the third as SSE that starts with a byte order mark), and a `tools/call`
    /// that never answers in time.
    async fn scripted_server() -> (String, Seen) {
        async fn handle(State(seen): State<Seen>, Json(message): Json<Value>) -> Response {
            seen.lock().unwrap().push(message.clone());
            let id = message["id"].clone();
            let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
            let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
            match message["method"].as_str().unwrap_or_default() {
                // Says it announces changes, as many servers do, without saying it takes our
                // capability into account.
                "initialize" => Json(reply(json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": true}}})))
                .into_response(),
                "tools/list" if message["params"]["cursor"].is_null() => {
                    Json(reply(json!({"tools": [tool("first")], "nextCursor": "p2"})))
                        .into_response()
                }
                "tools/list" if message["params"]["cursor"] == "p2" => {
                    let body = format!(
                        "event: message\ndata: {}\n\nevent: message\ndata: {}\n\n",
                        json!({"jsonrpc": "2.0", "method": "notifications/progress"}),
                        reply(json!({"tools": [tool("second")], "nextCursor": "p3"}))
                    );
                    ([(CONTENT_TYPE, "text/event-stream")], body).into_response()
                }
                "tools/list" => {
                    // Starting with a byte order mark, which the SSE format allows (and which
                    // made eventsource-stream panic; found by `fuzz/`, target `sse_events`).
                    let body = format!(
                        "\u{feff}data: {}\n\n",
                        reply(json!({"tools": [tool("third")]}))
                    );
                    ([(CONTENT_TYPE, "text/event-stream")], body).into_response()
                }
                "tools/call" => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Json(reply(json!({"content": []}))).into_response()
                }
                _ => axum::http::StatusCode::ACCEPTED.into_response(),
            }
        }
        let seen = Seen::default();
        let app = axum::Router::new()
            .route("/mcp", axum::routing::post(handle))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    async fn connect(url: &str) -> McpClient {
        let timeout = Duration::from_millis(300);
        McpClient::connect(
            reqwest::Client::new(),
            url,
            HeaderMap::new(),
            Duration::from_secs(5),
            timeout,
        )
        .await
        .expect("connect")
    }

    #[tokio::test]
    async fn tools_are_listed_across_pages_and_sse_replies() {
        let (url, seen) = scripted_server().await;
        let client = connect(&url).await;
        for _ in 0..2 {
            let tools = client.list_tools().await.expect("list");
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["first", "second", "third"]);
        }
        // A server that announces changes but does not take `RELISTS_ON_CHANGE` into account
        // is asked each time: its tools are not kept.
        assert!(client.tools.is_none());
        let seen = seen.lock().unwrap();
        let lists = seen.iter().filter(|m| m["method"] == "tools/list").count();
        assert_eq!(lists, 6);
    }

    #[tokio::test]
    async fn a_byte_order_mark_split_across_chunks_is_dropped() {
        let body = "\u{feff}data: x\n\n".as_bytes();
        for cut in 0..=4 {
            let (first, rest) = body.split_at(cut);
            let chunks = [first, rest].map(|c| Ok::<_, ()>(Bytes::copy_from_slice(c)));
            let events: Vec<_> = without_bom(stream::iter(chunks))
                .eventsource()
                .collect()
                .await;
            assert_eq!(events.len(), 1, "cut at {cut}: {events:?}");
            assert_eq!(events[0].as_ref().unwrap().data, "x");
        }
    }

    #[tokio::test]
    async fn a_call_that_times_out_is_cancelled_on_the_server() {
        let (url, seen) = scripted_server().await;
        let client = connect(&url).await;
        let error = client.call_tool("slow", json!({})).await.unwrap_err();
        assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
        let seen = seen.lock().unwrap().clone();
        let call = seen
            .iter()
            .find(|m| m["method"] == "tools/call")
            .expect("the call");
        let cancel = seen
            .iter()
            .find(|m| m["method"] == "notifications/cancelled")
            .expect("a cancellation");
        assert_eq!(cancel["params"]["requestId"], call["id"]);
    }
}
