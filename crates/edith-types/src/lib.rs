//! Wire types shared by the EDITH control plane, its store and the SDK.
//!
//! Everything here is plain data: serde for the wire, schemars for the contract. No tokio, no
//! database, no HTTP client.

mod events;
mod ids;
mod problem;
mod resources;
mod time;

pub use events::{JobEvent, JobEventKind, TurnEvent, TurnEventKind, Usage};
pub use ids::{
    IdError, InstanceId, JobId, NativeSessionId, ProfileId, SessionId, ToolHostId, ToolId, TurnId,
};
pub use problem::{ErrorCode, Problem};
pub use resources::*;
pub use time::Timestamp;
