//! Durable event logs: every turn and every job has one, numbered from 1.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{InstanceState, JobId, JobState, Timestamp, TurnAction, TurnId, TurnState};

/// Token accounting of a model call or a whole turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Tokens the model was sent (the prompts of every call).
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
    /// Model calls made.
    pub calls: u64,
}

/// One entry of a turn's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnEvent {
    /// Position in the log, from 1; the SSE `id`, and what `Last-Event-ID` resumes after.
    pub seq: u64,
    /// The turn whose log this is.
    pub turn_id: TurnId,
    /// When the control plane logged it.
    pub at: Timestamp,
    /// What happened.
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
    MessageDelta {
        /// The piece, to append to what came before.
        text: String,
    },
    /// The model called a tool.
    #[serde(rename = "tool.started")]
    ToolStarted {
        /// The call's id, which its `tool.completed` repeats.
        tool_call_id: String,
        /// The tool's name (a callback tool's as registered).
        name: String,
    },
    /// A tool call finished; `result` is what the model was given.
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        /// The call's id, as in its `tool.started`.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments the model called it with.
        args: Value,
        /// What the tool returned (or the error it reported).
        result: Value,
    },
    /// The assistant's message is complete.
    #[serde(rename = "message.completed")]
    MessageCompleted {
        /// The whole message.
        text: String,
        /// The turn's token usage, when the runtime reports it.
        usage: Option<Usage>,
    },
    /// The runtime asks the user to approve a command; answer with `turn_action`
    /// (`{"type": "approval", "choice": …}`). The turn is `requires_action` meanwhile.
    #[serde(rename = "approval.requested")]
    ApprovalRequested {
        /// The command the agent wants to run.
        command: String,
        /// Why it needs approval (`recursive or forced delete`, …).
        description: String,
        /// The rule it matched; approving `session` or `always` applies to this rule.
        pattern_key: String,
        /// The answers offered (`once`, `session`, `always`, `deny`).
        choices: Vec<String>,
    },
    /// The runtime asks the user a question; answer with `turn_action`
    /// (`{"type": "clarify", "request_id": …, "answer": …}`).
    #[serde(rename = "clarify.requested")]
    ClarifyRequested {
        /// What the answer names.
        request_id: String,
        /// The question.
        question: String,
        /// Answers offered; empty when the question is open.
        choices: Vec<String>,
    },
    /// A `turn_action` was delivered to the runtime.
    #[serde(rename = "action.answered")]
    ActionAnswered {
        /// The answer, as the application gave it.
        action: TurnAction,
    },
    /// The runtime reported an error.
    #[serde(rename = "error")]
    Error {
        /// What failed, in the runtime's words.
        message: String,
    },
    /// The turn reached a final state; always the last event.
    #[serde(rename = "turn.finished")]
    TurnFinished {
        /// The final state.
        state: TurnState,
        /// The assistant's final text (a completed or interrupted turn).
        output: Option<String>,
        /// Why the turn failed or was cancelled.
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
    /// Position in the log, from 1; what `Last-Event-ID` resumes after.
    pub seq: u64,
    /// The job whose log this is.
    pub job_id: JobId,
    /// When it was logged.
    pub at: Timestamp,
    /// What happened.
    #[serde(flatten)]
    pub kind: JobEventKind,
}

/// What happened in a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum JobEventKind {
    /// A step began.
    #[serde(rename = "step.started")]
    StepStarted {
        /// The step's name (`prepare_home`, `start_runtime`, …).
        step: String,
        /// Its place among the job's steps, from 1.
        index: u32,
        /// How many steps the job has.
        of: u32,
    },
    /// A step is done.
    #[serde(rename = "step.completed")]
    StepCompleted {
        /// The step's name.
        step: String,
        /// Its place among the job's steps, from 1.
        index: u32,
        /// How many steps the job has.
        of: u32,
    },
    /// The job reached a final state; always the last event.
    #[serde(rename = "job.finished")]
    JobFinished {
        /// The job's final state.
        state: JobState,
        /// The state the job left its instance in.
        instance_state: InstanceState,
        /// Why it failed (the step and the reason).
        error: Option<String>,
    },
}

impl JobEventKind {
    /// Whether this is the last event a job's log will ever get.
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
