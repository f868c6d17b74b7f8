//! Handles on the callback tools and tool hosts registered with the control plane. Like every
//! handle, building one makes no request.

use edith_types::{Tool, ToolHost, ToolHostId, ToolId, UpdateTool, UpdateToolHost};

use crate::error::Result;
use crate::hermes::Hermes;

/// One callback tool.
#[derive(Debug, Clone)]
pub struct ToolHandle {
    hermes: Hermes,
    id: ToolId,
}

impl ToolHandle {
    pub(crate) fn new(hermes: Hermes, id: ToolId) -> Self {
        Self { hermes, id }
    }

    /// Its id.
    pub fn id(&self) -> &ToolId {
        &self.id
    }

    /// Fetches the tool.
    pub async fn get(&self) -> Result<Tool> {
        self.hermes.sdk().tool_get(&self.id).await
    }

    /// Changes its description or argument schema; the next session offered it sees the change.
    pub async fn update(&self, change: &UpdateTool) -> Result<Tool> {
        self.hermes.sdk().tool_update(&self.id, change).await
    }

    /// Deletes the tool (409 naming the profiles it is still attached to).
    pub async fn delete(&self) -> Result<Tool> {
        self.hermes.sdk().tool_delete(&self.id).await
    }
}

/// One tool host: an endpoint that serves callback tools, with its secret.
#[derive(Debug, Clone)]
pub struct ToolHostHandle {
    hermes: Hermes,
    id: ToolHostId,
}

impl ToolHostHandle {
    pub(crate) fn new(hermes: Hermes, id: ToolHostId) -> Self {
        Self { hermes, id }
    }

    /// Its id.
    pub fn id(&self) -> &ToolHostId {
        &self.id
    }

    /// Fetches the host (never its secret).
    pub async fn get(&self) -> Result<ToolHost> {
        self.hermes.sdk().tool_host_get(&self.id).await
    }

    /// Moves the host or changes its secret; the next call of its tools uses the change.
    pub async fn update(&self, change: &UpdateToolHost) -> Result<ToolHost> {
        self.hermes.sdk().tool_host_update(&self.id, change).await
    }

    /// Deletes the host (409 naming the tools it still serves).
    pub async fn delete(&self) -> Result<ToolHost> {
        self.hermes.sdk().tool_host_delete(&self.id).await
    }
}
