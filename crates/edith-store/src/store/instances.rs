//! Instances: the resource, its state, and the credentials of its runtime links.

use edith_types::{Instance, InstanceId, InstanceState, Job, Page};
use sqlx::{AssertSqlSafe, Row};

use super::known_paths::Changed;
use super::{Result, Store, from_body, is_postgres, one_more, page, to_json};
use crate::records::InstanceRecord;

/// The statement that writes an instance's new state (its whole resource) only if its recorded
/// state is still `$from`.
macro_rules! move_instance {
    ($instance:expr, $from:expr) => {{
        let instance: &Instance = $instance;
        let from: InstanceState = $from;
        sqlx::query("UPDATE instances SET state = $1, body = $2 WHERE id = $3 AND state = $4")
            .bind(instance.state.as_str())
            .bind(to_json(instance))
            .bind(instance.id.as_str())
            .bind(from.as_str())
    }};
}

impl Store {
    /// Records a new instance together with the job that provisions it; `owner`: the replica
    /// that owns it from the start, and until when (see [`Store::claim_instance`]).
    pub async fn insert_instance(
        &self,
        record: &InstanceRecord,
        job: &Job,
        owner: Option<(&str, i64)>,
    ) -> Result<()> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            sqlx::query(
                "INSERT INTO instances (id, state, body, runtime_token, mcp_token, owner, \
                 owner_until) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(record.instance.id.as_str())
            .bind(record.instance.state.as_str())
            .bind(to_json(&record.instance))
            .bind(&record.runtime_token)
            .bind(&record.mcp_token)
            .bind(owner.map(|(replica, _)| replica))
            .bind(owner.map(|(_, until)| until))
            .execute(&mut *tx)
            .await?;
            insert_job!(job).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    pub async fn instance(&self, id: &InstanceId) -> Result<Option<InstanceRecord>> {
        on_db!(self, pool => {
            let row =
                sqlx::query("SELECT body, runtime_token, mcp_token FROM instances WHERE id = $1")
                    .bind(id.as_str())
                    .fetch_optional(pool)
                    .await?;
            row.map(|row| instance_record(&row)).transpose()
        })
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
        on_db!(self, pool => {
            let label_of = if is_postgres(pool) {
                "(body::jsonb -> 'labels' ->> $4)"
            } else {
                "json_extract(body, '$.labels.\"' || $4 || '\"')"
            };
            let sql = format!(
                "SELECT body FROM instances WHERE state != 'deleted' \
                 AND ($2 IS NULL OR rowid > (SELECT rowid FROM instances WHERE id = $2)) \
                 AND ($3 IS NULL OR state = $3) \
                 AND ($4 IS NULL OR {label_of} = $5) \
                 ORDER BY rowid LIMIT $1"
            );
            // Only constant text is spliced into `sql`.
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(one_more(limit))
                .bind(cursor.map(|c| c.as_str()))
                .bind(state.map(|s| s.as_str()))
                .bind(label.map(|(key, _)| key))
                .bind(label.map(|(_, value)| value))
                .fetch_all(pool)
                .await?;
            let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
            Ok(page(items, limit, |i: &Instance| i.id.to_string()))
        })
    }

    /// How many instances there are (deleted ones aside) by provider and state.
    pub async fn count_instances(&self) -> Result<Vec<(String, String, u64)>> {
        on_db!(self, pool => {
            let provider = if is_postgres(pool) {
                "body::jsonb ->> 'provider'"
            } else {
                "json_extract(body, '$.provider')"
            };
            let sql = format!(
                "SELECT {provider} AS provider, state, COUNT(*) AS n \
                 FROM instances WHERE state != 'deleted' GROUP BY 1, 2"
            );
            // Only constant text is spliced into `sql`.
            let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await?;
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
        })
    }

    /// Writes the instance's new state only if its recorded state is still `from` (nobody moved
    /// it meanwhile); returns whether it was written.
    pub async fn update_instance_from(
        &self,
        instance: &Instance,
        from: InstanceState,
    ) -> Result<bool> {
        let instance = instance.clone();
        self.changing_paths(
            Changed::Instance(instance.id.clone()),
            move |store| async move {
                on_db!(store, pool => {
                    let done = move_instance!(&instance, from).execute(pool).await?;
                    Ok(done.rows_affected() == 1)
                })
            },
        )
        .await
    }

    /// Like [`Store::update_instance_from`], and records `job` with the move, in one
    /// transaction: a job that works on the instance in its new state (its deletion) exists
    /// exactly when the move was made, also across a crash.
    pub async fn update_instance_from_with_job(
        &self,
        instance: &Instance,
        from: InstanceState,
        job: &Job,
    ) -> Result<bool> {
        let (instance, job) = (instance.clone(), job.clone());
        self.changing_paths(
            Changed::Instance(instance.id.clone()),
            move |store| async move {
                on_db!(store, pool => {
                    let mut tx = begin!(pool);
                    let done = move_instance!(&instance, from).execute(&mut *tx).await?;
                    if done.rows_affected() != 1 {
                        return Ok(false);
                    }
                    insert_job!(&job).execute(&mut *tx).await?;
                    tx.commit().await?;
                    Ok(true)
                })
            },
        )
        .await
    }

    /// Removes the instance and, by cascade, its profiles, sessions, turns and their events.
    /// Its jobs stay, so their history can still be read.
    pub async fn purge_instance(&self, id: &InstanceId) -> Result<()> {
        let id = id.clone();
        self.changing_paths(Changed::Instance(id.clone()), move |store| async move {
            on_db!(store, pool => {
                sqlx::query("DELETE FROM instances WHERE id = $1")
                    .bind(id.as_str())
                    .execute(pool)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}

/// An instance record from a row with its `body`, `runtime_token` and `mcp_token`.
pub(super) fn instance_record<R>(row: &R) -> Result<InstanceRecord>
where
    R: sqlx::Row,
    for<'r> &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    &'static str: sqlx::ColumnIndex<R>,
{
    Ok(InstanceRecord {
        instance: from_body(row)?,
        runtime_token: row.try_get("runtime_token")?,
        mcp_token: row.try_get("mcp_token")?,
    })
}
