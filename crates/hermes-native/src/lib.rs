//! The native protocol of Hermes 0.19's gateway (`/api/ws`): JSON-RPC 2.0 over WebSocket, one
//! JSON object per text frame, server pushes as `{"method":"event","params":{type, session_id,
//! payload}}`, and the first frame is always the `gateway.ready` event.
//!
//! This crate is the one definition of that protocol in the project: the control plane and our
//! runtime both compile against it.
//!
//! - [`methods`]: the methods the project calls or serves, with typed params and results.
//! - [`events`]: the events, typed ([`NativeEvent`]), unknown ones kept whole.
//! - [`config`]: a home's `config.yaml`, written by the control plane, read by runtimes.
//! - [`profile`], [`LiveSessionId`], [`StoredSessionId`], [`codes`]: names and codes.
//! - [`desktop`]: the Desktop REST routes (`/api/*`), generated from
//!   `contracts/hermes-desktop.routes.json`.
//! - [`GatewayClient`]: a multiplexed connection.
//! - [`Native`]: every method of the pinned catalog, in namespaces (`native.session().list(..)`),
//!   generated from `contracts/hermes-native.catalog.json` over any [`NativeTransport`].

#![deny(missing_docs)]

pub mod catalog;
pub mod client;
pub mod config;
pub mod desktop;
pub mod events;
#[rustfmt::skip]
mod generated;
mod ids;
pub mod methods;
mod native;
mod nullable;
pub mod profile;
pub mod protocol;

pub use client::{GatewayClient, GatewayError};
pub use events::{EventFrame, NativeEvent};
pub use generated::*;
pub use ids::{LiveSessionId, StoredSessionId};
pub use methods::*;
pub use native::{NativeError, NativeTransport};
pub use protocol::codes;
