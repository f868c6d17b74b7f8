//! The events a Hermes gateway pushes (`{"method":"event","params":{type, session_id,
//! payload}}`): the ones this project produces or reads are typed; any other arrives whole as
//! [`NativeEvent::Other`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::LiveSessionId;

/// One gateway event. The `type` of each variant is its serde name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload")]
#[non_exhaustive]
pub enum NativeEvent {
    /// The first frame of every connection.
    #[serde(rename = "gateway.ready")]
    GatewayReady(GatewayReady),
    /// The assistant began a message.
    #[serde(rename = "message.start")]
    MessageStart {},
    /// A piece of the assistant's text.
    #[serde(rename = "message.delta")]
    MessageDelta(TextPayload),
    /// The turn is over.
    #[serde(rename = "message.complete")]
    MessageComplete(MessageComplete),
    /// The model is writing a tool call.
    #[serde(rename = "tool.generating")]
    ToolGenerating(ToolGenerating),
    /// A tool call starts.
    #[serde(rename = "tool.start")]
    ToolStart(ToolStart),
    /// A tool call finished.
    #[serde(rename = "tool.complete")]
    ToolComplete(ToolComplete),
    /// The agent waits for the user to approve a command (`approval.respond`).
    #[serde(rename = "approval.request")]
    ApprovalRequest(ApprovalRequest),
    /// The agent waits for the user to answer a question (`clarify.respond`).
    #[serde(rename = "clarify.request")]
    ClarifyRequest(ClarifyRequest),
    /// Progress or a warning for the user interface.
    #[serde(rename = "status.update")]
    StatusUpdate(StatusUpdate),
    /// The session's agent, model and tools (after a build).
    #[serde(rename = "session.info")]
    SessionInfo(Map<String, Value>),
    /// Something failed (the turn still ends with `message.complete`).
    #[serde(rename = "error")]
    Error(ErrorPayload),
    /// Any other event, whole.
    #[serde(untagged)]
    Other {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        payload: Value,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayReady {
    #[serde(default)]
    pub skin: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextPayload {
    #[serde(default)]
    pub text: String,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionStatus {
    #[default]
    Complete,
    Interrupted,
    Error,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageComplete {
    /// The assistant's final text.
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub status: CompletionStatus,
    #[serde(default)]
    pub usage: NativeUsage,
}

/// Token accounting as Hermes reports it (`message.complete`'s `usage`, `session.usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NativeUsage {
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub prompt: u64,
    #[serde(default)]
    pub completion: u64,
    #[serde(default)]
    pub total: u64,
    #[serde(default)]
    pub calls: u64,
    /// What else the runtime reports (`reasoning`, `context_used`, …).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolGenerating {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStart {
    #[serde(default)]
    pub tool_id: String,
    /// As the model sees it: `mcp__<server>__<tool>` for MCP tools.
    #[serde(default)]
    pub name: String,
    /// A short description of the arguments.
    #[serde(default)]
    pub context: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolComplete {
    #[serde(default)]
    pub tool_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub args: Value,
    /// The result, decoded when it is JSON (an MCP tool's is `{"result": "<text>"}`).
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub duration_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub pattern_key: String,
    #[serde(default)]
    pub pattern_keys: Vec<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub allow_permanent: bool,
    /// `once`, `session`, `always`, `deny`.
    #[serde(default)]
    pub choices: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClarifyRequest {
    #[serde(default)]
    pub question: String,
    /// Offered answers; `null` when the question is open.
    #[serde(default)]
    pub choices: Option<Vec<String>>,
    /// What `clarify.respond` names.
    #[serde(default)]
    pub request_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusUpdate {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    #[serde(default)]
    pub message: String,
}

impl NativeEvent {
    /// The event's `type`.
    pub fn kind(&self) -> String {
        match self {
            NativeEvent::Other { kind, .. } => kind.clone(),
            typed => serde_json::to_value(typed)
                .ok()
                .and_then(|v| v["type"].as_str().map(str::to_owned))
                .unwrap_or_default(),
        }
    }

    /// Whether the agent now waits for the user (an approval or a question).
    pub fn waits_for_user(&self) -> bool {
        matches!(
            self,
            NativeEvent::ApprovalRequest(_) | NativeEvent::ClarifyRequest(_)
        )
    }
}

/// The `params` of an event notification: the event and the live session it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventFrame {
    /// Absent for connection-wide events (`gateway.ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    #[serde(flatten)]
    pub event: NativeEvent,
}

impl EventFrame {
    pub fn new(session_id: Option<LiveSessionId>, event: NativeEvent) -> Self {
        Self { session_id, event }
    }

    /// The whole notification, as sent on the wire.
    pub fn to_frame(&self) -> Value {
        serde_json::json!({"jsonrpc": "2.0", "method": "event", "params": self})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(params: Value) -> EventFrame {
        serde_json::from_value(params).expect("an event frame")
    }

    #[test]
    fn known_events_are_typed_and_serialize_as_hermes_sends_them() {
        let frame = parse(
            json!({"type": "message.delta", "session_id": "ab12cd34", "payload": {"text": "hi"}}),
        );
        assert_eq!(frame.session_id, Some(LiveSessionId::new("ab12cd34")));
        assert_eq!(
            frame.event,
            NativeEvent::MessageDelta(TextPayload { text: "hi".into() })
        );
        assert_eq!(frame.event.kind(), "message.delta");
        assert_eq!(
            serde_json::to_value(&frame).unwrap(),
            json!({"session_id": "ab12cd34", "type": "message.delta", "payload": {"text": "hi"}})
        );
        let start =
            serde_json::to_value(EventFrame::new(None, NativeEvent::MessageStart {})).unwrap();
        assert_eq!(start, json!({"type": "message.start", "payload": {}}));
    }

    #[test]
    fn message_complete_keeps_what_it_does_not_model() {
        let payload = json!({"text": "done", "status": "interrupted",
            "usage": {"model": "m", "input": 3, "output": 4, "calls": 1, "context_used": 99}});
        let frame =
            parse(json!({"type": "message.complete", "session_id": "s", "payload": payload}));
        let NativeEvent::MessageComplete(complete) = &frame.event else {
            panic!("{frame:?}")
        };
        assert_eq!(complete.status, CompletionStatus::Interrupted);
        assert_eq!(complete.usage.input, 3);
        assert_eq!(complete.usage.other["context_used"], 99);
    }

    #[test]
    fn unknown_events_arrive_whole() {
        let params = json!({"type": "pet.hatch.progress", "session_id": "s", "payload": {"pct": 50, "x": [1]}});
        let frame = parse(params.clone());
        assert_eq!(
            frame.event,
            NativeEvent::Other {
                kind: "pet.hatch.progress".into(),
                payload: json!({"pct": 50, "x": [1]})
            }
        );
        assert_eq!(frame.event.kind(), "pet.hatch.progress");
        assert_eq!(serde_json::to_value(&frame).unwrap(), params);
    }
}
