//! The control plane's durable store.
//!
//! SQLite (one WAL file in the data dir) is the embedded default. Migrations are append-only SQL
//! files embedded in the binary and applied in order at open.

mod migrate;
mod records;
mod store;

pub use records::{InstanceRecord, ToolHostRecord};
pub use store::{Idempotency, Store, StoreError};
