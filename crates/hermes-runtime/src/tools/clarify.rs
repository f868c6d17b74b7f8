//! `clarify`: asks the user a question (`clarify.request`) and waits for `clarify.respond`.

use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};

use super::TurnContext;
use crate::model::ToolSpec;
use crate::prompts::CLARIFY_TIMEOUT;
use hermes_native::NativeEvent;
use hermes_native::events::ClarifyRequest;

pub fn spec() -> ToolSpec {
    static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
        name: "clarify".to_owned(),
        description: "Ask the user a clarifying question and wait for the answer.".to_owned(),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question to ask."},
                "choices": {"type": "array", "items": {"type": "string"},
                            "description": "Answers to offer, if any."},
            },
            "required": ["question"],
        })),
    });
    SPEC.clone()
}

pub async fn call(ctx: &TurnContext<'_>, args: &Value) -> Value {
    let Some(question) = args["question"].as_str() else {
        return json!({"error": "`question` is required"});
    };
    let choices = args.get("choices").cloned().unwrap_or(Value::Null);
    let prompts = &ctx.runtime.prompts;
    let (request_id, answer) = prompts.question(&ctx.session.sid);
    ctx.session
        .emit(NativeEvent::ClarifyRequest(ClarifyRequest {
            question: question.to_owned(),
            choices: offered(&choices),
            request_id: request_id.clone(),
        }));
    let user_response = match tokio::time::timeout(CLARIFY_TIMEOUT, answer).await {
        Ok(Ok(answer)) => answer,
        // Released by an interrupt, or nobody answered in time.
        Ok(Err(_)) | Err(_) => {
            prompts.forget_question(&request_id);
            String::new()
        }
    };
    json!({"question": question, "choices_offered": choices, "user_response": user_response})
}

/// The answers a question offers: the strings of `choices`, or none when it is not a list.
fn offered(choices: &Value) -> Option<Vec<String>> {
    choices.as_array().map(|items| {
        items
            .iter()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect()
    })
}
