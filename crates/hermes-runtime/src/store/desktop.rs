//! The Desktop routes' reads and writes of `state.db`, answered in Hermes's reply types. Columns
//! Hermes has and this store does not (messaging origins, handoff, compression failures, cache
//! and reasoning tokens, subscription billing …) answer their empty value: null, or 0 for
//! counters.

use edith_sqlite::Sqlite;
use edith_sqlite::SqliteRow;
use hermes_native::StoredSessionId;
use hermes_native::desktop::replies::{
    MessagePagination, SearchHit, SessionBlobs, SessionColumns, SessionDetail, SessionSummary,
    StoredMessage,
};
use serde_json::Value;
use sqlx::{QueryBuilder, Row};

use super::{StateDb, unix_now};

/// How long after its last message a session still counts as active.
const ACTIVE_WINDOW_SECS: f64 = 300.0;
/// How many messages holding a query's first word a search looks at, at most.
const SEARCH_CANDIDATES: i64 = 2000;
/// Titles are at most this long, in characters.
pub const MAX_TITLE_CHARS: usize = 100;

/// Which archived sessions a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    Exclude,
    Only,
    Include,
}

/// The order of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Newest start first.
    Created,
    /// Latest activity first.
    Recent,
}

/// What `GET /api/sessions` asks for.
#[derive(Debug, Clone)]
pub struct ListFilter {
    pub limit: i64,
    pub offset: i64,
    pub min_messages: i64,
    pub archived: Archived,
    pub order: Order,
    pub source: Option<String>,
    pub exclude_sources: Vec<String>,
    /// Sessions working in this directory or below it.
    pub cwd_prefix: Option<String>,
    /// Rows with their stored agent settings and system prompt (`full=1`).
    pub full: bool,
}

/// Why a title cannot be set.
#[derive(Debug)]
pub enum TitleRefusal {
    TooLong(usize),
    InUse(String),
}

const SUMMARY_SELECT: &str = "SELECT s.*, \
     COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id), s.started_at) \
         AS last_active, \
     (SELECT m.content FROM messages m WHERE m.session_id = s.id AND m.role = 'user' \
         ORDER BY m.id LIMIT 1) AS first_user \
     FROM sessions s";

impl StateDb {
    /// The id `input` names: itself, or the one session it is a prefix of.
    pub async fn resolve_id(&self, input: &str) -> Result<Option<String>, sqlx::Error> {
        let exact: Option<String> = sqlx::query_scalar("SELECT id FROM sessions WHERE id = ?")
            .bind(input)
            .fetch_optional(&self.pool)
            .await?;
        if exact.is_some() || input.is_empty() {
            return Ok(exact);
        }
        let matches: Vec<String> =
            sqlx::query_scalar("SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' LIMIT 2")
                .bind(format!("{}%", escape_like(input)))
                .fetch_all(&self.pool)
                .await?;
        Ok(match matches.as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        })
    }

    /// Sessions not ended with a message (or start) in the last five minutes.
    pub async fn active_session_count(&self) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions s WHERE s.ended_at IS NULL AND \
             COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id), \
             s.started_at) > ?",
        )
        .bind(unix_now() - ACTIVE_WINDOW_SECS)
        .fetch_one(&self.pool)
        .await
    }

    /// One page of sessions and how many match in all. Sub-agent sessions are left out.
    pub async fn session_page(
        &self,
        filter: &ListFilter,
    ) -> Result<(Vec<SessionSummary>, i64), sqlx::Error> {
        let mut page = QueryBuilder::<Sqlite>::new(SUMMARY_SELECT);
        push_filters(&mut page, filter);
        page.push(match filter.order {
            Order::Created => " ORDER BY s.started_at DESC, s.id DESC",
            Order::Recent => " ORDER BY last_active DESC, s.started_at DESC, s.id DESC",
        });
        page.push(" LIMIT ")
            .push_bind(filter.limit)
            .push(" OFFSET ")
            .push_bind(filter.offset.max(0));
        // Both scan the sessions (and each one's messages): off the threads serving requests.
        let rows = self.pool.fetch_all_off_thread(page.build()).await?;
        let mut count = QueryBuilder::<Sqlite>::new("SELECT COUNT(*) FROM sessions s");
        push_filters(&mut count, filter);
        let counted = self.pool.fetch_all_off_thread(count.build()).await?;
        let total: i64 = counted
            .first()
            .ok_or(sqlx::Error::RowNotFound)?
            .try_get(0)?;
        let summaries = rows
            .iter()
            .map(|row| {
                let mut summary = summary(row);
                if filter.full {
                    summary.full = Some(SessionBlobs {
                        model_config: row.get("model_config"),
                        system_prompt: row.get("system_prompt"),
                    });
                }
                summary
            })
            .collect();
        Ok((summaries, total))
    }

    /// The sessions the runs of cron job `job` made (`cron_<job>_…`), newest first.
    pub async fn cron_runs(
        &self,
        job: &str,
        limit: i64,
    ) -> Result<Vec<SessionSummary>, sqlx::Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{SUMMARY_SELECT} WHERE s.source = 'cron' AND s.id LIKE ? ESCAPE '\\' \
             ORDER BY s.started_at DESC, s.id DESC LIMIT ?"
        )))
        .bind(format!("cron\\_{}\\_%", escape_like(job)))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(summary).collect())
    }

    pub async fn session_detail(&self, id: &str) -> Result<Option<SessionDetail>, sqlx::Error> {
        let row = sqlx::query("SELECT * FROM sessions WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| SessionDetail {
            columns: columns(&row),
            model_config: row.get("model_config"),
            system_prompt: row.get("system_prompt"),
            archived: row.get("archived"),
            profile: None,
        }))
    }

    /// Messages in the order they were written; `limit` at most 500.
    pub async fn stored_messages(
        &self,
        id: &str,
        limit: Option<i64>,
        offset: i64,
    ) -> Result<(Vec<StoredMessage>, MessagePagination), sqlx::Error> {
        let limit = limit.map(|l| l.min(500));
        let rows = sqlx::query(
            "SELECT * FROM messages WHERE session_id = ? AND active = 1 ORDER BY id \
                 LIMIT ? OFFSET ?",
        )
        .bind(id)
        .bind(limit.unwrap_or(-1))
        .bind(offset.max(0))
        .fetch_all(&self.pool)
        .await?;
        let messages: Vec<StoredMessage> = rows.iter().map(stored_message).collect();
        let pagination = MessagePagination {
            limit,
            offset,
            returned: messages.len() as i64,
        };
        Ok((messages, pagination))
    }

    /// Sets (`Some(text)`) or clears (`Some("")`) the title and/or the archived flag. The
    /// title is tidied first; one already used by another session is refused.
    pub async fn update_session(
        &self,
        id: &str,
        title: Option<&str>,
        archived: Option<bool>,
    ) -> Result<Result<String, TitleRefusal>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(raw) = title {
            let title = tidy_title(raw);
            let chars = title.chars().count();
            if chars > MAX_TITLE_CHARS {
                return Ok(Err(TitleRefusal::TooLong(chars)));
            }
            if !title.is_empty() {
                let holder: Option<String> =
                    sqlx::query_scalar("SELECT id FROM sessions WHERE title = ? AND id != ?")
                        .bind(&title)
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some(holder) = holder {
                    return Ok(Err(TitleRefusal::InUse(holder)));
                }
            }
            sqlx::query("UPDATE sessions SET title = ? WHERE id = ?")
                .bind((!title.is_empty()).then_some(&title))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(archived) = archived {
            sqlx::query("UPDATE sessions SET archived = ? WHERE id = ?")
                .bind(i64::from(archived))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        let now: Option<String> = sqlx::query_scalar("SELECT title FROM sessions WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(now.unwrap_or_default()))
    }

    /// Sessions whose id contains `query` (exact, then prefix, then the rest, newest first),
    /// then sessions with a message holding every word of it (as word prefixes); one hit per
    /// session, at most `limit`.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, sqlx::Error> {
        let mut hits: Vec<SearchHit> = Vec::new();
        // Both scan (`LIKE` with a leading `%`): off the threads serving requests.
        let by_id = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{SUMMARY_SELECT} WHERE s.source != 'tool' AND s.id LIKE ? ESCAPE '\\' \
             ORDER BY (s.id = ?) DESC, (s.id LIKE ? ESCAPE '\\') DESC, s.started_at DESC LIMIT ?"
        )))
        .bind(format!("%{}%", escape_like(query)))
        .bind(query)
        .bind(format!("{}%", escape_like(query)))
        .bind(limit as i64);
        let by_id = self.pool.fetch_all_off_thread(by_id).await?;
        for row in &by_id {
            let summary = summary(row);
            let snippet = if summary.preview.is_empty() {
                format!("Session ID: {}", summary.columns.id)
            } else {
                summary.preview.clone()
            };
            hits.push(hit(&summary.columns, snippet, None));
        }
        let words: Vec<String> = query
            .split_whitespace()
            .map(|w| w.trim_matches('"').to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let Some(first) = words.first() else {
            return Ok(hits);
        };
        let candidates = sqlx::query(
            "SELECT m.role, m.content, s.* FROM messages m JOIN sessions s ON s.id = m.session_id \
             WHERE s.source != 'tool' AND m.content LIKE ? ESCAPE '\\' ORDER BY m.id LIMIT ?",
        )
        .bind(format!("%{}%", escape_like(first)))
        .bind(SEARCH_CANDIDATES);
        let candidates = self.pool.fetch_all_off_thread(candidates).await?;
        for row in &candidates {
            if hits.len() >= limit {
                break;
            }
            let content: String = row.get::<Option<String>, _>("content").unwrap_or_default();
            let Some(snippet) = snippet(&content, &words) else {
                continue;
            };
            let columns = columns(row);
            if hits.iter().any(|h| h.session_id == columns.id) {
                continue;
            }
            hits.push(hit(&columns, snippet, Some(row.get("role"))));
        }
        hits.truncate(limit);
        Ok(hits)
    }
}

fn push_filters(query: &mut QueryBuilder<Sqlite>, filter: &ListFilter) {
    query.push(" WHERE s.source != 'tool' AND s.message_count >= ");
    query.push_bind(filter.min_messages.max(0));
    query.push(match filter.archived {
        Archived::Exclude => " AND s.archived = 0",
        Archived::Only => " AND s.archived != 0",
        Archived::Include => "",
    });
    if let Some(source) = &filter.source {
        query.push(" AND s.source = ").push_bind(source.clone());
    }
    for source in &filter.exclude_sources {
        query.push(" AND s.source != ").push_bind(source.clone());
    }
    if let Some(prefix) = &filter.cwd_prefix {
        // As Hermes: the directory itself or anything below it, `/` or `\` separated.
        let trimmed = prefix.trim_end_matches(['/', '\\']);
        let prefix = if trimmed.is_empty() { prefix } else { trimmed };
        let below = escape_like(prefix);
        query
            .push(" AND (s.cwd = ")
            .push_bind(prefix.to_owned())
            .push(" OR s.cwd LIKE ")
            .push_bind(format!("{below}/%"))
            .push(" ESCAPE '\\' OR s.cwd LIKE ")
            .push_bind(format!("{below}\\\\%"))
            .push(" ESCAPE '\\')");
    }
}

fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

fn columns(row: &SqliteRow) -> SessionColumns {
    SessionColumns {
        id: StoredSessionId::new(row.get::<String, _>("id")),
        source: row.get("source"),
        user_id: None,
        session_key: None,
        chat_id: None,
        chat_type: None,
        thread_id: None,
        display_name: None,
        origin_json: None,
        expiry_finalized: 0,
        model: row.get("model"),
        parent_session_id: row
            .get::<Option<String>, _>("parent_session_id")
            .map(StoredSessionId::new),
        started_at: row.get("started_at"),
        ended_at: row.get("ended_at"),
        end_reason: row.get("end_reason"),
        message_count: row.get("message_count"),
        tool_call_count: row.get("tool_call_count"),
        input_tokens: row.get("input_tokens"),
        output_tokens: row.get("output_tokens"),
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cwd: row.get("cwd"),
        git_branch: row.get("git_branch"),
        git_repo_root: row.get("git_repo_root"),
        billing_provider: row.get("billing_provider"),
        billing_base_url: row.get("billing_base_url"),
        billing_mode: None,
        estimated_cost_usd: row.get("estimated_cost_usd"),
        actual_cost_usd: None,
        cost_status: row.get("cost_status"),
        cost_source: row.get("cost_source"),
        pricing_version: None,
        title: row.get("title"),
        api_call_count: row.get("api_call_count"),
        handoff_state: None,
        handoff_platform: None,
        handoff_error: None,
        compression_failure_cooldown_until: None,
        compression_failure_error: None,
        compression_fallback_streak: 0,
        profile_name: row.get("profile_name"),
        rewind_count: 0,
    }
}

fn summary(row: &SqliteRow) -> SessionSummary {
    let columns = columns(row);
    let last_active: f64 = row.get("last_active");
    let is_active = columns.ended_at.is_none() && unix_now() - last_active < ACTIVE_WINDOW_SECS;
    SessionSummary {
        columns,
        archived: row.get::<i64, _>("archived") != 0,
        last_active,
        preview: preview(
            row.get::<Option<String>, _>("first_user")
                .as_deref()
                .unwrap_or(""),
        ),
        is_active,
        profile: None,
        is_default_profile: None,
        full: None,
    }
}

fn hit(columns: &SessionColumns, snippet: String, role: Option<String>) -> SearchHit {
    SearchHit {
        snippet,
        role,
        source: columns.source.clone(),
        model: columns.model.clone(),
        session_started: columns.started_at,
        session_id: columns.id.clone(),
        lineage_root: columns.id.clone(),
    }
}

fn stored_message(row: &SqliteRow) -> StoredMessage {
    let content: Option<String> = row.get("content");
    StoredMessage {
        id: row.get("id"),
        session_id: StoredSessionId::new(row.get::<String, _>("session_id")),
        role: row.get("role"),
        content: content.map(Value::String).unwrap_or(Value::Null),
        tool_call_id: row.get("tool_call_id"),
        tool_calls: row
            .get::<Option<String>, _>("tool_calls")
            .map(|json| serde_json::from_str(&json).unwrap_or_else(|_| Value::Array(Vec::new()))),
        tool_name: row.get("tool_name"),
        effect_disposition: None,
        timestamp: row.get("timestamp"),
        token_count: None,
        finish_reason: row.get("finish_reason"),
        reasoning: None,
        reasoning_content: None,
        reasoning_details: None,
        codex_reasoning_items: None,
        codex_message_items: None,
        platform_message_id: None,
        observed: 0,
        active: 1,
        compacted: 0,
        api_content: None,
    }
}

/// The first user message on one line: at most 60 characters, `...` when cut.
pub fn preview(first_user: &str) -> String {
    let line = first_user.replace(['\n', '\r'], " ");
    let line = line.trim();
    if line.chars().count() > 60 {
        format!("{}...", line.chars().take(60).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// A title as Hermes keeps it: no control, zero-width or direction characters, runs of
/// whitespace as one space, trimmed.
pub fn tidy_title(raw: &str) -> String {
    let kept: String = raw
        .chars()
        .filter(|c| !is_invisible(*c))
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_invisible(c: char) -> bool {
    (c.is_control() && !c.is_whitespace())
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Up to 40 words of `content` around the first word that starts with one of `words`, each
/// match between `>>>` and `<<<`; `None` unless every one of `words` starts some word.
fn snippet(content: &str, words: &[String]) -> Option<String> {
    let tokens: Vec<&str> = content.split_whitespace().collect();
    let matches = |token: &str| {
        let lower = token.to_lowercase();
        let bare = lower.trim_matches(|c: char| !c.is_alphanumeric());
        words.iter().any(|w| bare.starts_with(w.as_str()))
    };
    let all_present = words.iter().all(|w| {
        tokens.iter().any(|t| {
            t.to_lowercase()
                .trim_matches(|c: char| !c.is_alphanumeric())
                .starts_with(w.as_str())
        })
    });
    if !all_present {
        return None;
    }
    let first = tokens.iter().position(|t| matches(t))?;
    let start = first.saturating_sub(20);
    let end = (start + 40).min(tokens.len());
    let mut text: Vec<String> = tokens[start..end]
        .iter()
        .map(|t| {
            if matches(t) {
                format!(">>>{t}<<<")
            } else {
                (*t).to_owned()
            }
        })
        .collect();
    if start > 0 {
        text.insert(0, "...".to_owned());
    }
    if end < tokens.len() {
        text.push("...".to_owned());
    }
    Some(text.join(" "))
}
