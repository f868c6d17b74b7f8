//! The tool relay: the MCP endpoint each profile's runtime calls, the connections to the tool
//! hosts that serve the callback tools behind it, and the runtimes told when a profile's tools
//! change.

mod lists;
pub mod mcp_endpoint;

/// The `mcp_servers` name under which runtimes reach the control plane's callback tools; the
/// model sees them as `mcp__edith__<tool>`.
pub const MCP_SERVER_NAME: &str = "edith";
mod tool_hosts;

pub use lists::{ToolLists, Touched};
pub use tool_hosts::ToolHosts;
