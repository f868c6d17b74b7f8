//! Append-only migrations, one set per backend, applied by sqlx's migrator: each file runs once,
//! in order, in a transaction, and a released file that was edited is refused by its checksum.
//! Never edit a released migration; add a new one.

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{PgPool, SqlitePool};

pub(crate) static SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");
/// The same versions as [`SQLITE`], in PostgreSQL's dialect (a test holds them in step).
pub(crate) static POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");

pub async fn run_sqlite(pool: &SqlitePool) -> Result<(), MigrateError> {
    adopt_legacy_record(pool).await?;
    SQLITE.run(pool).await
}

/// Several control planes may start at once on one database: the migrator takes PostgreSQL's
/// advisory lock, so one applies what is pending and the others find it done.
pub async fn run_postgres(pool: &PgPool) -> Result<(), MigrateError> {
    POSTGRES.run(pool).await
}

/// Data dirs made before the store used sqlx's migrator recorded applied versions in
/// `schema_migrations`. Those versions are recorded for the migrator as applied (once), so no
/// migration runs twice on an existing database.
async fn adopt_legacy_record(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let legacy: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
    )
    .fetch_optional(pool)
    .await?;
    if legacy.is_none() {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    // The migrator's own table, as it creates it.
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
            version BIGINT PRIMARY KEY,
            description TEXT NOT NULL,
            installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
            success BOOLEAN NOT NULL,
            checksum BLOB NOT NULL,
            execution_time BIGINT NOT NULL
        )",
    )
    .execute(&mut *tx)
    .await?;
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM schema_migrations")
        .fetch_all(&mut *tx)
        .await?;
    for migration in SQLITE.iter().filter(|m| applied.contains(&m.version)) {
        sqlx::query(
            "INSERT OR IGNORE INTO _sqlx_migrations \
             (version, description, success, checksum, execution_time) VALUES (?, ?, 1, ?, 0)",
        )
        .bind(migration.version)
        .bind(migration.description.as_ref())
        .bind(migration.checksum.as_ref())
        .execute(&mut *tx)
        .await?;
    }
    sqlx::raw_sql("DROP TABLE schema_migrations")
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::SqlitePoolOptions;

    async fn pool() -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap()
    }

    /// Every change to the schema is made for both backends, under the same version and name.
    #[test]
    fn both_backends_have_the_same_migrations() {
        let versions = |migrator: &Migrator| {
            migrator
                .iter()
                .map(|m| (m.version, m.description.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(versions(&SQLITE), versions(&POSTGRES));
    }

    #[tokio::test]
    async fn migrations_apply_cleanly_and_twice_is_a_no_op() {
        let pool = pool().await;
        run_sqlite(&pool).await.unwrap();
        run_sqlite(&pool).await.unwrap();
        let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
            .fetch_all(&pool)
            .await
            .unwrap();
        let expected: Vec<i64> = SQLITE.iter().map(|m| m.version).collect();
        assert_eq!(versions, expected);
    }

    /// A database the earlier hand-written runner made keeps its data and gets only what it
    /// lacked.
    #[tokio::test]
    async fn a_database_of_the_earlier_runner_is_adopted_without_running_anything_twice() {
        let pool = pool().await;
        sqlx::raw_sql(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let first = SQLITE.iter().next().unwrap();
        sqlx::raw_sql(first.sql.as_ref())
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO schema_migrations VALUES (?, datetime('now'))")
            .bind(first.version)
            .execute(&pool)
            .await
            .unwrap();
        sqlx::raw_sql("INSERT INTO tool_hosts (id, body, secret) VALUES ('th_1', '{}', 'kept')")
            .execute(&pool)
            .await
            .unwrap();

        run_sqlite(&pool)
            .await
            .expect("adopted, then the rest applied");
        let kept: String = sqlx::query_scalar("SELECT secret FROM tool_hosts WHERE id = 'th_1'")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(kept, "kept");
        let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(versions.len(), SQLITE.iter().count());
        let legacy: Option<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE name = 'schema_migrations'")
                .fetch_optional(&pool)
                .await
                .unwrap();
        assert_eq!(legacy, None);
    }
}
