//! Stored forms that carry more than the wire resource: the secrets beside it.

use edith_types::{Instance, ToolHost};

/// An instance with the credentials of its runtime links.
#[derive(Clone)]
pub struct InstanceRecord {
    pub instance: Instance,
    /// The control plane presents it to the runtime.
    pub runtime_token: String,
    /// The runtime presents it to the control plane's MCP endpoint.
    pub mcp_token: String,
}

impl std::fmt::Debug for InstanceRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceRecord")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// A tool host with the secret the control plane sends it.
#[derive(Clone)]
pub struct ToolHostRecord {
    pub host: ToolHost,
    pub secret: String,
}

impl std::fmt::Debug for ToolHostRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHostRecord")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}
