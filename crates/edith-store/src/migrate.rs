//! Append-only migrations: each file runs once, in order, inside a transaction.

use sqlx::SqlitePool;

/// `(version, sql)`; never edit a released entry, add a new one.
const SQLITE: &[(i64, &str)] = &[
    (1, include_str!("../migrations/sqlite/0001_initial.sql")),
    (2, include_str!("../migrations/sqlite/0002_idempotency.sql")),
];

pub async fn run(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .execute(pool)
    .await?;
    for (version, sql) in SQLITE {
        let mut tx = pool.begin().await?;
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT version FROM schema_migrations WHERE version = ?")
                .bind(version)
                .fetch_optional(&mut *tx)
                .await?;
        if applied.is_none() {
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            sqlx::query(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, datetime('now'))",
            )
            .bind(version)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
    }
    Ok(())
}
