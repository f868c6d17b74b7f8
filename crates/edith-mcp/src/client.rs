//! The client side: one MCP server over Streamable HTTP.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::protocol::{PROTOCOL_VERSIONS, ToolDescriptor, ToolOutput};
use crate::server::SESSION_HEADER;

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

/// A connection to one MCP server.
#[derive(Debug)]
pub struct McpClient {
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

impl McpClient {
    /// Connects: `initialize`, then the `notifications/initialized` notification.
    pub async fn connect(
        http: reqwest::Client,
        url: impl Into<String>,
        mut headers: HeaderMap,
        connect_timeout: Duration,
        call_timeout: Duration,
    ) -> Result<Self, ClientError> {
        // The extra headers carry credentials: keep them out of any Debug output.
        for value in headers.values_mut() {
            value.set_sensitive(true);
        }
        let client = Self {
            http,
            url: url.into(),
            headers,
            call_timeout,
            connect_timeout,
            session: Mutex::new(None),
            protocol_version: Mutex::new(PROTOCOL_VERSIONS[0].to_owned()),
            next_id: AtomicU64::new(1),
        };
        let init = client
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSIONS[0],
                    "capabilities": {},
                    "clientInfo": {"name": "edith", "version": env!("CARGO_PKG_VERSION")},
                }),
                connect_timeout,
            )
            .await?;
        if let Some(version) = init["protocolVersion"].as_str() {
            *client.protocol_version.lock().expect("not poisoned") = version.to_owned();
        }
        client
            .notify("notifications/initialized", connect_timeout)
            .await?;
        Ok(client)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, ClientError> {
        let result = self
            .request("tools/list", json!({}), self.connect_timeout)
            .await?;
        serde_json::from_value(result["tools"].clone()).map_err(|e| ClientError::Protocol {
            url: self.url.clone(),
            detail: format!("tools/list result: {e}"),
        })
    }

    pub async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ClientError> {
        let result = self
            .request(
                "tools/call",
                json!({"name": name, "arguments": args}),
                self.call_timeout,
            )
            .await?;
        Ok(ToolOutput::from_result(&result))
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
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response
            .text()
            .await
            .map_err(|source| self.transport(source, timeout))?;
        let message = if is_sse {
            find_in_sse(&body, id)
        } else {
            serde_json::from_str(&body).ok()
        };
        let Some(message) = message else {
            return Err(ClientError::Protocol {
                url: self.url.clone(),
                detail: format!("no JSON-RPC reply to `{method}` in: {}", truncate(&body)),
            });
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

/// Finds the reply with `id` among the `data:` lines of an SSE body.
fn find_in_sse(body: &str, id: u64) -> Option<Value> {
    body.split("\n\n").find_map(|event| {
        let data: String = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        let message: Value = serde_json::from_str(&data).ok()?;
        (message["id"].as_u64() == Some(id)).then_some(message)
    })
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

    #[test]
    fn replies_are_found_in_an_sse_body() {
        let body = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n\
                    event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\n\n";
        assert_eq!(find_in_sse(body, 7).unwrap()["result"]["ok"], true);
        assert!(find_in_sse(body, 8).is_none());
    }
}
