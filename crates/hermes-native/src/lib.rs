//! The native protocol of Hermes 0.19's gateway (`/api/ws`): JSON-RPC 2.0 over WebSocket, one
//! JSON object per text frame, server pushes as `{"method":"event","params":{type, session_id,
//! payload}}`, and the first frame is always the `gateway.ready` event.
//!
//! - [`GatewayClient`]: a multiplexed connection.
//! - [`Native`]: every method of the pinned catalog, in namespaces (`native.session().list(..)`),
//!   generated from `contracts/hermes-native.catalog.json` over any [`NativeTransport`].

pub mod catalog;
pub mod client;
#[rustfmt::skip]
mod generated;
mod native;
pub mod protocol;

pub use client::{GatewayClient, GatewayError};
pub use generated::*;
pub use native::{NativeError, NativeTransport};
pub use protocol::{Event, codes};
