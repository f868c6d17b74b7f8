//! Wire shapes shared by the server and the client.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Protocol revisions we speak, newest first. The server answers a client's requested revision
/// when it is one of these and its newest otherwise, as the spec asks.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// A tool as `tools/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
}

/// What a tool call produced: the text the model reads, and the JSON value when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub value: Option<Value>,
    /// The tool ran and reported a failure (as opposed to the call itself failing).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result carrying a JSON value; strings are passed as they are.
    pub fn value(value: Value) -> Self {
        let text = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Self {
            text,
            value: Some(value),
            is_error: false,
        }
    }

    /// A failure the model should see.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            text: message.into(),
            value: None,
            is_error: true,
        }
    }

    /// The `tools/call` result object. Public for the fuzz targets in `fuzz/` only.
    #[doc(hidden)]
    pub fn to_result(&self) -> Value {
        let mut result = json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        });
        // structuredContent must be an object; other values travel as text only.
        if let Some(value @ Value::Object(_)) = &self.value {
            result["structuredContent"] = value.clone();
        }
        result
    }

    /// Reads a `tools/call` result object. Public for the fuzz targets in `fuzz/` only.
    #[doc(hidden)]
    pub fn from_result(result: &Value) -> Self {
        let text = result["content"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let value = match result.get("structuredContent") {
            Some(v) if !v.is_null() => Some(v.clone()),
            _ => serde_json::from_str(&text).ok(),
        };
        Self {
            text,
            value,
            is_error: result["isError"].as_bool().unwrap_or(false),
        }
    }
}

/// The notification a server sends on its event stream (`GET`) when its tools changed.
pub const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// The experimental capability a client declares at `initialize` to say that it lists the tools
/// again as soon as the server says they changed ([`LIST_CHANGED`]). A server that knows it may
/// then wait for that listing before it relies on the change (a control plane, before it sends
/// the runtime a prompt that may use a tool just attached), and says so by declaring it back; a
/// client keeps the tools it listed only from such a server.
pub const RELISTS_ON_CHANGE: &str = "edith/relistsOnChange";

/// How the server marks the session of a client that declared [`RELISTS_ON_CHANGE`] (the session
/// id is the server's to choose and opaque to the client), so the stream that client opens is
/// known for one that lists again without the server keeping anything per session.
const RELISTING_SESSION: &str = "relist-";

/// A new session id: marked when its client lists again on a change.
pub fn new_session(relists: bool) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    if relists {
        format!("{RELISTING_SESSION}{id}")
    } else {
        id
    }
}

/// Whether a session's client declared [`RELISTS_ON_CHANGE`] (see [`new_session`]).
pub fn session_relists(session: &str) -> bool {
    session.starts_with(RELISTING_SESSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        for output in [
            ToolOutput::value(json!({"count": 2})),
            ToolOutput::value(json!(5)),
            ToolOutput::error("boom"),
        ] {
            assert_eq!(ToolOutput::from_result(&output.to_result()), output);
        }
    }
}
