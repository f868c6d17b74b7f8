//! SQLite connections handed out and taken back without sqlx's pool, for the control plane's
//! store and the runtime's `state.db`.
//!
//! sqlx runs each SQLite connection on a thread of its own, so every statement is a round trip
//! to that thread. Its pool adds a second one whenever a connection comes back: it spawns a task
//! that pings the connection's thread before the connection can be used again. On this
//! project's machines a round trip costs tens of microseconds (a sleeping thread must be woken),
//! as much as the statement. A connection of this set is back as soon as its lease ends: the
//! thread runs commands in the order they were sent, so whatever a dropped caller left queued (a
//! rollback, say) runs before the next caller's first statement.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteConnection, SqliteQueryResult, SqliteRow};
use sqlx::{ConnectOptions, Connection, Either, Execute, Executor, SqlStr};
use tokio::sync::{Semaphore, SemaphorePermit};

/// At most `most` connections to one database, opened when first needed and kept open.
#[derive(Debug, Clone)]
pub struct Connections {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: SqliteConnectOptions,
    idle: Mutex<Vec<SqliteConnection>>,
    /// One permit per connection that may be in use; closed when the set is closed.
    permits: Semaphore,
    most: u32,
}

/// A connection in use; it goes back to the set when dropped.
#[derive(Debug)]
pub struct Lease<'a> {
    connection: Option<SqliteConnection>,
    shared: &'a Shared,
    _permit: SemaphorePermit<'a>,
}

impl Connections {
    /// Opens one connection at once, so a database that cannot be opened is reported here.
    pub async fn open(options: SqliteConnectOptions, most: u32) -> Result<Self, sqlx::Error> {
        let first = options.connect().await?;
        Ok(Self {
            shared: Arc::new(Shared {
                options,
                idle: Mutex::new(vec![first]),
                permits: Semaphore::new(most as usize),
                most,
            }),
        })
    }

    /// How its connections are opened.
    pub fn options(&self) -> &SqliteConnectOptions {
        &self.shared.options
    }

    /// A connection of the set: an idle one, or a new one while fewer than the most are open.
    /// Waits while all are in use; fails once the set is closed.
    pub async fn acquire(&self) -> Result<Lease<'_>, sqlx::Error> {
        let shared = &*self.shared;
        let permit = shared
            .permits
            .acquire()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = shared.idle.lock().expect("not poisoned").pop();
        let connection = match idle {
            Some(connection) => connection,
            None => shared.options.connect().await?,
        };
        Ok(Lease {
            connection: Some(connection),
            shared,
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
        transaction.committed = true;
        Ok(rows)
    }

    /// Waits (at most `bound`) for the connections in use to come back, then closes them all;
    /// later acquisitions fail.
    pub async fn close(&self, bound: std::time::Duration) {
        let shared = &*self.shared;
        let all = tokio::time::timeout(bound, shared.permits.acquire_many(shared.most)).await;
        shared.permits.close();
        let idle = std::mem::take(&mut *shared.idle.lock().expect("not poisoned"));
        for connection in idle {
            let _ = connection.close().await;
        }
        drop(all);
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
        if let Some(connection) = self.connection.take() {
            self.shared
                .idle
                .lock()
                .expect("not poisoned")
                .push(connection);
        }
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

/// Queries run on the set as on a pool: each on a connection leased for it.
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
        // The store's queries return a few rows: they are read whole, and the connection goes
        // back before the caller sees the first.
        let all = async move {
            let mut lease = self.acquire().await?;
            lease.fetch_many(query).try_collect::<Vec<_>>().await
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
        Box::pin(async move { self.acquire().await?.fetch_optional(query).await })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [sqlx::sqlite::SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<sqlx::sqlite::SqliteStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move { self.acquire().await?.prepare_with(sql, parameters).await })
    }

    // Required while sqlx's query macros are built (they describe queries at compile time).
    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Sqlite>, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move { self.acquire().await?.describe(sql).await })
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
        let (began, wrote) = tokio::sync::oneshot::channel();
        let caller = {
            let set = set.clone();
            tokio::spawn(async move {
                let mut tx = set.begin().await.unwrap();
                sqlx::query("INSERT INTO t VALUES (2)")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                began.send(()).unwrap();
                std::future::pending::<()>().await;
            })
        };
        wrote.await.unwrap();
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
