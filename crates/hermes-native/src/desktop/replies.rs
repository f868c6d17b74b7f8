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
    /// The release date of that Hermes version.
    pub release_date: String,
    /// `_config_version` of the profile's config.yaml (0 when unset).
    pub config_version: i64,
    /// The `_config_version` this Hermes version writes; a lower `config_version` is an unmigrated
    /// config.
    pub latest_config_version: i64,
    /// Whether the dashboard may offer `hermes update` (false when the install is managed from
    /// outside, as in a container).
    pub can_update_hermes: bool,
    /// Whether the messaging gateway runs (not the `/api/ws` gateway, which always does).
    pub gateway_running: bool,
    /// The messaging gateway's state from `gateway_state.json` (`running`, `stopped`,
    /// `startup_failed` …), if known.
    pub gateway_state: Option<String>,
    /// The messaging gateway's configured platforms and their states, by name (`{}` when it is not
    /// running).
    pub gateway_platforms: Value,
    /// Why the messaging gateway last exited, as it recorded.
    pub gateway_exit_reason: Option<String>,
    /// When the messaging gateway last wrote its runtime status.
    pub gateway_updated_at: Option<Value>,
    /// Agent turns the messaging gateway has in flight.
    pub active_agents: i64,
    /// The messaging gateway is running with at least one turn in flight.
    pub gateway_busy: bool,
    /// The messaging gateway is running and could be asked to drain.
    pub gateway_drainable: bool,
    /// Seconds a gateway restart waits for turns in flight to finish.
    pub restart_drain_timeout: f64,
    /// Sessions active in the last five minutes.
    pub active_sessions: i64,
    /// Whether the dashboard's sign-in gate is on (false on a loopback or `--insecure` bind).
    pub auth_required: bool,
    /// The names of the registered dashboard sign-in providers.
    pub auth_providers: Vec<String>,
    /// The Nous sign-in's health: `valid`, `terminal` or `unknown`.
    pub nous_session_valid: Value,
    /// `default` first, then the named profiles by name.
    pub profiles: Vec<String>,
    /// How messaging gateways serve the profiles: `multiplex`, `single`, `multiple` or `none`
    /// (`unknown` when they could not be listed).
    pub gateway_mode: String,
    /// Only when `auth_required` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hermes_home: Option<String>,
    /// The profile's `config.yaml`; only when `auth_required` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
    /// The profile's `.env`; only when `auth_required` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_path: Option<String>,
    /// The messaging gateway's process id, when it runs; only when `auth_required` is false.
    #[serde(default)]
    pub gateway_pid: Option<i64>,
    /// `GATEWAY_HEALTH_URL`, the probe of a gateway in another container, if set; only when
    /// `auth_required` is false.
    #[serde(default)]
    pub gateway_health_url: Option<String>,
    /// Each live messaging gateway: `profile`, `ports` by platform and any `served_profiles`; only
    /// when `auth_required` is false.
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
    /// The session's id.
    pub id: StoredSessionId,
    /// Where it was started: `tui`, `desktop`, `api_server`, `cron` …
    pub source: String,
    /// The messaging-gateway user it is with, if any.
    pub user_id: Option<String>,
    /// The messaging gateway's routing key for its conversation, if any.
    pub session_key: Option<String>,
    /// The messaging-gateway chat it belongs to, if any.
    pub chat_id: Option<String>,
    /// The type of that chat, as the gateway records it.
    pub chat_type: Option<String>,
    /// The thread within that chat, if any.
    pub thread_id: Option<String>,
    /// The messaging gateway's display name for its conversation.
    pub display_name: Option<String>,
    /// The messaging gateway's full origin metadata, as JSON text.
    pub origin_json: Option<String>,
    /// 1 once the messaging gateway has finalized its expiry, else 0.
    pub expiry_finalized: i64,
    /// The model it ran with.
    pub model: Option<String>,
    /// The session it continues after compression, or was branched or delegated from.
    pub parent_session_id: Option<StoredSessionId>,
    /// Epoch seconds.
    pub started_at: f64,
    /// Epoch seconds; `None` while it has not ended.
    pub ended_at: Option<f64>,
    /// Why it ended: `compression`, `branched`, `cli_close`, `cron_complete` …
    pub end_reason: Option<String>,
    /// How many messages it has.
    pub message_count: i64,
    /// How many tool calls it has.
    pub tool_call_count: i64,
    /// Input tokens used.
    pub input_tokens: i64,
    /// Output tokens used.
    pub output_tokens: i64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: i64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: i64,
    /// Reasoning tokens used.
    pub reasoning_tokens: i64,
    /// The working directory it ran in, when known.
    pub cwd: Option<String>,
    /// The git branch checked out in `cwd` when it started or resumed.
    pub git_branch: Option<String>,
    /// The root of the git repository `cwd` belongs to.
    pub git_repo_root: Option<String>,
    /// The provider its model calls are billed by.
    pub billing_provider: Option<String>,
    /// The API base URL its model calls went to.
    pub billing_base_url: Option<String>,
    /// How it is billed: `official_docs_snapshot`, `subscription_included`, `unknown` …
    pub billing_mode: Option<String>,
    /// Estimated cost, in US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// Actual cost, in US dollars, when known.
    pub actual_cost_usd: Option<f64>,
    /// `actual`, `estimated`, `included` or `unknown`.
    pub cost_status: Option<String>,
    /// Where the cost came from: `provider_cost_api`, `official_docs_snapshot`, `none` …
    pub cost_source: Option<String>,
    /// The price table the cost was computed from.
    pub pricing_version: Option<String>,
    /// Its title, if it has one.
    pub title: Option<String>,
    /// How many model API calls it made.
    pub api_call_count: i64,
    /// Its handoff to a messaging platform: `pending`, `running`, `completed` or `failed`.
    pub handoff_state: Option<String>,
    /// The platform it is handed off to.
    pub handoff_platform: Option<String>,
    /// Why the handoff failed.
    pub handoff_error: Option<String>,
    /// Epoch seconds until which compression is not retried after failing.
    pub compression_failure_cooldown_until: Option<f64>,
    /// The error of the compression failure behind that cooldown.
    pub compression_failure_error: Option<String>,
    /// Hermes's persisted streak of compressions that used its deterministic fallback.
    pub compression_fallback_streak: i64,
    /// The profile a session was created under, when not the runtime's own (never renamed).
    pub profile_name: Option<String>,
    /// How many times it was rewound to an earlier user message.
    pub rewind_count: i64,
}

/// A session in `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The stored row.
    #[serde(flatten)]
    pub columns: SessionColumns,
    /// Whether it is archived (hidden unless `archived` asks for it).
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
    /// With `?profile=`: whether that profile is `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_default_profile: Option<bool>,
    /// With `?full=1`: the stored agent settings and system prompt, which lists leave out
    /// otherwise (when the keys are absent this reads as both `None`).
    #[serde(flatten)]
    pub full: Option<SessionBlobs>,
}

/// The large columns of a session row that lists leave out unless asked (`full=1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionBlobs {
    /// A JSON document, as text.
    pub model_config: Option<String>,
    /// The system prompt stored for it.
    pub system_prompt: Option<String>,
}

/// `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPage {
    /// The sessions of this page.
    pub sessions: Vec<SessionSummary>,
    /// Every session the filters match, regardless of `limit` and `offset`.
    pub total: i64,
    /// The `limit` asked for.
    pub limit: i64,
    /// The `offset` asked for.
    pub offset: i64,
}

/// `GET /api/sessions/{id}`: the whole row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDetail {
    /// The stored row.
    #[serde(flatten)]
    pub columns: SessionColumns,
    /// A JSON document, as text.
    pub model_config: Option<String>,
    /// The system prompt stored for it.
    pub system_prompt: Option<String>,
    /// 0 or 1 (a bool in lists, an integer here, as Hermes answers).
    pub archived: i64,
    /// With `?profile=`: the profile whose `state.db` was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// A stored message (`state.db`'s `messages` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Its row id, increasing in the order messages were stored.
    pub id: i64,
    /// The session it belongs to.
    pub session_id: StoredSessionId,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Text, or structured content Hermes stored as JSON.
    pub content: Value,
    /// Of a `tool` message: the call it answers.
    pub tool_call_id: Option<String>,
    /// The tool calls of an assistant message, parsed.
    pub tool_calls: Option<Value>,
    /// Of a `tool` message: the tool that ran.
    pub tool_name: Option<String>,
    /// Of a tool result: `none` when the call had no effect, `unknown` when it may have
    /// (interrupted or timed out).
    pub effect_disposition: Option<String>,
    /// Epoch seconds.
    pub timestamp: f64,
    /// Its token count, when recorded.
    pub token_count: Option<i64>,
    /// Why the model stopped, for an assistant message.
    pub finish_reason: Option<String>,
    /// The model's reasoning text.
    pub reasoning: Option<String>,
    /// Reasoning as the provider's `reasoning_content` field carried it.
    pub reasoning_content: Option<String>,
    /// The provider's structured reasoning blocks.
    pub reasoning_details: Option<Value>,
    /// Reasoning items of the Codex Responses API, kept to be replayed.
    pub codex_reasoning_items: Option<Value>,
    /// Message items of the Codex Responses API, kept to be replayed.
    pub codex_message_items: Option<Value>,
    /// The messaging platform's own id for it.
    pub platform_message_id: Option<String>,
    /// 1 for group-chat context the gateway observed, not a message to the agent, else 0.
    pub observed: i64,
    /// 1 while it is part of the live conversation; 0 once rewound or compacted away.
    pub active: i64,
    /// 1 when compaction summarized it away (it stays searchable), else 0.
    pub compacted: i64,
    /// The exact content sent to the API, when it differs from `content`.
    pub api_content: Option<Value>,
}

/// `GET /api/sessions/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePage {
    /// The session read (a prefix given in the path resolves to the whole id).
    pub session_id: StoredSessionId,
    /// The session's active messages, in the order they were stored.
    pub messages: Vec<StoredMessage>,
    /// Which of them this page holds.
    pub pagination: MessagePagination,
}

/// Which messages a [`MessagePage`] holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePagination {
    /// The limit applied (at most 500), or `None` for all.
    pub limit: Option<i64>,
    /// How many messages were skipped.
    pub offset: i64,
    /// How many messages this page holds.
    pub returned: i64,
}

/// `GET /api/sessions/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    /// At most `limit` hits, one per conversation, session-id matches first.
    pub results: Vec<SearchHit>,
}

/// A conversation that matches a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The matching text, with the match between `>>>` and `<<<`.
    pub snippet: String,
    /// The role of the matching message; `None` for a match on the session id.
    pub role: Option<String>,
    /// The matching session's `source`.
    pub source: String,
    /// The matching session's model.
    pub model: Option<String>,
    /// When the matching session started, in epoch seconds.
    pub session_started: f64,
    /// The conversation's newest session (the tip of its compression chain).
    pub session_id: StoredSessionId,
    /// The conversation's first session (the root of its compression chain).
    pub lineage_root: StoredSessionId,
}

/// `PATCH /api/sessions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionUpdated {
    /// Always `true`.
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
    /// Always `true`.
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

/// A profile in `GET /api/profiles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// Its name (`default` for the root profile).
    pub name: String,
    /// The profile's home.
    pub path: String,
    /// Whether it is the `default` profile.
    pub is_default: bool,
    /// `model.default` of its config.yaml.
    pub model: Option<String>,
    /// `model.provider` of its config.yaml.
    pub provider: Option<String>,
    /// Whether it has a `.env` file.
    pub has_env: bool,
    /// How many skills it has installed.
    pub skill_count: i64,
    /// Whether its messaging gateway runs.
    pub gateway_running: bool,
    /// What it is good at, in a sentence or two (`""` when not described).
    pub description: String,
    /// `description` was generated and not yet confirmed by the user.
    pub description_auto: bool,
    /// The name of the distribution it was installed from (`distribution.yaml`), if any.
    pub distribution_name: Option<String>,
    /// That distribution's version.
    pub distribution_version: Option<String>,
    /// Where that distribution came from.
    pub distribution_source: Option<String>,
    /// Whether a wrapper command for it exists.
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
    /// Always `true`.
    pub ok: bool,
    /// The name as the request gave it.
    pub name: String,
    /// The new profile's home.
    pub path: String,
    /// Whether the provider and model the request gave were written to its config.
    pub model_set: bool,
    /// How many of the request's MCP servers were written to its config.
    pub mcp_written: i64,
    /// How many seeded skills were disabled for not being in the request's `keep_skills`.
    pub skills_disabled: i64,
    /// The skills-hub installs started for it: `identifier` and `pid` (`null` when it failed to
    /// start).
    pub hub_installs: Vec<Value>,
}

/// `PATCH /api/profiles/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRenamed {
    /// Always `true`.
    pub ok: bool,
    /// The new name as the request gave it.
    pub name: String,
    /// The profile's home after the rename.
    pub path: String,
}

/// `DELETE /api/profiles/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileDeleted {
    /// Always `true`.
    pub ok: bool,
    /// The home that was removed.
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

/// An entry of a listed directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    /// Its file name.
    pub name: String,
    /// The listed directory joined with `name`.
    pub path: String,
    /// A symbolic link is not a directory here, whatever it points to.
    pub is_directory: bool,
}

/// `GET /api/fs/read-text`: the first 512 KiB of a file, as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextFile {
    /// Whether its first 4 KiB look binary.
    pub binary: bool,
    /// The whole file's size.
    pub byte_size: i64,
    /// The language to highlight it as, from its extension (`text` when unknown).
    pub language: String,
    /// Its MIME type.
    pub mime_type: String,
    /// The resolved path.
    pub path: String,
    /// What was read, decoded as UTF-8 (invalid bytes replaced).
    pub text: String,
    /// Whether the file is longer than what was read.
    pub truncated: bool,
}

/// `POST /api/fs/write-text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    /// Always `true`.
    pub ok: bool,
    /// The resolved path written.
    pub path: String,
    /// The size written, in bytes.
    pub byte_size: i64,
}

/// `GET /api/git/status` of a repository (`null` for a directory that is not in one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoStatus {
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    /// The repository's trunk (`main`, `master` …), from `origin/HEAD` when set.
    pub default_branch: Option<String>,
    /// Whether HEAD is detached.
    pub detached: bool,
    /// Commits ahead of the upstream branch.
    pub ahead: i64,
    /// Commits behind the upstream branch.
    pub behind: i64,
    /// Changed files with staged changes.
    pub staged: i64,
    /// Changed files with unstaged changes, untracked ones included.
    pub unstaged: i64,
    /// Untracked files.
    pub untracked: i64,
    /// Files with merge conflicts.
    pub conflicted: i64,
    /// All changed files.
    pub changed: i64,
    /// Lines added and removed against HEAD, untracked files counted as added.
    pub added: i64,
    /// Lines removed against HEAD.
    pub removed: i64,
    /// The first 200 changed files.
    pub files: Vec<ChangedFile>,
}

/// A changed file of a [`RepoStatus`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Relative to the repository's root.
    pub path: String,
    /// Whether it has staged changes.
    pub staged: bool,
    /// Whether it has unstaged changes (an untracked file does).
    pub unstaged: bool,
    /// Whether git does not track it.
    pub untracked: bool,
    /// Whether it has a merge conflict.
    pub conflicted: bool,
}

/// `GET /api/git/branches`: most recent commit first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchList {
    /// The local branches.
    pub branches: Vec<Branch>,
}

/// A local branch of a [`BranchList`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    /// Its short name.
    pub name: String,
    /// Checked out in some worktree.
    pub checked_out: bool,
    /// Whether it is the repository's trunk.
    pub is_default: bool,
    /// The worktree it is checked out in, if any.
    pub worktree_path: Option<String>,
}

/// A scheduled job, as `<home>/cron/jobs.json` keeps it and the cron routes answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    /// 12 hex digits.
    pub id: String,
    /// Its name (from the prompt when none was given).
    pub name: String,
    /// The prompt the agent runs.
    pub prompt: String,
    /// Skills loaded before the prompt, in order.
    pub skills: Vec<String>,
    /// The first of `skills` (the older single-skill key).
    pub skill: Option<String>,
    /// A model pinned for the job.
    pub model: Option<String>,
    /// A provider pinned for the job.
    pub provider: Option<String>,
    /// The provider resolved when it was created, when none was pinned (a guard against drift).
    pub provider_snapshot: Option<String>,
    /// The model resolved when it was created, when none was pinned (a guard against drift).
    pub model_snapshot: Option<String>,
    /// An API base URL pinned for the job.
    pub base_url: Option<String>,
    /// A script whose output feeds the prompt, or is the whole job with `no_agent`.
    pub script: Option<String>,
    /// Whether `script` runs without the agent, its output delivered as is.
    pub no_agent: bool,
    /// Jobs whose latest output is given to this one as context.
    pub context_from: Option<Value>,
    /// When it runs.
    pub schedule: CronSchedule,
    /// The schedule in words (`every 30m` …).
    pub schedule_display: String,
    /// How often it runs and has run.
    pub repeat: CronRepeat,
    /// Whether it is scheduled to run.
    pub enabled: bool,
    /// `scheduled`, `paused`, `completed` or `error`.
    pub state: String,
    /// When it was paused.
    pub paused_at: Option<String>,
    /// Why it was paused.
    pub paused_reason: Option<String>,
    /// ISO 8601 times, with microseconds and offset.
    pub created_at: String,
    /// When it runs next.
    pub next_run_at: Option<String>,
    /// When it last ran.
    pub last_run_at: Option<String>,
    /// `ok` or `error` after a run.
    pub last_status: Option<String>,
    /// The error of the last run.
    pub last_error: Option<String>,
    /// Why delivering the last output failed.
    pub last_delivery_error: Option<String>,
    /// Where output goes: `local` (saved only).
    pub deliver: String,
    /// Where it was created, for `origin` delivery.
    pub origin: Option<Value>,
    /// The only toolsets the agent gets, when set.
    pub enabled_toolsets: Option<Vec<String>>,
    /// The directory it runs in, when set.
    pub workdir: Option<String>,
    /// In replies: the profile the job belongs to (`profile_name` is the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// In replies: the same as `profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_name: Option<String>,
    /// In replies: the home of its profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hermes_home: Option<String>,
    /// In replies: whether its profile is `default`.
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
    /// Of an `interval`: the minutes between runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<i64>,
    /// Of a `cron` schedule: the cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// Of a `once` schedule: when it runs (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// The schedule in words.
    pub display: String,
}

/// How often a job runs (`times: None` is forever) and how often it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRepeat {
    /// Runs wanted; `None` is forever.
    pub times: Option<i64>,
    /// Runs done.
    pub completed: i64,
}

/// `GET /api/cron/jobs/{id}/runs`: the sessions its runs made, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRuns {
    /// The run sessions.
    pub runs: Vec<SessionSummary>,
    /// The limit applied (1 to 100).
    pub limit: i64,
}

/// `DELETE /api/cron/jobs/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronDeleted {
    /// Always `true`.
    pub ok: bool,
}

/// A skill of a profile (`skills/**/SKILL.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// Its name (`name` in its front matter, else its directory's).
    pub name: String,
    /// Its description (from its front matter, else the first line of its text).
    pub description: String,
    /// The directory it sits in, for `skills/<category>/<skill>/SKILL.md`.
    pub category: Option<String>,
    /// Not in `skills.disabled`.
    pub enabled: bool,
    /// How often it was used, viewed or patched.
    pub usage: i64,
    /// `hub`, `bundled` or `agent`.
    pub provenance: String,
}

/// `PUT /api/skills/toggle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillToggled {
    /// Always `true`.
    pub ok: bool,
    /// The skill the request named.
    pub name: String,
    /// Whether it is now enabled.
    pub enabled: bool,
}

/// A toolset the agent may be given, and whether it is on for its platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toolset {
    /// Its key.
    pub name: String,
    /// Its display name.
    pub label: String,
    /// What it provides.
    pub description: String,
    /// The platform whose list it is in (`cli`).
    pub platform: String,
    /// The display name of `platform`.
    pub platform_label: String,
    /// Whether it is on for `platform`.
    pub enabled: bool,
    /// The same as `enabled`, as Hermes 0.19 answers.
    pub available: bool,
    /// Whatever it needs (keys) is set.
    pub configured: bool,
    /// The tools it provides, sorted.
    pub tools: Vec<String>,
}

/// `PUT /api/tools/toolsets/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsetUpdated {
    /// Always `true`.
    pub ok: bool,
    /// The toolset the request named.
    pub name: String,
    /// The platform whose toolsets were changed.
    pub platform: String,
    /// Whether it is now on.
    pub enabled: bool,
}

/// `GET /api/config`: the settings, `model` as its name, `model_context_length` last.
pub type Settings = serde_json::Map<String, Value>;

/// `PUT /api/config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsSaved {
    /// Always `true`.
    pub ok: bool,
}

/// `GET /api/config/schema`: each setting by its dotted key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsSchema {
    /// Each setting, by its dotted key.
    pub fields: std::collections::BTreeMap<String, SettingField>,
    /// The order to show categories in; others follow by name.
    pub category_order: Vec<String>,
}

/// A setting of a [`SettingsSchema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingField {
    /// `string`, `number`, `boolean`, `list` or `select`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its label (made from its key unless Hermes gives one).
    pub description: String,
    /// The category it is shown under.
    pub category: String,
    /// The choices of a `select`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<Value>>,
}

/// A dashboard plugin the server offers (`GET /api/dashboard/plugins`); one with `has_api`
/// serves routes of its own under `/api/plugins/<name>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DashboardPlugin {
    /// Its name.
    pub name: String,
    /// Its display name.
    pub label: String,
    /// What it does.
    pub description: String,
    /// Its version, from its manifest.
    pub version: Option<String>,
    /// Whether it serves routes of its own.
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
/// The reply of [`Route::McpCatalogList`](super::Route::McpCatalogList).
pub type McpCatalogList = McpCatalog;

/// The catalog of MCP servers a user may install (`GET /api/mcp/catalog`): the manifests the
/// server ships, each marked installed and enabled for the profile asked about.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpCatalog {
    /// The entries, each one MCP server.
    pub entries: Vec<McpCatalogEntry>,
    /// Manifests that could not be read, and why.
    pub diagnostics: Vec<McpCatalogDiagnostic>,
}

/// One MCP server of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCatalogEntry {
    /// Its name, as `mcp_servers:` would key it.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where its manifest comes from.
    pub source: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// How it authenticates (`none`, `env`, `oauth` …).
    pub auth_type: String,
    /// Variables the user must supply (names and prompts, never values).
    pub required_env: Vec<McpRequiredEnv>,
    /// For `stdio`: the command it runs, and its arguments.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// For `http`: where it is reached.
    pub url: Option<String>,
    /// For servers that are cloned and built: the repository and its ref.
    pub install_url: Option<String>,
    /// The ref to check out.
    pub install_ref: Option<String>,
    /// The commands that build it.
    pub bootstrap: Vec<String>,
    /// The tools switched on when it is installed (`None`: all).
    pub default_enabled: Option<Vec<String>>,
    /// What to do after installing it.
    pub post_install: String,
    /// Whether installing it clones and builds something.
    pub needs_install: bool,
    /// Whether it is in the profile's `mcp_servers:`.
    pub installed: bool,
    /// Whether it is switched on there.
    pub enabled: bool,
}

/// A variable an MCP server of the catalog needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpRequiredEnv {
    /// The variable's name.
    pub name: String,
    /// What the user is asked.
    pub prompt: String,
    /// Whether it must be set.
    pub required: bool,
}

/// A catalog manifest that could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCatalogDiagnostic {
    /// The manifest's name.
    pub name: String,
    /// What kind of problem.
    pub kind: String,
    /// What went wrong.
    pub message: String,
}
