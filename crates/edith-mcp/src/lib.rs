//! Just enough of the Model Context Protocol for tools, over Streamable HTTP.
//!
//! The control plane serves tools to runtimes with [`server`], and calls tool hosts (and runtimes
//! call the control plane) with [`client`]. Only the tool capability is implemented: `initialize`,
//! `ping`, `tools/list` and `tools/call`, and the `notifications/tools/list_changed` a server may
//! send on a client's event stream (`GET`), which lets the client keep the tools it listed until
//! they change. Replies are plain JSON; the client also reads replies sent as an SSE stream, as
//! other servers may.

pub mod client;
mod protocol;
pub mod server;
mod tool_list;

pub use client::{ClientError, McpClient};
pub use protocol::{
    LIST_CHANGED, PROTOCOL_VERSIONS, RELISTS_ON_CHANGE, ToolDescriptor, ToolOutput, session_relists,
};
pub use server::{ToolCallError, ToolService};
