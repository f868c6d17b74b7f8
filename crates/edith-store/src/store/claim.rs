//! One control plane per PostgreSQL database, until replicas share the work: a session-level
//! advisory lock, held on a connection of its own and watched.

use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use super::{Result, StoreError};

/// The advisory lock that says "a control plane uses this database" (an arbitrary constant:
/// `edith` in ASCII).
pub const SOLE_USE_LOCK: i64 = 0x65_64_69_74_68;

/// How often the claim's connection is checked.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long a check may take before the connection counts as gone.
const CHECK_LIMIT: Duration = Duration::from_secs(5);

/// A claim held for as long as this process uses a PostgreSQL database alone. Dropping it (or
/// the process dying, which closes its connection) lets another take the database. Should its
/// connection go (the server restarted, the session was ended), the claim is taken again on a
/// new one; if another process took it meanwhile, [`SoleUse::lost`] says so.
#[derive(Debug)]
pub struct SoleUse {
    /// Keeps the connection and checks it; `None` for SQLite, whose file is this process's.
    keeper: Option<tokio::task::JoinHandle<()>>,
    lost: watch::Receiver<bool>,
}

impl Drop for SoleUse {
    fn drop(&mut self) {
        if let Some(keeper) = &self.keeper {
            keeper.abort();
        }
    }
}

impl SoleUse {
    pub(super) fn not_needed() -> Self {
        Self {
            keeper: None,
            lost: watch::channel(false).1,
        }
    }

    pub(super) async fn claim(pool: &PgPool) -> Result<Self> {
        let connection = take(pool).await?.ok_or(StoreError::InUse)?;
        let (lost, seen) = watch::channel(false);
        let keeper = tokio::spawn(keep(pool.clone(), Some(connection), lost));
        Ok(Self {
            keeper: Some(keeper),
            lost: seen,
        })
    }

    /// Returns once another process has taken the database (never while this one holds it).
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        if lost.wait_for(|lost| *lost).await.is_err() {
            // No keeper (SQLite) or it is gone with its claim: nothing will ever be lost.
            std::future::pending::<()>().await;
        }
    }
}

/// A new connection holding the lock, or `None` when another process holds it.
async fn take(pool: &PgPool) -> Result<Option<sqlx::PgConnection>> {
    let mut connection = pool.acquire().await?.detach();
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(SOLE_USE_LOCK)
        .fetch_one(&mut connection)
        .await?;
    Ok(taken.then_some(connection))
}

/// Checks the claim's connection every [`CHECK_EVERY`]; takes the claim again on a new one when
/// it went, and reports the claim lost when another process has it.
async fn keep(pool: PgPool, mut held: Option<sqlx::PgConnection>, lost: watch::Sender<bool>) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        if let Some(connection) = held.as_mut() {
            let check = sqlx::query("SELECT 1").execute(&mut *connection);
            if matches!(tokio::time::timeout(CHECK_LIMIT, check).await, Ok(Ok(_))) {
                continue;
            }
            // Its lock went with it.
            held = None;
        }
        match tokio::time::timeout(CHECK_LIMIT, take(&pool)).await {
            Ok(Ok(Some(connection))) => held = Some(connection),
            Ok(Ok(None)) => {
                let _ = lost.send(true);
                return;
            }
            // The database cannot be reached now: try again at the next check.
            Ok(Err(_)) | Err(_) => {}
        }
    }
}
