//! Any OpenAI-compatible `/v1/chat/completions` endpoint: streamed text, streamed tool calls
//! (assembled from their deltas), and usage (`stream_options.include_usage`).

use eventsource_stream::Eventsource;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream};
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::{
    ChatMessage, Completion, Finish, Model, ModelError, ModelEvent, OneShot, TokenUsage, ToolCall,
    ToolSpec,
};

/// A model behind an OpenAI-compatible endpoint.
pub struct OpenAiModel {
    http: reqwest::Client,
    /// `.../v1`, without the trailing slash.
    base_url: String,
    api_key: Option<String>,
    model: String,
}

impl OpenAiModel {
    /// `http` is shared by the runtime, so connections to the endpoint are kept across turns.
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
        model: String,
    ) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model,
        }
    }

    fn body(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> Value {
        let messages: Vec<Value> = messages.iter().map(ChatMessage::to_openai).collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            body["tools"] = tools.iter().map(ToolSpec::to_openai).collect();
        }
        body
    }

    /// A POST to the endpoint's chat completions, with the key when there is one.
    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        let request = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .json(body);
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }
}

/// Sends a request; an answer that is not a success becomes the endpoint's error, classified.
async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, ModelError> {
    let response = request
        .send()
        .await
        .map_err(|e| ModelError::unreachable(format!("model endpoint unreachable: {e}")))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    // As Hermes, only a rate limit's `Retry-After` is waited for.
    let retry_after = (status.as_u16() == 429)
        .then(|| retry_after(response.headers()))
        .flatten();
    let text = response.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or(text);
    Err(ModelError::http(
        status.as_u16(),
        &summary(&detail),
        retry_after,
    ))
}

/// What the client is told of an error body, as Hermes summarizes it: an HTML page (a proxy's
/// error page) by its title, anything else cut to 300 characters.
fn summary(detail: &str) -> String {
    let lowered = detail.to_ascii_lowercase();
    if lowered.contains("<!doctype") || lowered.contains("<html") {
        let title = lowered
            .find("<title")
            .and_then(|open| Some(open + lowered[open..].find('>')? + 1))
            .and_then(|start| Some((start, start + lowered[start..].find("</title>")?)))
            .map(|(start, end)| detail[start..end].trim().to_owned())
            .filter(|title| !title.is_empty());
        return title.unwrap_or_else(|| "HTML error page (title not found)".to_owned());
    }
    detail.chars().take(300).collect()
}

/// `Retry-After` in seconds, as Hermes reads it (at most 10 minutes; a date is ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<std::time::Duration> {
    let seconds: f64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (seconds.is_finite() && seconds > 0.0)
        .then(|| std::time::Duration::from_secs_f64(seconds.min(600.0)))
}

/// Tool calls as their deltas arrive: by index, id and name once, arguments in pieces.
#[derive(Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

/// The decoded events of the response body (SSE framing and UTF-8 by `eventsource-stream`, so
/// a character split across network chunks arrives whole).
type SseBody = eventsource_stream::EventStream<BoxStream<'static, reqwest::Result<bytes::Bytes>>>;

struct Reading {
    body: SseBody,
    calls: BTreeMap<u64, PendingCall>,
    usage: Option<TokenUsage>,
    finish_reason: Option<String>,
    queued: std::collections::VecDeque<ModelEvent>,
    finished: bool,
}

impl Model for OpenAiModel {
    fn stream(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> BoxStream<'static, Result<ModelEvent, ModelError>> {
        let request = self.request(&self.body(messages, tools));
        let opened = async move {
            let response = send(request).await?;
            Ok(Reading {
                body: response.bytes_stream().boxed().eventsource(),
                calls: BTreeMap::new(),
                usage: None,
                finish_reason: None,
                queued: Default::default(),
                finished: false,
            })
        };
        stream::once(opened)
            .flat_map(|opened| match opened {
                Err(e) => stream::once(async move { Err(e) }).boxed(),
                Ok(reading) => read_events(reading).boxed(),
            })
            .boxed()
    }

    fn complete(
        &self,
        messages: &[ChatMessage],
        settings: OneShot,
    ) -> BoxFuture<'static, Result<Completion, ModelError>> {
        let messages: Vec<Value> = messages.iter().map(ChatMessage::to_openai).collect();
        let mut body = json!({"model": self.model, "messages": messages});
        if let Some(temperature) = settings.temperature {
            body["temperature"] = json!(temperature);
        }
        let request = self.request(&body);
        async move {
            let reply: Value =
                send(request).await?.json().await.map_err(|e| {
                    ModelError::unreachable(format!("unreadable model answer: {e}"))
                })?;
            let text = reply["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let usage = &reply["usage"];
            Ok(Completion {
                text,
                usage: TokenUsage {
                    input: usage["prompt_tokens"].as_u64().unwrap_or_default(),
                    output: usage["completion_tokens"].as_u64().unwrap_or_default(),
                },
            })
        }
        .boxed()
    }
}

fn read_events(
    reading: Reading,
) -> impl futures_util::Stream<Item = Result<ModelEvent, ModelError>> {
    stream::unfold(reading, |mut r| async move {
        loop {
            if let Some(event) = r.queued.pop_front() {
                return Some((Ok(event), r));
            }
            if r.finished {
                return None;
            }
            match r.body.next().await {
                Some(Ok(event)) => {
                    if let Err(e) = r.data(event.data.trim()) {
                        r.finished = true;
                        return Some((Err(e), r));
                    }
                }
                Some(Err(e)) => {
                    r.finished = true;
                    return Some((
                        Err(ModelError::unreachable(format!("model stream broke: {e}"))),
                        r,
                    ));
                }
                None => r.finish(),
            }
        }
    })
}

impl Reading {
    /// One event's `data`: a chunk of the completion, or `[DONE]`.
    fn data(&mut self, data: &str) -> Result<(), ModelError> {
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.finish();
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::fatal(format!("unreadable stream chunk: {e}")))?;
        if let Some(message) = chunk["error"]["message"].as_str() {
            return Err(ModelError::fatal(message));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(TokenUsage {
                input: usage["prompt_tokens"].as_u64().unwrap_or_default(),
                output: usage["completion_tokens"].as_u64().unwrap_or_default(),
            });
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(());
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.queued.push_back(ModelEvent::Delta(text.to_owned()));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let pending = self
                .calls
                .entry(call["index"].as_u64().unwrap_or_default())
                .or_default();
            if let Some(id) = call["id"].as_str() {
                pending.id = id.to_owned();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                pending.name.push_str(name);
            }
            if let Some(arguments) = call["function"]["arguments"].as_str() {
                pending.arguments.push_str(arguments);
            }
        }
        Ok(())
    }

    /// The stream is over: the assembled tool calls, then the usage.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for (index, call) in std::mem::take(&mut self.calls) {
            let arguments = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| json!({"_unparsed_arguments": call.arguments}))
            };
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            self.queued.push_back(ModelEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments,
            }));
        }
        self.queued.push_back(ModelEvent::Done(Finish {
            usage: self.usage,
            reason: self.finish_reason.take(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{FakeModel, FakeModelOptions};

    #[test]
    fn error_bodies_are_summarized_as_hermes_summarizes_them() {
        let page = "<!DOCTYPE html><html><head><title> 502 Bad Gateway </title></head></html>";
        assert_eq!(summary(page), "502 Bad Gateway");
        assert_eq!(
            summary("<html><body>no title</body></html>"),
            "HTML error page (title not found)"
        );
        assert_eq!(summary(&"é".repeat(500)).chars().count(), 300);
        assert_eq!(summary("overloaded"), "overloaded");
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_arrives_whole() {
        let fake = FakeModel::start_with(FakeModelOptions {
            split_characters: true,
            ..Default::default()
        })
        .await;
        let model = OpenAiModel::new(
            reqwest::Client::new(),
            fake.base_url(),
            None,
            "fake-model".to_owned(),
        );
        let said = "héllo wörld ✓ 🦀";
        let events: Vec<ModelEvent> = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            model
                .stream(&[ChatMessage::user(said.to_owned())], &[])
                .map(|e| e.expect("no stream error"))
                .collect(),
        )
        .await
        .expect("the stream ends");
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(piece) => Some(piece.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, format!("You said: {said}"));
    }
}
