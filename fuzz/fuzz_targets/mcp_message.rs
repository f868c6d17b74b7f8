//! One MCP message (JSON-RPC 2.0 over Streamable HTTP), both ways:
//!
//! - as the body of a POST to an MCP server of ours (`edith_mcp::server::handle_post`: the
//!   control plane's `/v1/mcp` for runtimes, an SDK `ToolHost` for the control plane), with a
//!   tool service that answers at once;
//! - as the body of a reply to our MCP client (`McpClient`): the `result` of `tools/call` read
//!   by `ToolOutput::from_result`, the `tools` of `tools/list` as `ToolDescriptor`s.
//!
//! Asserts, besides no panic: handling a message never waits (the service never does); a
//! notification or a client's reply gets 202 with no body, anything else 200 with one JSON-RPC
//! reply (`jsonrpc` 2.0, the request's `id` or `null`, exactly one of `result` and `error`, a
//! known error code); `initialize` agrees on a version we speak; a tool's output reaches the
//! caller as the service returned it; a tool result read, written and read again is the same
//! (but for a non-object `structuredContent`, which the spec does not allow and we do not keep);
//! tool descriptors round-trip.

#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use axum::http::{StatusCode, header};
use edith_mcp::server::{SESSION_HEADER, handle_post};
use edith_mcp::{PROTOCOL_VERSIONS, ToolCallError, ToolDescriptor, ToolOutput, ToolService};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let message = serde_json::from_slice::<Value>(data).ok();
    server(data, message.as_ref());
    if let Some(message) = &message {
        client(message);
    }
});

struct Tools;

impl ToolService for Tools {
    async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
        Ok(listed())
    }

    async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ToolCallError> {
        match name {
            "echo" => Ok(ToolOutput::value(args)),
            "fails" => Ok(ToolOutput::error("it failed")),
            "down" => Err(ToolCallError::Unavailable("the host is down".into())),
            other => Err(ToolCallError::UnknownTool(other.into())),
        }
    }
}

fn listed() -> Vec<ToolDescriptor> {
    vec![ToolDescriptor {
        name: "echo".into(),
        description: "Returns its arguments.".into(),
        input_schema: json!({"type": "object"}),
    }]
}

/// The output of a future that must not wait.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("waited although nothing it needs can wait"),
    }
}

fn server(body: &[u8], message: Option<&Value>) {
    let response = now(handle_post(&Tools, body));
    let status = response.status();
    let session = response.headers().get(SESSION_HEADER).cloned();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = now(axum::body::to_bytes(response.into_body(), usize::MAX))
        .expect("a reply body is in memory");

    let method = message.and_then(|m| m.get("method"));
    let id = message.and_then(|m| m.get("id"));
    let answered_reply = method.and_then(Value::as_str).is_none()
        && message.is_some_and(|m| m.get("result").is_some() || m.get("error").is_some());
    let notification = method.and_then(Value::as_str).is_some() && id.is_none();
    if answered_reply || notification {
        assert_eq!(status, StatusCode::ACCEPTED);
        assert!(bytes.is_empty(), "a 202 with a body");
        return;
    }
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        content_type.as_ref().and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let reply: Value = serde_json::from_slice(&bytes).expect("the reply is JSON");
    let fields = reply.as_object().expect("the reply is an object");
    assert_eq!(reply["jsonrpc"], "2.0");
    assert_eq!(Some(&reply["id"]), Some(id.unwrap_or(&Value::Null)));
    assert_eq!(fields.len(), 3, "{reply}");
    let result = match (reply.get("result"), reply.get("error")) {
        (Some(result), None) => result,
        (None, Some(error)) => {
            let code = error["code"].as_i64().expect("an error has a code");
            assert!(
                [-32700, -32600, -32601, -32602, -32603].contains(&code),
                "{code}"
            );
            assert!(error["message"].is_string());
            return;
        }
        _ => panic!("not exactly one of result and error: {reply}"),
    };

    let params = message
        .and_then(|m| m.get("params"))
        .cloned()
        .unwrap_or(json!({}));
    match method.and_then(Value::as_str) {
        Some("initialize") => {
            let agreed = result["protocolVersion"].as_str().expect("a version");
            assert!(PROTOCOL_VERSIONS.contains(&agreed));
            if let Some(asked) = params["protocolVersion"].as_str()
                && PROTOCOL_VERSIONS.contains(&asked)
            {
                assert_eq!(agreed, asked);
            }
            assert!(session.is_some(), "initialize gives no session");
        }
        Some("tools/list") => {
            let tools: Vec<ToolDescriptor> =
                serde_json::from_value(result["tools"].clone()).expect("tools read back");
            assert_eq!(tools, listed());
        }
        Some("tools/call") => {
            let name = params["name"].as_str().expect("a call that ran has a name");
            let args = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(args) => args.clone(),
            };
            let expected = match name {
                "echo" => ToolOutput::value(args),
                "fails" => ToolOutput::error("it failed"),
                "down" => ToolOutput::error("the host is down"),
                other => panic!("an unknown tool `{other}` was called"),
            };
            assert_eq!(ToolOutput::from_result(result), expected);
        }
        Some("ping") => assert_eq!(result, &json!({})),
        other => panic!("a result for {other:?}"),
    }
}

fn client(message: &Value) {
    let result = message.get("result").cloned().unwrap_or(Value::Null);

    // `tools/call`
    let output = ToolOutput::from_result(&result);
    let again = ToolOutput::from_result(&output.to_result());
    assert_eq!(again.text, output.text);
    assert_eq!(again.is_error, output.is_error);
    let from_text = serde_json::from_str::<Value>(&output.text).ok();
    let kept = match &output.value {
        Some(Value::Object(_)) | None => true,
        // Read from the text, it is read from the text again.
        Some(value) => Some(value) == from_text.as_ref(),
    };
    if kept {
        assert_eq!(again.value, output.value, "{result}");
    }

    // `tools/list`
    if let Ok(tools) = serde_json::from_value::<Vec<ToolDescriptor>>(result["tools"].clone()) {
        let written = serde_json::to_value(&tools).expect("descriptors serialize");
        let read: Vec<ToolDescriptor> =
            serde_json::from_value(written.clone()).expect("our own descriptors read");
        assert_eq!(read, tools, "{written}");
    }
}
