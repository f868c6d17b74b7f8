//! The gateway methods this project calls or serves, with typed params and results. Each is
//! declared once here; the generated namespaces, the control plane and our runtime all use these
//! declarations, so a method's name and shape cannot drift between them.
//!
//! Params mirror what Hermes 0.19 reads (`params.get`): every field is optional and unset fields
//! are not sent. Results carry what Hermes returns; fields a reply may lack default, and the
//! fields Hermes adds that no one here reads are kept in `other`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::events::{NativeUsage, SessionInfo};
use crate::ids::{LiveSessionId, StoredSessionId};
use crate::nullable::nullable;

/// A gateway method: its name, what it takes and what it answers.
pub trait Method {
    /// The JSON-RPC method name.
    const NAME: &'static str;
    /// The params it takes.
    type Params: Serialize + DeserializeOwned + Default + Send + Sync;
    /// What it answers.
    type Result: Serialize + DeserializeOwned + Send;
}

/// The live session a call of `method` opened, from its reply: `session.create`,
/// `session.resume` and `session.branch` each open one (a resume of a stored session that is
/// live already gives that one back), named by the reply's `session_id`.
pub fn opened_live_session(method: &str, reply: &Value) -> Option<LiveSessionId> {
    let opening = [
        SessionCreate::NAME,
        SessionResume::NAME,
        SessionBranch::NAME,
    ];
    if !opening.contains(&method) {
        return None;
    }
    let sid = reply.get("session_id")?.as_str()?;
    Some(LiveSessionId::new(sid))
}

macro_rules! methods {
    ($($(#[$doc:meta])* $name:ident = $wire:literal ($params:ty) -> $result:ty;)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Method for $name {
                const NAME: &'static str = $wire;
                type Params = $params;
                type Result = $result;
            }
        )*

        /// The names of the methods declared with types here (the code generator gives these
        /// their types instead of untyped params).
        pub const TYPED_METHODS: &[&str] = &[$($wire),*];

        #[cfg(test)]
        const PARAM_PROBES: &[(&str, fn(&str) -> bool)] = &[$(($wire, tests::has_field::<$name>)),*];
    };
}

methods! {
    /// Opens a live session (no stored row until the first prompt).
    SessionCreate = "session.create" (SessionCreateParams) -> SessionCreated;
    /// Opens a live session on a stored one (by stored id or title).
    SessionResume = "session.resume" (SessionResumeParams) -> SessionResumed;
    /// Stored sessions, newest first.
    SessionList = "session.list" (SessionListParams) -> SessionListed;
    /// The newest stored session.
    SessionMostRecent = "session.most_recent" (ProfileParams) -> MostRecentSession;
    /// The live sessions of this process.
    SessionActiveList = "session.active_list" (SessionActiveListParams) -> ActiveSessions;
    /// A live session's messages.
    SessionHistory = "session.history" (LiveSessionParams) -> HistoryReply;
    /// Closes a live session (ends its stored row).
    SessionClose = "session.close" (LiveSessionParams) -> SessionClosed;
    /// Deletes a stored session that is not live.
    SessionDelete = "session.delete" (SessionDeleteParams) -> SessionDeleted;
    /// Reads (no `title`) or sets a live session's title.
    SessionTitle = "session.title" (SessionTitleParams) -> SessionTitled;
    /// A live session's token accounting.
    SessionUsage = "session.usage" (LiveSessionParams) -> NativeUsage;
    /// Interrupts a live session's running turn.
    SessionInterrupt = "session.interrupt" (LiveSessionParams) -> StatusReply;
    /// Starts a turn (or queues the prompt behind the running one).
    PromptSubmit = "prompt.submit" (PromptSubmitParams) -> StatusReply;
    /// Answers the session's pending approvals, oldest first.
    ApprovalRespond = "approval.respond" (ApprovalRespondParams) -> ApprovalResolved;
    /// Answers a `clarify.request`.
    ClarifyRespond = "clarify.respond" (ClarifyRespondParams) -> StatusReply;
    /// The active pet (Hermes's animated companion), for clients that draw it.
    PetInfo = "pet.info" (NoParams) -> FeatureState;
    /// The active pet's metadata.
    PetInfoMeta = "pet.info.meta" (NoParams) -> FeatureState;
    /// The active pet as terminal cells (the TUI asks while it draws).
    PetCells = "pet.cells" (PetCellsParams) -> FeatureState;
    /// The hosted account's usage bars (`/usage`).
    UsageBars = "usage.bars" (NoParams) -> UsageAvailability;
    /// The runtime's scheduled jobs: `list` (enabled ones), `add`, `remove`, `pause`, `resume`.
    /// A refusal is a result with `success: false`, not an error; an unknown action is 4016.
    CronManage = "cron.manage" (CronManageParams) -> Value;
    /// Whether a model provider is set up (a client's first-run check).
    SetupStatus = "setup.status" (NoParams) -> SetupState;
    /// The background processes the agent started, in every session.
    AgentsList = "agents.list" (NoParams) -> BackgroundProcesses;
    /// A live session's background processes.
    ProcessList = "process.list" (LiveSessionParams) -> BackgroundProcesses;
    /// The toolsets, sorted by name: what each holds and whether it is on (for the session's
    /// agent, or as the config leaves them).
    ToolsetsList = "toolsets.list" (LiveSessionParams) -> ToolsetsListed;
    /// `toolsets.list`, each toolset with its tools' names.
    ToolsList = "tools.list" (LiveSessionParams) -> ToolsetsListed;
    /// The enabled tools, grouped by toolset, each with the first sentence of its description.
    ToolsShow = "tools.show" (LiveSessionParams) -> ToolsShown;
    /// One configuration value by `key`; the reply's shape depends on the key (`full`: the
    /// whole file as `config`; `mtime`: when it last changed; `skin`, `personality`: `value`;
    /// `prompt`: `prompt`). An unknown key is 4002. Hermes returns `full` with its
    /// credentials as they are, so the control plane lets only `admin` keys ask for it.
    ConfigGet = "config.get" (ConfigGetParams) -> Value;
    /// The slash commands the gateway can run, for a client's completion and help.
    CommandsCatalog = "commands.catalog" (NoParams) -> CommandCatalog;
    /// Takes the last exchange back from a live session's conversation (the answer, its tool
    /// messages and the prompt), in memory: what the model sees next. Busy is 4009.
    SessionUndo = "session.undo" (LiveSessionParams) -> Undone;
    /// A live session's status as text (`/status`).
    SessionStatus = "session.status" (LiveSessionParams) -> TextOutput;
    /// Writes a live session's conversation to a JSON file under the home's `sessions/saved/`.
    SessionSave = "session.save" (LiveSessionParams) -> SavedFile;
    /// How many stored sessions started in the last `days` (30 if unset), and their messages.
    InsightsGet = "insights.get" (InsightsParams) -> Insights;
    /// Completes a path being typed (`word`), or what can be attached after `@`.
    CompletePath = "complete.path" (CompletePathParams) -> Completions;
    /// Completes a slash command being typed (`text`).
    CompleteSlash = "complete.slash" (CompleteSlashParams) -> Completions;
    /// Branches a live session: a new stored session (the old one its parent) with a copy of
    /// its conversation, titled `name` or next in the old title's lineage (`Title #2`), and a
    /// live session on it. A session with nothing said yet is 4008.
    SessionBranch = "session.branch" (SessionBranchParams) -> SessionBranched;
    /// What fills a live session's context window, by kind (roughly: four characters a
    /// token), and how full it is. Before the session's first prompt nothing is broken down.
    SessionContextBreakdown = "session.context_breakdown" (LiveSessionParams) -> ContextBreakdown;
    /// A message for the agent while it works: added to the result of the next tool batch,
    /// marked as the user's. Without text 4002; before the session's first prompt 4010.
    SessionSteer = "session.steer" (SessionSteerParams) -> Steered;
    /// The configuration as `/config` shows it, in titled sections of `[label, value]` rows.
    ConfigShow = "config.show" (NoParams) -> ConfigShown;
    /// Sets one setting by `key` (`verbose`, `busy`, `approvals.mode`, `yolo`, `reasoning`,
    /// `details_mode`, `prompt`, `skin`, `cwd`, …), for the live session when `session_id`
    /// names one (an unknown id is no session), else in the home's `config.yaml`. The reply's
    /// shape depends on the key; an unknown key or a value the key does not take is 4002.
    ConfigSet = "config.set" (ConfigSetParams) -> Value;
    /// Moves a live session to another working directory (where its commands run), answered
    /// with the session's info. Busy is 4009, no `cwd` 4016, a directory that does not exist
    /// 4017.
    SessionCwdSet = "session.cwd.set" (SessionCwdSetParams) -> Value;
    /// Switches toolsets, or single tools of MCP servers (`server:tool`), on or off for the
    /// terminal platform; with a live session its agent is rebuilt on them, its context
    /// empty (the stored conversation stays). An unknown action is 4017, no names 4018.
    ToolsConfigure = "tools.configure" (ToolsConfigureParams) -> ToolsConfigured;
    /// Reconnects to the home's MCP servers. Unless `confirm` (or the config's
    /// `approvals.mcp_reload_confirm` is false) it only answers `confirm_required`; `always`
    /// sets that key to false.
    ReloadMcp = "reload.mcp" (ReloadMcpParams) -> StatusReply;
    /// Binds a live session to the calling connection (its events come here from now on) and
    /// says where it stands: its messages, whether a turn runs and what it has streamed.
    SessionActivate = "session.activate" (LiveSessionParams) -> Value;
    /// Runs a prompt in a session of its own, with no history and no events; its answer
    /// comes as one `background.complete` on the asking session. No `text` is 4012.
    PromptBackground = "prompt.background" (PromptBackgroundParams) -> BackgroundStarted;
    /// Kills every background process the agent started, in every session.
    ProcessStop = "process.stop" (NoParams) -> ProcessesKilled;
    /// Kills one of a live session's background processes. No `process_id` is 4012, one the
    /// session does not have 4044.
    ProcessKill = "process.kill" (ProcessKillParams) -> Value;
    /// Interrupts a running subagent. No `subagent_id` is 4000.
    SubagentInterrupt = "subagent.interrupt" (SubagentInterruptParams) -> SubagentInterrupted;
    /// The providers and models a client may pick from (`/model`), the current ones marked.
    ModelOptions = "model.options" (ModelOptionsParams) -> ModelChoices;
    /// Summarizes the middle of a live session's conversation (its first turns and its latest
    /// ones kept as they are), optionally keeping what concerns `focus_topic` in detail. Too
    /// little to summarize is no error (`summary.noop`); busy is 4009.
    SessionCompress = "session.compress" (SessionCompressParams) -> Compressed;
    /// Reads the home's `.env` again; answers how many variables changed.
    ReloadEnv = "reload.env" (NoParams) -> EnvReloaded;
    /// Answers a `sudo.request` with the password (empty: go on without). `ok`, or `expired`
    /// for a request no longer waiting; no `request_id` is 4009.
    SudoRespond = "sudo.respond" (SudoRespondParams) -> StatusReply;
    /// Answers a `secret.request` with the value (empty: skip). `ok`, or `expired` for a
    /// request no longer waiting; no `request_id` is 4009.
    SecretRespond = "secret.respond" (SecretRespondParams) -> StatusReply;
    /// The home's skills by category (`list`), or the skills hub's (`search`, `browse`,
    /// `inspect`, `install`). The reply's shape depends on the action; another is 4017.
    SkillsManage = "skills.manage" (SkillsManageParams) -> Value;
    /// Reads the home's skills again; says which appeared and which went since the last time.
    SkillsReload = "skills.reload" (NoParams) -> SkillsReloaded;
    /// The checkpoints of a live session's directory, newest first (`enabled: false` when
    /// checkpoints are off).
    RollbackList = "rollback.list" (LiveSessionParams) -> Checkpoints;
    /// What changed in the session's directory since a checkpoint (`hash`, or its number in
    /// the list from 1). No `hash` is 4014; a number out of range 5022.
    RollbackDiff = "rollback.diff" (RollbackParams) -> CheckpointDiff;
    /// Puts the session's directory (or `file_path`) back as a checkpoint had it; a whole
    /// restore also takes the last exchange back. `success: false` says why it could not; no
    /// `hash` is 4014, a whole restore while a turn runs 4009.
    RollbackRestore = "rollback.restore" (RollbackParams) -> Value;
}

/// Params of `rollback.diff` and `rollback.restore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RollbackParams {
    /// The live session whose directory it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// A checkpoint's hash, or its number in the list (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// One file to restore, relative to the directory (`rollback.restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
}

/// Reply of `rollback.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoints {
    /// Whether checkpoints are kept.
    pub enabled: bool,
    /// Newest first.
    pub checkpoints: Vec<Checkpoint>,
}

/// One checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Its commit in the shadow store.
    pub hash: String,
    /// ISO 8601.
    pub timestamp: String,
    /// Why it was taken (Hermes 0.19 sends this empty).
    pub message: String,
}

/// Reply of `rollback.diff`: `git diff --stat` and the diff (its first 4000 characters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointDiff {
    /// `git diff --stat` of the checkpoint against the directory now.
    pub stat: String,
    /// The diff (its first 4000 characters).
    pub diff: String,
    /// What else Hermes sends (`rendered`).
    #[serde(flatten)]
    pub other: Extra,
}

/// Params of `skills.manage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillsManageParams {
    /// `list` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// A search, an identifier to inspect or install, or a page number to browse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The page to browse (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u64>,
    /// Entries per page (20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u64>,
}

/// Reply of `skills.reload`: the text a client prints, and the change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillsReloaded {
    /// What a client prints.
    pub output: String,
    /// The change, item by item.
    pub result: SkillsChange,
}

/// What `skills.reload` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillsChange {
    /// Skills that appeared.
    pub added: Vec<NamedSkill>,
    /// Skills that went.
    pub removed: Vec<NamedSkill>,
    /// Skills there before and after.
    pub unchanged: Vec<String>,
    /// How many skills there are now.
    pub total: u64,
    /// Skills a client can run as `/<name>`.
    pub commands: u64,
}

/// A skill by name, with its description.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedSkill {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
}

/// Reply of `reload.env`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvReloaded {
    /// How many variables changed.
    pub updated: u64,
}

/// Params of `sudo.respond`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SudoRespondParams {
    /// The `sudo.request` it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The password (empty: go on without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Sent by clients; not read by Hermes 0.19 (the request id is enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
}

impl std::fmt::Debug for SudoRespondParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SudoRespondParams")
            .field("request_id", &self.request_id)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// Params of `secret.respond`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SecretRespondParams {
    /// The `secret.request` it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The value (empty: skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Sent by clients; not read by Hermes 0.19 (the request id is enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
}

impl std::fmt::Debug for SecretRespondParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRespondParams")
            .field("request_id", &self.request_id)
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// Params of `session.compress`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionCompressParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// A subject the summary keeps in detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus_topic: Option<String>,
}

/// Reply of `session.compress`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Compressed {
    /// `compressed`, or `aborted` when the summary could not be made (nothing removed).
    pub status: String,
    /// How many messages fewer there are.
    pub removed: u64,
    /// Messages before.
    pub before_messages: u64,
    /// Messages after.
    pub after_messages: u64,
    /// The rough size of a request before and after (four characters a token).
    pub before_tokens: u64,
    /// The rough size after.
    pub after_tokens: u64,
    /// What happened, in words.
    pub summary: CompressionSummary,
    /// The session's usage.
    pub usage: NativeUsage,
    /// The session's info.
    pub info: SessionInfo,
    /// The conversation now, as the model will be sent it.
    pub messages: Vec<Value>,
}

/// What a compression did, in words for the user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompressionSummary {
    /// Nothing changed (too little to summarize).
    pub noop: bool,
    /// The summary could not be made; nothing changed.
    pub aborted: bool,
    /// A summary made without the model was used (Hermes only).
    pub fallback_used: bool,
    /// `Compressed: 10 → 8 messages`, `No changes from compression: 4 messages`, …
    pub headline: String,
    /// `Approx request size: ~1,200 → ~800 tokens`.
    pub token_line: String,
    /// More to say, when there is.
    #[serde(default)]
    pub note: Option<String>,
}

/// Params of `session.steer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSteerParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The message for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Reply of `session.steer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Steered {
    /// `queued` (or `rejected`).
    pub status: String,
    /// The text as it was queued (trimmed).
    pub text: String,
}

/// Reply of `session.context_breakdown`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextBreakdown {
    /// The kinds with any tokens: `system_prompt`, `tool_definitions`, `rules`, `skills`,
    /// `mcp`, `subagent_definitions`, `memory`, `conversation`.
    pub categories: Vec<ContextCategory>,
    /// The model's context window, in tokens.
    pub context_max: u64,
    /// How full it is, in percent.
    pub context_percent: u64,
    /// What the last model call measured, else `estimated_total`.
    pub context_used: u64,
    /// The sum of the categories.
    pub estimated_total: u64,
    /// The session's model.
    pub model: String,
}

/// What fills part of the context window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextCategory {
    /// A CSS colour a client draws the kind in.
    pub color: String,
    /// Its id (`tool_definitions`, `conversation`, …).
    pub id: String,
    /// What a client shows.
    pub label: String,
    /// Its tokens (four characters a token).
    pub tokens: u64,
}

/// Params of `config.set`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigSetParams {
    /// The live session a session-wide setting applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The setting (`verbose`, `approvals.mode`, `model`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Text for most keys; Hermes reads any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// `session` (the default) or `global`, for `yolo` and `reasoning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Switch to a model even when it is costly (`model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_expensive_model: Option<bool>,
}

/// Params of `session.cwd.set`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionCwdSetParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The directory to work in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Reply of `config.show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigShown {
    /// The configuration, section by section.
    pub sections: Vec<ConfigSection>,
}

/// A titled section of `config.show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigSection {
    /// Its title.
    pub title: String,
    /// `[label, value]` pairs.
    pub rows: Vec<[String; 2]>,
}

/// Params of `tools.configure`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsConfigureParams {
    /// The live session whose agent is rebuilt on the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// `enable` or `disable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Toolset names and `server:tool` names; a list (Hermes reads a string as its letters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Value>,
}

/// Reply of `tools.configure`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsConfigured {
    /// The names acted on (every known one, changed or not).
    pub changed: Vec<String>,
    /// The toolsets on for the terminal platform now, sorted.
    pub enabled_toolsets: Vec<String>,
    /// The live session's info after its agent was rebuilt; `null` without a session.
    pub info: Option<Value>,
    /// MCP servers named in `server:tool` names that the config does not have, sorted.
    pub missing_servers: Vec<String>,
    /// Whether a live session's agent was rebuilt (its context emptied).
    pub reset: bool,
    /// Toolset names that do not exist.
    pub unknown: Vec<String>,
}

/// Params of `reload.mcp`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReloadMcpParams {
    /// The live session asking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// Reconnect without asking first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<bool>,
    /// Never ask first again (`approvals.mcp_reload_confirm: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<bool>,
}

/// Params of `model.options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelOptionsParams {
    /// The session whose model is the current one (else the config's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// Only the providers the config sets up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explicit_only: Option<bool>,
    /// Also the providers that are not set up yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_unconfigured: Option<bool>,
    /// List the endpoints' models anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<bool>,
}

/// Reply of `model.options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelChoices {
    /// The providers, with their models.
    pub providers: Vec<ProviderChoice>,
    /// The current model and provider.
    pub model: String,
    /// The current provider.
    pub provider: String,
}

/// One provider a client may pick, with its models.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderChoice {
    /// Its id (`custom`, `scripted`, …).
    pub slug: String,
    /// What a client shows.
    pub name: String,
    /// Whether it is the one in use.
    pub is_current: bool,
    /// Whether the user's config defines it.
    pub is_user_defined: bool,
    /// Its models.
    pub models: Vec<String>,
    /// How many models it has.
    pub total_models: u64,
    /// Where the entry comes from (`model-config`: the config's `model:` section).
    pub source: String,
    /// Everything else Hermes says of it (`api_url`, `authenticated`, `capabilities`, …).
    #[serde(flatten)]
    pub other: Extra,
}

/// Params of `prompt.background`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptBackgroundParams {
    /// The live session that asks (it gets the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Reply of `prompt.background`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackgroundStarted {
    /// `bg_` and six hex digits; also the id of the prompt's stored session.
    pub task_id: String,
}

/// Reply of `process.stop`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessesKilled {
    /// How many processes were killed.
    pub killed: u64,
}

/// Params of `process.kill`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessKillParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The process to kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
}

/// Params of `subagent.interrupt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubagentInterruptParams {
    /// Text; Hermes also reads a number as its digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_id: Option<Value>,
}

/// Reply of `subagent.interrupt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubagentInterrupted {
    /// Whether the subagent was found.
    pub found: bool,
    /// The subagent named.
    pub subagent_id: String,
}

/// Params of `session.branch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionBranchParams {
    /// The live session to branch from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The branch's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Reply of `session.branch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionBranched {
    /// The branch's live session.
    pub session_id: LiveSessionId,
    /// The branch's title.
    pub title: String,
    /// The stored session branched from.
    pub parent: StoredSessionId,
}

/// Reply of `session.undo`: how many messages were taken back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Undone {
    /// How many messages were taken back.
    pub removed: u64,
}

/// Reply of `session.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextOutput {
    /// The text a client prints.
    pub output: String,
}

/// Reply of `session.save`: the file written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedFile {
    /// Where the file was written.
    pub file: String,
}

/// Params of `insights.get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InsightsParams {
    /// A number of days (Hermes does not check it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<Value>,
}

/// Reply of `insights.get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Insights {
    /// The days counted.
    pub days: Value,
    /// Stored sessions in them.
    pub sessions: u64,
    /// Their messages.
    pub messages: u64,
}

/// Params of `complete.path`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletePathParams {
    /// What is typed so far: a path, `@`, `@file:…`, `@folder:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word: Option<String>,
    /// The directory relative paths start from (else the session's, else the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The live session, whose directory relative paths start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The native profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// Params of `complete.slash`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteSlashParams {
    /// What is typed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Reply of `complete.path` and `complete.slash`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completions {
    /// The completions, best first.
    pub items: Vec<Completion>,
    /// Where in the text the chosen item's `text` goes (`complete.slash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_from: Option<u64>,
}

/// One completion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// What replaces the word.
    pub text: String,
    /// What a menu shows.
    pub display: String,
    /// A hint beside it (`dir` for a directory).
    pub meta: String,
}

/// Reply of `commands.catalog`. A command is `[name, description]`, its name with its `/`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandCatalog {
    /// Every command.
    pub pairs: Vec<(String, String)>,
    /// A command's subcommands, by command.
    pub sub: BTreeMap<String, Vec<String>>,
    /// Each name and alias, lower-cased, to its command's name.
    pub canon: BTreeMap<String, String>,
    /// The commands again, by category, in the order a help screen shows them.
    pub categories: Vec<CommandCategory>,
    /// How many skills can be run as commands.
    pub skill_count: u64,
    /// Why part of the catalog could not be read, or empty.
    pub warning: String,
}

/// A category of commands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandCategory {
    /// Its name.
    pub name: String,
    /// Its commands.
    pub pairs: Vec<(String, String)>,
}

/// Reply of `setup.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupState {
    /// Whether a model provider is set up.
    pub provider_configured: bool,
}

/// Reply of `agents.list` and `process.list`: each process as it came (`session_id`,
/// `command`, `status`, `uptime` in `agents.list`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackgroundProcesses {
    /// One entry per process, as Hermes describes it.
    pub processes: Vec<Extra>,
}

/// Reply of `toolsets.list` and `tools.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsetsListed {
    /// Every toolset, sorted by name.
    pub toolsets: Vec<ToolsetEntry>,
}

/// One toolset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsetEntry {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// How many tools it has.
    pub tool_count: u64,
    /// Whether the platform's config leaves it on.
    pub enabled: bool,
    /// The tools' names (`tools.list` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// Reply of `tools.show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsShown {
    /// Sorted by toolset name; a section's tools sorted by name.
    pub sections: Vec<ToolSection>,
    /// How many tools there are.
    pub total: u64,
}

/// The tools of one toolset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSection {
    /// The toolset.
    pub name: String,
    /// Its tools, sorted by name.
    pub tools: Vec<ToolSummary>,
}

/// One tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Its name.
    pub name: String,
    /// The first sentence of its description.
    pub description: String,
}

/// Params of `config.get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigGetParams {
    /// What to read: `full`, `mtime`, `skin`, `personality`, `prompt`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The directory whose project `project` describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The live session, for session-wide values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
}

/// Params of `cron.manage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CronManageParams {
    /// `list` (the default), `add`, `remove`, `pause` or `resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The job's name for `add`; the job's id or name for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When to run (`every 30m`, a cron expression, …) for `add`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// What the job asks the agent, for `add`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// Params of a method that takes none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoParams {}

/// Params of `pet.cells`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PetCellsParams {
    /// Width in terminal columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<Value>,
    /// Whether the terminal draws graphics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphics: Option<Value>,
    /// `idle`, `run`, `review`, `failed`, `wave` or `jump`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// Whether an optional feature is on; when it is, what it says (kept as it came).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeatureState {
    /// Whether the feature is on.
    pub enabled: bool,
    /// What else Hermes sends.
    #[serde(flatten)]
    pub other: Extra,
}

/// Whether the hosted account's usage can be shown; when it can, what it says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageAvailability {
    /// Whether the call worked.
    pub ok: bool,
    /// Whether usage bars can be shown.
    pub available: bool,
    /// What else Hermes sends.
    #[serde(flatten)]
    pub other: Extra,
}

/// Anything a reply holds that the types here do not name.
pub type Extra = Map<String, Value>;

/// Params of `session.create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionCreateParams {
    /// The native profile whose home the session lives in (absent: `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Who opened it (`tui`, `edith`, …); stored with the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A title for the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Close the session as soon as this connection drops (no orphan grace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_on_disconnect: Option<bool>,
    /// The terminal's width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<Value>,
    /// The directory the session works in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Fast mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast: Option<Value>,
    /// Seed history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Value>,
    /// The model to use instead of the config's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The stored session it continues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// The provider of `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Value>,
    /// A stored id the session should take (as Hermes reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Reply of `session.create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCreated {
    /// The live session.
    pub session_id: LiveSessionId,
    /// Where it will be stored (from its first prompt on).
    pub stored_session_id: StoredSessionId,
    /// How many messages it has.
    #[serde(default, deserialize_with = "nullable")]
    pub message_count: u64,
    /// Its messages.
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<HistoryMessage>,
    /// Its info (before the agent is built, only what is known without it).
    #[serde(default, deserialize_with = "nullable")]
    pub info: SessionInfo,
}

/// Params of `session.resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionResumeParams {
    /// The stored session's id, or its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The native profile the stored session is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Where the session comes from (`tui`, `desktop`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Close the live session when this connection ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_on_disconnect: Option<bool>,
    /// The terminal's width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<Value>,
    /// Build the agent now rather than at the first prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager_build: Option<Value>,
    /// Open without building the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lazy: Option<Value>,
}

/// Reply of `session.resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResumed {
    /// The new live id.
    pub session_id: LiveSessionId,
    /// The stored session now live.
    pub resumed: StoredSessionId,
    /// The stored session's key.
    #[serde(default, deserialize_with = "nullable")]
    pub session_key: String,
    /// How many messages it has.
    #[serde(default, deserialize_with = "nullable")]
    pub message_count: u64,
    /// Its messages.
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<HistoryMessage>,
    /// Its info.
    #[serde(default, deserialize_with = "nullable")]
    pub info: SessionInfo,
    /// What a running turn has streamed so far.
    #[serde(default)]
    pub inflight: Value,
    /// Whether a turn runs.
    #[serde(default, deserialize_with = "nullable")]
    pub running: bool,
    /// `idle` or `streaming`.
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// When it started (Unix seconds).
    #[serde(default, deserialize_with = "nullable")]
    pub started_at: f64,
}

/// `profile` is read by `hermes-runtime` only (Hermes 0.19 lists the root home's sessions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionListParams {
    /// At most this many (Hermes: 200 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The native profile whose sessions are listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// Reply of `session.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionListed {
    /// Newest first.
    pub sessions: Vec<StoredSessionSummary>,
}

/// One stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSessionSummary {
    /// Its stored id.
    pub id: StoredSessionId,
    /// Its title.
    #[serde(default, deserialize_with = "nullable")]
    pub title: String,
    /// The start of its first message.
    #[serde(default, deserialize_with = "nullable")]
    pub preview: String,
    /// When it started (Unix seconds).
    #[serde(default, deserialize_with = "nullable")]
    pub started_at: f64,
    /// How many messages it has.
    #[serde(default, deserialize_with = "nullable")]
    pub message_count: u64,
    /// Where it came from (`tui`, `cron`, …).
    #[serde(default, deserialize_with = "nullable")]
    pub source: String,
    /// What else Hermes sends.
    #[serde(flatten)]
    pub other: Extra,
}

/// `profile` is read by `hermes-runtime` only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileParams {
    /// The native profile (the root when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// `session_id` is `null` (and nothing else is set) when there is no stored session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MostRecentSession {
    /// The stored session, if there is one.
    pub session_id: Option<StoredSessionId>,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// When it started (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Params of `session.active_list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionActiveListParams {
    /// Marks that session `current` in the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_session_id: Option<String>,
}

/// Reply of `session.active_list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActiveSessions {
    /// The live sessions of this process.
    pub sessions: Vec<ActiveSession>,
}

/// One live session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveSession {
    /// Its live id.
    pub id: LiveSessionId,
    /// Whether it is the caller's current session.
    #[serde(default, deserialize_with = "nullable")]
    pub current: bool,
    /// When it was last used (Unix seconds).
    #[serde(default, deserialize_with = "nullable")]
    pub last_active: f64,
    /// How many messages it has.
    #[serde(default, deserialize_with = "nullable")]
    pub message_count: u64,
    /// Its model.
    #[serde(default, deserialize_with = "nullable")]
    pub model: String,
    /// The start of its first message.
    #[serde(default, deserialize_with = "nullable")]
    pub preview: String,
    /// The stored session's id.
    #[serde(default, deserialize_with = "nullable")]
    pub session_key: String,
    /// When it started (Unix seconds).
    #[serde(default, deserialize_with = "nullable")]
    pub started_at: f64,
    /// `idle` or `streaming`.
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Its title.
    #[serde(default, deserialize_with = "nullable")]
    pub title: String,
    /// What else Hermes sends.
    #[serde(flatten)]
    pub other: Extra,
}

/// Methods on one live session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveSessionParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
}

impl LiveSessionParams {
    /// Params naming `session_id`.
    pub fn new(session_id: &LiveSessionId) -> Self {
        Self {
            session_id: Some(session_id.clone()),
        }
    }
}

/// Reply of `session.history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryReply {
    /// How many messages.
    #[serde(default, deserialize_with = "nullable")]
    pub count: u64,
    /// The messages, oldest first.
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<HistoryMessage>,
}

/// A message as Hermes shows history: `{role, text}`, or `{role: tool, name, context}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryMessage {
    /// `user`, `assistant`, `tool`, …
    pub role: String,
    /// The message's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A tool row's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A tool row's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// What else Hermes sends (`name`, `context`, …).
    #[serde(flatten)]
    pub other: Extra,
}

/// Reply of `session.close`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionClosed {
    /// `false` when no such live session existed.
    pub closed: bool,
}

/// Params of `session.delete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionDeleteParams {
    /// The stored session's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Read by `hermes-runtime` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// Reply of `session.delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDeleted {
    /// The stored session deleted.
    pub deleted: StoredSessionId,
}

/// Params of `session.title`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionTitleParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// Absent: read the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A read answers `{title, session_key}`; a write answers `{pending, title}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionTitled {
    /// Whether the title waits for the session's first prompt to be stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<bool>,
    /// The title.
    #[serde(default, deserialize_with = "nullable")]
    pub title: String,
    /// The stored session's key (when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// `prompt.submit`'s status when the prompt started a turn.
pub const PROMPT_STREAMING: &str = "streaming";
/// `prompt.submit`'s status when the live session was running a turn: that turn is interrupted
/// (Hermes's default `busy_input_mode: interrupt`), and the prompt's turn runs once it has ended.
pub const PROMPT_QUEUED: &str = "queued";

/// `{status}`: `streaming` / `queued` / `steered` for a prompt, `interrupted` for an interrupt,
/// `ok` / `expired` for an answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReply {
    /// What happened.
    pub status: String,
    /// What else Hermes sends.
    #[serde(flatten)]
    pub other: Extra,
}

impl StatusReply {
    /// A reply of `status` alone.
    pub fn new(status: &str) -> Self {
        Self {
            status: status.to_owned(),
            other: Extra::new(),
        }
    }
}

/// Params of `prompt.submit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptSubmitParams {
    /// The live session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// The prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Take the conversation back to before this user message first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_before_user_ordinal: Option<Value>,
}

/// How far an approval reaches, as `approval.respond`'s `choice` and `approval.request`'s
/// `choices` name it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ApprovalChoice {
    /// This command, this time.
    Once,
    /// Commands of the same pattern, for the rest of the session.
    Session,
    /// Commands of the same pattern, from now on, in this home.
    Always,
    /// Do not run it.
    Deny,
}

impl ApprovalChoice {
    /// Every choice, in the order Hermes offers them.
    pub const ALL: &[ApprovalChoice] = <Self as strum::VariantArray>::VARIANTS;

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A `choice` as Hermes reads it: `approve` and `allow` also mean once; anything it does
    /// not know denies.
    pub fn parse(value: &str) -> Self {
        match value {
            "approve" | "allow" => Self::Once,
            other => Self::ALL
                .iter()
                .copied()
                .find(|choice| choice.as_str() == other)
                .unwrap_or(Self::Deny),
        }
    }
}

/// Params of `approval.respond`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRespondParams {
    /// The live session whose approval it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
    /// An [`ApprovalChoice`] (`deny` when unset); a string, because Hermes also reads aliases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    /// Resolve every pending approval of the session, not just the oldest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
}

/// Reply of `approval.respond`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResolved {
    /// How many approvals the answer resolved (0: none was pending).
    pub resolved: u64,
}

/// Params of `clarify.respond`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClarifyRespondParams {
    /// The question it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Sent by clients; not read by Hermes 0.19 (the request id is enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<LiveSessionId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::catalog;

    /// Whether `M::Params` has a field named `param`: a field rejects an object of the wrong
    /// type or sends it back; an unknown key is silently dropped.
    pub(super) fn has_field<M: Method>(param: &str) -> bool {
        let probe = serde_json::json!({ param: {"probe": true} });
        match serde_json::from_value::<M::Params>(probe) {
            Err(_) => true,
            Ok(params) => serde_json::to_value(params).unwrap().get(param).is_some(),
        }
    }

    #[test]
    fn approval_choices_read_as_hermes_reads_them() {
        for &choice in ApprovalChoice::ALL {
            let wire = serde_json::to_value(choice).unwrap();
            assert_eq!(wire, choice.as_str());
            assert_eq!(ApprovalChoice::parse(choice.as_str()), choice);
        }
        assert_eq!(ApprovalChoice::parse("approve"), ApprovalChoice::Once);
        assert_eq!(ApprovalChoice::parse("allow"), ApprovalChoice::Once);
        assert_eq!(ApprovalChoice::parse("perhaps"), ApprovalChoice::Deny);
    }

    #[test]
    fn every_typed_method_is_in_the_pinned_catalog_and_takes_every_param_hermes_reads() {
        for (name, has) in PARAM_PROBES {
            let info = catalog()
                .method(name)
                .unwrap_or_else(|| panic!("{name} is not a Hermes 0.19 method"));
            for param in &info.params {
                assert!(has(param), "{name}: no field for the param `{param}`");
            }
        }
        assert_eq!(PARAM_PROBES.len(), TYPED_METHODS.len());
    }
}
