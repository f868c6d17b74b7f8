//! Stored forms that carry more than the wire resource (the secrets beside it), and what a
//! request's path names, read at once.

use edith_types::{Instance, Profile, Session, ToolHost};

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

/// An instance and as much of a path under it as exists: its profile, that profile's session
/// (never a session without its profile).
#[derive(Debug, Clone)]
pub struct SessionPath {
    pub instance: InstanceRecord,
    pub profile: Option<Profile>,
    pub session: Option<Session>,
}
