//! The `/api/ws` gateway: one JSON-RPC 2.0 conversation per WebSocket.

mod connection;
mod facts;
mod methods;

pub use connection::serve_connection;
pub use methods::IMPLEMENTED as IMPLEMENTED_METHODS;
