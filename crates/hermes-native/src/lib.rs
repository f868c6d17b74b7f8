//! The native protocol of Hermes 0.19's gateway (`/api/ws`): JSON-RPC 2.0 over WebSocket, one
//! JSON object per text frame, server pushes as `{"method":"event","params":{type, session_id,
//! payload}}`, and the first frame is always the `gateway.ready` event.

pub mod client;
pub mod protocol;

pub use client::{GatewayClient, GatewayError};
pub use protocol::{Event, codes};
