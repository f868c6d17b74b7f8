//! API keys, kept by the hash of their secret.

use edith_types::{ApiKey, ApiKeyId, Page, Timestamp};

use super::{Channel, Result, Store, duplicate_or_db, from_body, is_postgres, to_json};

impl Store {
    /// Stores a key by the hash of its secret (never the secret).
    pub async fn insert_api_key(&self, key: &ApiKey, hash: &[u8]) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query("INSERT INTO api_keys (id, hash, body) VALUES ($1, $2, $3)")
                .bind(key.id.as_str())
                .bind(hash)
                .bind(to_json(key))
                .execute(pool)
                .await
                .map_err(|e| duplicate_or_db(e, "a key with this secret".to_owned()))?;
            Ok(())
        })
    }

    /// The key whose secret hashes to `hash`.
    pub async fn api_key_by_hash(&self, hash: &[u8]) -> Result<Option<ApiKey>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM api_keys WHERE hash = $1")
                .bind(hash)
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    pub async fn api_key(&self, id: &ApiKeyId) -> Result<Option<ApiKey>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM api_keys WHERE id = $1")
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    pub async fn list_api_keys(
        &self,
        cursor: Option<&ApiKeyId>,
        limit: usize,
    ) -> Result<Page<ApiKey>> {
        self.page_in_order(
            in_order!("api_keys"),
            cursor.map(|c| c.as_str()),
            limit,
            |k: &ApiKey| k.id.to_string(),
        )
        .await
    }

    /// Writes a key's `last_used_at`, and nothing else.
    pub async fn record_api_key_use(&self, id: &ApiKeyId, at: &Timestamp) -> Result<()> {
        self.set_key_time(id, "last_used_at", at, None).await
    }

    /// Writes a key's `revoked_at`, and nothing else, and tells the other replicas.
    pub async fn revoke_api_key(&self, id: &ApiKeyId, at: &Timestamp) -> Result<()> {
        self.set_key_time(id, "revoked_at", at, Some(Channel::KeyRevoked))
            .await
    }

    /// Sets one time of a key in one statement, so that a change to another (a use recorded
    /// while a revocation is written) is never written over; announced on `channel` if given.
    async fn set_key_time(
        &self,
        id: &ApiKeyId,
        field: &'static str,
        at: &Timestamp,
        channel: Option<Channel>,
    ) -> Result<()> {
        on_db!(self, pool => {
            let sql = if is_postgres(pool) {
                format!(
                    "UPDATE api_keys SET body = jsonb_set(body::jsonb, '{{{field}}}', \
                     to_jsonb($1::text))::text WHERE id = $2"
                )
            } else {
                format!("UPDATE api_keys SET body = json_set(body, '$.{field}', $1) WHERE id = $2")
            };
            let mut tx = begin!(pool);
            // Only the constant names above are spliced into `sql`.
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(at.as_str())
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
            if let Some(channel) = channel {
                announce!(tx, self, pool, channel, id.as_str());
            }
            tx.commit().await?;
            Ok(())
        })
    }
}
