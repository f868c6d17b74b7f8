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
        let held = take(pool).await?.ok_or(StoreError::InUse)?;
        let (lost, seen) = watch::channel(false);
        let keeper = tokio::spawn(keep(pool.clone(), Some(held), lost));
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

/// The claim's connection, and its server process (whose lock it is).
struct Held {
    connection: sqlx::PgConnection,
    backend: i32,
}

/// A new connection holding the lock, or `None` when another holds it.
async fn take(pool: &PgPool) -> Result<Option<Held>> {
    let mut connection = pool.acquire().await?.detach();
    // The server notices a vanished client within half a minute (its lock goes with it),
    // rather than at the operating system's keepalive of hours.
    sqlx::raw_sql(
        "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; \
         SET tcp_keepalives_count = 3",
    )
    .execute(&mut connection)
    .await?;
    let (taken, backend): (bool, i32) =
        sqlx::query_as("SELECT pg_try_advisory_lock($1), pg_backend_pid()")
            .bind(SOLE_USE_LOCK)
            .fetch_one(&mut connection)
            .await?;
    Ok(taken.then_some(Held {
        connection,
        backend,
    }))
}

/// The server process holding the lock now, if any.
async fn holder(pool: &PgPool) -> Result<Option<i32>> {
    // A bigint advisory key is kept as its high and low halves, `objsubid` 1.
    let holder = sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1",
    )
    .bind(SOLE_USE_LOCK >> 32)
    .bind(SOLE_USE_LOCK & 0xffff_ffff)
    .fetch_optional(pool)
    .await?;
    Ok(holder)
}

/// Checks the claim's connection every [`CHECK_EVERY`]; takes the claim again on a new one when
/// it went, and reports the claim lost when another process has it. A connection that stopped
/// answering may still hold the lock on the server: that one is ended, as it is this
/// process's own.
async fn keep(pool: PgPool, held: Option<Held>, lost: watch::Sender<bool>) {
    let mut backend = held.as_ref().map(|held| held.backend);
    let mut held = held;
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        if let Some(claim) = held.as_mut() {
            let check = sqlx::query("SELECT 1").execute(&mut claim.connection);
            if matches!(tokio::time::timeout(CHECK_LIMIT, check).await, Ok(Ok(_))) {
                continue;
            }
            held = None;
        }
        match tokio::time::timeout(CHECK_LIMIT, retake(&pool, backend)).await {
            Ok(Ok(Retaken::Held(claim))) => {
                backend = Some(claim.backend);
                held = Some(claim);
            }
            Ok(Ok(Retaken::ByAnother)) => {
                let _ = lost.send(true);
                return;
            }
            // Try again at the next check.
            Ok(Ok(Retaken::NotYet)) | Ok(Err(_)) | Err(_) => {}
        }
    }
}

/// What trying to take the claim again found.
enum Retaken {
    Held(Held),
    /// Another process holds it.
    ByAnother,
    /// Not now: the database is unreachable, or the lock is still on its way out.
    NotYet,
}

/// Takes the claim again. When the one holding it is `ours` (the server side of the connection
/// that stopped answering), that is ended, and the next check takes the claim.
async fn retake(pool: &PgPool, ours: Option<i32>) -> Result<Retaken> {
    if let Some(claim) = take(pool).await? {
        return Ok(Retaken::Held(claim));
    }
    match holder(pool).await? {
        // Let go in between.
        None => Ok(Retaken::NotYet),
        Some(pid) if Some(pid) == ours => {
            sqlx::query("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .execute(pool)
                .await?;
            Ok(Retaken::NotYet)
        }
        Some(_) => Ok(Retaken::ByAnother),
    }
}
