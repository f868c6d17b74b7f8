//! The tool relay: the MCP endpoint each profile's runtime calls, and the connections to the
//! tool hosts that serve the callback tools behind it.

pub mod mcp_endpoint;

/// The `mcp_servers` name under which runtimes reach the control plane's callback tools; the
/// model sees them as `mcp__edith__<tool>`.
pub const MCP_SERVER_NAME: &str = "edith";
mod tool_hosts;

pub use tool_hosts::ToolHosts;
