//! What the control plane does, apart from how it is asked: instances and their provisioning
//! jobs, profiles, sessions, tools, native calls, and the turn driver. HTTP handlers call these.

pub mod announcements;
pub mod desktop;
mod hub;
mod idle_sessions;
pub mod instances;
pub mod jobs;
pub mod keys;
pub mod native;
mod profile_locks;
pub mod profiles;
pub mod reconciler;
pub mod relay;
pub mod replicas;
pub mod sessions;
pub mod tools;
pub mod turns;

pub use hub::{Follower, Hub, LogEvent, Shared};
pub use profile_locks::ProfileLocks;
pub use turns::TurnGates;
