//! The server side: turns one HTTP POST of a JSON-RPC message into the HTTP reply.
//!
//! Authentication and routing are the caller's: an axum handler checks its credentials, picks the
//! [`ToolService`] for the request, and hands over the body.

use std::future::Future;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::protocol::{
    LIST_CHANGED, PROTOCOL_VERSIONS, RELISTS_ON_CHANGE, ToolDescriptor, ToolOutput, new_session,
};

/// Why a tool call could not be made at all (a tool that ran and failed returns
/// [`ToolOutput::error`] instead).
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    #[error("{0}")]
    Unavailable(String),
}

/// The tools one endpoint serves.
pub trait ToolService: Send + Sync {
    /// Whether the endpoint tells clients on their event stream when its tools change (see
    /// [`list_changes`]); then it says so at `initialize`.
    fn announces_list_changes(&self) -> bool {
        false
    }
    fn list_tools(&self) -> impl Future<Output = Result<Vec<ToolDescriptor>, String>> + Send;
    fn call_tool(
        &self,
        name: &str,
        args: Value,
    ) -> impl Future<Output = Result<ToolOutput, ToolCallError>> + Send;
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// The header that carries the MCP session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Whether the request carries `Authorization: Bearer <secret>`. The comparison takes the same
/// time wherever the first difference is, so timing does not reveal the secret.
pub fn bearer_matches(headers: &axum::http::HeaderMap, secret: &str) -> bool {
    let Some(given) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    given.as_bytes().ct_eq(secret.as_bytes()).into()
}

/// Handles one POSTed message. Notifications get `202 Accepted`; requests get a JSON reply.
pub async fn handle_post<S: ToolService>(service: &S, body: &[u8]) -> Response {
    let message: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return rpc_error(Value::Null, PARSE_ERROR, format!("parse error: {e}")),
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        if message.get("result").is_some() || message.get("error").is_some() {
            // A reply to a server request; we never send any, so there is nothing to match.
            return StatusCode::ACCEPTED.into_response();
        }
        return rpc_error(
            message.get("id").cloned().unwrap_or(Value::Null),
            INVALID_REQUEST,
            "invalid request: no method".into(),
        );
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response(); // a notification
    };
    let params = message.get("params").cloned().unwrap_or(json!({}));
    match method {
        "initialize" => {
            let requested = params["protocolVersion"].as_str().unwrap_or_default();
            let version = PROTOCOL_VERSIONS
                .iter()
                .find(|v| **v == requested)
                .unwrap_or(&PROTOCOL_VERSIONS[0]);
            // Changes are announced to the clients that list again on them: those are the
            // ones the endpoint may wait for (other clients list when they need to, as before).
            let announced = service.announces_list_changes()
                && params["capabilities"]["experimental"]
                    .get(RELISTS_ON_CHANGE)
                    .is_some();
            let mut capabilities = json!({"tools": {"listChanged": announced}});
            if announced {
                // Says the server waits for such a client's listings: the client may keep them.
                capabilities["experimental"] = json!({RELISTS_ON_CHANGE: {}});
            }
            let mut response = rpc_result(
                id,
                json!({
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "serverInfo": {"name": "edith", "version": env!("CARGO_PKG_VERSION")},
                }),
            );
            let session = new_session(announced);
            if let Ok(value) = HeaderValue::from_str(&session) {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
            response
        }
        "ping" => rpc_result(id, json!({})),
        "tools/list" => match service.list_tools().await {
            Ok(tools) => rpc_result(id, json!({ "tools": tools })),
            Err(e) => rpc_error(id, INTERNAL_ERROR, e),
        },
        "tools/call" => {
            let Some(name) = params["name"].as_str() else {
                return rpc_error(id, INVALID_PARAMS, "tools/call needs a `name`".into());
            };
            let args = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(args @ Value::Object(_)) => args.clone(),
                Some(_) => {
                    return rpc_error(id, INVALID_PARAMS, "`arguments` must be an object".into());
                }
            };
            match service.call_tool(name, args).await {
                Ok(output) => rpc_result(id, output.to_result()),
                Err(e @ ToolCallError::UnknownTool(_)) => {
                    rpc_error(id, INVALID_PARAMS, e.to_string())
                }
                // The model sees an unreachable tool as a failed call, not a protocol error.
                Err(ToolCallError::Unavailable(msg)) => {
                    rpc_result(id, ToolOutput::error(msg).to_result())
                }
            }
        }
        other => rpc_error(id, METHOD_NOT_FOUND, format!("method not found: {other}")),
    }
}

/// How often an idle event stream sends a comment, so both ends see a dead connection.
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The reply to a client's `GET` (its event stream): one [`LIST_CHANGED`] notification for each
/// item of `changes`, until `changes` ends; a comment every [`KEEP_ALIVE`] meanwhile.
pub fn list_changes<S>(changes: S) -> Response
where
    S: futures_util::Stream<Item = ()> + Send + 'static,
{
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt;
    let notification = json!({"jsonrpc": "2.0", "method": LIST_CHANGED}).to_string();
    let events = changes.map(move |()| {
        Ok::<_, std::convert::Infallible>(Event::default().event("message").data(&notification))
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    // A proxy in front must pass each notification on as it comes, not hold it back.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    response
}

fn rpc_result(id: Value, result: Value) -> Response {
    json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn rpc_error(id: Value, code: i64, message: String) -> Response {
    json_response(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn json_response(body: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::bearer_matches;
    use axum::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};

    #[test]
    fn only_the_exact_bearer_secret_matches() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            headers
        };
        assert!(bearer_matches(&with("Bearer s3cret"), "s3cret"));
        for wrong in ["Bearer s3cre", "Bearer s3cret!", "s3cret", "Basic s3cret"] {
            assert!(!bearer_matches(&with(wrong), "s3cret"), "{wrong}");
        }
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
