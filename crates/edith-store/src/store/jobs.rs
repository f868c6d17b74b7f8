//! Provisioning jobs: the resource, its lease, and its event log.

use edith_types::{InstanceId, Job, JobEvent, JobEventKind, JobId, Timestamp};
use sqlx::Row;

use super::{Channel, Result, Store, from_body, seq_bound, to_json};

impl Store {
    pub async fn job(&self, id: &JobId) -> Result<Option<Job>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM jobs WHERE id = $1")
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    /// The jobs of an instance (its provisioning, its deletion), oldest first.
    pub async fn jobs_of_instance(&self, instance: &InstanceId) -> Result<Vec<Job>> {
        on_db!(self, pool => {
            let rows = sqlx::query("SELECT body FROM jobs WHERE instance_id = $1 ORDER BY rowid")
                .bind(instance.as_str())
                .fetch_all(pool)
                .await?;
            rows.iter().map(from_body).collect()
        })
    }

    /// Writes the job's progress if `owner` still holds its lease (a runner that lost it must
    /// not write over the one that took the job over); returns whether it was written.
    pub async fn update_leased_job(&self, job: &Job, owner: &str) -> Result<bool> {
        on_db!(self, pool => {
            let done = sqlx::query(
                "UPDATE jobs SET state = $1, body = $2 WHERE id = $3 AND lease_owner = $4",
            )
            .bind(job.state.as_str())
            .bind(to_json(job))
            .bind(job.id.as_str())
            .bind(owner)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Whether `owner` holds the job's lease now.
    pub async fn holds_job_lease(&self, job: &JobId, owner: &str) -> Result<bool> {
        on_db!(self, pool => {
            let held: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND lease_owner = $2)",
            )
            .bind(job.as_str())
            .bind(owner)
            .fetch_one(pool)
            .await?;
            Ok(held)
        })
    }

    /// Unfinished jobs that `owner` may take now: not leased, leased by `owner` itself (an
    /// earlier run of the same replica), or whose lease ran out before `now_ms` — and whose
    /// instance no other replica owns (a job runs where its instance's runtime does).
    pub async fn jobs_to_take(&self, owner: &str, now_ms: i64) -> Result<Vec<Job>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT body FROM jobs WHERE state IN ('queued', 'running') \
                 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at < $2) \
                 AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = jobs.instance_id \
                 AND i.owner <> $1 AND i.owner_until >= $2) \
                 ORDER BY rowid",
            )
            .bind(owner)
            .bind(now_ms)
            .fetch_all(pool)
            .await?;
            rows.iter().map(from_body).collect()
        })
    }

    /// Leases the job to `owner` until `until_ms` if nobody else holds a live lease on it
    /// (`now_ms` decides what is live), or renews `owner`'s own lease; returns whether `owner`
    /// holds it now. A finished job is never leased, nor is any job to a replica that left
    /// (its runners may still be running while it stops; what it gave up stays given up). The
    /// check and the write are one statement, so two replicas racing for a job cannot both win.
    pub async fn lease_job(
        &self,
        id: &JobId,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool> {
        on_db!(self, pool => {
            let done = sqlx::query(
                "UPDATE jobs SET lease_owner = $1, lease_expires_at = $2 \
                 WHERE id = $3 AND state IN ('queued', 'running') \
                 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at < $4) \
                 AND NOT EXISTS (SELECT 1 FROM replicas WHERE id = $1 AND alive_until = 0)",
            )
            .bind(owner)
            .bind(until_ms)
            .bind(id.as_str())
            .bind(now_ms)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Gives up `owner`'s lease on the job (it finished, or its runner stopped).
    pub async fn release_job(&self, id: &JobId, owner: &str) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query(
                "UPDATE jobs SET lease_owner = NULL, lease_expires_at = NULL \
                 WHERE id = $1 AND lease_owner = $2",
            )
            .bind(id.as_str())
            .bind(owner)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    pub async fn append_job_event(&self, job: &JobId, kind: &JobEventKind) -> Result<JobEvent> {
        let at = Timestamp::now();
        let body = to_json(kind);
        let seq = on_db!(self, pool => {
            append_alone!(self, pool, Channel::JobEvents, "job_events", "job_id", job.as_str(), at.as_str(), &body)
        });
        Ok(JobEvent {
            seq: seq as u64,
            job_id: job.clone(),
            at,
            kind: kind.clone(),
        })
    }

    pub async fn job_events_after(&self, job: &JobId, after: u64) -> Result<Vec<JobEvent>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT seq, at, body FROM job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq",
            )
            .bind(job.as_str())
            .bind(seq_bound(after))
            .fetch_all(pool)
            .await?;
            rows.iter()
                .map(|row| {
                    Ok(JobEvent {
                        seq: row.try_get::<i64, _>("seq")? as u64,
                        job_id: job.clone(),
                        at: Timestamp::from_stored(row.try_get("at")?),
                        kind: from_body(row)?,
                    })
                })
                .collect()
        })
    }
}
