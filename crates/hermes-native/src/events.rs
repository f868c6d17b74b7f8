//! The events a Hermes gateway pushes (`{"method":"event","params":{type, session_id,
//! payload}}`): the ones this project produces or reads are typed; any other arrives whole as
//! [`NativeEvent::Other`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::LiveSessionId;
use crate::nullable::nullable;

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
    /// The session's agent, model and tools (after a build, and again when late MCP tools
    /// land).
    #[serde(rename = "session.info")]
    SessionInfo(SessionInfo),
    /// The terminal skin was changed (`config.set skin`); sent with an empty session id.
    #[serde(rename = "skin.changed")]
    SkinChanged(Skin),
    /// The session was given a title by the model after its first exchanges.
    #[serde(rename = "session.title")]
    SessionTitle(SessionTitlePayload),
    /// A command needs the sudo password (`sudo.respond`).
    #[serde(rename = "sudo.request")]
    SudoRequest(PendingRequest),
    /// A sudo password request was not answered in time.
    #[serde(rename = "sudo.expire")]
    SudoExpire(PendingRequest),
    /// A skill needs a secret the home does not have (`secret.respond`).
    #[serde(rename = "secret.request")]
    SecretRequest(SecretRequest),
    /// A secret request was not answered in time.
    #[serde(rename = "secret.expire")]
    SecretExpire(PendingRequest),
    /// The answer to a `prompt.background`, on the session that asked.
    #[serde(rename = "background.complete")]
    BackgroundComplete(BackgroundComplete),
    /// Something failed (the turn still ends with `message.complete`).
    #[serde(rename = "error")]
    Error(ErrorPayload),
    /// Any other event, whole.
    #[serde(untagged)]
    Other {
        /// The event's `type`.
        #[serde(rename = "type")]
        kind: String,
        /// Its payload, as sent.
        #[serde(default)]
        payload: Value,
    },
}

/// What a session's agent has: `session.info`'s payload, and `info` of `session.create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionInfo {
    /// Tool names by toolset, as Hermes groups them.
    pub tools: BTreeMap<String, Vec<String>>,
    /// Everything else (model, skills, cwd, …), as sent.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Read as an object whose `tools` is then taken out. (serde's `flatten` would first copy the
/// whole object into a buffer of its own, and the info is the largest event a turn sends.)
impl<'de> Deserialize<'de> for SessionInfo {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut other = Map::deserialize(deserializer)?;
        let tools = other
            .shift_remove("tools")
            .map(tool_map)
            .unwrap_or_default();
        Ok(Self { tools, other })
    }
}

impl SessionInfo {
    /// The `type` of its event ([`NativeEvent::SessionInfo`]).
    pub fn kind() -> &'static str {
        static KIND: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| NativeEvent::SessionInfo(SessionInfo::default()).kind());
        &KIND
    }

    /// Every tool name, whatever its toolset.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.values().flatten().map(String::as_str)
    }
}

/// A toolset → names map; anything else reads as no tools rather than failing the event.
fn tool_map(value: Value) -> BTreeMap<String, Vec<String>> {
    serde_json::from_value(value).unwrap_or_default()
}

/// `session.title`'s payload: the stored session and its new title.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionTitlePayload {
    /// The stored session's id (the frame's `session_id` is the live one).
    #[serde(default, deserialize_with = "nullable")]
    pub session_id: String,
    /// The new title.
    #[serde(default, deserialize_with = "nullable")]
    pub title: String,
}

/// `background.complete`'s payload: the answer to a `prompt.background`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackgroundComplete {
    /// The id `prompt.background` gave back.
    pub task_id: String,
    /// The prompt's final answer (or why it failed).
    pub text: Option<String>,
}

/// A terminal skin: its name (`default` when the one asked for does not exist) and, from
/// Hermes, its colours and branding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Skin {
    /// The skin's name.
    pub name: String,
    /// Its colours and branding, as sent.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `gateway.ready`'s payload, the first frame of every connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayReady {
    /// The terminal skin in use.
    #[serde(default)]
    pub skin: Value,
    /// Which runtime this is, when it says (ours: `hermes-runtime <version>`; Hermes 0.19 sends
    /// none, and its clients ignore the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
}

/// A payload that is one text (`message.delta`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextPayload {
    /// The text.
    #[serde(default, deserialize_with = "nullable")]
    pub text: String,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionStatus {
    /// The turn ran to its end.
    #[default]
    Complete,
    /// The turn was interrupted (`session.interrupt`).
    Interrupted,
    /// The turn failed (its text says why).
    Error,
    /// A status this project does not know.
    #[serde(other)]
    Unknown,
}

/// `message.complete`'s payload: how the turn ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageComplete {
    /// The assistant's final text.
    #[serde(default, deserialize_with = "nullable")]
    pub text: String,
    /// How it ended.
    #[serde(default, deserialize_with = "nullable")]
    pub status: CompletionStatus,
    /// The session's usage after the turn.
    #[serde(default, deserialize_with = "nullable")]
    pub usage: NativeUsage,
}

/// Token accounting as Hermes reports it (`message.complete`'s `usage`, `session.usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NativeUsage {
    /// The model used.
    #[serde(default, deserialize_with = "nullable")]
    pub model: String,
    /// Input tokens of the session's calls.
    #[serde(default, deserialize_with = "nullable")]
    pub input: u64,
    /// Output tokens of the session's calls.
    #[serde(default, deserialize_with = "nullable")]
    pub output: u64,
    /// Prompt tokens, as the provider counts them.
    #[serde(default, deserialize_with = "nullable")]
    pub prompt: u64,
    /// Completion tokens, as the provider counts them.
    #[serde(default, deserialize_with = "nullable")]
    pub completion: u64,
    /// All tokens.
    #[serde(default, deserialize_with = "nullable")]
    pub total: u64,
    /// How many model calls were made.
    #[serde(default, deserialize_with = "nullable")]
    pub calls: u64,
    /// What else the runtime reports (`reasoning`, `context_used`, …).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `tool.generating`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolGenerating {
    /// The tool the model is writing a call of.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

/// `tool.start`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStart {
    /// The call's id; its `tool.complete` has the same.
    #[serde(default, deserialize_with = "nullable")]
    pub tool_id: String,
    /// As the model sees it: `mcp__<server>__<tool>` for MCP tools.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// A short description of the arguments.
    #[serde(default, deserialize_with = "nullable")]
    pub context: String,
}

/// `tool.complete`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolComplete {
    /// The call's id, as its `tool.start` gave it.
    #[serde(default, deserialize_with = "nullable")]
    pub tool_id: String,
    /// The tool, as the model sees it.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The arguments it was called with.
    #[serde(default)]
    pub args: Value,
    /// The result, decoded when it is JSON (an MCP tool's is `{"result": "<text>"}`).
    #[serde(default)]
    pub result: Value,
    /// How long the call took, in seconds.
    #[serde(default, deserialize_with = "nullable")]
    pub duration_s: f64,
}

/// `approval.request`'s payload: a command that waits for the user's approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The command.
    #[serde(default, deserialize_with = "nullable")]
    pub command: String,
    /// The first dangerous pattern it matched.
    #[serde(default, deserialize_with = "nullable")]
    pub pattern_key: String,
    /// Every dangerous pattern it matched.
    #[serde(default, deserialize_with = "nullable")]
    pub pattern_keys: Vec<String>,
    /// Why it is dangerous, in words.
    #[serde(default, deserialize_with = "nullable")]
    pub description: String,
    /// Whether `always` may be answered.
    #[serde(default, deserialize_with = "nullable")]
    pub allow_permanent: bool,
    /// `once`, `session`, `always`, `deny`.
    #[serde(default, deserialize_with = "nullable")]
    pub choices: Vec<String>,
}

/// `clarify.request`'s payload: a question for the user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClarifyRequest {
    /// The question.
    #[serde(default, deserialize_with = "nullable")]
    pub question: String,
    /// Offered answers; `null` when the question is open.
    #[serde(default)]
    pub choices: Option<Vec<String>>,
    /// What `clarify.respond` names.
    #[serde(default, deserialize_with = "nullable")]
    pub request_id: String,
}

/// A request the agent waits on, named by the id its answer gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingRequest {
    /// What the answer names.
    #[serde(default, deserialize_with = "nullable")]
    pub request_id: String,
}

/// `secret.request`: which variable a skill needs, and how to ask for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SecretRequest {
    /// What to ask the user.
    #[serde(default, deserialize_with = "nullable")]
    pub prompt: String,
    /// The variable the answer is stored as.
    #[serde(default, deserialize_with = "nullable")]
    pub env_var: String,
    /// `{skill_name, help?, required_for?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// What `secret.respond` names.
    #[serde(default, deserialize_with = "nullable")]
    pub request_id: String,
}

/// `status.update`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// What it is about (`status`, `warn`, `lifecycle`, …).
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// What a client shows.
    #[serde(default, deserialize_with = "nullable")]
    pub text: String,
}

/// `error`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// What failed.
    #[serde(default, deserialize_with = "nullable")]
    pub message: String,
}

impl NativeEvent {
    /// The event of type `kind` with `payload`, decoded as leniently as the runtimes send it: a
    /// missing or `null` payload is an empty one, and missing or `null` fields take their
    /// defaults (Hermes sends `message.start` without a payload and `text: null` in some
    /// `message.complete`s).
    /// A payload that still does not fit its type arrives whole as [`NativeEvent::Other`].
    pub fn from_wire(kind: String, payload: Value) -> Self {
        let was_null = payload.is_null();
        let body = if was_null {
            Value::Object(Map::new())
        } else {
            payload
        };
        // The tag first, so serde reads the payload straight into its variant; read from a
        // reference, so the payload is still there to keep whole when it does not fit.
        let mut tagged = Map::with_capacity(2);
        tagged.insert("type".to_owned(), Value::String(kind));
        tagged.insert("payload".to_owned(), body);
        let tagged = Value::Object(tagged);
        match NativeEvent::deserialize(&tagged) {
            Ok(NativeEvent::Other { .. }) | Err(_) => {
                let Value::Object(mut tagged) = tagged else {
                    unreachable!("built as an object")
                };
                let kind = match tagged.remove("type") {
                    Some(Value::String(kind)) => kind,
                    _ => unreachable!("built with a string type"),
                };
                let payload = match tagged.remove("payload") {
                    Some(_) if was_null => Value::Null,
                    payload => payload.unwrap_or_default(),
                };
                NativeEvent::Other { kind, payload }
            }
            Ok(event) => event,
        }
    }

    /// Whether the event ends a turn: `message.complete`, even one whose payload could not be
    /// read (a turn must never wait for a completion that already came).
    pub fn ends_turn(&self) -> bool {
        match self {
            NativeEvent::MessageComplete(_) => true,
            NativeEvent::Other { kind, .. } => kind == "message.complete",
            _ => false,
        }
    }

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

/// An event notification's `params` with the payload left as text.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default)]
    session_id: Option<LiveSessionId>,
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    payload: Option<&'a serde_json::value::RawValue>,
}

/// The `params` of an event notification: the event and the live session it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventFrame {
    /// Absent for connection-wide events (`gateway.ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The event.
    #[serde(flatten)]
    pub event: NativeEvent,
}

impl<'de> Deserialize<'de> for EventFrame {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            session_id: Option<LiveSessionId>,
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            payload: Value,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(EventFrame {
            session_id: wire.session_id,
            event: NativeEvent::from_wire(wire.kind, wire.payload),
        })
    }
}

impl EventFrame {
    /// An event notification's `params`, read from their JSON text: the same as deserializing
    /// them, with a payload that fits its type read into it from the text (serde buffers it, its
    /// strings borrowed, but builds no `Value` tree),
    /// which matters for large ones (`session.info`). Anything else (an unknown event, a payload
    /// that does not fit, a repeated key) is read through a tree, as before.
    pub fn from_json(params: &str) -> serde_json::Result<Self> {
        let read = Self::from_json_unless(params, |_, _| false)?;
        Ok(read.expect("an event is read unless its reader says otherwise"))
    }

    /// Like [`EventFrame::from_json`], except that an event of which `unread(session, type)`
    /// holds is not read further than those two: `None`.
    pub fn from_json_unless(
        params: &str,
        unread: impl FnOnce(Option<&LiveSessionId>, &str) -> bool,
    ) -> serde_json::Result<Option<Self>> {
        if let Ok(wire) = serde_json::from_str::<Wire>(params) {
            if unread(wire.session_id.as_ref(), &wire.kind) {
                return Ok(None);
            }
            if let Some(typed) = Self::typed(wire) {
                return Ok(Some(typed));
            }
        }
        serde_json::from_value(serde_json::from_str(params)?).map(Some)
    }

    /// The frame whose payload reads into its type at once; `None` otherwise.
    fn typed(wire: Wire) -> Option<Self> {
        use serde_json::value::RawValue;
        let payload = wire.payload.map(RawValue::get).filter(|p| *p != "null");
        // The tag first, so serde reads the payload straight into its variant.
        let tagged = format!(
            "{{\"type\":{},\"payload\":{}}}",
            serde_json::to_string(&wire.kind).ok()?,
            payload.unwrap_or("{}")
        );
        match serde_json::from_str(&tagged).ok()? {
            NativeEvent::Other { .. } => None,
            event => Some(EventFrame {
                session_id: wire.session_id,
                event,
            }),
        }
    }

    /// The event `event` of the live session `session_id` (none: connection-wide).
    pub fn new(session_id: Option<LiveSessionId>, event: NativeEvent) -> Self {
        Self { session_id, event }
    }

    /// The whole notification, as sent on the wire (written out at once, with no `Value` tree in
    /// between: the runtime sends one per event).
    pub fn to_frame(&self) -> String {
        notification(self)
    }

    /// The notification of the event `kind` (its `type`) whose payload is JSON text written
    /// already: the frame [`EventFrame::to_frame`] writes for that event, with the payload
    /// copied, not read into its type and written again (the runtime keeps a session's info as
    /// text and sends it after every turn).
    pub fn frame_with_payload(
        session_id: Option<&LiveSessionId>,
        kind: &str,
        payload: &serde_json::value::RawValue,
    ) -> String {
        /// What [`EventFrame`] serializes as, its payload as text.
        #[derive(Serialize)]
        struct Params<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            session_id: Option<&'a LiveSessionId>,
            #[serde(rename = "type")]
            kind: &'a str,
            payload: &'a serde_json::value::RawValue,
        }
        notification(&Params {
            session_id,
            kind,
            payload,
        })
    }
}

/// A JSON-RPC notification of an event, `params` its frame.
fn notification<P: Serialize>(params: &P) -> String {
    #[derive(Serialize)]
    struct Notification<'a, P> {
        jsonrpc: &'static str,
        method: &'static str,
        params: &'a P,
    }
    let notification = Notification {
        jsonrpc: "2.0",
        method: "event",
        params,
    };
    serde_json::to_string(&notification).expect("events serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The frame `params` are, read both ways a frame is read (from a JSON tree, and from its
    /// text), which must agree.
    fn parse(params: Value) -> EventFrame {
        let from_text = EventFrame::from_json(&params.to_string()).expect("an event frame");
        let from_tree = serde_json::from_value(params).expect("an event frame");
        assert_eq!(from_text, from_tree);
        from_tree
    }

    #[test]
    fn an_events_frame_with_its_payload_as_text_is_the_frame_of_that_event() {
        let sid = LiveSessionId::new("ab12cd34");
        let info = SessionInfo {
            tools: [("web".to_owned(), vec!["web_search".to_owned()])].into(),
            other: json!({"model": "m", "running": false, "usage": {"calls": 2}})
                .as_object()
                .cloned()
                .unwrap(),
        };
        let text = serde_json::to_string(&info).unwrap();
        let payload = serde_json::value::RawValue::from_string(text).unwrap();
        let event = NativeEvent::SessionInfo(info);
        for session_id in [Some(sid), None] {
            let raw = EventFrame::frame_with_payload(session_id.as_ref(), &event.kind(), &payload);
            assert_eq!(raw, EventFrame::new(session_id, event.clone()).to_frame());
        }
    }

    #[test]
    fn a_sessions_info_reads_its_tools_by_toolset_and_keeps_the_rest_in_order() {
        let frame = parse(
            json!({"type": "session.info", "session_id": "s", "payload": {
            "model": "m", "tools": {"web": ["web_search", "web_extract"]}, "cwd": "/w",
            "usage": {"calls": 1}}}),
        );
        let NativeEvent::SessionInfo(info) = &frame.event else {
            panic!("{frame:?}")
        };
        assert_eq!(
            info.tool_names().collect::<Vec<_>>(),
            ["web_search", "web_extract"]
        );
        assert_eq!(
            info.other.keys().collect::<Vec<_>>(),
            ["model", "cwd", "usage"]
        );
        // Tools in another shape read as none; the event is still read.
        let odd = parse(json!({"type": "session.info", "session_id": "s",
            "payload": {"tools": ["web_search"], "model": "m"}}));
        let NativeEvent::SessionInfo(info) = &odd.event else {
            panic!("{odd:?}")
        };
        assert!(info.tools.is_empty());
        assert_eq!(info.other["model"], "m");
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
    fn events_as_the_real_hermes_sends_them_are_typed() {
        // `_emit("message.start", sid)`: no payload at all.
        let start = parse(json!({"type": "message.start", "session_id": "s"}));
        assert_eq!(start.event, NativeEvent::MessageStart {});
        // An interrupted turn with no text.
        let complete = parse(json!({"type": "message.complete", "session_id": "s",
            "payload": {"text": null, "status": "interrupted", "usage": {"input": 1, "output": null}}}));
        let NativeEvent::MessageComplete(complete) = &complete.event else {
            panic!("{complete:?}")
        };
        assert_eq!(complete.text, "");
        assert_eq!(complete.status, CompletionStatus::Interrupted);
        assert_eq!(complete.usage.input, 1);
        // A status nobody here knows still completes the turn.
        let odd = parse(json!({"type": "message.complete", "payload": {"status": "aborted"}}));
        assert!(odd.event.ends_turn());
        assert!(
            matches!(&odd.event, NativeEvent::MessageComplete(c) if c.status == CompletionStatus::Unknown)
        );
        // One whose payload cannot be read at all still ends it.
        let garbled = parse(json!({"type": "message.complete", "payload": {"usage": "lots"}}));
        assert!(matches!(garbled.event, NativeEvent::Other { .. }));
        assert!(garbled.event.ends_turn());
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
        // Without a payload, and with one that does not fit its type: kept as it came.
        let bare = parse(json!({"type": "pet.nap", "session_id": "s"}));
        let kind = "pet.nap".to_owned();
        assert_eq!(
            bare.event,
            NativeEvent::Other {
                kind,
                payload: Value::Null
            }
        );
        let garbled = parse(json!({"type": "message.delta", "payload": {"text": 7}}));
        let (kind, payload) = ("message.delta".to_owned(), json!({"text": 7}));
        assert_eq!(garbled.event, NativeEvent::Other { kind, payload });
        // What the runtime sends is what a client reads back.
        let text = frame.to_frame();
        let Some(crate::protocol::Incoming::Event(read)) = crate::protocol::Incoming::parse(&text)
        else {
            panic!("{text}")
        };
        assert_eq!(read, frame);
        let wire: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            wire,
            json!({"jsonrpc": "2.0", "method": "event", "params": params})
        );
    }
}
