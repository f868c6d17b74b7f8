//! MCP servers from a home's config: connections kept across turns; tools listed each turn, or
//! kept until the server says they changed when it announces changes (`edith_mcp::McpClient`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_mcp::McpClient;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::model::ToolSpec;
use hermes_native::config::{HermesConfig, McpServer};

/// A listed tool: how the model sees it, the connection that serves it, its name there.
pub type Listed = (ToolSpec, Arc<McpClient>, String);

/// A connection being made or made: one attempt per server at a time, whose outcome every
/// listing that asked meanwhile shares. New sessions come in bursts (a client opening many at
/// once); each making its own connection would open as many MCP sessions and event streams on
/// the server, all but one thrown away.
type Connecting = Shared<BoxFuture<'static, Result<Arc<McpClient>, String>>>;

/// Open MCP connections, shared by every session of the runtime and kept across turns.
pub struct McpPool {
    http: reqwest::Client,
    /// By server url and credentials, so two profiles with the same server share a connection.
    clients: Mutex<HashMap<String, Connecting>>,
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
        let connecting = self
            .clients()
            .entry(key.clone())
            .or_insert_with(|| {
                // On a task of its own, so that it goes on when those waiting give up (a
                // session's info waits only so long) and is done, or has failed, by the time
                // the next listing asks: its request deadlines count from when they are sent.
                let attempt = tokio::spawn(connect(self.http.clone(), config.clone()));
                attempt
                    .map(|joined| joined.unwrap_or_else(|e| Err(e.to_string())))
                    .boxed()
                    .shared()
            })
            .clone();
        let connected = connecting.clone().await;
        if connected.is_err() {
            // The next listing tries again, unless another attempt already replaced this one.
            let mut clients = self.clients();
            if clients
                .get(&key)
                .is_some_and(|kept| kept.ptr_eq(&connecting))
            {
                clients.remove(&key);
            }
        }
        connected
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<String, Connecting>> {
        self.clients.lock().expect("not poisoned")
    }

    /// Drops every connection (`reload.mcp`): the next listing connects anew.
    pub fn forget_all(&self) {
        self.clients().clear();
    }

    /// Lists the tools of every configured server, with the connection that serves each and its
    /// name there. A server that cannot be reached is left out and reported, so one bad server
    /// does not take the others down.
    pub async fn list(&self, config: &HermesConfig) -> (Vec<Listed>, Vec<String>) {
        let mut tools = Vec::new();
        let mut problems = Vec::new();
        for (server, server_config) in &config.mcp_servers {
            // On failure, the connection that failed, if one was made.
            let listed = match self.client(server_config).await {
                Ok(client) => match client.list_tools().await {
                    Ok(tools) => Ok((client, tools)),
                    Err(e) => Err((Some(client), e.to_string())),
                },
                Err(e) => Err((None, e)),
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
                Err((failed, e)) => {
                    // A kept connection may be stale (the server restarted): forget it, and
                    // only it (another may have replaced it meanwhile).
                    if let Some(failed) = failed {
                        self.clients().retain(|_, kept| {
                            !matches!(kept.peek(), Some(Ok(client)) if Arc::ptr_eq(client, &failed))
                        });
                    }
                    problems.push(format!("MCP server `{server}`: {e}"));
                }
            }
        }
        (tools, problems)
    }
}

/// Opens a connection to the server `config` names, with its credentials.
async fn connect(http: reqwest::Client, config: McpServer) -> Result<Arc<McpClient>, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let name = HeaderName::try_from(name.as_str()).map_err(|e| e.to_string())?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|e| e.to_string())?;
        headers.insert(name, value);
    }
    let client = McpClient::connect(
        http,
        config.url.clone(),
        headers,
        config.connect_timeout.duration(),
        config.timeout.duration(),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(client))
}
