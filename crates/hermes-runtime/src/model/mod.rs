//! Models the agent loop can drive. A model turns the conversation so far, and the tools it may
//! call, into a stream of text pieces and tool calls.

mod openai;
mod scripted;

use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use openai::OpenAiModel;
pub use scripted::ScriptedModel;

use hermes_native::config::{HermesConfig, SCRIPTED};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of the conversation, in the shape chat-completions models take.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// Calls made by an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// On a tool message: which call it answers, and the tool's name.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
}

impl ChatMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self::plain(Role::User, text.into())
    }

    /// The message in OpenAI's chat format (what a model endpoint is sent, and what Hermes
    /// saves a conversation as).
    pub fn to_openai(&self) -> Value {
        let mut wire = json!({"role": self.role.as_str(), "content": self.content});
        if self.role == Role::Assistant && !self.tool_calls.is_empty() {
            wire["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function", "function": {
                        "name": c.name, "arguments": c.arguments.to_string(),
                    }})
                })
                .collect();
        }
        if let Some(id) = &self.tool_call_id {
            wire["tool_call_id"] = json!(id);
        }
        wire
    }

    pub fn plain(role: Role, content: String) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolSpec {
    /// The tool in OpenAI's chat format.
    pub fn to_openai(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters,
        }})
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Delta(String),
    ToolCall(ToolCall),
    /// Always last on success.
    Done(TokenUsage),
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

pub trait Model: Send + Sync {
    fn stream(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> BoxStream<'static, Result<ModelEvent, ModelError>>;
}

/// The model a home's config asks for: `scripted` (also when there is no `model:` section),
/// or any OpenAI-compatible endpoint given by `base_url` (Hermes's `custom` provider).
pub fn from_config(
    config: &HermesConfig,
    http: &reqwest::Client,
) -> Result<Box<dyn Model>, ModelError> {
    let section = &config.model;
    match (section.provider.as_deref(), section.base_url.as_deref()) {
        (None, None) => Ok(Box::new(ScriptedModel)),
        (Some(provider), None) if provider == SCRIPTED => Ok(Box::new(ScriptedModel)),
        (_, Some(base_url)) => Ok(Box::new(OpenAiModel::new(
            http.clone(),
            base_url,
            section.api_key.clone(),
            config.model_name(),
        ))),
        (Some(other), None) => Err(ModelError(format!(
            "model provider `{other}` needs a `base_url` (an OpenAI-compatible endpoint)"
        ))),
    }
}
