//! Frames and error codes of the gateway protocol.

use serde_json::Value;

use crate::LiveSessionId;
use crate::events::EventFrame;

/// JSON-RPC and Hermes domain error codes, as 0.19 sends them.
pub mod codes {
    /// The frame is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The frame is JSON but not a request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method (or one our runtime does not implement).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The method failed in a way Hermes gives no code of its own.
    pub const HANDLER_ERROR: i64 = -32000;
    /// A live session id (`session_id` of a live-session method) that this process does not know.
    pub const LIVE_SESSION_NOT_FOUND: i64 = 4001;
    /// `config.get` of a key it does not know.
    pub const UNKNOWN_CONFIG_KEY: i64 = 4002;
    /// `session.steer` without text (Hermes uses 4002 for this too).
    pub const TEXT_REQUIRED: i64 = 4002;
    /// A live-session method called without `session_id`.
    pub const SESSION_ID_REQUIRED: i64 = 4006;
    /// A stored session (`session.resume`, `session.delete`) that does not exist.
    pub const SESSION_NOT_FOUND: i64 = 4007;
    /// `session.branch` of a session with no messages.
    pub const NOTHING_TO_BRANCH: i64 = 4008;
    /// `session.steer` before the session's agent exists (its first prompt).
    pub const NO_AGENT: i64 = 4010;
    /// Busy, or no pending request to answer.
    pub const BUSY: i64 = 4009;
    /// `session.title` with an empty title.
    pub const TITLE_REQUIRED: i64 = 4021;
    /// `session.delete` of a session that is live.
    pub const SESSION_ACTIVE: i64 = 4023;
    /// Something went wrong inside the runtime.
    pub const INTERNAL: i64 = 5000;
    /// `session.branch` could not write the branch.
    pub const BRANCH_FAILED: i64 = 5008;
    /// `session.save` could not write its file.
    pub const SAVE_FAILED: i64 = 5011;
    /// `insights.get` could not count.
    pub const INSIGHTS_FAILED: i64 = 5017;
    /// `cron.manage` with an action it does not know.
    pub const UNKNOWN_CRON_ACTION: i64 = 4016;
    /// `session.cwd.set` without a directory.
    pub const CWD_REQUIRED: i64 = 4016;
    /// `session.cwd.set` to a directory that does not exist.
    pub const NO_SUCH_DIRECTORY: i64 = 4017;
    /// `tools.configure` with an action other than `enable` and `disable`.
    pub const UNKNOWN_TOOLS_ACTION: i64 = 4017;
    /// `tools.configure` without names.
    pub const NAMES_REQUIRED: i64 = 4018;
    /// `config.set` could not apply a value (an unknown personality, a model switch that
    /// failed).
    pub const SETTING_FAILED: i64 = 5001;
    /// `prompt.background` without text, `process.kill` without a process id.
    pub const REQUIRED: i64 = 4012;
    /// `process.kill` of a process the session does not have.
    pub const NO_SUCH_PROCESS: i64 = 4044;
    /// `subagent.interrupt` without a subagent id.
    pub const SUBAGENT_ID_REQUIRED: i64 = 4000;
    /// `config.show` could not read the config.
    pub const CONFIG_SHOW_FAILED: i64 = 5030;
    /// `tools.configure` could not read or write the config.
    pub const TOOLS_CONFIGURE_FAILED: i64 = 5035;
    /// `reload.mcp` (and `reload.env`) failed.
    pub const RELOAD_FAILED: i64 = 5015;
    /// `model.options` could not list.
    pub const MODEL_OPTIONS_FAILED: i64 = 5033;
    /// `session.compress` failed.
    pub const COMPRESS_FAILED: i64 = 5005;
    /// `skills.manage` with an action it does not know.
    pub const UNKNOWN_SKILLS_ACTION: i64 = 4017;
    /// `skills.manage` failed.
    pub const SKILLS_FAILED: i64 = 5024;
    /// `rollback.diff` or `rollback.restore` without a checkpoint to name.
    pub const HASH_REQUIRED: i64 = 4014;
    /// `rollback.list`, `rollback.restore` and `rollback.diff` failed (or named a checkpoint
    /// number out of range).
    pub const ROLLBACK_LIST_FAILED: i64 = 5020;
    /// `rollback.restore` failed.
    pub const ROLLBACK_RESTORE_FAILED: i64 = 5021;
    /// `rollback.diff` failed.
    pub const ROLLBACK_DIFF_FAILED: i64 = 5022;
}

/// One incoming frame, as a client sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The reply to a request of ours.
    Reply {
        /// The id of the request it answers.
        id: Value,
        /// Its `result`, or its error's code and message.
        outcome: Result<Value, (i64, String)>,
    },
    /// An event the gateway sent.
    Event(EventFrame),
    /// An event of a live session that its reader said it does not read
    /// ([`Incoming::parse_unless`]): only its session and type were read.
    Unread,
    /// Anything else (a server request this client does not know); ignored.
    Other(Value),
}

impl Incoming {
    /// Reads a frame's text; `None` when it is not JSON.
    pub fn parse(text: &str) -> Option<Self> {
        Self::parse_unless(text, |_, _| false)
    }

    /// Like [`Incoming::parse`], except that an event of a live session of which
    /// `unread(session, type)` holds is left unread ([`Incoming::Unread`]).
    pub fn parse_unless(
        text: &str,
        unread: impl FnOnce(&LiveSessionId, &str) -> bool,
    ) -> Option<Self> {
        /// Enough of a frame to tell an event, whose params are then read from their text.
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(borrow, default)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow, default)]
            params: Option<&'a serde_json::value::RawValue>,
        }
        // Most frames a client reads are events: they are read into their types from the text,
        // with no `Value` tree. Anything else, or anything odd, is read as a tree. (Only an
        // object: serde reads a struct from an array too.)
        if text.trim_start().starts_with('{')
            && let Ok(head) = serde_json::from_str::<Head>(text)
            && head.method.as_deref() == Some("event")
            && let Some(params) = head.params
            && let Ok(read) = EventFrame::from_json_unless(params.get(), |session, kind| {
                session.is_some_and(|session| unread(session, kind))
            })
        {
            return Some(read.map_or(Incoming::Unread, Incoming::Event));
        }
        Self::from_value(serde_json::from_str(text).ok()?)
    }

    /// Like [`Incoming::parse`], for a frame already read as JSON. Its parts are moved out of
    /// it, not copied: every event the gateway sends comes this way.
    pub fn from_value(mut frame: Value) -> Option<Self> {
        let method = frame.get("method");
        if method.and_then(Value::as_str) == Some("event") {
            let params = frame.get_mut("params")?.take();
            let event = serde_json::from_value(params).ok()?;
            return Some(Incoming::Event(event));
        }
        if method.is_none()
            && let Some(fields) = frame.as_object_mut()
            && let Some(id) = fields.remove("id")
        {
            let outcome = match fields.remove("error") {
                Some(error) => Err((
                    error["code"].as_i64().unwrap_or_default(),
                    error["message"].as_str().unwrap_or_default().to_owned(),
                )),
                None => Ok(fields.remove("result").unwrap_or(Value::Null)),
            };
            return Some(Incoming::Reply { id, outcome });
        }
        Some(Incoming::Other(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::events::{NativeEvent, TextPayload};
    use serde_json::json;

    /// An event frame is read from its text; whatever that path does not take (found by
    /// `fuzz/`: a frame that is not an object, keys given twice) reads as it does as a tree.
    #[test]
    fn a_frame_reads_the_same_from_its_text_as_from_its_tree() {
        let frames = [
            r#""""#,
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.delta","type":"message.delta","session_id":"s","payload":{"text":"a","text":"b"}}}"#,
            r#"{"jsonrpc":"2.0","method":"event","method":"event","params":{"type":"message.start"}}"#,
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.delta","payload":{"text":7}}}"#,
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"pet.nap","payload":null}}"#,
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.delta","payload":{"text":"\u00e9"}}}"#,
            r#"{"jsonrpc":"2.0","method":"event"}"#,
            r#"["event", {"type": "message.delta", "payload": {"text": "hi"}}]"#,
        ];
        for text in frames {
            let tree: Value = serde_json::from_str(text).unwrap();
            assert_eq!(Incoming::parse(text), Incoming::from_value(tree), "{text}");
        }
    }

    #[test]
    fn events_and_replies_are_told_apart() {
        let event = Incoming::parse(
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.delta","session_id":"ab12cd34","payload":{"text":"hi"}}}"#,
        );
        let Some(Incoming::Event(event)) = event else {
            panic!("not an event")
        };
        assert_eq!(
            event.event,
            NativeEvent::MessageDelta(TextPayload { text: "hi".into() })
        );
        assert_eq!(event.session_id.unwrap().as_str(), "ab12cd34");

        let reply = Incoming::parse(
            r#"{"jsonrpc":"2.0","id":"r1","error":{"code":4007,"message":"session not found"}}"#,
        );
        assert_eq!(
            reply,
            Some(Incoming::Reply {
                id: json!("r1"),
                outcome: Err((4007, "session not found".into()))
            })
        );
    }

    #[test]
    fn an_event_its_reader_does_not_want_is_left_unread_and_others_are_read() {
        let delta = r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.delta","session_id":"ab12cd34","payload":{"text":"hi"}}}"#;
        let mut asked = Vec::new();
        let unread = Incoming::parse_unless(delta, |sid, kind| {
            asked.push((sid.as_str().to_owned(), kind.to_owned()));
            true
        });
        assert_eq!(unread, Some(Incoming::Unread));
        assert_eq!(asked, [("ab12cd34".to_owned(), "message.delta".to_owned())]);
        let read = Incoming::parse_unless(delta, |_, _| false);
        assert_eq!(read, Incoming::parse(delta));
        assert!(matches!(read, Some(Incoming::Event(_))));
        // A connection-wide event has no session to be left unread for.
        let ready =
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"gateway.ready","payload":{}}}"#;
        assert!(matches!(
            Incoming::parse_unless(ready, |_, _| true),
            Some(Incoming::Event(_))
        ));
    }
}
