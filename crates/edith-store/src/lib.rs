//! The control plane's durable store.
//!
//! SQLite (one WAL file in the data dir) is the embedded default; PostgreSQL is the other
//! backend, behind the same [`Store`]. Migrations are append-only SQL files, one set per
//! backend with the same versions, embedded in the binary and applied in order at open.

mod migrate;
mod records;
mod store;

pub use records::{InstanceRecord, SessionPath, ToolHostRecord};
pub use store::{
    Announcement, Channel, Claim, Idempotency, Listener, SessionChange, Store, StoreError,
    Synchronous,
};
