//! MCP servers from a home's config: connections kept across turns; tools listed each turn, or
//! kept until the server says they changed when it announces changes (`edith_mcp::McpClient`).

use std::collections::HashMap;
use std::sync::Arc;

use edith_mcp::McpClient;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::Mutex;

use crate::model::ToolSpec;
use hermes_native::config::{HermesConfig, McpServer};

/// A listed tool: how the model sees it, the connection that serves it, its name there.
pub type Listed = (ToolSpec, Arc<McpClient>, String);

/// Open MCP connections, shared by every session of the runtime and kept across turns.
pub struct McpPool {
    http: reqwest::Client,
    /// By server url and credentials, so two profiles with the same server share a connection.
    clients: Mutex<HashMap<String, Arc<McpClient>>>,
}

impl McpPool {
    /// A pool whose connections go through `http` (the runtime's one HTTP client).
    pub fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            clients: Mutex::default(),
        }
    }

    async fn client(&self, config: &McpServer) -> Result<Arc<McpClient>, String> {
        let key = format!("{} {:?}", config.url, config.headers);
        if let Some(client) = self.clients.lock().await.get(&key) {
            return Ok(client.clone());
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::try_from(name.as_str()).map_err(|e| e.to_string())?;
            let value = HeaderValue::try_from(value.as_str()).map_err(|e| e.to_string())?;
            headers.insert(name, value);
        }
        let client = McpClient::connect(
            self.http.clone(),
            config.url.clone(),
            headers,
            config.connect_timeout.duration(),
            config.timeout.duration(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let client = Arc::new(client);
        self.clients.lock().await.insert(key, client.clone());
        Ok(client)
    }

    /// Drops every connection (`reload.mcp`): the next listing connects anew.
    pub async fn forget_all(&self) {
        self.clients.lock().await.clear();
    }

    /// Lists the tools of every configured server, with the connection that serves each and its
    /// name there. A server that cannot be reached is left out and reported, so one bad server
    /// does not take the others down.
    pub async fn list(&self, config: &HermesConfig) -> (Vec<Listed>, Vec<String>) {
        let mut tools = Vec::new();
        let mut problems = Vec::new();
        for (server, server_config) in &config.mcp_servers {
            let listed = match self.client(server_config).await {
                Ok(client) => client
                    .list_tools()
                    .await
                    .map(|t| (client, t))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match listed {
                Ok((client, listed)) => {
                    let excluded = server_config.excluded_tools();
                    for tool in listed.into_iter().filter(|t| !excluded.contains(&t.name)) {
                        let spec = ToolSpec {
                            name: format!("mcp__{server}__{}", tool.name),
                            description: tool.description,
                            parameters: Arc::new(tool.input_schema),
                        };
                        tools.push((spec, client.clone(), tool.name));
                    }
                }
                Err(e) => {
                    // A cached connection may be stale (the server restarted): forget it.
                    self.clients
                        .lock()
                        .await
                        .retain(|_, c| c.url() != server_config.url);
                    problems.push(format!("MCP server `{server}`: {e}"));
                }
            }
        }
        (tools, problems)
    }
}
