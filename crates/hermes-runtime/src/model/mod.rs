//! Models the agent loop can drive. A model turns the conversation so far, and the tools it may
//! call, into a stream of text pieces and tool calls.

mod openai;
mod scripted;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
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

/// The conversation as a model is sent it: adjacent user messages (a prompt left unanswered by
/// an interrupt or a failed call, then the next one) merged into one, their texts a blank line
/// apart, as Hermes 0.19 repairs a history before each call (`repair_message_sequence`:
/// providers expect the roles to alternate). The history itself keeps both.
pub fn as_sent(history: &[ChatMessage]) -> Cow<'_, [ChatMessage]> {
    let users_adjacent =
        (history.windows(2)).any(|pair| pair[0].role == Role::User && pair[1].role == Role::User);
    if !users_adjacent {
        return Cow::Borrowed(history);
    }
    let mut sent: Vec<ChatMessage> = Vec::with_capacity(history.len());
    for message in history {
        match sent.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                last.content.push_str("\n\n");
                last.content.push_str(&message.content);
            }
            _ => sent.push(message.clone()),
        }
    }
    Cow::Owned(sent)
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
    /// On an assistant message: why the model stopped (`stop`, `tool_calls`, `length` …).
    pub finish_reason: Option<String>,
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
            finish_reason: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A tool as the model is told about it. Every model call of a turn is told of every tool, so
/// the schema is shared, not copied.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Arc<Value>,
}

impl ToolSpec {
    /// The tool in OpenAI's chat format.
    pub fn to_openai(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": &*self.parameters,
        }})
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
}

/// How a streamed model call ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finish {
    /// What the call cost, when the endpoint said.
    pub usage: Option<TokenUsage>,
    /// Why the model stopped, when the endpoint said.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Delta(String),
    ToolCall(ToolCall),
    /// Always last on success.
    Done(Finish),
}

/// A model call that failed: what went wrong, and whether another attempt may help.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// What the client is told (`HTTP 503: overloaded`, `model endpoint unreachable: …`).
    pub message: String,
    /// The endpoint's HTTP status, when it answered with an error.
    pub status: Option<u16>,
    /// Another attempt may succeed: the endpoint could not be reached or timed out, was rate
    /// limited (429) or failed on its side (5xx, 408), as Hermes classifies errors.
    pub transient: bool,
    /// How long the endpoint asked us to wait before trying again (`Retry-After`).
    pub retry_after: Option<Duration>,
}

impl ModelError {
    /// A failure that another attempt would not mend (a bad configuration, a refused request).
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: None,
            transient: false,
            retry_after: None,
        }
    }

    /// The endpoint could not be reached, or the connection broke before an answer.
    pub fn unreachable(message: impl Into<String>) -> Self {
        Self {
            transient: true,
            ..Self::fatal(message)
        }
    }

    /// The endpoint answered `status` with `detail`.
    pub fn http(status: u16, detail: &str, retry_after: Option<Duration>) -> Self {
        Self {
            message: format!("HTTP {status}: {detail}"),
            status: Some(status),
            transient: matches!(status, 408 | 429) || status >= 500,
            retry_after,
        }
    }

    /// The endpoint said it is rate limiting us.
    pub fn rate_limited(&self) -> bool {
        self.status == Some(429)
    }
}

/// What a one-shot (not streamed) call is for. Endpoints are sent the same request either way;
/// the offline scripted model answers each task in its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxTask {
    /// A session's title, from its first exchange.
    Title,
    /// A summary of earlier turns, for compressing a session's context.
    Summary,
}

/// A one-shot call's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneShot {
    pub task: AuxTask,
    /// Sent when set; the endpoint's default otherwise.
    pub temperature: Option<f64>,
}

/// The answer of a one-shot call.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub usage: TokenUsage,
}

pub trait Model: Send + Sync {
    /// The agent loop's call: the reply streamed, text and tool calls.
    fn stream(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> BoxStream<'static, Result<ModelEvent, ModelError>>;

    /// An auxiliary call without tools, answered whole (a title, a summary).
    fn complete(
        &self,
        messages: &[ChatMessage],
        settings: OneShot,
    ) -> BoxFuture<'static, Result<Completion, ModelError>>;
}

/// A model's answer without its `<think>…</think>` (and `<reasoning>…</reasoning>`) blocks;
/// an unclosed block hides the rest.
pub fn without_reasoning(text: &str) -> String {
    let mut rest = text;
    let mut kept = String::new();
    loop {
        let opening = ["<think>", "<reasoning>"]
            .iter()
            .filter_map(|tag| rest.find(tag).map(|at| (at, *tag)))
            .min();
        let Some((at, tag)) = opening else {
            kept.push_str(rest);
            return kept;
        };
        kept.push_str(&rest[..at]);
        let closing = tag.replacen('<', "</", 1);
        match rest[at..].find(&closing) {
            Some(end) => rest = &rest[at + end + closing.len()..],
            None => return kept,
        }
    }
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
        (Some(other), None) => Err(ModelError::fatal(format!(
            "model provider `{other}` needs a `base_url` (an OpenAI-compatible endpoint)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(messages: &[ChatMessage]) -> Vec<(Role, &str)> {
        (messages.iter())
            .map(|m| (m.role, m.content.as_str()))
            .collect()
    }

    #[test]
    fn adjacent_user_messages_are_sent_as_one() {
        let answered = [
            ChatMessage::plain(Role::System, "sys".to_owned()),
            ChatMessage::user("hello"),
            ChatMessage::plain(Role::Assistant, "hi".to_owned()),
            ChatMessage::user("and you"),
        ];
        assert!(matches!(as_sent(&answered), Cow::Borrowed(_)));
        // A prompt an interrupt left unanswered, then two more.
        let mut unanswered = answered.to_vec();
        unanswered.push(ChatMessage::user("still there"));
        unanswered.push(ChatMessage::user("?"));
        assert_eq!(
            texts(&as_sent(&unanswered)),
            [
                (Role::System, "sys"),
                (Role::User, "hello"),
                (Role::Assistant, "hi"),
                (Role::User, "and you\n\nstill there\n\n?"),
            ]
        );
    }
}
