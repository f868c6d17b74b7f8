//! The tool relay: the MCP endpoint each profile's runtime calls, and the connections to the
//! tool hosts that serve the callback tools behind it.

pub mod mcp_endpoint;
mod tool_hosts;

pub use tool_hosts::ToolHosts;
