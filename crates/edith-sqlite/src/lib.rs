//! SQLite connections handed out and taken back without sqlx's pool, for the control plane's
//! store and the runtime's `state.db`.
//!
//! sqlx runs each SQLite connection on a thread of its own, so every statement is a round trip
//! to that thread. Its pool adds a second one whenever a connection comes back: it spawns a task
//! that pings the connection's thread before the connection can be used again. On this
//! project's machines a round trip costs tens of microseconds (a sleeping thread must be woken),
//! as much as the statement. A connection of this set is back as soon as its lease ends. The
//! thread runs commands in the order they were sent: a caller dropped midway leaves at most the
//! statement its thread is running, which ends before the next caller's first statement starts
//! (the rest of a dropped query is not run); such a connection is handed out last.
//!
//! Transactions go through [`Connections::begin`] or [`Connections::transact`], which close a
//! connection whose transaction did not end; a query run through the set must not open one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteConnection, SqliteQueryResult, SqliteRow};
use sqlx::{ConnectOptions, Connection, Either, Execute, Executor, SqlStr};
use tokio::sync::{Semaphore, SemaphorePermit};

/// How long a caller waits for a connection while all are in use (sqlx's pool's default).
const ACQUIRE_LIMIT: Duration = Duration::from_secs(30);

/// A connection unused this long is closed (sqlx's pool's default): when one comes back, or by
/// the set's sweep, which runs every half of it.
const IDLE_LIMIT: Duration = Duration::from_secs(600);

/// At most `most` connections to one database, opened when first needed, kept while used.
#[derive(Debug, Clone)]
pub struct Connections {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: SqliteConnectOptions,
    /// Connections not in use. The last used is at the back and handed out first; one whose
    /// caller was dropped midway goes to the front, since its thread may still be busy.
    idle: Mutex<VecDeque<Idle>>,
    /// One permit per connection that may be in use; closed when the set is closed.
    permits: Semaphore,
    most: u32,
    /// How long a connection may stay unused before it is closed ([`IDLE_LIMIT`]).
    idle_limit: Duration,
}

#[derive(Debug)]
struct Idle {
    connection: SqliteConnection,
    since: Instant,
}

/// A connection in use; it goes back to the set when dropped.
#[derive(Debug)]
struct Lease<'a> {
    connection: Option<SqliteConnection>,
    shared: &'a Shared,
    ended: Ended,
    _permit: SemaphorePermit<'a>,
}

/// How a lease's use ended, which decides what becomes of its connection.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ended {
    /// Its caller was dropped midway, or never said.
    Unknown,
    /// Its last command answered.
    Answered,
    /// The connection's thread is gone or its file failed: closed, not kept.
    Broken,
}

impl Connections {
    /// Opens one connection at once, so a database that cannot be opened is reported here.
    pub async fn open(options: SqliteConnectOptions, most: u32) -> Result<Self, sqlx::Error> {
        Self::open_with_idle_limit(options, most, IDLE_LIMIT).await
    }

    async fn open_with_idle_limit(
        options: SqliteConnectOptions,
        most: u32,
        idle_limit: Duration,
    ) -> Result<Self, sqlx::Error> {
        let first = options.connect().await?;
        let shared = Arc::new(Shared {
            options,
            idle: Mutex::new(VecDeque::from([Idle {
                connection: first,
                since: Instant::now(),
            }])),
            permits: Semaphore::new(most as usize),
            most,
            idle_limit,
        });
        tokio::spawn(sweep(Arc::downgrade(&shared)));
        Ok(Self { shared })
    }

    /// How its connections are opened.
    pub fn options(&self) -> &SqliteConnectOptions {
        &self.shared.options
    }

    /// A connection of the set: the last used idle one, or a new one while fewer than the most
    /// are open. Waits at most [`ACQUIRE_LIMIT`] while all are in use; fails once the set is
    /// closed.
    async fn acquire(&self) -> Result<Lease<'_>, sqlx::Error> {
        let shared = &*self.shared;
        let permit = match tokio::time::timeout(ACQUIRE_LIMIT, shared.permits.acquire()).await {
            Err(_) => return Err(sqlx::Error::PoolTimedOut),
            Ok(Err(_)) => return Err(sqlx::Error::PoolClosed),
            Ok(Ok(permit)) => permit,
        };
        let idle = shared.idle.lock().expect("not poisoned").pop_back();
        let connection = match idle {
            Some(idle) => idle.connection,
            None => shared.options.connect().await?,
        };
        Ok(Lease {
            connection: Some(connection),
            shared,
            ended: Ended::Unknown,
            _permit: permit,
        })
    }

    /// A transaction on a connection of the set: `BEGIN` and `COMMIT` are a round trip each
    /// (sqlx's own transactions wait for the connection's thread to be told that their result
    /// arrived, twice more). One that does not commit is rolled back by closing its connection,
    /// which needs no round trip, so a caller that is dropped midway leaves nothing open.
    pub async fn begin(&self) -> Result<Transaction<'_>, sqlx::Error> {
        let mut transaction = Transaction {
            lease: self.acquire().await?,
            committed: false,
        };
        sqlx::query("BEGIN").execute(&mut *transaction).await?;
        Ok(transaction)
    }

    /// Runs `script`, a transaction written out whole (`BEGIN IMMEDIATE; …; COMMIT`), in one
    /// round trip, and returns the rows its statements return. If it stops partway (a statement
    /// failed, or the caller was dropped), its connection is closed, which rolls it back.
    pub async fn transact<'q, E>(&self, script: E) -> Result<Vec<SqliteRow>, sqlx::Error>
    where
        E: 'q + Execute<'q, Sqlite>,
    {
        let mut transaction = Transaction {
            lease: self.acquire().await?,
            committed: false,
        };
        let rows = transaction.fetch_all(script).await?;
        // Every statement ran: the connection's thread stops a query early only at an error or
        // when its caller is gone.
        transaction.committed = true;
        transaction.lease.ended = Ended::Answered;
        Ok(rows)
    }

    /// Closes the set: later acquisitions fail, connections in use are closed when they come
    /// back. Waits at most `bound` in all for those in use and for the idle ones to close.
    pub async fn close(&self, bound: Duration) {
        let shared = &*self.shared;
        let closing = async {
            let all = shared.permits.acquire_many(shared.most).await;
            shared.permits.close();
            let idle = std::mem::take(&mut *shared.idle.lock().expect("not poisoned"));
            for idle in idle {
                let _ = idle.connection.close().await;
            }
            drop(all);
        };
        let _ = tokio::time::timeout(bound, closing).await;
        shared.permits.close();
        // What is left is closed without waiting.
        drop(std::mem::take(
            &mut *shared.idle.lock().expect("not poisoned"),
        ));
    }
}

impl Lease<'_> {
    /// Notes how a command on the connection ended.
    fn answered<T>(&mut self, result: &Result<T, sqlx::Error>) {
        self.ended = match result {
            Err(sqlx::Error::WorkerCrashed | sqlx::Error::Io(_)) => Ended::Broken,
            _ => Ended::Answered,
        };
    }
}

impl std::ops::Deref for Lease<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        self.connection.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.connection.as_mut().expect("held until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        if self.ended == Ended::Broken || self.shared.permits.is_closed() {
            return;
        }
        let now = Instant::now();
        let returned = Idle {
            connection,
            since: now,
        };
        let stale = {
            let mut idle = self.shared.idle.lock().expect("not poisoned");
            match self.ended {
                Ended::Answered => idle.push_back(returned),
                _ => idle.push_front(returned),
            }
            take_stale(&mut idle, now, self.shared.idle_limit)
        };
        // Closed outside the lock (dropping a connection tells its thread to end).
        drop(stale);
    }
}

/// The connections of `idle` unused for `limit` at `now`, taken out of it.
fn take_stale(idle: &mut VecDeque<Idle>, now: Instant, limit: Duration) -> VecDeque<Idle> {
    let is_stale = |idle: &Idle| now.duration_since(idle.since) >= limit;
    // Rarely any: the list is only rebuilt when one is.
    if !idle.iter().any(is_stale) {
        return VecDeque::new();
    }
    let (stale, fresh) = std::mem::take(idle).into_iter().partition(is_stale);
    *idle = fresh;
    stale
}

/// Closes the set's connections left unused for its idle limit, every half of it, until the set
/// is closed or gone. Without it a database nobody uses any more (a runtime home without
/// traffic) would keep its last connections, their threads and page caches, for good: they are
/// otherwise closed only when another connection comes back.
async fn sweep(set: Weak<Shared>) {
    let Some(period) = set.upgrade().map(|shared| shared.idle_limit / 2) else {
        return;
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(shared) = set.upgrade() else {
            return;
        };
        if shared.permits.is_closed() {
            return;
        }
        let stale = {
            let mut idle = shared.idle.lock().expect("not poisoned");
            take_stale(&mut idle, Instant::now(), shared.idle_limit)
        };
        drop(stale);
    }
}

/// A transaction of [`Connections::begin`]; rolled back unless committed.
#[derive(Debug)]
pub struct Transaction<'a> {
    lease: Lease<'a>,
    committed: bool,
}

impl Transaction<'_> {
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        sqlx::query("COMMIT").execute(&mut *self).await?;
        self.committed = true;
        self.lease.ended = Ended::Answered;
        Ok(())
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.lease
    }
}

impl std::ops::DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.lease
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.committed {
            // Closed rather than given back: SQLite rolls back what a closed connection left
            // open. A new one is opened when needed.
            drop(self.lease.connection.take());
        }
    }
}

/// Queries run on the set as on a pool: each on a connection leased for it. (Not transactions:
/// see [`Connections::begin`].)
impl<'p> Executor<'p> for &'p Connections {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<SqliteQueryResult, SqliteRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        // The queries of the store and the runtime return a few rows: they are read whole, and
        // the connection goes back before the caller sees the first.
        let all = async move {
            let mut lease = self.acquire().await?;
            let all = lease.fetch_many(query).try_collect::<Vec<_>>().await;
            lease.answered(&all);
            all
        };
        futures_util::stream::once(all)
            .map_ok(|all| futures_util::stream::iter(all.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        Box::pin(async move {
            let mut lease = self.acquire().await?;
            let row = lease.fetch_optional(query).await;
            lease.answered(&row);
            row
        })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [sqlx::sqlite::SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<sqlx::sqlite::SqliteStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.acquire().await?;
            let prepared = lease.prepare_with(sql, parameters).await;
            lease.answered(&prepared);
            prepared
        })
    }

    // Required while sqlx's query macros are built (they describe queries at compile time).
    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Sqlite>, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.acquire().await?;
            let described = lease.describe(sql).await;
            lease.answered(&described);
            described
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Row;

    use super::*;

    async fn set(dir: &tempfile::TempDir, most: u32) -> Connections {
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("set.db"))
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        let set = Connections::open(options, most).await.unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .execute(&set)
            .await
            .unwrap();
        set
    }

    async fn ids(set: &Connections) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM t ORDER BY id")
            .fetch_all(set)
            .await
            .unwrap()
    }

    /// Bounded: a write that waited on a transaction left open would wait for the busy timeout.
    async fn insert(set: &Connections, id: i64) {
        let write = sqlx::query("INSERT INTO t VALUES ($1)")
            .bind(id)
            .execute(set);
        tokio::time::timeout(Duration::from_secs(5), write)
            .await
            .expect("nothing holds the write lock")
            .unwrap();
    }

    #[tokio::test]
    async fn connections_left_unused_are_closed_without_any_other_traffic() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("set.db"))
            .create_if_missing(true);
        let limit = Duration::from_millis(100);
        let set = Connections::open_with_idle_limit(options, 2, limit)
            .await
            .unwrap();
        let idle = || set.shared.idle.lock().unwrap().len();
        assert_eq!(idle(), 1, "the first connection is kept");
        // Bounded: about five seconds.
        for _ in 0..100 {
            if idle() == 0 {
                let one: i64 = sqlx::query_scalar("SELECT 1")
                    .fetch_one(&set)
                    .await
                    .unwrap();
                assert_eq!(one, 1, "a new connection is opened when needed");
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("a connection unused for {limit:?} is still open");
    }

    #[tokio::test]
    async fn a_transaction_dropped_before_its_commit_is_rolled_back_and_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 2).await;
        let mut tx = set.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut *tx)
            .await
            .unwrap();
        drop(tx);

        // A caller dropped while its transaction waits (a cancelled request, say).
        let (wrote_tx, wrote_rx) = tokio::sync::oneshot::channel();
        let caller = {
            let set = set.clone();
            tokio::spawn(async move {
                let mut tx = set.begin().await.unwrap();
                sqlx::query("INSERT INTO t VALUES (2)")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                wrote_tx.send(()).unwrap();
                std::future::pending::<()>().await;
            })
        };
        wrote_rx.await.unwrap();
        caller.abort();
        let _ = caller.await;

        insert(&set, 3).await;
        let mut tx = set.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (4)")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(ids(&set).await, [3, 4]);
    }

    #[tokio::test]
    async fn a_script_that_fails_partway_leaves_nothing_and_one_that_ends_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 2).await;
        let failed = set
            .transact(sqlx::query(
                "BEGIN IMMEDIATE; INSERT INTO t VALUES (1); INSERT INTO t VALUES (1); COMMIT",
            ))
            .await;
        assert!(failed.is_err(), "the second insert breaks the key");
        insert(&set, 2).await;
        let rows = set
            .transact(
                sqlx::query(
                    "BEGIN IMMEDIATE; INSERT INTO t VALUES ($1); \
                     INSERT INTO t VALUES ($2) RETURNING id; COMMIT",
                )
                .bind(5)
                .bind(6),
            )
            .await
            .unwrap();
        let returned: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
        assert_eq!(returned, [6]);
        assert_eq!(ids(&set).await, [2, 5, 6]);
    }

    /// A statement that takes a while (counting to `n`); the count is its one row.
    fn slow(n: i64) -> String {
        format!(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) \
             SELECT count(*) FROM c"
        )
    }

    #[tokio::test]
    async fn a_query_dropped_while_it_runs_leaves_the_connection_serving_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 1).await;
        let long = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(slow(1_000_000)));
        let cut = tokio::time::timeout(Duration::from_millis(1), long.fetch_one(&set)).await;
        assert!(cut.is_err(), "cut off while it runs");
        // Its thread finishes the statement it runs (well under the bound), then this one.
        let next = sqlx::query_scalar::<_, i64>("SELECT 42").fetch_one(&set);
        let next = tokio::time::timeout(Duration::from_secs(20), next)
            .await
            .expect("served after the dropped statement")
            .unwrap();
        assert_eq!(next, 42);
    }

    #[tokio::test]
    async fn a_script_dropped_while_it_runs_is_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 1).await;
        let script = format!(
            "BEGIN IMMEDIATE; INSERT INTO t VALUES (1); {}; COMMIT",
            slow(1_000_000)
        );
        let script = set.transact(sqlx::query(sqlx::AssertSqlSafe(script)));
        let cut = tokio::time::timeout(Duration::from_millis(1), script).await;
        assert!(cut.is_err(), "cut off while it runs");
        // Waits (within the busy timeout) for the closed connection's thread to finish the
        // statement it runs and let go of the write lock.
        let write = sqlx::query("INSERT INTO t VALUES (2)").execute(&set);
        tokio::time::timeout(Duration::from_secs(20), write)
            .await
            .expect("the write lock is let go")
            .unwrap();
        assert_eq!(ids(&set).await, [2]);
    }

    #[tokio::test]
    async fn closing_waits_for_a_connection_in_use_only_as_long_as_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 2).await;
        let out = set.acquire().await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            set.close(Duration::from_millis(100)),
        )
        .await
        .expect("closing is bounded");
        drop(out);
        assert!(
            set.shared.idle.lock().unwrap().is_empty(),
            "not kept once closed"
        );
        assert!(matches!(set.acquire().await, Err(sqlx::Error::PoolClosed)));
    }

    #[tokio::test]
    async fn at_most_the_given_number_are_in_use_and_a_closed_set_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir, 2).await;
        let first = set.acquire().await.unwrap();
        let second = set.acquire().await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(200), set.acquire()).await;
        assert!(third.is_err(), "a third waits while two are in use");
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), set.acquire())
            .await
            .expect("one came back")
            .unwrap();
        drop((second, third));

        set.close(Duration::from_secs(5)).await;
        assert!(matches!(set.acquire().await, Err(sqlx::Error::PoolClosed)));
    }
}
