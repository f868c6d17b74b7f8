//! The tools an agent may call: the built-in `terminal` and `clarify`, and the tools of the MCP
//! servers in its home's config (named as Hermes names them: `mcp__<server>__<tool>`).
//!
//! Every result is a JSON document in text, as Hermes passes tool results to the model.

mod clarify;
mod mcp;
mod terminal;

use std::sync::Arc;
use std::time::{Duration, Instant};

use edith_mcp::McpClient;
use serde_json::{Value, json};

use crate::model::ToolSpec;
use crate::runtime::Runtime;
use crate::session::LiveSession;

pub use mcp::McpPool;

/// What a tool call needs from its turn: where to ask the user, and how to hear an interrupt.
pub struct TurnContext<'a> {
    pub runtime: &'a Runtime,
    pub session: &'a LiveSession,
}

/// What one call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// A JSON document, given to the model as the tool message.
    pub text: String,
    pub duration: Duration,
}

enum Handler {
    Terminal,
    Clarify,
    Mcp {
        client: Arc<McpClient>,
        remote_name: String,
    },
}

/// The tools available to one turn.
pub struct ToolBox {
    tools: Vec<(ToolSpec, Handler)>,
}

impl ToolBox {
    /// Built-ins plus the tools of every reachable MCP server; unreachable servers are left out
    /// and reported.
    pub async fn for_turn(
        runtime: &Runtime,
        config: &crate::config::HomeConfig,
    ) -> (Self, Vec<String>) {
        let mut tools = vec![
            (terminal::spec(), Handler::Terminal),
            (clarify::spec(), Handler::Clarify),
        ];
        let (listed, problems) = runtime.mcp.list(config).await;
        for (spec, client, remote_name) in listed {
            tools.push((
                spec,
                Handler::Mcp {
                    client,
                    remote_name,
                },
            ));
        }
        (Self { tools }, problems)
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    pub async fn call(&self, ctx: &TurnContext<'_>, name: &str, args: Value) -> ToolResult {
        let started = Instant::now();
        let value = match self.tools.iter().find(|(spec, _)| spec.name == name) {
            None => json!({"error": format!("unknown tool: {name}")}),
            Some((_, Handler::Terminal)) => terminal::call(ctx, &args).await,
            Some((_, Handler::Clarify)) => clarify::call(ctx, &args).await,
            Some((
                _,
                Handler::Mcp {
                    client,
                    remote_name,
                },
            )) => match client.call_tool(remote_name, args).await {
                Ok(output) if output.is_error => json!({"error": output.text}),
                Ok(output) => json!({"result": output.text}),
                Err(e) => json!({"error": e.to_string()}),
            },
        };
        ToolResult {
            text: crate::pyjson::to_string(&value),
            duration: started.elapsed(),
        }
    }
}
