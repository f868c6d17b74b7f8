//! Queries. Every method is one short transaction; callers never see SQL.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use edith_types::{
    ApiKey, ApiKeyId, Instance, InstanceId, InstanceState, Job, JobEvent, JobEventKind, JobId,
    Page, Profile, ProfileId, Session, SessionId, Timestamp, Tool, ToolHost, ToolHostId, ToolId,
    Turn, TurnEvent, TurnEventKind, TurnId, TurnState,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::records::{InstanceRecord, ToolHostRecord};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored record is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
    /// A uniqueness rule was broken (e.g. a second profile with the same name).
    #[error("already exists: {0}")]
    Duplicate(String),
}

type Result<T> = std::result::Result<T, StoreError>;

/// Handle to the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("wire types always serialize")
}

fn from_body<T: DeserializeOwned>(row: &sqlx::sqlite::SqliteRow) -> Result<T> {
    Ok(serde_json::from_str(row.get::<&str, _>("body"))?)
}

fn duplicate_or_db(e: sqlx::Error, what: impl Into<String>) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Duplicate(what.into()),
        _ => StoreError::Db(e),
    }
}

/// Cuts a page from `limit + 1` rows (the extra row only tells that a next page exists). List
/// queries select the rows after the cursor's row: `rowid > (SELECT rowid … WHERE id = cursor)`.
fn page<T>(mut items: Vec<T>, limit: usize, id_of: impl Fn(&T) -> String) -> Page<T> {
    let next_cursor = if items.len() > limit {
        items.truncate(limit);
        items.last().map(id_of)
    } else {
        None
    };
    Page { items, next_cursor }
}

impl Store {
    /// Opens (creating) the SQLite database at `path` and applies pending migrations.
    pub async fn open_sqlite(path: &Path) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // With WAL, NORMAL never corrupts the database; a power cut may drop the last
            // commits, a crash of this process loses nothing.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        crate::migrate::run(&pool).await?;
        Ok(Self { pool })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    // ---- instances ----

    pub async fn insert_instance(&self, record: &InstanceRecord, job: &Job) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO instances (id, state, body, runtime_token, mcp_token) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(record.instance.id.as_str())
        .bind(record.instance.state.as_str())
        .bind(to_json(&record.instance))
        .bind(&record.runtime_token)
        .bind(&record.mcp_token)
        .execute(&mut *tx)
        .await?;
        insert_job(&mut tx, job).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn instance(&self, id: &InstanceId) -> Result<Option<InstanceRecord>> {
        let row = sqlx::query("SELECT body, runtime_token, mcp_token FROM instances WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(InstanceRecord {
                instance: from_body(&row)?,
                runtime_token: row.get("runtime_token"),
                mcp_token: row.get("mcp_token"),
            })
        })
        .transpose()
    }

    /// A page of instances, only those in `state` and with the label `key` = `value` when
    /// given.
    pub async fn list_instances(
        &self,
        cursor: Option<&InstanceId>,
        limit: usize,
        state: Option<InstanceState>,
        label: Option<(&str, &str)>,
    ) -> Result<Page<Instance>> {
        let rows = sqlx::query(
            "SELECT body FROM instances WHERE state != 'deleted' \
             AND (?2 IS NULL OR rowid > (SELECT rowid FROM instances WHERE id = ?2)) \
             AND (?3 IS NULL OR state = ?3) \
             AND (?4 IS NULL OR json_extract(body, '$.labels.\"' || ?4 || '\"') = ?5) \
             ORDER BY rowid LIMIT ?1",
        )
        .bind(limit as i64 + 1)
        .bind(cursor.map(|c| c.as_str()))
        .bind(state.map(|s| s.as_str()))
        .bind(label.map(|(key, _)| key))
        .bind(label.map(|(_, value)| value))
        .fetch_all(&self.pool)
        .await?;
        let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
        Ok(page(items, limit, |i: &Instance| i.id.to_string()))
    }

    /// How many instances there are (deleted ones aside) by provider and state.
    pub async fn count_instances(&self) -> Result<Vec<(String, String, u64)>> {
        let rows = sqlx::query(
            "SELECT json_extract(body, '$.provider') AS provider, state, COUNT(*) AS n \
             FROM instances WHERE state != 'deleted' GROUP BY 1, 2",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let count: i64 = row.try_get("n")?;
                Ok((
                    row.try_get("provider")?,
                    row.try_get("state")?,
                    count.max(0) as u64,
                ))
            })
            .collect()
    }

    /// Every instance in `state`.
    pub async fn instances_in_state(&self, state: InstanceState) -> Result<Vec<Instance>> {
        let rows = sqlx::query("SELECT body FROM instances WHERE state = ? ORDER BY rowid")
            .bind(state.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(from_body).collect()
    }

    /// Writes the instance's new state (the whole resource is rewritten).
    pub async fn update_instance(&self, instance: &Instance) -> Result<()> {
        sqlx::query("UPDATE instances SET state = ?, body = ? WHERE id = ?")
            .bind(instance.state.as_str())
            .bind(to_json(instance))
            .bind(instance.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Writes the instance's new state only if its recorded state is still `from` (nobody moved
    /// it meanwhile); returns whether it was written.
    pub async fn update_instance_from(
        &self,
        instance: &Instance,
        from: InstanceState,
    ) -> Result<bool> {
        let done =
            sqlx::query("UPDATE instances SET state = ?, body = ? WHERE id = ? AND state = ?")
                .bind(instance.state.as_str())
                .bind(to_json(instance))
                .bind(instance.id.as_str())
                .bind(from.as_str())
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the instance and, by cascade, its profiles, sessions, turns and their events.
    /// Its jobs stay, so their history can still be read.
    pub async fn purge_instance(&self, id: &InstanceId) -> Result<()> {
        sqlx::query("DELETE FROM instances WHERE id = ?")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ---- jobs ----

    pub async fn insert_job(&self, job: &Job) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        insert_job(&mut conn, job).await
    }

    pub async fn job(&self, id: &JobId) -> Result<Option<Job>> {
        let row = sqlx::query("SELECT body FROM jobs WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    /// Writes the job's progress if `owner` still holds its lease (a runner that lost it must
    /// not write over the one that took the job over); returns whether it was written.
    pub async fn update_leased_job(&self, job: &Job, owner: &str) -> Result<bool> {
        let done =
            sqlx::query("UPDATE jobs SET state = ?, body = ? WHERE id = ? AND lease_owner = ?")
                .bind(job.state.as_str())
                .bind(to_json(job))
                .bind(job.id.as_str())
                .bind(owner)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether `owner` holds the job's lease now.
    pub async fn holds_job_lease(&self, job: &JobId, owner: &str) -> Result<bool> {
        let found: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ?")
                .bind(job.as_str())
                .bind(owner)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    /// Unfinished jobs that `owner` may take now: not leased, leased by `owner` itself (an
    /// earlier run of the same replica), or whose lease ran out before `now_ms`.
    pub async fn jobs_to_take(&self, owner: &str, now_ms: i64) -> Result<Vec<Job>> {
        let rows = sqlx::query(
            "SELECT body FROM jobs WHERE state IN ('queued', 'running') \
             AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < ?) ORDER BY rowid",
        )
        .bind(owner)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_body).collect()
    }

    /// Leases the job to `owner` until `until_ms` if nobody else holds a live lease on it
    /// (`now_ms` decides what is live), or renews `owner`'s own lease; returns whether `owner`
    /// holds it now. A finished job is never leased.
    pub async fn lease_job(
        &self,
        id: &JobId,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE jobs SET lease_owner = ?1, lease_expires_at = ?2 \
             WHERE id = ?3 AND state IN ('queued', 'running') \
             AND (lease_owner IS NULL OR lease_owner = ?1 OR lease_expires_at < ?4)",
        )
        .bind(owner)
        .bind(until_ms)
        .bind(id.as_str())
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives up `owner`'s lease on the job (it finished, or its runner stopped).
    pub async fn release_job(&self, id: &JobId, owner: &str) -> Result<()> {
        sqlx::query(
            "UPDATE jobs SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND lease_owner = ?",
        )
        .bind(id.as_str())
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn append_job_event(&self, job: &JobId, kind: &JobEventKind) -> Result<JobEvent> {
        let at = Timestamp::now();
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO job_events (job_id, seq, at, body) \
             SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3 FROM job_events WHERE job_id = ?1 \
             RETURNING seq",
        )
        .bind(job.as_str())
        .bind(at.as_str())
        .bind(to_json(kind))
        .fetch_one(&self.pool)
        .await?;
        Ok(JobEvent {
            seq: seq as u64,
            job_id: job.clone(),
            at,
            kind: kind.clone(),
        })
    }

    pub async fn job_events_after(&self, job: &JobId, after: u64) -> Result<Vec<JobEvent>> {
        let rows = sqlx::query(
            "SELECT seq, at, body FROM job_events WHERE job_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(job.as_str())
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(JobEvent {
                    seq: row.get::<i64, _>("seq") as u64,
                    job_id: job.clone(),
                    at: Timestamp::from_stored(row.get("at")),
                    kind: from_body(row)?,
                })
            })
            .collect()
    }

    // ---- profiles ----

    pub async fn insert_profile(&self, profile: &Profile) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO profiles (id, instance_id, native_name, body) VALUES (?, ?, ?, ?)",
        )
        .bind(profile.id.as_str())
        .bind(profile.instance_id.as_str())
        .bind(&profile.native_name)
        .bind(to_json(profile))
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            duplicate_or_db(
                e,
                format!("a profile named `{}` in this instance", profile.native_name),
            )
        })?;
        for tool in &profile.tools {
            sqlx::query("INSERT OR IGNORE INTO profile_tools (profile_id, tool_id) VALUES (?, ?)")
                .bind(profile.id.as_str())
                .bind(tool.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Removes a profile and, by cascade, its tool attachments, sessions and turns.
    pub async fn delete_profile(&self, id: &ProfileId) -> Result<()> {
        sqlx::query("DELETE FROM profiles WHERE id = ?")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rewrites the profile's resource (its tool attachments live apart).
    pub async fn update_profile(&self, profile: &Profile) -> Result<()> {
        sqlx::query("UPDATE profiles SET body = ? WHERE id = ?")
            .bind(to_json(profile))
            .bind(profile.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether a turn of the profile's sessions is still queued, running or waiting.
    pub async fn profile_has_unfinished_turns(&self, profile: &ProfileId) -> Result<bool> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM turns JOIN sessions ON sessions.id = turns.session_id \
             WHERE sessions.profile_id = ? \
             AND turns.state IN ('queued', 'running', 'requires_action') LIMIT 1",
        )
        .bind(profile.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    pub async fn profile(&self, instance: &InstanceId, id: &ProfileId) -> Result<Option<Profile>> {
        let row = sqlx::query("SELECT body FROM profiles WHERE id = ? AND instance_id = ?")
            .bind(id.as_str())
            .bind(instance.as_str())
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => {
                let mut profile: Profile = from_body(&row)?;
                profile.tools = self.profile_tool_ids(id).await?;
                Ok(Some(profile))
            }
            None => Ok(None),
        }
    }

    pub async fn list_profiles(
        &self,
        instance: &InstanceId,
        cursor: Option<&ProfileId>,
        limit: usize,
    ) -> Result<Page<Profile>> {
        let rows = sqlx::query(
            "SELECT id, body FROM profiles WHERE instance_id = ?3 AND (?2 IS NULL OR rowid > (SELECT rowid FROM profiles WHERE id = ?2)) ORDER BY rowid LIMIT ?1",
        )
            .bind(limit as i64 + 1)
            .bind(cursor.map(|c| c.as_str()))
            .bind(instance.as_str())
            .fetch_all(&self.pool)
            .await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut profile: Profile = from_body(row)?;
            profile.tools = self.profile_tool_ids(&profile.id).await?;
            items.push(profile);
        }
        Ok(page(items, limit, |p: &Profile| p.id.to_string()))
    }

    async fn profile_tool_ids(&self, profile: &ProfileId) -> Result<Vec<ToolId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT tool_id FROM profile_tools WHERE profile_id = ? ORDER BY rowid",
        )
        .bind(profile.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Attaches a tool; attaching twice is a no-op.
    pub async fn attach_tool(&self, profile: &ProfileId, tool: &ToolId) -> Result<()> {
        sqlx::query("INSERT OR IGNORE INTO profile_tools (profile_id, tool_id) VALUES (?, ?)")
            .bind(profile.as_str())
            .bind(tool.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Detaches a tool; returns whether it was attached.
    pub async fn detach_tool(&self, profile: &ProfileId, tool: &ToolId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM profile_tools WHERE profile_id = ? AND tool_id = ?")
            .bind(profile.as_str())
            .bind(tool.as_str())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The profiles a tool is attached to.
    pub async fn profiles_using_tool(&self, tool: &ToolId) -> Result<Vec<ProfileId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT profile_id FROM profile_tools WHERE tool_id = ? ORDER BY rowid",
        )
        .bind(tool.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// The tools a host serves.
    pub async fn tools_of_host(&self, host: &ToolHostId) -> Result<Vec<ToolId>> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM tools WHERE host_id = ? ORDER BY rowid")
                .bind(host.as_str())
                .fetch_all(&self.pool)
                .await?;
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Deletes a tool unless a profile uses it, in one statement (no attachment can slip in
    /// between a check and the delete); returns whether it was deleted.
    pub async fn delete_unused_tool(&self, tool: &ToolId) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM tools WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM profile_tools WHERE tool_id = ?1)",
        )
        .bind(tool.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes a tool host unless a tool uses it, in one statement; returns whether it was.
    pub async fn delete_unused_tool_host(&self, host: &ToolHostId) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM tool_hosts WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM tools WHERE host_id = ?1)",
        )
        .bind(host.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The tools attached to a profile, each with the host that serves it.
    pub async fn profile_tools(&self, profile: &ProfileId) -> Result<Vec<(Tool, ToolHostRecord)>> {
        let rows = sqlx::query(
            "SELECT t.body AS body, h.body AS host_body, h.secret AS secret \
             FROM profile_tools pt JOIN tools t ON t.id = pt.tool_id \
             JOIN tool_hosts h ON h.id = t.host_id WHERE pt.profile_id = ? ORDER BY pt.rowid",
        )
        .bind(profile.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let host: ToolHost = serde_json::from_str(row.get::<&str, _>("host_body"))?;
                Ok((
                    from_body(row)?,
                    ToolHostRecord {
                        host,
                        secret: row.get("secret"),
                    },
                ))
            })
            .collect()
    }

    // ---- API keys ----

    /// Stores a key by the hash of its secret (never the secret).
    pub async fn insert_api_key(&self, key: &ApiKey, hash: &[u8]) -> Result<()> {
        sqlx::query("INSERT INTO api_keys (id, hash, body) VALUES (?, ?, ?)")
            .bind(key.id.as_str())
            .bind(hash)
            .bind(to_json(key))
            .execute(&self.pool)
            .await
            .map_err(|e| duplicate_or_db(e, "a key with this secret".to_owned()))?;
        Ok(())
    }

    /// The key whose secret hashes to `hash`.
    pub async fn api_key_by_hash(&self, hash: &[u8]) -> Result<Option<ApiKey>> {
        let row = sqlx::query("SELECT body FROM api_keys WHERE hash = ?")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn api_key(&self, id: &ApiKeyId) -> Result<Option<ApiKey>> {
        let row = sqlx::query("SELECT body FROM api_keys WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn list_api_keys(
        &self,
        cursor: Option<&ApiKeyId>,
        limit: usize,
    ) -> Result<Page<ApiKey>> {
        let rows = sqlx::query(
            "SELECT body FROM api_keys WHERE (?2 IS NULL OR rowid > (SELECT rowid FROM api_keys WHERE id = ?2)) ORDER BY rowid LIMIT ?1",
        )
        .bind(limit as i64 + 1)
        .bind(cursor.map(|c| c.as_str()))
        .fetch_all(&self.pool)
        .await?;
        let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
        Ok(page(items, limit, |k: &ApiKey| k.id.to_string()))
    }

    /// Rewrites a key's visible record (revocation, last use).
    pub async fn update_api_key(&self, key: &ApiKey) -> Result<()> {
        sqlx::query("UPDATE api_keys SET body = ? WHERE id = ?")
            .bind(to_json(key))
            .bind(key.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ---- tools and tool hosts ----

    pub async fn insert_tool_host(&self, record: &ToolHostRecord) -> Result<()> {
        sqlx::query("INSERT INTO tool_hosts (id, body, secret) VALUES (?, ?, ?)")
            .bind(record.host.id.as_str())
            .bind(to_json(&record.host))
            .bind(&record.secret)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rewrites a tool host: its resource, and its secret when `secret` is given.
    pub async fn update_tool_host(&self, host: &ToolHost, secret: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE tool_hosts SET body = ?, secret = COALESCE(?, secret) WHERE id = ?")
            .bind(to_json(host))
            .bind(secret)
            .bind(host.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn tool_host(&self, id: &ToolHostId) -> Result<Option<ToolHost>> {
        let row = sqlx::query("SELECT body FROM tool_hosts WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn insert_tool(&self, tool: &Tool) -> Result<()> {
        sqlx::query("INSERT INTO tools (id, name, host_id, body) VALUES (?, ?, ?, ?)")
            .bind(tool.id.as_str())
            .bind(&tool.name)
            .bind(tool.host_id.as_str())
            .bind(to_json(tool))
            .execute(&self.pool)
            .await
            .map_err(|e| duplicate_or_db(e, format!("a tool named `{}`", tool.name)))?;
        Ok(())
    }

    /// Rewrites a tool's resource (its name and host stay).
    pub async fn update_tool(&self, tool: &Tool) -> Result<()> {
        sqlx::query("UPDATE tools SET body = ? WHERE id = ?")
            .bind(to_json(tool))
            .bind(tool.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn tool(&self, id: &ToolId) -> Result<Option<Tool>> {
        let row = sqlx::query("SELECT body FROM tools WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn list_tools(&self, cursor: Option<&ToolId>, limit: usize) -> Result<Page<Tool>> {
        let rows = sqlx::query(
            "SELECT body FROM tools WHERE (?2 IS NULL OR rowid > (SELECT rowid FROM tools WHERE id = ?2)) ORDER BY rowid LIMIT ?1",
        )
            .bind(limit as i64 + 1)
            .bind(cursor.map(|c| c.as_str()))
            .fetch_all(&self.pool)
            .await?;
        let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
        Ok(page(items, limit, |t: &Tool| t.id.to_string()))
    }

    // ---- sessions ----

    pub async fn insert_session(&self, session: &Session) -> Result<()> {
        sqlx::query("INSERT INTO sessions (id, profile_id, body) VALUES (?, ?, ?)")
            .bind(session.id.as_str())
            .bind(session.profile_id.as_str())
            .bind(to_json(session))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn session(&self, profile: &ProfileId, id: &SessionId) -> Result<Option<Session>> {
        let row = sqlx::query("SELECT body FROM sessions WHERE id = ? AND profile_id = ?")
            .bind(id.as_str())
            .bind(profile.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn list_sessions(
        &self,
        profile: &ProfileId,
        cursor: Option<&SessionId>,
        limit: usize,
    ) -> Result<Page<Session>> {
        let rows = sqlx::query(
            "SELECT body FROM sessions WHERE profile_id = ?3 AND (?2 IS NULL OR rowid > (SELECT rowid FROM sessions WHERE id = ?2)) ORDER BY rowid LIMIT ?1",
        )
            .bind(limit as i64 + 1)
            .bind(cursor.map(|c| c.as_str()))
            .bind(profile.as_str())
            .fetch_all(&self.pool)
            .await?;
        let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
        Ok(page(items, limit, |s: &Session| s.id.to_string()))
    }

    /// Removes the session and, by cascade, its turns and their events — unless one of its
    /// turns has not finished (checked in the same statement); returns whether it was removed.
    pub async fn delete_idle_session(&self, id: &SessionId) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM sessions WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM turns \
             WHERE session_id = ?1 AND state IN ('queued', 'running', 'requires_action'))",
        )
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn update_session(&self, session: &Session) -> Result<()> {
        sqlx::query("UPDATE sessions SET body = ? WHERE id = ?")
            .bind(to_json(session))
            .bind(session.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ---- turns ----

    /// Inserts a turn unless the session already has one that has not finished; returns the
    /// unfinished one in that case. The check and the insert are one statement, so two racing
    /// creates cannot both win.
    pub async fn insert_turn_if_idle(&self, turn: &Turn) -> Result<Option<TurnId>> {
        let inserted = sqlx::query(
            "INSERT INTO turns (id, session_id, state, body) SELECT ?1, ?2, ?3, ?4 \
             WHERE NOT EXISTS (SELECT 1 FROM turns WHERE session_id = ?2 \
             AND state IN ('queued', 'running', 'requires_action'))",
        )
        .bind(turn.id.as_str())
        .bind(turn.session_id.as_str())
        .bind(turn.state.as_str())
        .bind(to_json(turn))
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(None);
        }
        let busy: Option<String> = sqlx::query_scalar(
            "SELECT id FROM turns WHERE session_id = ? AND state IN ('queued', 'running', 'requires_action') LIMIT 1",
        )
        .bind(turn.session_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(busy.and_then(|id| id.parse().ok()))
    }

    /// A page of the session's turns, oldest first (only those in `state`, if given).
    pub async fn list_turns(
        &self,
        session: &SessionId,
        cursor: Option<&TurnId>,
        limit: usize,
        state: Option<TurnState>,
    ) -> Result<Page<Turn>> {
        let rows = sqlx::query(
            "SELECT body FROM turns WHERE session_id = ?3 \
             AND (?2 IS NULL OR rowid > (SELECT rowid FROM turns WHERE id = ?2)) \
             AND (?4 IS NULL OR state = ?4) ORDER BY rowid LIMIT ?1",
        )
        .bind(limit as i64 + 1)
        .bind(cursor.map(|c| c.as_str()))
        .bind(session.as_str())
        .bind(state.map(|s| s.as_str()))
        .fetch_all(&self.pool)
        .await?;
        let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
        Ok(page(items, limit, |t: &Turn| t.id.to_string()))
    }

    pub async fn turn(&self, session: &SessionId, id: &TurnId) -> Result<Option<Turn>> {
        let row = sqlx::query("SELECT body FROM turns WHERE id = ? AND session_id = ?")
            .bind(id.as_str())
            .bind(session.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| from_body(&row)).transpose()
    }

    pub async fn update_turn(&self, turn: &Turn) -> Result<()> {
        sqlx::query("UPDATE turns SET state = ?, body = ? WHERE id = ?")
            .bind(turn.state.as_str())
            .bind(to_json(turn))
            .bind(turn.id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Turns that had not finished when the process stopped.
    /// Whether a turn of the instance is still queued, running or waiting for an answer.
    pub async fn instance_has_unfinished_turns(&self, instance: &InstanceId) -> Result<bool> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM turns JOIN sessions ON sessions.id = turns.session_id \
             JOIN profiles ON profiles.id = sessions.profile_id \
             WHERE profiles.instance_id = ? \
             AND turns.state IN ('queued', 'running', 'requires_action') LIMIT 1",
        )
        .bind(instance.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    /// Finished turns whose log lacks its final event (written by a version that recorded the
    /// two apart, and stopped between them).
    pub async fn finished_turns_without_their_end(&self) -> Result<Vec<Turn>> {
        let rows = sqlx::query(
            "SELECT body FROM turns t WHERE state NOT IN ('queued', 'running', 'requires_action') \
             AND NOT EXISTS (SELECT 1 FROM turn_events e WHERE e.turn_id = t.id \
             AND json_extract(e.body, '$.type') = 'turn.finished')",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_body).collect()
    }

    pub async fn unfinished_turns(&self) -> Result<Vec<Turn>> {
        let rows = sqlx::query(
            "SELECT body FROM turns WHERE state IN ('queued', 'running', 'requires_action')",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_body).collect()
    }

    pub async fn append_turn_event(
        &self,
        turn: &TurnId,
        kind: &TurnEventKind,
    ) -> Result<TurnEvent> {
        let mut conn = self.pool.acquire().await?;
        insert_turn_event(&mut conn, turn, kind).await
    }

    /// Records a turn's final state and its final event together: a crash leaves both or
    /// neither (a finished turn whose log lacks its end would keep its readers waiting).
    pub async fn finish_turn(&self, turn: &Turn, last: &TurnEventKind) -> Result<TurnEvent> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE turns SET state = ?, body = ? WHERE id = ?")
            .bind(turn.state.as_str())
            .bind(to_json(turn))
            .bind(turn.id.as_str())
            .execute(&mut *tx)
            .await?;
        let event = insert_turn_event(&mut tx, &turn.id, last).await?;
        tx.commit().await?;
        Ok(event)
    }

    pub async fn turn_events_after(&self, turn: &TurnId, after: u64) -> Result<Vec<TurnEvent>> {
        let rows = sqlx::query(
            "SELECT seq, at, body FROM turn_events WHERE turn_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(turn.as_str())
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(TurnEvent {
                    seq: row.get::<i64, _>("seq") as u64,
                    turn_id: turn.clone(),
                    at: Timestamp::from_stored(row.get("at")),
                    kind: from_body(row)?,
                })
            })
            .collect()
    }
}

/// Appends an event to a turn's log, numbered after the last one.
async fn insert_turn_event(
    conn: &mut sqlx::SqliteConnection,
    turn: &TurnId,
    kind: &TurnEventKind,
) -> Result<TurnEvent> {
    let at = Timestamp::now();
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO turn_events (turn_id, seq, at, body) \
         SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3 FROM turn_events WHERE turn_id = ?1 \
         RETURNING seq",
    )
    .bind(turn.as_str())
    .bind(at.as_str())
    .bind(to_json(kind))
    .fetch_one(&mut *conn)
    .await?;
    Ok(TurnEvent {
        seq: seq as u64,
        turn_id: turn.clone(),
        at,
        kind: kind.clone(),
    })
}

/// What an `Idempotency-Key` is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotency {
    /// First use: the caller handles the request, then calls `finish_idempotent`.
    New,
    /// The first request with this key is still being handled.
    InProgress,
    /// Same key, same request: the stored reply.
    Replay {
        status: u16,
        body: Vec<u8>,
        content_type: Option<String>,
    },
    /// Same key, another request.
    Mismatch,
}

impl Store {
    /// Claims `key` for this request, or reports what it is already bound to.
    pub async fn claim_idempotent(
        &self,
        key: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Idempotency> {
        let inserted = sqlx::query(
            "INSERT OR IGNORE INTO idempotency (key, method, path, request_body, created_at) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(key)
        .bind(method)
        .bind(path)
        .bind(body)
        .bind(Timestamp::now().as_str())
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(Idempotency::New);
        }
        let row = sqlx::query(
            "SELECT method, path, request_body, status, response_body, content_type \
             FROM idempotency WHERE key = ?",
        )
        .bind(key)
        .fetch_one(&self.pool)
        .await?;
        let same = row.get::<&str, _>("method") == method
            && row.get::<&str, _>("path") == path
            && row.get::<&[u8], _>("request_body") == body;
        if !same {
            return Ok(Idempotency::Mismatch);
        }
        Ok(match row.get::<Option<i64>, _>("status") {
            None => Idempotency::InProgress,
            Some(status) => Idempotency::Replay {
                status: status as u16,
                body: row
                    .get::<Option<Vec<u8>>, _>("response_body")
                    .unwrap_or_default(),
                content_type: row.get("content_type"),
            },
        })
    }

    /// Stores the reply to replay for `key`.
    pub async fn finish_idempotent(
        &self,
        key: &str,
        status: u16,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE idempotency SET status = ?, response_body = ?, content_type = ? WHERE key = ?",
        )
        .bind(i64::from(status))
        .bind(body)
        .bind(content_type)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Releases `key` after a failure that should not be replayed (a 5xx), so a retry runs.
    pub async fn release_idempotent(&self, key: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency WHERE key = ? AND status IS NULL")
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

async fn insert_job(conn: &mut sqlx::SqliteConnection, job: &Job) -> Result<()> {
    sqlx::query("INSERT INTO jobs (id, instance_id, state, body) VALUES (?, ?, ?, ?)")
        .bind(job.id.as_str())
        .bind(job.instance_id.as_str())
        .bind(job.state.as_str())
        .bind(to_json(job))
        .execute(conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use edith_types::{JobKind, JobState};

    async fn store_with_job() -> (tempfile::TempDir, Store, Job) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("edith.db"))
            .await
            .unwrap();
        let now = Timestamp::now();
        let job = Job {
            id: JobId::generate(),
            instance_id: InstanceId::generate(),
            kind: JobKind::InstanceProvision,
            state: JobState::Queued,
            steps: Vec::new(),
            error: None,
            created_at: now.clone(),
            updated_at: now,
        };
        store.insert_job(&job).await.unwrap();
        (dir, store, job)
    }

    #[tokio::test]
    async fn a_job_is_leased_to_one_replica_until_its_lease_runs_out() {
        let (_dir, store, job) = store_with_job().await;
        let taken = |owner: &'static str, now: i64| {
            let store = store.clone();
            async move {
                let jobs = store.jobs_to_take(owner, now).await.unwrap();
                jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>()
            }
        };
        assert_eq!(
            taken("a", 0).await,
            std::slice::from_ref(&job.id),
            "not leased: anyone's"
        );
        assert!(store.lease_job(&job.id, "a", 0, 100).await.unwrap());
        assert!(!store.lease_job(&job.id, "b", 50, 150).await.unwrap());
        assert!(
            taken("b", 50).await.is_empty(),
            "a live lease keeps others off"
        );
        assert_eq!(
            taken("a", 50).await,
            std::slice::from_ref(&job.id),
            "its owner, restarted, takes it"
        );
        assert!(
            store.lease_job(&job.id, "a", 90, 200).await.unwrap(),
            "renewed"
        );
        assert!(!store.lease_job(&job.id, "b", 150, 250).await.unwrap());
        assert!(
            store.lease_job(&job.id, "b", 201, 300).await.unwrap(),
            "ran out: taken over"
        );
        assert!(
            !store.lease_job(&job.id, "a", 210, 310).await.unwrap(),
            "a lost it"
        );

        store.release_job(&job.id, "a").await.unwrap();
        assert!(
            !store.lease_job(&job.id, "a", 220, 320).await.unwrap(),
            "only b releases"
        );
        assert!(store.holds_job_lease(&job.id, "b").await.unwrap());
        let mut finished = job.clone();
        finished.state = JobState::Succeeded;
        assert!(
            !store.update_leased_job(&finished, "a").await.unwrap(),
            "a lost it"
        );
        assert!(store.update_leased_job(&finished, "b").await.unwrap());
        store.release_job(&job.id, "b").await.unwrap();
        assert!(
            !store.lease_job(&job.id, "a", 230, 330).await.unwrap(),
            "finished"
        );
        assert!(taken("a", 230).await.is_empty());
    }
}
