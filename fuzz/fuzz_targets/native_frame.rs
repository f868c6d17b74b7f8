//! One WebSocket message of the native gateway protocol (JSON-RPC 2.0), read every way the
//! project reads one:
//!
//! - by a client (`GatewayClient`, the control plane): `Incoming::parse`, then a reply's result
//!   as the method's typed `Result`;
//! - by the SDK's `GatewayConnection`, which gets it from the control plane's relay inside a
//!   `RelayMessage`, then reads the frame with `Incoming::from_value`;
//! - by a runtime (ours): the message split into lines, each line JSON, the params of the
//!   method as its typed `Params` (a missing or `null` params is `{}`).
//!
//! Asserts, besides no panic: whatever is read writes back to a frame that reads as the same
//! thing; an event's `kind()` is the `type` it came with, and only `message.complete` ends a
//! turn; every typed method is covered here.

#![no_main]

use edith_types::RelayMessage;
use hermes_native::methods::{self, Method};
use hermes_native::protocol::Incoming;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    // A text frame is UTF-8 (the socket library checks); the runtime also takes binary frames,
    // read as lossy UTF-8.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(frame) = serde_json::from_str::<Value>(text) {
            assert_eq!(Incoming::parse(text), Incoming::from_value(frame));
        }
        if let Some(incoming) = Incoming::parse(text) {
            client_round_trip(&incoming);
        }
        // A reader that leaves every session's events unread gets the same frames otherwise.
        let unread = Incoming::parse_unless(text, |_, _| true);
        if unread != Some(Incoming::Unread) {
            assert_eq!(unread, Incoming::parse(text), "{text}");
        }
        relay(text);
    }
    let text = String::from_utf8_lossy(data);
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        server_side(line);
    }
});

/// A frame as a client reads it writes back to one that reads the same.
fn client_round_trip(incoming: &Incoming) {
    let written = match incoming {
        Incoming::Reply {
            id,
            outcome: Ok(result),
        } => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Incoming::Reply {
            id,
            outcome: Err((code, message)),
        } => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        Incoming::Event(frame) => {
            let kind = frame.event.kind();
            assert_eq!(
                frame.event.ends_turn(),
                kind == "message.complete",
                "{frame:?}"
            );
            let wire = serde_json::to_value(frame).expect("an event frame serializes");
            assert_eq!(wire["type"], kind.as_str(), "kind() is not the wire type");
            serde_json::from_str(&frame.to_frame()).expect("an event frame is JSON")
        }
        Incoming::Other(frame) => frame.clone(),
        Incoming::Unread => panic!("`parse` left an event unread"),
    };
    let text = written.to_string();
    let again =
        Incoming::parse(&text).unwrap_or_else(|| panic!("our own frame is unreadable: {text}"));
    assert_eq!(&again, incoming, "read back differently: {text}");
}

/// A relay message (the SDK's side of the control plane's gateway relay).
fn relay(text: &str) {
    let Ok(message) = serde_json::from_str::<RelayMessage>(text) else {
        return;
    };
    let written = serde_json::to_string(&message).expect("a relay message serializes");
    let again: RelayMessage = serde_json::from_str(&written)
        .unwrap_or_else(|e| panic!("our own relay message is unreadable ({e}): {written}"));
    assert_eq!(again, message);
    if let RelayMessage::Frame { frame, .. } = message
        && let Some(incoming) = Incoming::from_value(frame)
    {
        client_round_trip(&incoming);
    }
}

/// One line as a runtime reads a request, and its `result` as a client reads a reply.
fn server_side(line: &str) {
    let Ok(frame) = serde_json::from_str::<Value>(line) else {
        return;
    };
    let params = match frame.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => return, // -32602 before any decoding
    };
    let result = frame.get("result").cloned().unwrap_or(Value::Null);
    if let Some(choice) = params.get("choice").and_then(Value::as_str) {
        let choice = methods::ApprovalChoice::parse(choice);
        assert_eq!(methods::ApprovalChoice::parse(choice.as_str()), choice);
    }
    // Every typed method, whatever the frame's `method`: more decoding per input.
    let mut names = Vec::new();
    macro_rules! each {
        ($($method:ident),* $(,)?) => {$(
            typed::<methods::$method>(&params, &result);
            names.push(<methods::$method as Method>::NAME);
        )*};
    }
    each!(
        SessionCreate,
        SessionResume,
        SessionList,
        SessionMostRecent,
        SessionActiveList,
        SessionHistory,
        SessionClose,
        SessionDelete,
        SessionTitle,
        SessionUsage,
        SessionInterrupt,
        PromptSubmit,
        ApprovalRespond,
        ClarifyRespond,
        PetInfo,
        PetInfoMeta,
        PetCells,
        UsageBars,
        CronManage,
        SetupStatus,
        AgentsList,
        ProcessList,
        ToolsetsList,
        ToolsList,
        ToolsShow,
        ConfigGet,
        CommandsCatalog,
        SessionUndo,
        SessionStatus,
        SessionSave,
        InsightsGet,
        CompletePath,
        CompleteSlash,
        SessionBranch,
        SessionContextBreakdown,
        SessionSteer,
        ConfigShow,
        ConfigSet,
        SessionCwdSet,
        ToolsConfigure,
        ReloadMcp,
        SessionActivate,
        PromptBackground,
        ProcessStop,
        ProcessKill,
        SubagentInterrupt,
        ModelOptions,
        SessionCompress,
        ReloadEnv,
        SudoRespond,
        SecretRespond,
        SkillsManage,
        SkillsReload,
        RollbackList,
        RollbackDiff,
        RollbackRestore,
    );
    assert_eq!(
        names,
        methods::TYPED_METHODS,
        "a typed method is missing from this fuzz target"
    );
}

fn typed<M: Method>(params: &Value, result: &Value) {
    if let Ok(params) = serde_json::from_value::<M::Params>(params.clone()) {
        round_trip(M::NAME, "params", &params);
    }
    if let Ok(result) = serde_json::from_value::<M::Result>(result.clone()) {
        round_trip(M::NAME, "result", &result);
    }
}

/// What was read writes back to JSON that reads as the same value (compared by what it writes:
/// the method types need not be `PartialEq`).
fn round_trip<T: Serialize + DeserializeOwned>(method: &str, part: &str, value: &T) {
    let written = serde_json::to_value(value).expect("typed values serialize");
    let again: T = serde_json::from_value(written.clone()).unwrap_or_else(|e| {
        panic!("{method} {part}: our own output is unreadable ({e}): {written}")
    });
    let rewritten = serde_json::to_value(&again).expect("typed values serialize");
    assert_eq!(
        rewritten, written,
        "{method} {part} changed on the way back"
    );
}
