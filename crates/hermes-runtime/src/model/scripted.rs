//! A deterministic offline model, for demos and tests.
//!
//! Its rules, in order:
//! 1. After a tool result, it answers `<tool> returned <result>.` (an MCP result's text).
//! 2. When the user's text names an available tool (by its full name or the part after the
//!    last `__`) followed by a JSON object, it calls that tool with that object.
//! 3. Otherwise it answers `You said: <text>`.
//!
//! Text is streamed a word at a time. Usage counts are a quarter of the characters, rounded up.
//!
//! One-shot calls: a title is the first words the user said; a summary lists what the user
//! said in the turns it is given.

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream};
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;

use super::{
    AuxTask, ChatMessage, Completion, Finish, Model, ModelError, ModelEvent, OneShot, Role,
    TokenUsage, ToolCall, ToolSpec,
};

#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedModel;

impl Model for ScriptedModel {
    fn stream(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> BoxStream<'static, Result<ModelEvent, ModelError>> {
        let input_chars: usize = messages.iter().map(|m| m.content.len()).sum();
        let mut events = Vec::new();
        let mut output_chars = 0;
        let reason = match reply(messages, tools) {
            Reply::Text(text) => {
                output_chars = text.len();
                events.extend(
                    split_words(&text)
                        .into_iter()
                        .map(|piece| ModelEvent::Delta(piece.to_owned())),
                );
                "stop"
            }
            Reply::Call(call) => {
                events.push(ModelEvent::ToolCall(call));
                "tool_calls"
            }
        };
        events.push(ModelEvent::Done(Finish {
            usage: Some(TokenUsage {
                input: input_chars.div_ceil(4) as u64,
                output: output_chars.div_ceil(4) as u64,
            }),
            reason: Some(reason.to_owned()),
        }));
        stream::iter(events.into_iter().map(Ok)).boxed()
    }

    fn complete(
        &self,
        messages: &[ChatMessage],
        settings: OneShot,
    ) -> BoxFuture<'static, Result<Completion, ModelError>> {
        let asked = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        let text = match settings.task {
            AuxTask::Title => title_of(asked),
            AuxTask::Summary => summary_of(asked),
        };
        let input: usize = messages.iter().map(|m| m.content.len()).sum();
        let usage = TokenUsage {
            input: input.div_ceil(4) as u64,
            output: text.len().div_ceil(4) as u64,
        };
        futures_util::future::ready(Ok(Completion { text, usage })).boxed()
    }
}

/// A title from a title request (`User: <text>\n\nAssistant: …`): the user's first six words.
fn title_of(request: &str) -> String {
    let user = request
        .strip_prefix("User: ")
        .and_then(|rest| rest.split("\n\nAssistant: ").next())
        .unwrap_or(request);
    user.split_whitespace()
        .take(6)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A summary from a summary request: a goal and what the user said, one line per turn (the
/// request lists the turns as `[USER]: …` lines).
fn summary_of(request: &str) -> String {
    let said: Vec<&str> = request
        .lines()
        .filter_map(|line| line.strip_prefix("[USER]: "))
        .collect();
    let mut summary = format!(
        "## Goal\n{}\n\n## Completed Actions\n",
        said.last().copied().unwrap_or("(none stated)")
    );
    for line in said {
        summary.push_str(&format!("- the user said: {line}\n"));
    }
    summary
}

enum Reply {
    Text(String),
    Call(ToolCall),
}

fn reply(messages: &[ChatMessage], tools: &[ToolSpec]) -> Reply {
    let Some(last) = messages.last() else {
        return Reply::Text("You said nothing.".to_owned());
    };
    if last.role == Role::Tool {
        let name = last.tool_name.as_deref().unwrap_or("the tool");
        return Reply::Text(format!(
            "{} returned {}.",
            short_name(name),
            unwrap_result(&last.content)
        ));
    }
    if let Some((tool, arguments)) = find_call(&last.content, tools) {
        let calls_so_far: usize = messages.iter().map(|m| m.tool_calls.len()).sum();
        return Reply::Call(ToolCall {
            id: format!("call_{}", calls_so_far + 1),
            name: tool.name.clone(),
            arguments,
        });
    }
    Reply::Text(format!("You said: {}", last.content))
}

/// An MCP result travels as `{"result": "<text>"}`, long ones fenced as untrusted data; the
/// model talks about the text.
fn unwrap_result(content: &str) -> String {
    let content = content
        .strip_prefix("<untrusted_tool_result")
        .and_then(|rest| rest.split_once("\n\n"))
        .and_then(|(_, body)| body.strip_suffix("\n</untrusted_tool_result>"))
        .unwrap_or(content);
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(map)) if map.len() == 1 => match map.get("result") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => content.to_owned(),
        },
        _ => content.to_owned(),
    }
}

/// `mcp__edith__word_count` → `word_count`.
fn short_name(name: &str) -> &str {
    name.rsplit("__").next().unwrap_or(name)
}

/// The first tool named in `text` and directly followed by a JSON object.
fn find_call<'t>(text: &str, tools: &'t [ToolSpec]) -> Option<(&'t ToolSpec, Value)> {
    tools.iter().find_map(|tool| {
        [tool.name.as_str(), short_name(&tool.name)]
            .into_iter()
            .find_map(|name| {
                text.match_indices(name).find_map(|(at, _)| {
                    let rest = text[at + name.len()..].trim_start();
                    if !rest.starts_with('{') {
                        return None;
                    }
                    let mut objects = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                    match objects.next() {
                        Some(Ok(args @ Value::Object(_))) => Some((tool, args)),
                        _ => None,
                    }
                })
            })
    })
}

/// Splits into pieces that concatenate back to `text`: each word with the spaces after it.
fn split_words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            while i < bytes.len() && bytes[i] == b' ' {
                i += 1;
            }
            pieces.push(&text[start..i]);
            start = i;
        } else {
            i += 1;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use serde_json::json;

    fn word_count() -> ToolSpec {
        ToolSpec {
            name: "mcp__edith__word_count".into(),
            description: "count words".into(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        }
    }

    /// The text of the `Delta` events, joined.
    fn streamed(events: &[ModelEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    async fn run(messages: &[ChatMessage], tools: &[ToolSpec]) -> Vec<ModelEvent> {
        ScriptedModel
            .stream(messages, tools)
            .map(|e| e.unwrap())
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_named_tool_with_json_arguments_is_called() {
        let events = run(
            &[ChatMessage::user(
                r#"Count with word_count {"text": "a b c"} please"#,
            )],
            &[word_count()],
        )
        .await;
        assert_eq!(
            events[0],
            ModelEvent::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "mcp__edith__word_count".into(),
                arguments: json!({"text": "a b c"}),
            })
        );
    }

    #[tokio::test]
    async fn without_a_tool_it_echoes_word_by_word() {
        let events = run(&[ChatMessage::user("hello  there")], &[]).await;
        let text: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, ["You ", "said: ", "hello  ", "there"]);
        assert!(matches!(events.last(), Some(ModelEvent::Done(_))));
    }

    #[tokio::test]
    async fn a_fenced_tool_result_is_reported_without_its_fence() {
        let fenced = crate::tools::for_model(
            "mcp__edith__word_count",
            r#"{"result": "a rather long result text, over the limit"}"#,
        );
        let mut result = ChatMessage::plain(Role::Tool, fenced);
        result.tool_name = Some("mcp__edith__word_count".into());
        let events = run(&[ChatMessage::user("x"), result], &[word_count()]).await;
        let text = streamed(&events);
        assert_eq!(
            text,
            "word_count returned a rather long result text, over the limit."
        );
    }

    #[tokio::test]
    async fn a_tool_result_is_reported() {
        let mut result = ChatMessage::plain(Role::Tool, r#"{"result": "3"}"#.into());
        result.tool_name = Some("mcp__edith__word_count".into());
        let events = run(&[ChatMessage::user("x"), result], &[word_count()]).await;
        let text = streamed(&events);
        assert_eq!(text, "word_count returned 3.");
    }
}
