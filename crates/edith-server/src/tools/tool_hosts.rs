//! Calls to tool hosts: one MCP connection per host, made on first use and remade after a
//! failure (the host may have restarted).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use edith_mcp::{McpClient, ToolOutput};
use edith_store::ToolHostRecord;
use edith_types::ToolHostId;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::sync::Mutex;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Default)]
pub struct ToolHosts {
    http: reqwest::Client,
    clients: Mutex<HashMap<ToolHostId, Arc<McpClient>>>,
}

impl ToolHosts {
    async fn client(&self, record: &ToolHostRecord) -> Result<Arc<McpClient>, String> {
        if let Some(client) = self.clients.lock().await.get(&record.host.id) {
            return Ok(client.clone());
        }
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::try_from(format!("Bearer {}", record.secret))
            .map_err(|_| "the tool host secret is not a valid header value".to_owned())?;
        headers.insert(AUTHORIZATION, bearer);
        let client = McpClient::connect(
            self.http.clone(),
            record.host.url.clone(),
            headers,
            CONNECT_TIMEOUT,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
        let client = Arc::new(client);
        self.clients
            .lock()
            .await
            .insert(record.host.id.clone(), client.clone());
        Ok(client)
    }

    /// Drops the connection to a host (it was changed or deleted).
    pub async fn forget(&self, host: &ToolHostId) {
        self.clients.lock().await.remove(host);
    }

    /// Drops every connection (a change to any host may have gone unheard).
    pub async fn forget_all(&self) {
        self.clients.lock().await.clear();
    }

    /// Calls `tool` on the host. Failures to reach it are told to the model as a failed call.
    pub async fn call(&self, record: &ToolHostRecord, tool: &str, args: Value) -> ToolOutput {
        let client = match self.client(record).await {
            Ok(client) => client,
            Err(e) => return ToolOutput::error(format!("tool host unreachable: {e}")),
        };
        match client.call_tool(tool, args).await {
            Ok(output) => output,
            Err(e) => {
                self.clients.lock().await.remove(&record.host.id);
                if e.is_unreachable() {
                    ToolOutput::error(format!("tool host unreachable: {e}"))
                } else {
                    ToolOutput::error(format!("tool host call failed: {e}"))
                }
            }
        }
    }
}
