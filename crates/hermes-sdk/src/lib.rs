//! The Hermes SDK.
//!
//! - [`Hermes`]: resource handles over an EDITH control plane — embedded
//!   ([`Hermes::local`]) or remote ([`Hermes::remote`]).
//! - [`EdithHermes`]: the low-level client, one method per operation of the checked-in
//!   control-plane contract (`hermes.sdk()`).
//! - [`HermesDesktop`]: the Desktop REST routes of one runtime (`/api/*`), one method per
//!   route of the checked-in `contracts/hermes-desktop.routes.json`.
//! - [`Tool`] and [`ToolHost`]: callback tools that live in your process.
//!
//! Features: `local` (default) adds `Hermes::local()`, an embedded control plane and runtime;
//! `tool-host` (implied by `local`) adds `ToolHost` and `Tool`. Without them the SDK talks to a
//! remote control plane only, and compiles without axum, sqlx or the runtime.
//!
//! The README's example is compiled as a doctest (see [`ReadmeDoctests`]).

#![deny(missing_docs)]

mod client;
mod desktop;
mod error;
mod events;
mod gateway;
#[rustfmt::skip]
mod generated;
mod handles;
mod hermes;
#[cfg(feature = "local")]
mod local;
mod native_route;
#[cfg(feature = "tool-host")]
mod tool;
mod tool_handles;
#[cfg(feature = "tool-host")]
mod tool_host;
mod transport;

pub use client::{EdithHermes, PageRequest};
pub use desktop::{DesktopCapabilities, HermesDesktop};
/// A runtime command for [`LocalBuilder::runtime`].
#[cfg(feature = "local")]
pub use edith_server::RuntimeCommand;
pub use error::{Error, Result};
/// For the fuzz targets in `fuzz/` only; not part of the API.
#[doc(hidden)]
pub use events::decode_sse_body;
pub use events::{EventStream, LogEvent};
pub use gateway::{GatewayConnection, GatewayEvent};
pub use generated::OPERATIONS;
pub use handles::{
    InstanceCreation, InstanceHandle, Instances, ProfileHandle, ProfileSpec, Profiles,
    SessionHandle, Sessions, TurnHandle,
};
pub use hermes::Hermes;
#[cfg(feature = "local")]
pub use local::LocalBuilder;
#[cfg(feature = "tool-host")]
pub use tool::{Tool, ToolError};
pub use tool_handles::{ToolHandle, ToolHostHandle};
#[cfg(feature = "tool-host")]
pub use tool_host::ToolHost;

pub use native_route::NativeRoute;
pub use transport::{HttpRequest, HttpResponse, HttpTransport, TransportFailure};

/// The native gateway: generated namespaces, params, errors and the pinned catalog.
pub mod native {
    pub use hermes_native::*;
}

/// The wire types (resources, events, ids), re-exported.
pub use edith_types as types;

/// Compiles the README's Rust examples, so the README stays true.
#[cfg(all(doctest, feature = "local"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
