//! What each Desktop route answers, declared from observation of Hermes 0.19.0 (every key it
//! sends, with the same meaning). Our runtime serializes these; the SDK reads them, and keys a
//! server adds beyond them are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::StoredSessionId;

/// `GET /api/status`: public liveness and facts about the runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The Hermes release whose protocol the server speaks.
    pub version: String,
    pub release_date: String,
    /// `_config_version` of the profile's config.yaml (0 when unset).
    pub config_version: i64,
    pub latest_config_version: i64,
    pub can_update_hermes: bool,
    /// Whether the messaging gateway runs (not the `/api/ws` gateway, which always does).
    pub gateway_running: bool,
    pub gateway_state: Option<String>,
    pub gateway_platforms: Value,
    pub gateway_exit_reason: Option<String>,
    pub gateway_updated_at: Option<Value>,
    pub active_agents: i64,
    pub gateway_busy: bool,
    pub gateway_drainable: bool,
    pub restart_drain_timeout: f64,
    /// Sessions active in the last five minutes.
    pub active_sessions: i64,
    pub auth_required: bool,
    pub auth_providers: Vec<String>,
    pub nous_session_valid: Value,
    /// `default` first, then the named profiles by name.
    pub profiles: Vec<String>,
    pub gateway_mode: String,
    /// Only when `auth_required` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hermes_home: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_path: Option<String>,
    #[serde(default)]
    pub gateway_pid: Option<i64>,
    #[serde(default)]
    pub gateway_health_url: Option<String>,
    #[serde(default)]
    pub gateways: Vec<Value>,
    /// Only from this project's runtime: `hermes-runtime` (Hermes sends no such key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Only from this project's runtime: its own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
}

/// The columns of a stored session (`state.db`'s `sessions` row) that every session reply
/// carries, in Hermes's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionColumns {
    pub id: StoredSessionId,
    /// Where it was started: `tui`, `desktop`, `api_server`, `cron` …
    pub source: String,
    pub user_id: Option<String>,
    pub session_key: Option<String>,
    pub chat_id: Option<String>,
    pub chat_type: Option<String>,
    pub thread_id: Option<String>,
    pub display_name: Option<String>,
    pub origin_json: Option<String>,
    pub expiry_finalized: i64,
    pub model: Option<String>,
    pub parent_session_id: Option<StoredSessionId>,
    /// Epoch seconds.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub end_reason: Option<String>,
    pub message_count: i64,
    pub tool_call_count: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub cwd: Option<String>,
    pub git_branch: Option<String>,
    pub git_repo_root: Option<String>,
    pub billing_provider: Option<String>,
    pub billing_base_url: Option<String>,
    pub billing_mode: Option<String>,
    pub estimated_cost_usd: Option<f64>,
    pub actual_cost_usd: Option<f64>,
    pub cost_status: Option<String>,
    pub cost_source: Option<String>,
    pub pricing_version: Option<String>,
    pub title: Option<String>,
    pub api_call_count: i64,
    pub handoff_state: Option<String>,
    pub handoff_platform: Option<String>,
    pub handoff_error: Option<String>,
    pub compression_failure_cooldown_until: Option<f64>,
    pub compression_failure_error: Option<String>,
    pub compression_fallback_streak: i64,
    /// The profile a session was created under, when not the runtime's own (never renamed).
    pub profile_name: Option<String>,
    pub rewind_count: i64,
}

/// A session in `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    #[serde(flatten)]
    pub columns: SessionColumns,
    pub archived: bool,
    /// The newest message's time, else `started_at`.
    pub last_active: f64,
    /// The first user message, on one line, cut at 60 characters (`…` marks a cut).
    pub preview: String,
    /// Not ended, and active in the last five minutes.
    pub is_active: bool,
    /// With `?profile=`: the profile whose `state.db` was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_default_profile: Option<bool>,
}

/// `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    /// Every session the filters match, regardless of `limit` and `offset`.
    pub total: i64,
    pub limit: i64,
    pub offset: i64,
}

/// `GET /api/sessions/{id}`: the whole row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub columns: SessionColumns,
    /// A JSON document, as text.
    pub model_config: Option<String>,
    pub system_prompt: Option<String>,
    /// 0 or 1 (a bool in lists, an integer here, as Hermes answers).
    pub archived: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// A stored message (`state.db`'s `messages` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub id: i64,
    pub session_id: StoredSessionId,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Text, or structured content Hermes stored as JSON.
    pub content: Value,
    pub tool_call_id: Option<String>,
    /// The tool calls of an assistant message, parsed.
    pub tool_calls: Option<Value>,
    pub tool_name: Option<String>,
    pub effect_disposition: Option<String>,
    /// Epoch seconds.
    pub timestamp: f64,
    pub token_count: Option<i64>,
    pub finish_reason: Option<String>,
    pub reasoning: Option<String>,
    pub reasoning_content: Option<String>,
    pub reasoning_details: Option<Value>,
    pub codex_reasoning_items: Option<Value>,
    pub codex_message_items: Option<Value>,
    pub platform_message_id: Option<String>,
    pub observed: i64,
    pub active: i64,
    pub compacted: i64,
    pub api_content: Option<Value>,
}

/// `GET /api/sessions/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePage {
    /// The session read (a prefix given in the path resolves to the whole id).
    pub session_id: StoredSessionId,
    pub messages: Vec<StoredMessage>,
    pub pagination: MessagePagination,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePagination {
    /// The limit applied (at most 500), or `None` for all.
    pub limit: Option<i64>,
    pub offset: i64,
    pub returned: i64,
}

/// `GET /api/sessions/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub results: Vec<SearchHit>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The matching text, with the match between `>>>` and `<<<`.
    pub snippet: String,
    /// The role of the matching message; `None` for a match on the session id.
    pub role: Option<String>,
    pub source: String,
    pub model: Option<String>,
    pub session_started: f64,
    pub session_id: StoredSessionId,
    pub lineage_root: StoredSessionId,
}

/// `PATCH /api/sessions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionUpdated {
    pub ok: bool,
    /// The title now (`""` when cleared).
    pub title: String,
    /// Only when the request set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
}

/// `DELETE /api/sessions/{id}`: idempotent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDeleted {
    pub ok: bool,
    /// `Some(true)` when there was no such session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_absent: Option<bool>,
}

/// `GET /api/profiles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profiles {
    /// `default` first, then the named profiles by name.
    pub profiles: Vec<ProfileSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub name: String,
    /// The profile's home.
    pub path: String,
    pub is_default: bool,
    /// `model.default` of its config.yaml.
    pub model: Option<String>,
    pub provider: Option<String>,
    pub has_env: bool,
    pub skill_count: i64,
    pub gateway_running: bool,
    pub description: String,
    pub description_auto: bool,
    pub distribution_name: Option<String>,
    pub distribution_version: Option<String>,
    pub distribution_source: Option<String>,
    pub has_alias: bool,
}

/// `GET /api/profiles/active`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveProfile {
    /// The sticky active profile.
    pub active: String,
    /// The profile this server runs as.
    pub current: String,
}

/// `POST /api/profiles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileCreated {
    pub ok: bool,
    /// The name as the request gave it.
    pub name: String,
    pub path: String,
    pub model_set: bool,
    pub mcp_written: i64,
    pub skills_disabled: i64,
    pub hub_installs: Vec<Value>,
}

/// `PATCH /api/profiles/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRenamed {
    pub ok: bool,
    /// The new name as the request gave it.
    pub name: String,
    pub path: String,
}

/// `DELETE /api/profiles/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileDeleted {
    pub ok: bool,
    pub path: String,
}

/// `GET /api/fs/list`: a failure is a code in `error`, not an HTTP error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirListing {
    /// Directories first, then by name (case-insensitively).
    pub entries: Vec<DirEntry>,
    /// `ENOENT`, `ENOTDIR`, `EACCES` …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    pub name: String,
    pub path: String,
    /// A symbolic link is not a directory here, whatever it points to.
    pub is_directory: bool,
}

/// `GET /api/fs/read-text`: the first 512 KiB of a file, as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextFile {
    pub binary: bool,
    /// The whole file's size.
    pub byte_size: i64,
    pub language: String,
    pub mime_type: String,
    /// The resolved path.
    pub path: String,
    pub text: String,
    pub truncated: bool,
}

/// `POST /api/fs/write-text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    pub ok: bool,
    pub path: String,
    pub byte_size: i64,
}

/// `GET /api/git/status` of a repository (`null` for a directory that is not in one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoStatus {
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    pub default_branch: Option<String>,
    pub detached: bool,
    pub ahead: i64,
    pub behind: i64,
    pub staged: i64,
    pub unstaged: i64,
    pub untracked: i64,
    pub conflicted: i64,
    pub changed: i64,
    /// Lines added and removed against HEAD, untracked files counted as added.
    pub added: i64,
    pub removed: i64,
    /// The first 200 changed files.
    pub files: Vec<ChangedFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Relative to the repository's root.
    pub path: String,
    pub staged: bool,
    pub unstaged: bool,
    pub untracked: bool,
    pub conflicted: bool,
}

/// `GET /api/git/branches`: most recent commit first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchList {
    pub branches: Vec<Branch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    pub name: String,
    /// Checked out in some worktree.
    pub checked_out: bool,
    pub is_default: bool,
    pub worktree_path: Option<String>,
}

/// A scheduled job, as `<home>/cron/jobs.json` keeps it and the cron routes answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    /// 12 hex digits.
    pub id: String,
    pub name: String,
    pub prompt: String,
    pub skills: Vec<String>,
    pub skill: Option<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub provider_snapshot: Option<String>,
    pub model_snapshot: Option<String>,
    pub base_url: Option<String>,
    pub script: Option<String>,
    pub no_agent: bool,
    pub context_from: Option<Value>,
    pub schedule: CronSchedule,
    pub schedule_display: String,
    pub repeat: CronRepeat,
    pub enabled: bool,
    /// `scheduled`, `paused`, `completed` or `error`.
    pub state: String,
    pub paused_at: Option<String>,
    pub paused_reason: Option<String>,
    /// ISO 8601 times, with microseconds and offset.
    pub created_at: String,
    pub next_run_at: Option<String>,
    pub last_run_at: Option<String>,
    /// `ok` or `error` after a run.
    pub last_status: Option<String>,
    pub last_error: Option<String>,
    pub last_delivery_error: Option<String>,
    /// Where output goes: `local` (saved only).
    pub deliver: String,
    pub origin: Option<Value>,
    pub enabled_toolsets: Option<Vec<String>>,
    pub workdir: Option<String>,
    /// In replies: the profile the job belongs to (`profile_name` is the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hermes_home: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_default_profile: Option<bool>,
    /// Keys beyond these (`fire_claim`, `latest_execution` in lists, anything an update set).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronSchedule {
    /// `interval`, `cron` or `once`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    pub display: String,
}

/// How often a job runs (`times: None` is forever) and how often it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRepeat {
    pub times: Option<i64>,
    pub completed: i64,
}

/// `GET /api/cron/jobs/{id}/runs`: the sessions its runs made, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRuns {
    pub runs: Vec<SessionSummary>,
    pub limit: i64,
}

/// `DELETE /api/cron/jobs/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronDeleted {
    pub ok: bool,
}

/// A skill of a profile (`skills/**/SKILL.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The directory it sits in, for `skills/<category>/<skill>/SKILL.md`.
    pub category: Option<String>,
    /// Not in `skills.disabled`.
    pub enabled: bool,
    pub usage: i64,
    /// `hub`, `bundled` or `agent`.
    pub provenance: String,
}

/// `PUT /api/skills/toggle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillToggled {
    pub ok: bool,
    pub name: String,
    pub enabled: bool,
}

/// A toolset the agent may be given, and whether it is on for its platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toolset {
    pub name: String,
    pub label: String,
    pub description: String,
    /// The platform whose list it is in (`cli`).
    pub platform: String,
    pub platform_label: String,
    pub enabled: bool,
    pub available: bool,
    /// Whatever it needs (keys) is set.
    pub configured: bool,
    pub tools: Vec<String>,
}

/// `PUT /api/tools/toolsets/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsetUpdated {
    pub ok: bool,
    pub name: String,
    pub platform: String,
    pub enabled: bool,
}

/// `GET /api/config`: the settings, `model` as its name, `model_context_length` last.
pub type Settings = serde_json::Map<String, Value>;

/// `PUT /api/config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsSaved {
    pub ok: bool,
}

/// `GET /api/config/schema`: each setting by its dotted key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsSchema {
    pub fields: std::collections::BTreeMap<String, SettingField>,
    pub category_order: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingField {
    /// `string`, `number`, `boolean`, `list` or `select`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    pub category: String,
    /// The choices of a `select`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<Value>>,
}

/// A dashboard plugin the server offers (`GET /api/dashboard/plugins`); one with `has_api`
/// serves routes of its own under `/api/plugins/<name>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DashboardPlugin {
    pub name: String,
    pub label: String,
    pub description: String,
    pub version: Option<String>,
    #[serde(default)]
    pub has_api: bool,
    /// `bundled` or `user`.
    pub source: String,
    /// What the dashboard needs to show it (`icon`, `tab`, `slots`, `entry`, `css` …).
    #[serde(flatten)]
    pub presentation: serde_json::Map<String, Value>,
}

/// The reply of [`Route::StatusGet`](super::Route::StatusGet).
pub type StatusGet = Status;
/// The reply of [`Route::SessionList`](super::Route::SessionList).
pub type SessionList = SessionPage;
/// The reply of [`Route::SessionSearch`](super::Route::SessionSearch).
pub type SessionSearch = SearchResults;
/// The reply of [`Route::SessionGet`](super::Route::SessionGet).
pub type SessionGet = SessionDetail;
/// The reply of [`Route::SessionMessages`](super::Route::SessionMessages).
pub type SessionMessages = MessagePage;
/// The reply of [`Route::SessionUpdate`](super::Route::SessionUpdate).
pub type SessionUpdate = SessionUpdated;
/// The reply of [`Route::SessionDelete`](super::Route::SessionDelete).
pub type SessionDelete = SessionDeleted;
/// The reply of [`Route::ProfileList`](super::Route::ProfileList).
pub type ProfileList = Profiles;
/// The reply of [`Route::ProfileActive`](super::Route::ProfileActive).
pub type ProfileActive = ActiveProfile;
/// The reply of [`Route::ProfileCreate`](super::Route::ProfileCreate).
pub type ProfileCreate = ProfileCreated;
/// The reply of [`Route::ProfileRename`](super::Route::ProfileRename).
pub type ProfileRename = ProfileRenamed;
/// The reply of [`Route::ProfileDelete`](super::Route::ProfileDelete).
pub type ProfileDelete = ProfileDeleted;
/// The reply of [`Route::CronJobList`](super::Route::CronJobList).
pub type CronJobList = Vec<CronJob>;
/// The reply of [`Route::CronJobCreate`](super::Route::CronJobCreate).
pub type CronJobCreate = CronJob;
/// The reply of [`Route::CronJobGet`](super::Route::CronJobGet).
pub type CronJobGet = CronJob;
/// The reply of [`Route::CronJobUpdate`](super::Route::CronJobUpdate).
pub type CronJobUpdate = CronJob;
/// The reply of [`Route::CronJobDelete`](super::Route::CronJobDelete).
pub type CronJobDelete = CronDeleted;
/// The reply of [`Route::CronJobPause`](super::Route::CronJobPause).
pub type CronJobPause = CronJob;
/// The reply of [`Route::CronJobResume`](super::Route::CronJobResume).
pub type CronJobResume = CronJob;
/// The reply of [`Route::CronJobTrigger`](super::Route::CronJobTrigger).
pub type CronJobTrigger = CronJob;
/// The reply of [`Route::CronJobRuns`](super::Route::CronJobRuns).
pub type CronJobRuns = CronRuns;
/// The reply of [`Route::SkillList`](super::Route::SkillList).
pub type SkillList = Vec<Skill>;
/// The reply of [`Route::SkillToggle`](super::Route::SkillToggle).
pub type SkillToggle = SkillToggled;
/// The reply of [`Route::ToolsetList`](super::Route::ToolsetList).
pub type ToolsetList = Vec<Toolset>;
/// The reply of [`Route::ToolsetUpdate`](super::Route::ToolsetUpdate).
pub type ToolsetUpdate = ToolsetUpdated;
/// The reply of [`Route::ConfigGet`](super::Route::ConfigGet).
pub type ConfigGet = Settings;
/// The reply of [`Route::ConfigUpdate`](super::Route::ConfigUpdate).
pub type ConfigUpdate = SettingsSaved;
/// The reply of [`Route::ConfigSchema`](super::Route::ConfigSchema).
pub type ConfigSchema = SettingsSchema;
/// The reply of [`Route::FsList`](super::Route::FsList).
pub type FsList = DirListing;
/// The reply of [`Route::FsReadText`](super::Route::FsReadText).
pub type FsReadText = TextFile;
/// The reply of [`Route::FsWriteText`](super::Route::FsWriteText).
pub type FsWriteText = FileWritten;
/// The reply of [`Route::GitStatus`](super::Route::GitStatus).
pub type GitStatus = Option<RepoStatus>;
/// The reply of [`Route::GitBranches`](super::Route::GitBranches).
pub type GitBranches = BranchList;
/// The reply of [`Route::PluginList`](super::Route::PluginList).
pub type PluginList = Vec<DashboardPlugin>;
