//! The `/api/ws` gateway: one JSON-RPC 2.0 conversation per WebSocket.

mod background;
mod completion;
mod compress;
mod connection;
mod facts;
mod methods;
mod models;
pub mod reaper;
mod rollback;
mod session_info;
mod session_work;
mod settings;
mod skills;

pub use connection::{in_process, serve_connection};
pub use methods::IMPLEMENTED as IMPLEMENTED_METHODS;
