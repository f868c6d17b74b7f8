//! Replies kept for `Idempotency-Key`s.

use edith_types::Timestamp;
use sqlx::Row;

use super::{Result, Store};

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
        on_db!(self, pool => {
            let inserted = sqlx::query(
                "INSERT INTO idempotency (key, method, path, request_body, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(key)
            .bind(method)
            .bind(path)
            .bind(body)
            .bind(Timestamp::now().as_str())
            .execute(pool)
            .await?;
            if inserted.rows_affected() == 1 {
                return Ok(Idempotency::New);
            }
            let row = sqlx::query(
                "SELECT method, path, request_body, status, response_body, content_type \
                 FROM idempotency WHERE key = $1",
            )
            .bind(key)
            .fetch_one(pool)
            .await?;
            let same = row.try_get::<&str, _>("method")? == method
                && row.try_get::<&str, _>("path")? == path
                && row.try_get::<&[u8], _>("request_body")? == body;
            if !same {
                return Ok(Idempotency::Mismatch);
            }
            Ok(match row.try_get::<Option<i64>, _>("status")? {
                None => Idempotency::InProgress,
                Some(status) => Idempotency::Replay {
                    status: status as u16,
                    body: row
                        .try_get::<Option<Vec<u8>>, _>("response_body")?
                        .unwrap_or_default(),
                    content_type: row.try_get("content_type")?,
                },
            })
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
        on_db!(self, pool => {
            sqlx::query(
                "UPDATE idempotency SET status = $1, response_body = $2, content_type = $3 \
                 WHERE key = $4",
            )
            .bind(i64::from(status))
            .bind(body)
            .bind(content_type)
            .bind(key)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    /// Releases `key` after a failure that should not be replayed (a 5xx), so a retry runs.
    pub async fn release_idempotent(&self, key: &str) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query("DELETE FROM idempotency WHERE key = $1 AND status IS NULL")
                .bind(key)
                .execute(pool)
                .await?;
            Ok(())
        })
    }
}
