//! The gateway relay (`profile_gateway`): a WebSocket from an application to a profile's native
//! Hermes gateway, through the control plane.
//!
//! The client sends native JSON-RPC requests as they are. The control plane sends
//! [`RelayMessage`]s: first `attached`, then each frame of the runtime (replies and events)
//! numbered in order. When the client's socket drops, the control plane keeps the runtime
//! connection and the frames that arrive for a while; a client that connects again with
//! `?connection=<id>&after=<last seq it saw>` gets the frames it missed, none twice.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::GatewayConnectionId;

/// The query of a `profile_gateway` request that resumes a connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayResume {
    /// The connection to resume (from its `attached` message).
    pub connection: Option<GatewayConnectionId>,
    /// The last sequence number the client saw; frames after it are sent again.
    pub after: Option<u64>,
}

/// A JSON-RPC error code the relay answers a request with when the caller's key lacks the
/// scope the method needs (the request never reaches the runtime).
pub const FORBIDDEN: i64 = 4403;

/// A JSON-RPC error code the relay answers `session.resume` with when the stored session it
/// names is continued by a control-plane session of the profile: that session's turns go
/// through the control plane, and a relayed connection that resumed it would take the events of
/// its live session from them (the request never reaches the runtime).
pub const HELD_BY_THE_CONTROL_PLANE: i64 = 4409;

/// What the control plane sends on a relayed gateway connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RelayMessage {
    /// The first message: which connection this is, and whether frames were lost.
    Attached {
        /// Name it with `?connection=` to resume after a drop.
        connection: GatewayConnectionId,
        /// Whether this resumed an earlier socket's connection.
        resumed: bool,
        /// Frames after the client's `after` that were no longer kept (the gap was too long):
        /// the first and last sequence numbers lost. Absent when nothing was lost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        missed: Option<(u64, u64)>,
    },
    /// A frame from the runtime (a reply or an event) or the relay's own reply to a request it
    /// refused, numbered from 1 in the order sent.
    Frame {
        /// Its number; a resume names the last one seen (`after`).
        seq: u64,
        /// One native JSON-RPC message.
        frame: Value,
    },
    /// The runtime's side ended; the socket closes after this.
    Closed {
        /// Why it ended.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_tagged_by_type() {
        let attached = RelayMessage::Attached {
            connection: GatewayConnectionId::generate(),
            resumed: true,
            missed: Some((3, 9)),
        };
        let wire = serde_json::to_value(&attached).unwrap();
        assert_eq!(wire["type"], "attached");
        assert_eq!(wire["missed"], json!([3, 9]));
        let back: RelayMessage = serde_json::from_value(wire).unwrap();
        assert_eq!(back, attached);
        let frame: RelayMessage =
            serde_json::from_value(json!({"type": "frame", "seq": 1, "frame": {"id": 1}})).unwrap();
        assert_eq!(
            frame,
            RelayMessage::Frame {
                seq: 1,
                frame: json!({"id": 1})
            }
        );
    }
}
