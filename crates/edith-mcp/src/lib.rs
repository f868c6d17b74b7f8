//! Just enough of the Model Context Protocol for tools, over Streamable HTTP.
//!
//! The control plane serves tools to runtimes with [`server`], and calls tool hosts (and runtimes
//! call the control plane) with [`client`]. Only the tool capability is implemented: `initialize`,
//! `ping`, `tools/list` and `tools/call`. Replies are plain JSON; the client also reads replies
//! sent as an SSE stream, as other servers may.

pub mod client;
mod protocol;
pub mod server;

pub use client::{ClientError, McpClient};
pub use protocol::{PROTOCOL_VERSIONS, ToolDescriptor, ToolOutput};
pub use server::{ToolCallError, ToolService};
