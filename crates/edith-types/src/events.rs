//! Durable event logs: every turn and every job has one, numbered from 1.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{InstanceState, JobId, JobState, Timestamp, TurnAction, TurnId, TurnState};

/// Token accounting of a model call or a whole turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Model calls made.
    pub calls: u64,
}

/// One entry of a turn's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnEvent {
    /// Position in the log, from 1; the SSE `id`, and what `Last-Event-ID` resumes after.
    pub seq: u64,
    pub turn_id: TurnId,
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: TurnEventKind,
}

/// What happened in a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum TurnEventKind {
    /// The runtime accepted the input.
    #[serde(rename = "turn.started")]
    TurnStarted,
    /// The assistant began a message.
    #[serde(rename = "message.started")]
    MessageStarted,
    /// A piece of the assistant's text.
    #[serde(rename = "message.delta")]
    MessageDelta { text: String },
    /// The model called a tool.
    #[serde(rename = "tool.started")]
    ToolStarted { tool_call_id: String, name: String },
    /// A tool call finished; `result` is what the model was given.
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        tool_call_id: String,
        name: String,
        args: Value,
        result: Value,
    },
    /// The assistant's message is complete.
    #[serde(rename = "message.completed")]
    MessageCompleted { text: String, usage: Option<Usage> },
    /// The runtime asks the user to approve a command; answer with `turn_action`
    /// (`{"type": "approval", "choice": …}`). The turn is `requires_action` meanwhile.
    #[serde(rename = "approval.requested")]
    ApprovalRequested {
        command: String,
        description: String,
        pattern_key: String,
        choices: Vec<String>,
    },
    /// The runtime asks the user a question; answer with `turn_action`
    /// (`{"type": "clarify", "request_id": …, "answer": …}`).
    #[serde(rename = "clarify.requested")]
    ClarifyRequested {
        request_id: String,
        question: String,
        choices: Vec<String>,
    },
    /// A `turn_action` was delivered to the runtime.
    #[serde(rename = "action.answered")]
    ActionAnswered { action: TurnAction },
    /// The runtime reported an error.
    #[serde(rename = "error")]
    Error { message: String },
    /// The turn reached a final state; always the last event.
    #[serde(rename = "turn.finished")]
    TurnFinished {
        state: TurnState,
        output: Option<String>,
        error: Option<String>,
    },
}

impl TurnEventKind {
    /// Whether this is the last event a turn's log will ever get.
    pub fn is_final(&self) -> bool {
        matches!(self, TurnEventKind::TurnFinished { .. })
    }
}

/// One entry of a job's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobEvent {
    pub seq: u64,
    pub job_id: JobId,
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: JobEventKind,
}

/// What happened in a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum JobEventKind {
    #[serde(rename = "step.started")]
    StepStarted { step: String, index: u32, of: u32 },
    #[serde(rename = "step.completed")]
    StepCompleted { step: String, index: u32, of: u32 },
    /// The job reached a final state; always the last event.
    #[serde(rename = "job.finished")]
    JobFinished {
        state: JobState,
        instance_state: InstanceState,
        error: Option<String>,
    },
}

impl JobEventKind {
    pub fn is_final(&self) -> bool {
        matches!(self, JobEventKind::JobFinished { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_events_are_flat_objects_tagged_by_type() {
        let event = TurnEvent {
            seq: 3,
            turn_id: TurnId::generate(),
            at: Timestamp::now(),
            kind: TurnEventKind::MessageDelta { text: "hi".into() },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "message.delta");
        assert_eq!(json["text"], "hi");
        assert_eq!(json["seq"], 3);
        assert_eq!(serde_json::from_value::<TurnEvent>(json).unwrap(), event);
    }
}
