//! The control plane's resources and the bodies that create them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rules;
use crate::{
    InstanceId, JobId, NativeSessionId, ProfileId, SessionId, Timestamp, ToolHostId, ToolId,
    TurnId, Usage,
};

/// Which runtime provider runs an instance.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProviderKind {
    /// The project's own Hermes-compatible runtime, inside the control-plane process.
    Embedded,
    /// A runtime command the operator configured (`edith serve --runtime NAME=COMMAND`, or the
    /// built-in `hermes-runtime`), run as a child process in the instance's own home.
    Process,
    /// A runtime someone else runs, reached at `url` with `token`: the control plane never
    /// starts, stops or deletes anything on it, and deleting the instance forgets it.
    External,
    /// Our runtime in-process, with the faults the instance asks for (`sim`): for testing the
    /// control plane itself. Offered only when the operator enables it.
    Sim,
}

impl ProviderKind {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Lifecycle of an instance.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum InstanceState {
    /// Its provisioning job runs.
    Provisioning,
    /// Its runtime takes sessions and turns.
    Ready,
    /// Its runtime is being stopped.
    Stopping,
    /// Its runtime is stopped.
    Stopped,
    /// Provisioning or deletion failed; `state_reason` says which step and why.
    Failed,
    /// The runtime died; `state_reason` says how.
    Lost,
    /// Its deletion job runs.
    Deleting,
    /// Gone: only kept so that its id is not reused.
    Deleted,
}

impl InstanceState {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The state named `value`, if there is one.
    pub fn parse(value: &str) -> Option<Self> {
        value.parse().ok()
    }
}

/// One Hermes runtime managed by the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Instance {
    /// Its id (`inst_…`), which routes to it.
    pub id: InstanceId,
    /// Display name; never used for routing.
    pub name: String,
    /// What runs its runtime.
    pub provider: ProviderKind,
    /// For `process` instances: the name of the runtime they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// For `external` instances: where the runtime is (its token is never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Where it is in its lifecycle.
    pub state: InstanceState,
    /// Why the instance is in its state, when that is not obvious (`failed`, `lost`, or a
    /// runtime restarted after it exited).
    pub state_reason: Option<String>,
    /// What the control plane does when the instance's runtime exits on its own.
    #[serde(default)]
    pub restart_policy: RestartPolicy,
    /// With `on_failure`: how many restarts in a row are tried before the instance stays `lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
    /// For `sim` instances: the faults they simulate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimFaults>,
    /// The caller's labels, to find instances by (`instance_list?label=key=value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Restarts in a row so far: set back to 0 once a restarted runtime has run for 10 minutes.
    #[serde(default)]
    pub restarts: u32,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// Body of `instance_create`. Which fields go with which provider is part of the contract
/// (`allOf` below): `url` and `token` with `external` only, `runtime` with `process` only,
/// `sim` with `sim` only, `on_failure` with `process` or `sim`, `max_restarts` with
/// `on_failure` only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {
        "if": {"required": ["provider"], "properties": {"provider": {"const": "external"}}},
        "then": {
            "required": ["url", "token"],
            "properties": {"url": {"type": "string"}, "token": {"type": "string"}},
        },
        "else": {"properties": {"url": {"type": "null"}, "token": {"type": "null"}}},
    },
    {
        "if": {"required": ["provider"], "properties": {"provider": {"const": "process"}}},
        "then": {"required": ["runtime"], "properties": {"runtime": {"type": "string"}}},
        "else": {"properties": {"runtime": {"type": "null"}}},
    },
    {
        "if": {"required": ["provider"], "properties": {"provider": {"const": "sim"}}},
        "else": {"properties": {"sim": {"type": "null"}}},
    },
    {
        "if": {
            "required": ["restart_policy"],
            "properties": {"restart_policy": {"const": "on_failure"}},
        },
        "then": {
            "required": ["provider"],
            "properties": {"provider": {"enum": ["process", "sim"]}},
        },
        "else": {"properties": {"max_restarts": {"type": "null"}}},
    },
]))]
pub struct CreateInstance {
    /// Display name (1 to 128 characters, not all blank).
    #[schemars(length(min = 1, max = rules::NAME_MAX_CHARS), pattern(rules::NOT_BLANK))]
    pub name: String,
    /// Runtime provider; `embedded` when absent.
    #[serde(default = "default_provider")]
    pub provider: ProviderKind,
    /// For `process`: which of the operator's runtimes to run (see `runtime_list`).
    #[serde(default)]
    pub runtime: Option<String>,
    /// For `external`: the runtime's base URL, `http://HOST:PORT`, e.g. `http://10.0.0.5:9119`.
    #[serde(default)]
    #[schemars(pattern(rules::EXTERNAL_URL))]
    pub url: Option<String>,
    /// For `external`: its `HERMES_DASHBOARD_SESSION_TOKEN` (at least 8 characters). Kept by
    /// the control plane, never returned.
    #[serde(default)]
    #[schemars(length(min = rules::EXTERNAL_TOKEN_MIN_CHARS))]
    pub token: Option<String>,
    /// What to do when the runtime exits on its own; `never` when absent. `on_failure` is for
    /// `process` instances (the only runtimes the control plane starts that can die alone).
    #[serde(default)]
    pub restart_policy: RestartPolicy,
    /// With `on_failure`: restarts in a row before giving up (1 to 100; 3 when absent).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub max_restarts: Option<u32>,
    /// For `sim`: the faults to simulate.
    #[serde(default)]
    pub sim: Option<SimFaults>,
    /// Labels to find the instance by: up to 32; keys of 1 to 63 lowercase letters, digits,
    /// `.`, `_`, `-` or `/`, starting with a letter or digit; values up to 256 characters.
    #[serde(default)]
    #[schemars(extend(
        "maxProperties" = rules::LABELS_MAX,
        "propertyNames" = {"pattern": rules::LABEL_KEY},
        "additionalProperties" = {"type": "string", "maxLength": rules::LABEL_VALUE_MAX_CHARS},
    ))]
    pub labels: BTreeMap<String, String>,
}

impl CreateInstance {
    /// An `embedded` instance named `name`, with nothing else set.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            provider: ProviderKind::Embedded,
            runtime: None,
            url: None,
            token: None,
            restart_policy: RestartPolicy::Never,
            max_restarts: None,
            sim: None,
            labels: BTreeMap::new(),
        }
    }
}

/// Query of `instance_list`: only the instances that match every filter given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceFilter {
    /// Only instances in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InstanceState>,
    /// Only instances with this label, as `key=value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(rules::LABEL_FILTER))]
    pub label: Option<String>,
}

/// Query of `turn_list`: only the turns that match every filter given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnFilter {
    /// Only turns in this state (e.g. `requires_action`: the ones waiting for an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TurnState>,
}

/// Faults a `sim` instance simulates, to test how the control plane copes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimFaults {
    /// A job step (e.g. `start_runtime`) that fails the first time it runs, after it did its
    /// work (so there is something to undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_step: Option<String>,
    /// Every job step runs twice (each must be idempotent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat_steps: bool,
    /// How long the runtime takes to start, in milliseconds (at most 60,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = rules::SIM_START_DELAY_MAX_MS))]
    pub start_delay_ms: Option<u64>,
    /// The runtime exits on its own this long after it started, in milliseconds (at most a
    /// day, 86,400,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = rules::SIM_EXIT_AFTER_MAX_MS))]
    pub exit_after_ms: Option<u64>,
    /// The runtime's gateway drops each connection this long after the first prompt sent on it,
    /// in milliseconds (at most a day, 86,400,000); the runtime itself goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = rules::SIM_DROP_CONNECTION_AFTER_MAX_MS))]
    pub drop_connection_after_ms: Option<u64>,
}

/// What the control plane does when an instance's runtime exits on its own.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RestartPolicy {
    /// The instance stays `lost` until it is deleted.
    #[default]
    Never,
    /// The instance is `lost` until its runtime is started again, after a pause that doubles
    /// with each restart in a row (1 s, 2 s, 4 s … at most 30 s), up to `max_restarts` in a row.
    OnFailure,
}

/// What this control plane offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Capabilities {
    /// The control plane's version.
    pub version: String,
    /// The providers instances can be created with.
    pub providers: Vec<ProviderKind>,
    /// The runtimes `process` instances can run.
    pub runtimes: Vec<String>,
    /// The Hermes release whose native catalog is pinned (`native_call` checks against it).
    pub native_catalog: String,
}

/// What an instance's runtime offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceCapabilities {
    /// Which runtime it is: ours (`hermes-runtime <version>`, as it says when connected) or
    /// `hermes` (a runtime that does not say, taken for Hermes itself).
    pub runtime: String,
    /// The native methods of the pinned catalog it implements; any other is `unsupported`.
    pub native_methods: Vec<String>,
}

/// A runtime command the operator allows `process` instances to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeInfo {
    /// What `instance_create` names it by.
    pub name: String,
    /// The program it runs.
    pub program: String,
    /// The first line of its `--version`, when it gave one in time.
    pub version: Option<String>,
}

/// The last lines a runtime wrote (stdout and stderr).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeLog {
    /// Oldest first.
    pub lines: Vec<String>,
}

fn default_provider() -> ProviderKind {
    ProviderKind::Embedded
}

/// Reply of `instance_create` and `instance_delete`: the instance and the job that moves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceWithJob {
    /// The instance, as the job found it.
    pub instance: Instance,
    /// The job; follow it with `job_events`.
    pub job: Job,
}

/// Lifecycle of a provisioning job.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum JobState {
    /// Waiting for a runner.
    Queued,
    /// A runner holds its lease and works through its steps.
    Running,
    /// Every step is done.
    Succeeded,
    /// A step failed; what it had made was undone where it could be.
    Failed,
    /// Stopped before its end.
    Cancelled,
}

impl JobState {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The state named `value`, if there is one.
    pub fn parse(value: &str) -> Option<Self> {
        value.parse().ok()
    }

    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }
}

/// What a job does.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum JobKind {
    /// Makes an instance's home, starts its runtime and connects to its gateway.
    #[serde(rename = "instance.provision")]
    #[strum(serialize = "instance.provision")]
    InstanceProvision,
    /// Disconnects, destroys the runtime and removes the instance's records.
    #[serde(rename = "instance.delete")]
    #[strum(serialize = "instance.delete")]
    InstanceDelete,
}

impl JobKind {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind named `value`, if there is one.
    pub fn parse(value: &str) -> Option<Self> {
        value.parse().ok()
    }
}

/// A durable job that moves an instance between states, step by step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Job {
    /// Its id (`job_…`).
    pub id: JobId,
    /// The instance it moves.
    pub instance_id: InstanceId,
    /// What it does.
    pub kind: JobKind,
    /// Where it is.
    pub state: JobState,
    /// The steps in order, with how far each has got.
    pub steps: Vec<JobStep>,
    /// Why the job failed.
    pub error: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// One step of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobStep {
    /// The step's name (`prepare_home`, `start_runtime`, …).
    pub name: String,
    /// How far it has got.
    pub state: StepState,
}

/// Progress of one job step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Not started.
    Pending,
    /// Under way.
    Running,
    /// Finished.
    Done,
    /// It failed; the job's `error` says why.
    Failed,
}

/// The model a profile's runtime uses, as the control plane shows it (never with a secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "provider", rename_all = "snake_case")]
pub enum ModelConfig {
    /// The runtime's deterministic offline model: it calls a tool when the input names one
    /// followed by a JSON object of arguments, and otherwise echoes the input.
    Scripted,
    /// An OpenAI-compatible chat-completions endpoint.
    OpenaiCompatible {
        /// The endpoint (`http://127.0.0.1:8000/v1`).
        base_url: String,
        /// The model's name at the endpoint.
        model: String,
        /// Whether an API key was given (it is kept on the runtime, never shown).
        api_key_set: bool,
    },
    /// Whatever the runtime's own configuration says (`external` instances, whose runtime is
    /// configured by its owner).
    Runtime,
}

/// The model for a new profile.
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelSpec {
    /// See [`ModelConfig::Scripted`]. (A struct variant: serde refuses unknown fields only in
    /// those.)
    Scripted {},
    /// An OpenAI-compatible chat-completions endpoint, e.g. `http://127.0.0.1:8000/v1`.
    OpenaiCompatible {
        /// The endpoint, an http:// or https:// URL.
        #[schemars(pattern(rules::HTTP_URL))]
        base_url: String,
        /// The model's name at the endpoint.
        #[schemars(pattern(rules::NOT_BLANK))]
        model: String,
        /// Sent as `Authorization: Bearer …` to the endpoint; written to the runtime's
        /// configuration and never returned.
        #[serde(default)]
        api_key: Option<String>,
    },
}

impl ModelSpec {
    /// What reads show of this model.
    pub fn shown(&self) -> ModelConfig {
        match self {
            ModelSpec::Scripted {} => ModelConfig::Scripted,
            ModelSpec::OpenaiCompatible {
                base_url,
                model,
                api_key,
            } => ModelConfig::OpenaiCompatible {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key_set: api_key.is_some(),
            },
        }
    }
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSpec::Scripted {} => f.write_str("Scripted"),
            ModelSpec::OpenaiCompatible {
                base_url,
                model,
                api_key,
            } => f
                .debug_struct("OpenaiCompatible")
                .field("base_url", base_url)
                .field("model", model)
                .field("api_key", &api_key.as_ref().map(|_| "<redacted>"))
                .finish(),
        }
    }
}

/// A control-plane profile: one native Hermes profile of an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    /// Its id (`prof_…`).
    pub id: ProfileId,
    /// The instance it belongs to.
    pub instance_id: InstanceId,
    /// Display name.
    pub name: String,
    /// The native Hermes profile name (its `profiles/<name>/` home on the runtime).
    pub native_name: String,
    /// The model its sessions use.
    pub model: ModelConfig,
    /// Callback tools attached to this profile.
    pub tools: Vec<ToolId>,
    /// When it was made.
    pub created_at: Timestamp,
}

/// Body of `profile_create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProfile {
    /// Also the native profile name: `^[a-z0-9][a-z0-9_-]{0,63}$`, unique in the instance.
    pub name: String,
    /// The model; `scripted` when absent.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    /// Tools to attach right away.
    #[serde(default)]
    pub tools: Vec<ToolId>,
}

/// Body of `profile_update`: what changes (the name, which is also the native profile's home,
/// does not).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProfile {
    /// The model from now on.
    #[serde(default)]
    pub model: Option<ModelSpec>,
}

/// Body of `session_update`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSession {
    /// The session's title from now on.
    #[serde(default)]
    pub title: Option<String>,
}

/// A control-plane session: a conversation on one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Session {
    /// Its id (`sess_…`); never a runtime's native session id.
    pub id: SessionId,
    /// The profile it belongs to.
    pub profile_id: ProfileId,
    /// The profile's instance.
    pub instance_id: InstanceId,
    /// The runtime's stored session, once known (given at create, or learned at the first turn).
    pub native_session_id: Option<NativeSessionId>,
    /// The caller's title for it.
    pub title: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
}

/// Body of `session_create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// A title for the session.
    #[serde(default)]
    pub title: Option<String>,
    /// Continue this stored native session instead of starting a new one.
    #[serde(default)]
    pub resume_native_session_id: Option<NativeSessionId>,
}

/// Lifecycle of a turn.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TurnState {
    /// Accepted, not yet sent to the runtime.
    Queued,
    /// The runtime works on it.
    Running,
    /// It waits for the application's answer (an approval, a question): see `turn_action`.
    RequiresAction,
    /// The agent answered.
    Completed,
    /// It ended on an error; `error` says which.
    Failed,
    /// The application cancelled it.
    Cancelled,
    /// Its runtime or the control plane stopped under it.
    Interrupted,
}

impl TurnState {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The state named `value`, if there is one.
    pub fn parse(value: &str) -> Option<Self> {
        value.parse().ok()
    }

    /// Whether the turn has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TurnState::Completed
                | TurnState::Failed
                | TurnState::Cancelled
                | TurnState::Interrupted
        )
    }
}

/// One exchange: the input, the streamed events, the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Turn {
    /// Its id (`turn_…`).
    pub id: TurnId,
    /// The session it belongs to.
    pub session_id: SessionId,
    /// Where it is.
    pub state: TurnState,
    /// The user's text.
    pub input: String,
    /// The final answer, once completed.
    pub output: Option<String>,
    /// Why the turn failed.
    pub error: Option<String>,
    /// Tokens it used, when the runtime said.
    pub usage: Option<Usage>,
    /// When it was accepted.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// Body of `turn_create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTurn {
    /// The user's text (not all blank).
    #[schemars(length(min = 1), pattern(rules::NOT_BLANK))]
    pub input: String,
}

/// Body of `turn_action`: the user's answer to what a `requires_action` turn waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnAction {
    /// Answers the oldest pending approval (or all of them, with `all`).
    Approval {
        /// How far the answer reaches.
        choice: ApprovalChoice,
        /// Answer every pending approval of the turn, not only the oldest.
        #[serde(default)]
        all: bool,
    },
    /// Answers the question `request_id` of a `clarify.requested` event.
    Clarify {
        /// The question's `request_id`.
        request_id: String,
        /// The answer: one of its choices, or any text for an open question.
        answer: String,
    },
}

/// How far an approval reaches.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ApprovalChoice {
    /// This command, this time.
    Once,
    /// Commands of the same pattern, for the rest of the session.
    Session,
    /// Commands of the same pattern, from now on, on this profile.
    Always,
    /// Do not run it.
    Deny,
}

impl ApprovalChoice {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A callback tool: served by a tool host, called by runtimes through the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    /// Its id (`tool_…`).
    pub id: ToolId,
    /// The name the model sees: `^[A-Za-z][A-Za-z0-9_-]{0,63}$`, unique among tools.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// The tool host that serves it.
    pub host_id: ToolHostId,
    /// When it was registered.
    pub created_at: Timestamp,
}

/// Body of `tool_register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterTool {
    /// What models call it: `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
    #[schemars(pattern(rules::TOOL_NAME))]
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the arguments; must describe an object.
    #[schemars(extend(
        "type" = "object",
        "required" = ["type"],
        "properties" = {"type": {"const": rules::OBJECT_SCHEMA}},
    ))]
    pub input_schema: Value,
    /// The tool host that serves it.
    pub host_id: ToolHostId,
}

/// Body of `tool_update`: what changes (the name, which the model sees and profiles are
/// configured with, does not).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTool {
    /// What the model is told the tool does, from now on.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments; must describe an object.
    #[serde(default)]
    #[schemars(extend(
        "type" = ["object", "null"],
        "required" = ["type"],
        "properties" = {"type": {"const": rules::OBJECT_SCHEMA}},
    ))]
    pub input_schema: Option<Value>,
}

/// Body of `tool_host_update`: where the host is now, and its new secret (write-only).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateToolHost {
    /// Where the host's MCP endpoint is now.
    #[serde(default)]
    #[schemars(pattern(rules::HTTP_URL))]
    pub url: Option<String>,
    /// The secret calls carry from now on (at least 16 characters; never shown).
    #[serde(default)]
    #[schemars(length(min = rules::TOOL_HOST_SECRET_MIN_CHARS))]
    pub secret: Option<String>,
}

impl std::fmt::Debug for UpdateToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateToolHost")
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A registered endpoint that serves callback tools over MCP (Streamable HTTP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolHost {
    /// Its id (`th_…`).
    pub id: ToolHostId,
    /// The MCP endpoint the control plane calls.
    pub url: String,
    /// When it was registered.
    pub created_at: Timestamp,
}

/// Body of `tool_host_register`. The secret is stored and never returned.
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterToolHost {
    /// `http://` URL of the host's MCP endpoint, reachable from the control plane.
    #[schemars(pattern(rules::HTTP_URL))]
    pub url: String,
    /// Sent as `Authorization: Bearer <secret>` on every call to the host (at least 16
    /// characters).
    #[schemars(length(min = rules::TOOL_HOST_SECRET_MIN_CHARS))]
    pub secret: String,
}

impl std::fmt::Debug for RegisterToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterToolHost")
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// A page of a list, with the cursor of the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "PageOf{T}")]
pub struct Page<T> {
    /// This page's items, in the list's order.
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Reply of `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// `ok` while the control plane serves.
    pub status: String,
    /// The control plane's release.
    pub version: String,
}

/// Body of `native_call`: one method of the native Hermes gateway, run on the instance's
/// runtime over the control plane's connection to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NativeCall {
    /// A method of the pinned catalog, e.g. `session.list`.
    pub method: String,
    /// Its params (an object).
    #[serde(default = "empty_object")]
    #[schemars(extend("type" = "object"))]
    pub params: Value,
    /// For profile-scoped methods (`session.create`, `session.resume`): the profile whose
    /// native profile the call acts on, unless `params.profile` names one.
    #[serde(default)]
    pub profile_id: Option<ProfileId>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Reply of `native_call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NativeReply {
    /// The method's JSON-RPC result.
    pub result: Value,
}
