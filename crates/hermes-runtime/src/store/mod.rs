//! `state.db`: a home's stored sessions and messages, in the columns Hermes 0.19 uses (a subset).

pub mod desktop;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use edith_sqlite::Connections;
use edith_sqlite::{Connection as SqliteConnection, SqliteRow};
use sqlx::Row;

use crate::model::{ChatMessage, Role, TokenUsage, ToolCall};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    model TEXT,
    parent_session_id TEXT REFERENCES sessions(id),
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    tool_call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    title TEXT,
    profile_name TEXT,
    archived INTEGER NOT NULL DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    billing_provider TEXT,
    billing_base_url TEXT,
    estimated_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    api_call_count INTEGER NOT NULL DEFAULT 0,
    model_config TEXT,
    system_prompt TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    finish_reason TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, id);
CREATE INDEX IF NOT EXISTS sessions_by_title ON sessions(title);
"#;

/// The titles of a lineage: its base (`?1`) and those that start with `<base> #`, which are the
/// titles from `<base> #` (`?2`) up to `<base> $` (`?3`; `$` follows `#`) in SQLite's binary
/// order: a range of `sessions_by_title`, where a `substr` test would read every session.
const LINEAGE_TITLES: &str =
    "SELECT title FROM sessions WHERE title = ?1 OR (title >= ?2 AND title < ?3)";

/// Whether a session has the title `?1`.
const TITLE_TAKEN: &str = "SELECT EXISTS (SELECT 1 FROM sessions WHERE title = ?1)";

/// A stored session row.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub source: String,
    pub model: String,
    pub started_at: f64,
    pub title: Option<String>,
    pub message_count: i64,
    pub profile_name: Option<String>,
}

/// A row of `session.list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedSession {
    pub id: String,
    pub title: Option<String>,
    /// The start of the first user message.
    pub preview: String,
    pub started_at: f64,
    pub message_count: i64,
    pub source: String,
}

/// Accounts for one model call, as Hermes does after each response that told its usage: tokens
/// and calls add up; what the call was billed to is kept from the first call. This runtime
/// prices nothing, so the cost stays 0 and `unknown`, as Hermes answers for an endpoint it has
/// no price for. Its values: input and output tokens, provider, base URL, session id.
const ACCOUNT_MODEL_CALL: &str = "UPDATE sessions SET input_tokens = input_tokens + ?, \
     output_tokens = output_tokens + ?, \
     estimated_cost_usd = COALESCE(estimated_cost_usd, 0), \
     cost_status = 'unknown', cost_source = 'none', \
     billing_provider = COALESCE(billing_provider, ?), \
     billing_base_url = COALESCE(billing_base_url, ?), \
     api_call_count = api_call_count + 1 WHERE id = ?";

/// A model call that told its usage, and what it is billed to.
pub struct ModelCall<'a> {
    pub usage: TokenUsage,
    pub billing: &'a Billing,
}

/// What model calls are billed to: the configured provider and endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Billing {
    pub provider: Option<String>,
    /// Without a trailing `/`, as Hermes keeps it.
    pub base_url: Option<String>,
}

impl Billing {
    pub fn of(config: &hermes_native::config::HermesConfig) -> Self {
        Self {
            provider: config.model.provider.clone(),
            base_url: config
                .model
                .base_url
                .as_deref()
                .map(|url| url.trim_end_matches('/').to_owned()),
        }
    }
}

/// Where a directory sits in git: its branch, and the root of its repository (the main
/// checkout's, for a worktree).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitPlace {
    pub branch: Option<String>,
    pub repo_root: Option<String>,
}

/// How long closing waits for the queries under way to end.
const CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct StateDb {
    pool: Connections,
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

impl StateDb {
    /// Opens (creating) `<home>/state.db` in WAL mode. The home must exist: a profile removed
    /// or renamed is not brought back by a late write.
    pub async fn open(home: &Path) -> Result<Self, sqlx::Error> {
        let options = edith_sqlite::Options::new(home.join("state.db"))
            .busy_timeout(std::time::Duration::from_secs(5))
            // 256 KiB of page cache per connection, not SQLite's 2 MiB: every profile's home
            // has a `state.db` of its own.
            .cache_kib(256);
        let pool = Connections::open(options).await?;
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        add_missing_columns(&pool).await?;
        Ok(Self { pool })
    }

    pub async fn close(&self) {
        self.pool.close(CLOSE_LIMIT).await;
    }

    /// Writes the session row if it is not there yet (Hermes writes it at the first prompt).
    pub async fn ensure_session(&self, row: &SessionRow) -> Result<(), sqlx::Error> {
        bind_session_row(sqlx::query(ENSURE_SESSION), row)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Writes `row` as a branch of session `parent` with a copy of `messages`, in one
    /// transaction. (Hermes copies only roles and text, and repairs the tool messages left
    /// without their calls before each model call; a whole copy needs no repair.)
    pub async fn insert_branch(
        &self,
        row: &SessionRow,
        parent: &str,
        messages: &[ChatMessage],
    ) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let insert = sqlx::query(
            "INSERT INTO sessions (id, source, model, started_at, title, profile_name, \
             parent_session_id, message_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        );
        bind_session_row(insert, row)
            .bind(parent)
            .bind(messages.len() as i64)
            .execute(&mut *tx)
            .await?;
        let now = unix_now();
        for message in messages {
            insert_message(&mut tx, &row.id, message, now).await?;
        }
        tx.commit().await
    }

    /// The title after `title` in its lineage: `title` itself (without any ` #N`) while no
    /// session has it or a numbered one, else `title #<highest N + 1>` (the base counts as 1).
    pub async fn next_title_in_lineage(&self, title: &str) -> Result<String, sqlx::Error> {
        let number = |n: &str| {
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse::<u64>().unwrap_or(u64::MAX))
        };
        let base = match title.rsplit_once(" #") {
            Some((base, n)) if number(n).is_some() => base,
            _ => title,
        };
        let titles: Vec<String> = sqlx::query_scalar(LINEAGE_TITLES)
            .bind(base)
            .bind(format!("{base} #"))
            .bind(format!("{base} $"))
            .fetch_all(&self.pool)
            .await?;
        let highest = titles
            .iter()
            .filter_map(|t| match t.strip_prefix(base) {
                Some("") => Some(1),
                Some(rest) => number(rest.strip_prefix(" #")?),
                None => None,
            })
            .max();
        Ok(match highest {
            None => base.to_owned(),
            Some(n) => format!("{base} #{}", n.saturating_add(1)),
        })
    }

    /// Appends messages and bumps the session's counts, in one transaction (one script; each
    /// statement takes the next `?` values in turn). `call`: the model call that produced them,
    /// accounted for in the same write. `first`: what a session's first write also stores.
    pub async fn append_messages(
        &self,
        session_id: &str,
        messages: &[ChatMessage],
        call: Option<&ModelCall<'_>>,
        first: &FirstWrite<'_>,
    ) -> Result<(), sqlx::Error> {
        let mut script = String::new();
        if first.row.is_some() {
            script.push_str(&format!("{ENSURE_SESSION}; "));
        }
        if first.setup.is_some() {
            script.push_str(&format!("{NOTE_SETUP}; "));
        }
        script.push_str(&format!("{INSERT_MESSAGE}; ").repeat(messages.len()));
        script.push_str(
            "UPDATE sessions SET message_count = message_count + ?, \
             tool_call_count = tool_call_count + ? WHERE id = ?; ",
        );
        if call.is_some() {
            script.push_str(&format!("{ACCOUNT_MODEL_CALL}; "));
        }
        let now = unix_now();
        // Only constant text is repeated into the script.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(script));
        if let Some(row) = first.row {
            query = bind_session_row(query, row);
        }
        if let Some(setup) = &first.setup {
            query = query
                .bind(setup.model_config)
                .bind(setup.cwd.map(|dir| dir.display().to_string()))
                .bind(session_id);
        }
        for message in messages {
            query = bind_message(query, session_id, message, now);
        }
        let tool_calls: usize = messages.iter().map(|m| m.tool_calls.len()).sum();
        query = query
            .bind(messages.len() as i64)
            .bind(tool_calls as i64)
            .bind(session_id);
        if let Some(call) = call {
            query = query
                .bind(call.usage.input as i64)
                .bind(call.usage.output as i64)
                .bind(&call.billing.provider)
                .bind(&call.billing.base_url)
                .bind(session_id);
        }
        self.pool.transact(query).await?;
        Ok(())
    }

    /// Stores the session's working directory; false when it has no row yet.
    pub async fn set_cwd(&self, session_id: &str, cwd: &Path) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("UPDATE sessions SET cwd = ? WHERE id = ?")
            .bind(cwd.display().to_string())
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores the git branch and repository found in `cwd`, while that is still the session's
    /// directory (a later move wins over a slow probe). A part not known clears nothing.
    pub async fn set_git_place(
        &self,
        session_id: &str,
        cwd: &Path,
        place: &GitPlace,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE sessions SET git_branch = COALESCE(?, git_branch), \
             git_repo_root = COALESCE(?, git_repo_root) WHERE id = ? AND cwd = ?",
        )
        .bind(&place.branch)
        .bind(&place.repo_root)
        .bind(session_id)
        .bind(cwd.display().to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The working directory stored with a session, if any.
    pub async fn stored_cwd(&self, session_id: &str) -> Result<Option<String>, sqlx::Error> {
        let cwd: Option<Option<String>> =
            sqlx::query_scalar("SELECT cwd FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(cwd.flatten().filter(|dir| !dir.trim().is_empty()))
    }

    /// Compacts a session in place, as Hermes does: its messages so far are kept but no longer
    /// active (marked compacted), `messages` become its active conversation, and its counts
    /// are theirs. One transaction.
    pub async fn compact(
        &self,
        session_id: &str,
        messages: &[ChatMessage],
    ) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1",
        )
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        let now = unix_now();
        for message in messages {
            insert_message(&mut tx, session_id, message, now).await?;
        }
        let tool_calls: usize = messages.iter().map(|m| m.tool_calls.len()).sum();
        sqlx::query("UPDATE sessions SET message_count = ?, tool_call_count = ? WHERE id = ?")
            .bind(messages.len() as i64)
            .bind(tool_calls as i64)
            .bind(session_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT id, source, model, started_at, title, message_count, profile_name \
             FROM sessions WHERE id = ? OR title = ? ORDER BY id = ? DESC LIMIT 1",
        )
        .bind(id)
        .bind(id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| session_row(&row)))
    }

    /// Latest activity first (the newest message, else the start), as Hermes lists them;
    /// sub-agent rows (source `tool`) are left out, as in Hermes.
    pub async fn list_sessions(&self, limit: u64) -> Result<Vec<ListedSession>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT s.id, s.title, s.started_at, s.message_count, s.source, \
             (SELECT substr(m.content, 1, 80) FROM messages m \
              WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1) AS preview \
             FROM sessions s WHERE s.source != 'tool' \
             ORDER BY COALESCE((SELECT MAX(m.timestamp) FROM messages m \
              WHERE m.session_id = s.id), s.started_at) DESC, s.started_at DESC, s.id DESC LIMIT ?",
        )
        .bind(limit.min(i64::MAX as u64) as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| ListedSession {
                id: row.get("id"),
                title: row.get("title"),
                preview: row.get::<Option<String>, _>("preview").unwrap_or_default(),
                started_at: row.get("started_at"),
                message_count: row.get("message_count"),
                source: row.get("source"),
            })
            .collect())
    }

    /// How many sessions started at `since` (unix seconds) or later, and how many messages
    /// they hold — of the newest 500, archived and sub-agent rows left out, as Hermes counts.
    pub async fn activity_since(&self, since: f64) -> Result<(u64, u64), sqlx::Error> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS sessions, COALESCE(SUM(message_count), 0) AS messages FROM \
             (SELECT message_count, started_at FROM sessions \
              WHERE source != 'tool' AND archived = 0 ORDER BY started_at DESC LIMIT 500) \
             WHERE started_at >= ?",
        )
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        let count = |name: &str| row.get::<i64, _>(name).max(0) as u64;
        Ok((count("sessions"), count("messages")))
    }

    pub async fn messages(&self, session_id: &str) -> Result<Vec<ChatMessage>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT role, content, tool_call_id, tool_calls, tool_name, finish_reason FROM messages \
             WHERE session_id = ? AND active = 1 ORDER BY id",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let role = match row.get::<String, _>("role").as_str() {
                    "system" => Role::System,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    _ => Role::User,
                };
                let tool_calls: Vec<ToolCall> = row
                    .get::<Option<String>, _>("tool_calls")
                    .and_then(|json| serde_json::from_str(&json).ok())
                    .unwrap_or_default();
                ChatMessage {
                    role,
                    content: row.get::<Option<String>, _>("content").unwrap_or_default(),
                    tool_calls,
                    tool_call_id: row.get("tool_call_id"),
                    tool_name: row.get("tool_name"),
                    finish_reason: row.get("finish_reason"),
                }
            })
            .collect())
    }

    /// Sets the title; false when the row does not exist.
    pub async fn set_title(&self, id: &str, title: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("UPDATE sessions SET title = ? WHERE id = ?")
            .bind(title)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether a session has this title.
    pub async fn title_taken(&self, title: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(TITLE_TAKEN)
            .bind(title)
            .fetch_one(&self.pool)
            .await
    }

    /// Sets the title of a session that has none; false when it had one (or no row).
    pub async fn set_title_if_untitled(&self, id: &str, title: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("UPDATE sessions SET title = ? WHERE id = ? AND title IS NULL")
            .bind(title)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a session and its messages; false when there was no such session.
    pub async fn delete_session(&self, id: &str) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        // Its branches stay, without a parent.
        sqlx::query("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM messages WHERE session_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn end_session(&self, id: &str, reason: &str) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        )
        .bind(unix_now())
        .bind(reason)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// Columns added since a home's `state.db` was made (`CREATE TABLE IF NOT EXISTS` leaves an
/// existing table as it is): table, column, definition.
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("sessions", "archived", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "cwd", "TEXT"),
    ("sessions", "git_branch", "TEXT"),
    ("sessions", "git_repo_root", "TEXT"),
    ("sessions", "billing_provider", "TEXT"),
    ("sessions", "billing_base_url", "TEXT"),
    ("sessions", "estimated_cost_usd", "REAL"),
    ("sessions", "cost_status", "TEXT"),
    ("sessions", "cost_source", "TEXT"),
    ("sessions", "api_call_count", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "model_config", "TEXT"),
    ("sessions", "system_prompt", "TEXT"),
    // Compaction (`session.compress`) keeps earlier rows, no longer active.
    ("messages", "active", "INTEGER NOT NULL DEFAULT 1"),
    ("messages", "compacted", "INTEGER NOT NULL DEFAULT 0"),
    ("messages", "finish_reason", "TEXT"),
];

async fn add_missing_columns(pool: &Connections) -> Result<(), sqlx::Error> {
    for table in ["sessions", "messages"] {
        let present: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
            .bind(table)
            .fetch_all(pool)
            .await?;
        for (_, column, definition) in ADDED_COLUMNS.iter().filter(|(t, ..)| *t == table) {
            if !present.iter().any(|c| c == column) {
                // Names and definitions are the constants above, never input.
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "ALTER TABLE {table} ADD COLUMN {column} {definition}"
                )))
                .execute(pool)
                .await?;
            }
        }
    }
    Ok(())
}

/// Writes a session's row if it is not there yet (Hermes writes it at the first prompt).
const ENSURE_SESSION: &str = "INSERT OR IGNORE INTO sessions \
                              (id, source, model, started_at, title, profile_name) \
                              VALUES (?, ?, ?, ?, ?, ?)";

/// Keeps what a session was started with, unless it has it already.
const NOTE_SETUP: &str = "UPDATE sessions SET model_config = COALESCE(model_config, ?), \
                          cwd = COALESCE(cwd, ?) WHERE id = ?";

/// What a session's first write stores besides its messages, in the same transaction.
#[derive(Default)]
pub struct FirstWrite<'a> {
    /// The session's row, written unless it is there ([`ENSURE_SESSION`]).
    pub row: Option<&'a SessionRow>,
    /// What its first turn was started with ([`NOTE_SETUP`]).
    pub setup: Option<Setup<'a>>,
}

/// What a session's first turn was started with.
pub struct Setup<'a> {
    /// The agent's settings, JSON text as Hermes writes them.
    pub model_config: &'a str,
    /// The working directory, when the client chose one.
    pub cwd: Option<&'a Path>,
}

/// `query` with a session row's values bound after those it has, in the order of
/// [`ENSURE_SESSION`]'s columns.
fn bind_session_row<'q>(query: SqliteQuery<'q>, row: &'q SessionRow) -> SqliteQuery<'q> {
    query
        .bind(&row.id)
        .bind(&row.source)
        .bind(&row.model)
        .bind(row.started_at)
        .bind(&row.title)
        .bind(&row.profile_name)
}

/// One message's row; its values are bound by [`bind_message`].
const INSERT_MESSAGE: &str = "INSERT INTO messages (session_id, role, content, tool_call_id, \
                              tool_calls, tool_name, timestamp, finish_reason) \
                              VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

type SqliteQuery<'q> = sqlx::query::Query<'q, edith_sqlite::Sqlite, edith_sqlite::Arguments>;

/// `query` with the values of [`INSERT_MESSAGE`] bound after those it has: `message`'s, in
/// `session_id`, written at `now`.
fn bind_message<'q>(
    query: SqliteQuery<'q>,
    session_id: &'q str,
    message: &'q ChatMessage,
    now: f64,
) -> SqliteQuery<'q> {
    let tool_calls = (!message.tool_calls.is_empty())
        .then(|| serde_json::to_string(&message.tool_calls).unwrap_or_default());
    query
        .bind(session_id)
        .bind(message.role.as_str())
        .bind(&message.content)
        .bind(&message.tool_call_id)
        .bind(tool_calls)
        .bind(&message.tool_name)
        .bind(now)
        .bind(&message.finish_reason)
}

async fn insert_message(
    conn: &mut SqliteConnection,
    session_id: &str,
    message: &ChatMessage,
    now: f64,
) -> Result<(), sqlx::Error> {
    bind_message(sqlx::query(INSERT_MESSAGE), session_id, message, now)
        .execute(conn)
        .await?;
    Ok(())
}

fn session_row(row: &SqliteRow) -> SessionRow {
    SessionRow {
        id: row.get("id"),
        source: row.get("source"),
        model: row.get::<Option<String>, _>("model").unwrap_or_default(),
        started_at: row.get("started_at"),
        title: row.get("title"),
        message_count: row.get("message_count"),
        profile_name: row.get("profile_name"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, title: &str) -> SessionRow {
        SessionRow {
            id: id.to_owned(),
            source: "test".to_owned(),
            model: String::new(),
            started_at: unix_now(),
            title: Some(title.to_owned()),
            message_count: 0,
            profile_name: None,
        }
    }

    #[tokio::test]
    async fn a_title_lineage_counts_on_from_its_highest_number() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        assert_eq!(db.next_title_in_lineage("Plans").await.unwrap(), "Plans");
        db.ensure_session(&row("a", "Plans")).await.unwrap();
        assert_eq!(db.next_title_in_lineage("Plans").await.unwrap(), "Plans #2");
        db.ensure_session(&row("b", "Plans #7")).await.unwrap();
        db.ensure_session(&row("c", "Plans #x")).await.unwrap();
        db.ensure_session(&row("d", "Plansx #9")).await.unwrap();
        db.ensure_session(&row("e", "Plans #+50")).await.unwrap();
        // From the base or from a numbered title of the lineage alike.
        assert_eq!(db.next_title_in_lineage("Plans").await.unwrap(), "Plans #8");
        assert_eq!(
            db.next_title_in_lineage("Plans #2").await.unwrap(),
            "Plans #8"
        );
        // At the borders of the range the lineage is read from: `Plans $9` and `Plans "9` sort
        // either side of `Plans #…`, and a title under another case is another lineage.
        db.ensure_session(&row("g", "Plans $90")).await.unwrap();
        db.ensure_session(&row("h", "Plans \"90")).await.unwrap();
        db.ensure_session(&row("i", "plans #90")).await.unwrap();
        db.ensure_session(&row("j", "Plans #12")).await.unwrap();
        assert_eq!(
            db.next_title_in_lineage("Plans").await.unwrap(),
            "Plans #13"
        );
        // Leading zeros do not make a number larger; all zeros is 0.
        db.ensure_session(&row("k", "Plans #0020")).await.unwrap();
        db.ensure_session(&row("l", "Zero #000")).await.unwrap();
        assert_eq!(
            db.next_title_in_lineage("Plans").await.unwrap(),
            "Plans #21"
        );
        assert_eq!(db.next_title_in_lineage("Zero").await.unwrap(), "Zero #1");
        // A number too large to count on stays at the largest.
        db.ensure_session(&row("f", "Huge #18446744073709551615"))
            .await
            .unwrap();
        let next = db.next_title_in_lineage("Huge").await.unwrap();
        assert_eq!(next, "Huge #18446744073709551615");
        db.close().await;
    }

    /// The messages of one append, written by one script, each with its own values, and the
    /// session's counts bumped by them.
    #[tokio::test]
    async fn appended_messages_are_stored_whole_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        db.ensure_session(&row("s", "Plans")).await.unwrap();
        let none = FirstWrite::default();
        let call = ToolCall {
            id: "call_1".to_owned(),
            name: "search".to_owned(),
            arguments: serde_json::json!({"q": "rust"}),
        };
        let asked = ChatMessage {
            tool_calls: vec![call],
            finish_reason: Some("tool_calls".to_owned()),
            ..ChatMessage::plain(Role::Assistant, String::new())
        };
        let answered = ChatMessage {
            tool_call_id: Some("call_1".to_owned()),
            tool_name: Some("search".to_owned()),
            ..ChatMessage::plain(Role::Tool, "found".to_owned())
        };
        db.append_messages("s", &[ChatMessage::user("look it up")], None, &none)
            .await
            .unwrap();
        db.append_messages("s", &[asked.clone(), answered.clone()], None, &none)
            .await
            .unwrap();
        let stored = db.messages("s").await.unwrap();
        assert_eq!(stored, [ChatMessage::user("look it up"), asked, answered]);
        assert_eq!(db.session("s").await.unwrap().unwrap().message_count, 3);
        let tool_calls: i64 =
            sqlx::query_scalar("SELECT tool_call_count FROM sessions WHERE id = 's'")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        assert_eq!(tool_calls, 1);
        db.close().await;
    }

    /// Every connection to a home's `state.db` keeps a small page cache (a runtime has a
    /// `state.db` per profile).
    #[tokio::test]
    async fn connections_keep_a_small_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        let cache: i64 = sqlx::query_scalar("PRAGMA cache_size")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(cache, -256);
        db.close().await;
    }

    /// A session's first write makes its row and keeps what it was started with, with its
    /// first message; a later one changes neither.
    #[tokio::test]
    async fn a_sessions_first_write_makes_its_row_and_notes_its_setup() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        let work = dir.path().join("work");
        let (plans, other_row) = (row("s", "Plans"), row("s", "Other"));
        let first = FirstWrite {
            row: Some(&plans),
            setup: Some(Setup {
                model_config: r#"{"max_iterations": 90}"#,
                cwd: Some(&work),
            }),
        };
        let prompt = || ChatMessage::user("hello");
        db.append_messages("s", &[prompt()], None, &first)
            .await
            .unwrap();
        let other = dir.path().join("elsewhere");
        let again = FirstWrite {
            row: Some(&other_row),
            setup: Some(Setup {
                model_config: "{}",
                cwd: Some(&other),
            }),
        };
        db.append_messages("s", &[prompt()], None, &again)
            .await
            .unwrap();
        let stored = sqlx::query(
            "SELECT title, model_config, cwd, message_count FROM sessions WHERE id = 's'",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(stored.get::<String, _>("title"), "Plans");
        assert_eq!(
            stored.get::<String, _>("model_config"),
            r#"{"max_iterations": 90}"#
        );
        assert_eq!(stored.get::<String, _>("cwd"), work.display().to_string());
        assert_eq!(stored.get::<i64, _>("message_count"), 2);
        db.close().await;
    }

    /// A reply written with the model call that made it: tokens and calls add up, what the calls
    /// are billed to is the first's; a reply without usage accounts for nothing.
    #[tokio::test]
    async fn a_reply_is_written_with_its_calls_accounting() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        db.ensure_session(&row("s", "Plans")).await.unwrap();
        let none = FirstWrite::default();
        let billed = |provider: &str| Billing {
            provider: Some(provider.to_owned()),
            base_url: Some(format!("http://{provider}/v1")),
        };
        let (first, second) = (billed("first"), billed("second"));
        let reply = || ChatMessage::plain(Role::Assistant, "done".to_owned());
        for (input, output, billing) in [(10, 3, &first), (5, 2, &second)] {
            let call = ModelCall {
                usage: TokenUsage { input, output },
                billing,
            };
            db.append_messages("s", &[reply()], Some(&call), &none)
                .await
                .unwrap();
        }
        db.append_messages("s", &[reply()], None, &none)
            .await
            .unwrap();
        let accounted = sqlx::query(
            "SELECT input_tokens, output_tokens, api_call_count, billing_provider, \
             billing_base_url, message_count FROM sessions WHERE id = 's'",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        let number = |column: &str| accounted.get::<i64, _>(column);
        assert_eq!(
            [
                number("input_tokens"),
                number("output_tokens"),
                number("api_call_count"),
                number("message_count")
            ],
            [15, 5, 2, 3]
        );
        assert_eq!(accounted.get::<String, _>("billing_provider"), "first");
        assert_eq!(
            accounted.get::<String, _>("billing_base_url"),
            "http://first/v1"
        );
        db.close().await;
    }

    /// Titles are looked up through their index, not by reading every session (a runtime with
    /// many sessions gives each new one a title).
    #[tokio::test]
    async fn titles_are_found_through_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).await.unwrap();
        for (sql, binds) in [(LINEAGE_TITLES, 3), (TITLE_TAKEN, 1)] {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut query = sqlx::query(sqlx::AssertSqlSafe(explain));
            for _ in 0..binds {
                query = query.bind("a");
            }
            let rows = query.fetch_all(&db.pool).await.unwrap();
            let details: Vec<String> = rows.iter().map(|r| r.get("detail")).collect();
            let details = details.join("; ");
            assert!(details.contains("sessions_by_title"), "{sql}: {details}");
            assert!(!details.contains("SCAN sessions"), "{sql}: {details}");
        }
        db.close().await;
    }
}
