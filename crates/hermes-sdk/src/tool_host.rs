//! `ToolHost`: serves callback tools over MCP (Streamable HTTP) on a socket the control plane
//! can reach, guarded by a secret the control plane presents.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use edith_mcp::server::{ToolCallError, ToolService, bearer_matches, handle_post};
use edith_mcp::{ToolDescriptor, ToolOutput};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::tool::Tool;

/// A running tool host. Stop it with [`ToolHost::shutdown`] (dropping it stops it too).
pub struct ToolHost {
    url: String,
    secret: String,
    tools: Arc<Registry>,
    stop: tokio::sync::watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHost")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

struct Registry {
    secret: String,
    tools: RwLock<BTreeMap<String, Tool>>,
}

impl Registry {
    fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.tools
            .read()
            .expect("not poisoned")
            .values()
            .map(|tool| ToolDescriptor {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
            })
            .collect()
    }
}

impl ToolService for Registry {
    async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
        Ok(self.descriptors())
    }

    async fn call_tool(&self, name: &str, args: Value) -> Result<ToolOutput, ToolCallError> {
        let tool = self
            .tools
            .read()
            .expect("not poisoned")
            .get(name)
            .cloned()
            .ok_or_else(|| ToolCallError::UnknownTool(name.to_owned()))?;
        Ok(match (tool.handler)(args).await {
            Ok(value) => ToolOutput::value(value),
            Err(message) => ToolOutput::error(message),
        })
    }
}

impl ToolHost {
    /// Serves on `listen` (port 0 lets the OS pick) with a fresh random secret.
    pub async fn serve(listen: SocketAddr) -> Result<Self> {
        let secret = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let tools = Arc::new(Registry {
            secret: secret.clone(),
            tools: RwLock::new(BTreeMap::new()),
        });
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| Error::Local(format!("tool host cannot listen on {listen}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Local(e.to_string()))?;
        let app = Router::new()
            .route("/mcp", post(mcp).get(no_stream))
            .with_state(tools.clone());
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopping.wait_for(|stop| *stop).await;
            };
            if let Err(e) = axum::serve(listener.tap_io(no_delay), app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(error = %e, "tool host failed");
            }
        });
        Ok(Self {
            url: format!("http://{addr}/mcp"),
            secret,
            tools,
            stop,
            server: Some(server),
        })
    }

    /// The MCP endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What callers must present as `Authorization: Bearer <secret>`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Serves `tool` (replacing one with the same name).
    pub fn add(&self, tool: Tool) {
        self.tools
            .tools
            .write()
            .expect("not poisoned")
            .insert(tool.name.clone(), tool);
    }

    /// The tools it serves now, as the control plane registers them.
    pub(crate) fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.tools.descriptors()
    }

    /// Stops serving; calls in flight finish first.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for ToolHost {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn mcp(State(tools): State<Arc<Registry>>, headers: HeaderMap, body: Bytes) -> Response {
    if !bearer_matches(&headers, &tools.secret) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    handle_post(tools.as_ref(), &body).await
}

async fn no_stream() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// Small frames (stream pieces) go out at once instead of waiting on Nagle's algorithm.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}
