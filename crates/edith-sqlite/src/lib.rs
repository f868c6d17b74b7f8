//! SQLite for the control plane's store and the runtime's `state.db`, its statements run on the
//! thread that asks, through sqlx's API.
//!
//! sqlx's own SQLite driver runs each connection on a thread of its own: every statement is a
//! round trip to that thread, which costs 35–40 µs of CPU on this project's machines (a
//! sleeping thread is woken and wakes its caller back; `cargo run --release -p edith-sqlite
//! --example hop`), more than the statement itself. Here a statement runs where it is polled,
//! with no await inside it, so a caller dropped midway has run it whole or not at all. The
//! queries are still written with `sqlx::query` and read with `Row::get`: [`Sqlite`] is a sqlx
//! database, so a query's text and the code reading its rows compile for it and for
//! PostgreSQL alike.
//!
//! One connection writes, behind an async lock: in-process writers queue there, in order, and
//! never meet SQLite's own lock; the writes queued when the writer is taken are committed
//! together, each all or nothing ([`batch`]). Another process's lock is waited for without
//! holding the thread (SQLite's busy handler, which sleeps on it, is off once a connection is
//! open). A statement that only reads runs on the writer when nobody holds it (its page cache
//! is the one another connection's commit does not drop), else on a reader taken from a list;
//! a read never waits for a write (WAL). Transactions go through [`Connections::begin`] or
//! [`Connections::transact`], on the writer; a query run through the set must not begin or end
//! one.

mod batch;
mod connection;
mod database;
mod error;
mod run;
mod types;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use rusqlite::OpenFlags;
use sqlx::{Either, Execute, Executor, SqlStr};
use tokio::sync::Semaphore;

pub use connection::{Connection, Options, Synchronous};
pub use database::{Arguments, Column, QueryResult, Sqlite, SqliteRow, TypeInfo, Value, ValueRef};
pub use error::SqliteError;

use connection::{first_row, not_prepared, parts, stream};
use database::Statement;
use error::is_busy;
use run::{Results, only_reads, run};

/// How long a caller waits for the writer while others use it (sqlx's pool's default).
const ACQUIRE_LIMIT: Duration = Duration::from_secs(30);

/// A connection unused this long is closed (sqlx's pool's default): when a reader comes back,
/// or by the set's sweep, which runs every half of it.
const IDLE_LIMIT: Duration = Duration::from_secs(600);

/// The longest pause before a statement that met another process's lock is tried again.
const BUSY_PAUSE_MOST: Duration = Duration::from_millis(25);

/// How many reads may run on blocking threads at once ([`Connections::fetch_all_off_thread`]).
const OFF_THREAD_MOST: usize = 4;

/// How many writes between two checkpoints of the WAL (SQLite's own default is every 1000
/// pages; a write here changes two to four).
const CHECKPOINT_EVERY: u32 = 300;

/// The connections to one database: one that writes, and readers opened when needed.
#[derive(Debug, Clone)]
pub struct Connections {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Itself, for the checkpoints it starts.
    me: Weak<Shared>,
    options: Options,
    /// The connection that writes; `None` until needed again after the sweep closed it.
    writer: tokio::sync::Mutex<Writer>,
    /// Writes waiting for the writer, to be committed together.
    queue: Mutex<batch::Queue>,
    /// Transactions of queued writes committed, for [`Connections::commits`].
    commits: AtomicU64,
    /// Readers not in use, the last used at the back. A reader is in use only while a
    /// statement runs, without an await, so there are never more than the threads polling,
    /// and the reads sent to blocking threads ([`OFF_THREAD_MOST`]).
    readers: Mutex<Vec<Idle>>,
    closed: AtomicBool,
    /// One permit per read that may run on a blocking thread at once.
    off_thread: Semaphore,
    /// Writes made, for [`Shared::wrote`].
    writes: AtomicU32,
    /// A checkpoint is under way.
    checkpointing: AtomicBool,
    /// Checkpoints done.
    checkpoints: AtomicU32,
    /// How long a connection may stay unused before it is closed ([`IDLE_LIMIT`]).
    idle_limit: Duration,
}

#[derive(Debug)]
struct Writer {
    connection: Option<Connection>,
    /// When it was last taken.
    since: Instant,
}

#[derive(Debug)]
struct Idle {
    connection: Connection,
    since: Instant,
}

impl Connections {
    /// Opens the writer at once, so a database that cannot be opened is reported here.
    pub async fn open(options: Options) -> Result<Self, sqlx::Error> {
        Self::open_with_idle_limit(options, IDLE_LIMIT)
    }

    fn open_with_idle_limit(options: Options, idle_limit: Duration) -> Result<Self, sqlx::Error> {
        let writer = Connection(options.open_writer()?);
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            options,
            writer: tokio::sync::Mutex::new(Writer {
                connection: Some(writer),
                since: Instant::now(),
            }),
            queue: Mutex::default(),
            commits: AtomicU64::new(0),
            readers: Mutex::default(),
            closed: AtomicBool::new(false),
            off_thread: Semaphore::new(OFF_THREAD_MOST),
            writes: AtomicU32::new(0),
            checkpointing: AtomicBool::new(false),
            checkpoints: AtomicU32::new(0),
            idle_limit,
        });
        tokio::spawn(sweep(Arc::downgrade(&shared)));
        Ok(Self { shared })
    }

    /// How its connections are opened.
    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    fn refuse_if_closed(&self) -> Result<(), sqlx::Error> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(sqlx::Error::PoolClosed);
        }
        Ok(())
    }

    /// A reader: the last used idle one, or a new one.
    fn reader(&self) -> Result<Reader<'_>, sqlx::Error> {
        self.refuse_if_closed()?;
        let idle = self.shared.readers.lock().expect("not poisoned").pop();
        let connection = match idle {
            Some(idle) => idle.connection,
            None => Connection(self.shared.options.open()?),
        };
        Ok(Reader {
            connection: Some(connection),
            shared: &self.shared,
        })
    }

    /// The writer, once those before have let it go: waits at most [`ACQUIRE_LIMIT`].
    async fn writer(&self) -> Result<WriterLease<'_>, sqlx::Error> {
        self.refuse_if_closed()?;
        let mut writer = tokio::time::timeout(ACQUIRE_LIMIT, self.shared.writer.lock())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        // Closed while this caller waited.
        self.refuse_if_closed()?;
        if writer.connection.is_none() {
            writer.connection = Some(Connection(self.shared.options.open_writer()?));
        }
        writer.since = Instant::now();
        Ok(WriterLease {
            writer,
            shared: &self.shared,
            writes: 1,
        })
    }

    /// A transaction on the writer (`BEGIN IMMEDIATE`). One that is not committed is rolled
    /// back when dropped, so a caller dropped midway leaves nothing open.
    pub async fn begin(&self) -> Result<Transaction<'_>, sqlx::Error> {
        let mut writer = self.writer().await?;
        self.begin_patiently(&mut writer).await?;
        Ok(Transaction {
            writer,
            committed: false,
        })
    }

    /// Runs `script`, statements that go together (without a `BEGIN` or `COMMIT` of their
    /// own), all or none, and returns the rows they return. (Any write through the set is all
    /// or none; this names it, and gives the rows of a script.)
    pub async fn transact<'q, E>(&self, script: E) -> Result<Vec<SqliteRow>, sqlx::Error>
    where
        E: 'q + Execute<'q, Sqlite>,
    {
        let (sql, arguments) = parts(script)?;
        let results = self.write(sql, arguments).await?;
        Ok(results.into_iter().filter_map(Either::right).collect())
    }

    /// How many transactions of queued writes have been committed (not those lost and rolled
    /// back): fewer than the writes when they came together.
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Acquire)
    }

    /// Runs `sql`, a write, in the next transaction of queued writes, and returns what it gave
    /// back once that transaction has committed. Whoever takes the writer commits every write
    /// queued by then; a caller gone before its write was taken leaves it undone.
    async fn write(&self, sql: SqlStr, arguments: Arguments) -> Result<Results, sqlx::Error> {
        let (id, mut answered) = self
            .shared
            .queue
            .lock()
            .expect("not poisoned")
            .push(sql, arguments);
        let mut queued = Queued {
            shared: &self.shared,
            id: Some(id),
        };
        // The writes of the tasks ready to run join this one's transaction.
        tokio::task::yield_now().await;
        loop {
            tokio::select! {
                biased;
                answer = &mut answered => {
                    // Answered, so taken out of the queue already.
                    queued.id = None;
                    return answer.unwrap_or_else(|_| Err(unanswered()));
                }
                writer = self.writer() => match writer {
                    Ok(mut writer) => self.commit_queued(&mut writer).await?,
                    // Not taken by anyone: it is not made.
                    Err(e) if queued.take_out() => return Err(e),
                    // Taken meanwhile by whoever holds the writer, who runs it without an
                    // await and answers.
                    Err(_) => {
                        queued.id = None;
                        return answered.await.unwrap_or_else(|_| Err(unanswered()));
                    }
                },
            }
        }
    }

    /// Commits the writes queued by now on `writer`, together, and answers them. Another
    /// process's lock is waited for first, without holding the thread (an error then: nothing
    /// was taken from the queue); from then on it runs to its end without awaiting.
    async fn commit_queued(&self, writer: &mut WriterLease<'_>) -> Result<(), sqlx::Error> {
        if self.shared.queue.lock().expect("not poisoned").is_empty() {
            return Ok(());
        }
        self.begin_patiently(writer).await?;
        let queued = self.shared.queue.lock().expect("not poisoned").take();
        let committed = batch::commit(&writer.0, queued);
        writer.writes = u32::try_from(committed.writes).unwrap_or(u32::MAX).max(1);
        if committed.kept {
            self.shared.commits.fetch_add(1, Ordering::AcqRel);
        }
        // A transaction that could not be rolled back goes with its connection (SQLite rolls
        // back what a closed connection left open); a new one is opened when needed.
        if writer.roll_back().is_err() {
            close_off_thread(writer.writer.connection.take().into_iter().collect());
        }
        Ok(())
    }

    /// Runs `query`: one statement that only reads on the writer if nobody holds it, else on a
    /// reader (on a blocking thread with [`ReadOn::BlockingThread`]); a write in the queue of
    /// writes.
    async fn run<'q, E: Execute<'q, Sqlite>>(
        &self,
        query: E,
        reads: ReadOn,
    ) -> Result<Results, sqlx::Error> {
        let (mut sql, mut arguments) = parts(query)?;
        self.refuse_if_closed()?;
        if let ReadOn::ThisThread = reads {
            match self.read_on_idle_writer(sql.as_str(), &arguments) {
                OnWriter::Read(Ok(results)) => return Ok(results),
                OnWriter::Read(Err(e)) if !is_busy(&e) => return Err(e),
                // Another process's lock, met by a read: waited for as a write is.
                OnWriter::Read(Err(_)) | OnWriter::Writes => {
                    return self.write(sql, arguments).await;
                }
                OnWriter::Taken => {}
            }
        }
        let mut reader = self.reader()?;
        let connection = reader.connection.take().expect("held until dropped");
        let read = if only_reads(&connection.0, sql.as_str()) {
            let (connection, read) = match reads {
                ReadOn::ThisThread => {
                    let read = read_with(&connection, sql.as_str(), &arguments);
                    (connection, read)
                }
                ReadOn::BlockingThread => {
                    // A caller dropped meanwhile stops the statement rather than let it run on.
                    let stop = Interrupt(Some(connection.0.get_interrupt_handle()));
                    let ((connection, lent_sql, lent_arguments), read) =
                        tokio::task::spawn_blocking(move || {
                            let read = read_with(&connection, sql.as_str(), &arguments);
                            ((connection, sql, arguments), read)
                        })
                        .await
                        .map_err(|e| {
                            sqlx::Error::Protocol(format!(
                                "a read on a blocking thread failed: {e}"
                            ))
                        })?;
                    stop.disarm();
                    (sql, arguments) = (lent_sql, lent_arguments);
                    (connection, read)
                }
            };
            reader.connection = Some(connection);
            Some(read)
        } else {
            reader.connection = Some(connection);
            None
        };
        drop(reader);
        match read {
            Some(Ok(results)) => return Ok(results),
            Some(Err(e)) if !is_busy(&e) => return Err(e),
            // Another process's lock, met by a read: waited for on the writer below, the
            // reader given back meanwhile. Or a statement that writes.
            _ => {}
        }
        self.write(sql, arguments).await
    }

    /// Runs `sql` on the writer when nobody holds it and it only reads: the writer's page cache
    /// keeps what its own commits changed, where a reader's is dropped whenever another
    /// connection has committed, and read again from the files.
    fn read_on_idle_writer(&self, sql: &str, arguments: &Arguments) -> OnWriter {
        let Ok(mut writer) = self.shared.writer.try_lock() else {
            return OnWriter::Taken;
        };
        let Some(connection) = writer.connection.as_ref() else {
            return OnWriter::Taken;
        };
        // Never left in a transaction between uses; were it, its changes would be read.
        if connection.roll_back().is_err() {
            close_off_thread(writer.connection.take().into_iter().collect());
            return OnWriter::Taken;
        }
        if !only_reads(&connection.0, sql) {
            return OnWriter::Writes;
        }
        let read = read_with(connection, sql, arguments);
        // A statement that only reads may still open a transaction (`BEGIN`): not kept open.
        if connection.roll_back().is_err() {
            close_off_thread(writer.connection.take().into_iter().collect());
        }
        writer.since = Instant::now();
        OnWriter::Read(read)
    }

    /// Runs `query` on a reader, in `spawn_blocking`, and returns its rows: for a query that
    /// may scan a large table, which would hold a thread serving requests as long. One that
    /// does not only read runs on the writer, as through the set's `Executor`.
    pub async fn fetch_all_off_thread<'q, E>(&self, query: E) -> Result<Vec<SqliteRow>, sqlx::Error>
    where
        E: 'q + Execute<'q, Sqlite>,
    {
        let _permit = tokio::time::timeout(ACQUIRE_LIMIT, self.shared.off_thread.acquire())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let results = self.run(query, ReadOn::BlockingThread).await?;
        Ok(results.into_iter().filter_map(Either::right).collect())
    }

    /// Begins a transaction on `connection` (`BEGIN IMMEDIATE`). While another process holds
    /// the lock, tries again after a pause, for at most the busy timeout.
    async fn begin_patiently(&self, connection: &mut Connection) -> Result<(), sqlx::Error> {
        let deadline = Instant::now() + self.shared.options.busy_limit();
        let mut pause = Duration::from_millis(1);
        loop {
            match batch::execute(&connection.0, "BEGIN IMMEDIATE") {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if !is_busy(&e) || Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BUSY_PAUSE_MOST);
                }
            }
        }
    }

    /// Closes the set: later uses fail, a reader in use is closed when it comes back. Waits at
    /// most `bound` for the writer's last user to let it go.
    pub async fn close(&self, bound: Duration) {
        let shared = &*self.shared;
        shared.closed.store(true, Ordering::Release);
        let readers = std::mem::take(&mut *shared.readers.lock().expect("not poisoned"));
        let mut connections: Vec<Connection> =
            readers.into_iter().map(|idle| idle.connection).collect();
        if let Ok(mut writer) = tokio::time::timeout(bound, shared.writer.lock()).await {
            connections.extend(writer.connection.take());
        }
        close_off_thread(connections);
    }
}

/// Runs `sql`, a statement that only reads, on `connection`.
fn read_with(
    connection: &Connection,
    sql: &str,
    arguments: &Arguments,
) -> Result<Results, sqlx::Error> {
    run(&connection.0, sql, &arguments.0)
}

/// Interrupts the statement running on a connection when dropped, unless disarmed.
struct Interrupt(Option<rusqlite::InterruptHandle>);

impl Interrupt {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.interrupt();
        }
    }
}

/// What [`Connections::read_on_idle_writer`] did.
enum OnWriter {
    /// It read.
    Read(Result<Results, sqlx::Error>),
    /// The statement writes: it goes to the queue of writes.
    Writes,
    /// The writer is in use, or closed (the sweep closed it): a reader reads.
    Taken,
}

/// Where a statement that only reads runs.
#[derive(Debug, Clone, Copy)]
enum ReadOn {
    /// The thread polling it: a statement of a turn takes microseconds.
    ThisThread,
    /// A blocking thread (`spawn_blocking`), for one that may scan a large table.
    BlockingThread,
}

/// A reader in use; back to the list when dropped.
struct Reader<'a> {
    connection: Option<Connection>,
    shared: &'a Shared,
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        // A statement that only reads may still open a transaction (`BEGIN`): not kept open.
        if self.shared.closed.load(Ordering::Acquire) || connection.roll_back().is_err() {
            close_off_thread(vec![connection]);
            return;
        }
        let now = Instant::now();
        let stale = {
            let mut readers = self.shared.readers.lock().expect("not poisoned");
            readers.push(Idle {
                connection,
                since: now,
            });
            take_stale(&mut readers, now, self.shared.idle_limit)
        };
        close_off_thread(stale.into_iter().map(|idle| idle.connection).collect());
    }
}

/// The writer, taken.
struct WriterLease<'a> {
    writer: tokio::sync::MutexGuard<'a, Writer>,
    shared: &'a Shared,
    /// The writes made while it was held.
    writes: u32,
}

impl Drop for WriterLease<'_> {
    fn drop(&mut self) {
        self.shared.wrote(self.writes);
    }
}

/// A write in the queue, taken out when its caller goes before it was taken (`id` is `None`
/// once it was).
struct Queued<'a> {
    shared: &'a Shared,
    id: Option<u64>,
}

impl Queued<'_> {
    /// Takes the write out of the queue; whether it was still there (else someone took it to
    /// make it).
    fn take_out(&mut self) -> bool {
        self.id
            .take()
            .is_some_and(|id| self.shared.queue.lock().expect("not poisoned").remove(id))
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.take_out();
    }
}

/// A write taken from the queue and then dropped unanswered (only if making it panicked).
fn unanswered() -> sqlx::Error {
    sqlx::Error::Protocol("the write was dropped before it was made".to_owned())
}

impl Shared {
    /// Counts `writes` made on the writer; every [`CHECKPOINT_EVERY`] writes, starts a
    /// checkpoint ([`Shared::checkpoint`]), unless one is under way.
    fn wrote(&self, writes: u32) {
        let before = self.writes.fetch_add(writes, Ordering::Relaxed);
        if before / CHECKPOINT_EVERY == before.wrapping_add(writes) / CHECKPOINT_EVERY
            || self.checkpointing.swap(true, Ordering::AcqRel)
        {
            return;
        }
        match (tokio::runtime::Handle::try_current(), self.me.upgrade()) {
            (Ok(runtime), Some(shared)) => drop(runtime.spawn(shared.checkpoint())),
            _ => self.checkpointing.store(false, Ordering::Release),
        }
    }

    /// Copies what the WAL holds into the database file, on a blocking thread and a connection
    /// of its own (`PASSIVE`: it waits for no reader), while it holds the writer. Writes made
    /// meanwhile would keep it from ever catching up: the WAL starts again from its beginning
    /// only once a checkpoint has copied all of it, and without that it grows for good. SQLite's
    /// automatic checkpoint is off on this set's connections: it would run in the commit that
    /// crossed its threshold, on a thread serving requests, and with `Synchronous::Normal` it
    /// syncs the files. A checkpoint that fails is tried again at the next one.
    async fn checkpoint(self: Arc<Self>) {
        let writer = self.writer.lock().await;
        // Not once the set is closed: the database may be on its way out (a home removed),
        // and is not made again.
        if !self.closed.load(Ordering::Acquire) {
            let path = self.options.path().to_owned();
            let _ = tokio::task::spawn_blocking(move || {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                if let Ok(connection) = rusqlite::Connection::open_with_flags(path, flags) {
                    let _ = connection.execute_batch("PRAGMA wal_checkpoint(PASSIVE)");
                }
            })
            .await;
        }
        drop(writer);
        self.checkpointing.store(false, Ordering::Release);
        self.checkpoints.fetch_add(1, Ordering::Release);
    }
}

impl std::ops::Deref for WriterLease<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.writer.connection.as_ref().expect("opened when taken")
    }
}

impl std::ops::DerefMut for WriterLease<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.writer.connection.as_mut().expect("opened when taken")
    }
}

/// Closes `connections` on a blocking thread: the last connection to a database to close
/// checkpoints its WAL and syncs the file.
fn close_off_thread(connections: Vec<Connection>) {
    if connections.is_empty() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(connections))),
        Err(_) => drop(connections),
    }
}

/// The connections of `idle` unused for `limit` at `now`, taken out of it.
fn take_stale(idle: &mut Vec<Idle>, now: Instant, limit: Duration) -> Vec<Idle> {
    let is_stale = |idle: &Idle| now.duration_since(idle.since) >= limit;
    // Rarely any: the list is only rebuilt when one is.
    if !idle.iter().any(is_stale) {
        return Vec::new();
    }
    let (stale, fresh) = std::mem::take(idle).into_iter().partition(is_stale);
    *idle = fresh;
    stale
}

/// Closes the set's connections left unused for its idle limit, every half of it, until the set
/// is closed or gone. Without it a database nobody uses any more (a runtime home without
/// traffic) would keep its connections and their page caches for good.
async fn sweep(set: Weak<Shared>) {
    let Some(period) = set.upgrade().map(|shared| shared.idle_limit / 2) else {
        return;
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(shared) = set.upgrade() else {
            return;
        };
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let mut stale: Vec<Connection> = {
            let mut readers = shared.readers.lock().expect("not poisoned");
            take_stale(&mut readers, now, shared.idle_limit)
        }
        .into_iter()
        .map(|idle| idle.connection)
        .collect();
        // A writer in use is not stale.
        if let Ok(mut writer) = shared.writer.try_lock()
            && now.duration_since(writer.since) >= shared.idle_limit
        {
            stale.extend(writer.connection.take());
        }
        close_off_thread(stale);
    }
}

/// A transaction of [`Connections::begin`]; rolled back unless committed.
pub struct Transaction<'a> {
    writer: WriterLease<'a>,
    committed: bool,
}

impl Transaction<'_> {
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        self.writer.run(sqlx::query("COMMIT"))?;
        self.committed = true;
        Ok(())
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.writer
    }
}

impl std::ops::DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.writer
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.committed && self.writer.roll_back().is_err() {
            // Closed instead: SQLite rolls back what a closed connection left open. A new one
            // is opened when needed.
            drop(self.writer.writer.connection.take());
        }
    }
}

/// Queries run on the set as on a pool. (Not transactions: see [`Connections::begin`].)
impl<'p> Executor<'p> for &'p Connections {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<QueryResult, SqliteRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        futures_util::stream::once(self.run(query, ReadOn::ThisThread))
            .map(stream)
            .flatten()
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
        Box::pin(async move { self.run(query, ReadOn::ThisThread).await.map(first_row) })
    }

    fn prepare_with<'e>(
        self,
        _sql: SqlStr,
        _parameters: &'e [TypeInfo],
    ) -> BoxFuture<'e, Result<Statement, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(std::future::ready(Err(not_prepared())))
    }

    fn describe<'e>(
        self,
        _sql: SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Sqlite>, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(std::future::ready(Err(not_prepared())))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Row;

    use super::*;

    fn options(dir: &tempfile::TempDir) -> Options {
        Options::new(dir.path().join("set.db")).busy_timeout(Duration::from_secs(10))
    }

    async fn set(dir: &tempfile::TempDir) -> Connections {
        let set = Connections::open(options(dir)).await.unwrap();
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

    fn assert_breaks_a_key<T: std::fmt::Debug>(result: Result<T, sqlx::Error>) {
        match result {
            Err(sqlx::Error::Database(e)) => assert!(e.is_unique_violation(), "{e}"),
            other => panic!("expected a unique violation, got {other:?}"),
        }
    }

    /// Bounded: a write that waited on a transaction left open would wait for the writer.
    async fn insert(set: &Connections, id: i64) {
        let write = sqlx::query("INSERT INTO t VALUES ($1)")
            .bind(id)
            .execute(set);
        tokio::time::timeout(Duration::from_secs(5), write)
            .await
            .expect("nothing holds the writer")
            .unwrap();
    }

    #[tokio::test]
    async fn commits_wait_for_the_sync_they_are_told_to() {
        let dir = tempfile::tempdir().unwrap();
        for (told, pragma) in [(Synchronous::Normal, 1), (Synchronous::Full, 2)] {
            let set = Connections::open(options(&dir).synchronous(told))
                .await
                .unwrap();
            // Read on the writer, then on a reader while the writer is held.
            let read = || sqlx::query_scalar::<_, i64>("PRAGMA synchronous").fetch_one(&set);
            assert_eq!(read().await.unwrap(), pragma, "{told:?}");
            let tx = set.begin().await.unwrap();
            assert_eq!(read().await.unwrap(), pragma, "{told:?}, on a reader");
            drop(tx);
            set.close(Duration::from_secs(5)).await;
        }
    }

    #[tokio::test]
    async fn values_go_in_and_come_out_as_they_were_with_each_kind_of_placeholder() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        sqlx::raw_sql("CREATE TABLE v (i INTEGER, r REAL, s TEXT, b BLOB, f INTEGER, n TEXT)")
            .execute(&set)
            .await
            .unwrap();
        let written = sqlx::query("INSERT INTO v VALUES ($1, ?3, ?2, ?, ?, ?)")
            .bind(-7_i64)
            .bind("dé")
            .bind(1.5_f64)
            .bind(&[0_u8, 255][..])
            .bind(true)
            .bind(None::<&str>)
            .execute(&set)
            .await
            .unwrap();
        assert_eq!(written.rows_affected(), 1);
        let row = sqlx::query("SELECT i, r, s, b, f, n FROM v WHERE s = $1")
            .bind("dé")
            .fetch_one(&set)
            .await
            .unwrap();
        // `?N` and `$N` name an argument by its place; a bare `?` takes the one after the
        // highest named before it.
        assert_eq!(row.get::<i64, _>("i"), -7);
        assert_eq!(row.get::<f64, _>(1), 1.5);
        assert_eq!(row.get::<&str, _>("s"), "dé");
        assert_eq!(row.get::<Vec<u8>, _>("b"), [0, 255]);
        assert!(row.get::<bool, _>("f"));
        assert_eq!(row.get::<Option<String>, _>("n"), None);
        assert!(
            row.try_get::<i64, _>("s").is_err(),
            "text is not an integer"
        );
        assert!(matches!(
            row.try_get::<i64, _>("nope"),
            Err(sqlx::Error::ColumnNotFound(_))
        ));

        // In a script, a bare `?` takes the argument after those of the statements before.
        sqlx::query("INSERT INTO t VALUES (?); INSERT INTO t VALUES (?)")
            .bind(10_i64)
            .bind(11_i64)
            .execute(&set)
            .await
            .unwrap();
        assert_eq!(ids(&set).await, [10, 11]);

        let short = sqlx::query("SELECT $2").bind(1_i64).fetch_one(&set).await;
        assert!(
            matches!(&short, Err(sqlx::Error::Protocol(m)) if m.contains("argument 2")),
            "{short:?}"
        );
    }

    #[tokio::test]
    async fn the_writer_keeps_a_page_cache_of_its_own_size() {
        let dir = tempfile::tempdir().unwrap();
        let options = options(&dir).cache_kib(256).writer_cache_kib(4096);
        let set = Connections::open(options).await.unwrap();
        let cache_size = "PRAGMA cache_size";
        let mut tx = set.begin().await.unwrap();
        let writer: i64 = sqlx::query_scalar(cache_size)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        // Beside the transaction, a reader answers.
        let reader: i64 = sqlx::query_scalar(cache_size)
            .fetch_one(&set)
            .await
            .unwrap();
        drop(tx);
        assert_eq!((writer, reader), (-4096, -256));
    }

    #[tokio::test]
    async fn a_broken_rule_is_reported_as_the_rule_it_broke() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        insert(&set, 1).await;
        let again = sqlx::query("INSERT INTO t VALUES (1)").execute(&set).await;
        assert_breaks_a_key(again);
        let changed = sqlx::query("UPDATE t SET id = id + 10 WHERE id > $1")
            .bind(5_i64)
            .execute(&set)
            .await
            .unwrap();
        assert_eq!(changed.rows_affected(), 0, "no row matched");
    }

    #[tokio::test]
    async fn connections_left_unused_are_closed_without_any_other_traffic() {
        let dir = tempfile::tempdir().unwrap();
        let limit = Duration::from_millis(100);
        let set = Connections::open_with_idle_limit(options(&dir), limit).unwrap();
        // Read beside a transaction, so that a reader reads.
        let tx = set.begin().await.unwrap();
        sqlx::query("SELECT 1").execute(&set).await.unwrap();
        drop(tx);
        let open = || {
            let readers = set.shared.readers.lock().unwrap().len();
            let writer = set
                .shared
                .writer
                .try_lock()
                .map_or(1, |w| usize::from(w.connection.is_some()));
            readers + writer
        };
        assert_eq!(open(), 2, "the writer and a reader are kept");
        // Bounded: about five seconds.
        for _ in 0..100 {
            if open() == 0 {
                insert_new_table(&set).await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("a connection unused for {limit:?} is still open");
    }

    /// A write and a read, on connections opened again.
    async fn insert_new_table(set: &Connections) {
        sqlx::raw_sql("CREATE TABLE u (id INTEGER); INSERT INTO u VALUES (42)")
            .execute(set)
            .await
            .unwrap();
        let id: i64 = sqlx::query_scalar("SELECT id FROM u")
            .fetch_one(set)
            .await
            .unwrap();
        assert_eq!(id, 42);
    }

    #[tokio::test]
    async fn a_transaction_dropped_before_its_commit_is_rolled_back_and_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_write_that_begins_or_ends_a_transaction_of_its_own_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let refused = sqlx::raw_sql("BEGIN; INSERT INTO t VALUES (1)")
            .execute(&set)
            .await;
        assert!(refused.is_err(), "writes run in the set's transactions");
        insert(&set, 2).await;
        assert_eq!(ids(&set).await, [2]);
        // Nor end one, in the middle of others': they are made, it is not.
        let before = set.commits();
        let (first, ending, last) = tokio::join!(
            insert(&set, 3),
            sqlx::raw_sql("INSERT INTO t VALUES (4); COMMIT").execute(&set),
            insert(&set, 5),
        );
        let ((), ()) = (first, last);
        assert!(
            matches!(&ending, Err(sqlx::Error::Protocol(m)) if m.contains("COMMIT")),
            "{ending:?}"
        );
        assert_eq!(set.commits() - before, 1, "the three went together");
        assert_eq!(ids(&set).await, [2, 3, 5]);
    }

    #[tokio::test]
    async fn a_transaction_opened_by_a_statement_that_only_reads_is_not_kept_open() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        // SQLite counts `BEGIN` as a statement that only reads.
        sqlx::query("BEGIN").execute(&set).await.unwrap();
        // Left open, the reader's transaction would keep the snapshot this read takes.
        assert!(ids(&set).await.is_empty());
        insert(&set, 1).await;
        assert_eq!(ids(&set).await, [1], "no reader reads an old snapshot");
    }

    #[tokio::test]
    async fn foreign_keys_are_enforced_unless_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        sqlx::raw_sql("CREATE TABLE c (t_id INTEGER REFERENCES t (id))")
            .execute(&set)
            .await
            .unwrap();
        let orphan = sqlx::query("INSERT INTO c VALUES (9)").execute(&set).await;
        match orphan {
            Err(sqlx::Error::Database(e)) => assert!(e.is_foreign_key_violation(), "{e}"),
            other => panic!("expected a foreign key violation, got {other:?}"),
        }
    }

    /// On a one-thread runtime, a long read sent off the thread lets a task run meanwhile; run
    /// on the thread, it would end before the task could start.
    #[tokio::test(flavor = "current_thread")]
    async fn a_read_sent_off_the_thread_lets_others_run_and_gives_its_reader_back() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        insert(&set, 1).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let ticker = {
            let order = Arc::clone(&order);
            tokio::spawn(async move { order.lock().unwrap().push("the task") })
        };
        let long = format!("{} WHERE (SELECT count(*) FROM t) = 1", slow(3_000_000));
        let rows = set
            .fetch_all_off_thread(sqlx::query(sqlx::AssertSqlSafe(long)))
            .await
            .unwrap();
        order.lock().unwrap().push("the read");
        assert_eq!(rows[0].get::<i64, _>(0), 3_000_000);
        ticker.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["the task", "the read"]);
        assert_eq!(
            set.shared.readers.lock().unwrap().len(),
            1,
            "its reader is back"
        );
        // One that writes goes to the writer.
        set.fetch_all_off_thread(sqlx::query("INSERT INTO t VALUES (2)"))
            .await
            .unwrap();
        assert_eq!(ids(&set).await, [1, 2]);
    }

    /// A long read sent off the thread and dropped is stopped: it lets go of its snapshot of
    /// the WAL, which a `TRUNCATE` checkpoint has to wait for.
    #[tokio::test]
    async fn a_read_sent_off_the_thread_and_dropped_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        insert(&set, 1).await;
        let endless = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{} WHERE (SELECT count(*) FROM t) = 1",
            slow(500_000_000)
        )));
        let cut = tokio::time::timeout(
            Duration::from_millis(200),
            set.fetch_all_off_thread(endless),
        )
        .await;
        assert!(cut.is_err(), "cut off while it runs");
        let other = rusqlite::Connection::open(dir.path().join("set.db")).unwrap();
        // Bounded: about five seconds; the read alone would run for a minute or more.
        for _ in 0..100 {
            let busy: i64 = other
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
                .unwrap();
            if busy == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the dropped read still holds its snapshot");
    }

    /// A statement that takes a while (counting to `n`); the count is its one row.
    fn slow(n: i64) -> String {
        format!(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) \
             SELECT count(*) FROM c"
        )
    }

    #[tokio::test]
    async fn a_script_that_fails_partway_leaves_nothing_and_one_that_ends_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let failed = set
            .transact(sqlx::query(
                "INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)",
            ))
            .await;
        assert!(failed.is_err(), "the second insert breaks the key");
        insert(&set, 2).await;
        let rows = set
            .transact(
                sqlx::query("INSERT INTO t VALUES ($1); INSERT INTO t VALUES ($2) RETURNING id")
                    .bind(5)
                    .bind(6),
            )
            .await
            .unwrap();
        let returned: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
        assert_eq!(returned, [6]);
        assert_eq!(ids(&set).await, [2, 5, 6]);
    }

    /// Writes that come together share a transaction, and each is all or nothing within it.
    #[tokio::test(flavor = "current_thread")]
    async fn writes_made_together_are_committed_together_each_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let before = set.commits();
        let inserts = (1..=32).map(|id| insert(&set, id));
        futures_util::future::join_all(inserts).await;
        let commits = set.commits() - before;
        assert!(commits <= 2, "32 writes at once took {commits} commits");
        assert_eq!(ids(&set).await, (1..=32).collect::<Vec<_>>());

        // One write of three fails: it alone is undone, in the transaction of the others.
        let before = set.commits();
        let script = "INSERT INTO t VALUES ($1); INSERT INTO t VALUES ($2)";
        let (first, failed, last) = tokio::join!(
            sqlx::query("INSERT INTO t VALUES (40)").execute(&set),
            set.transact(sqlx::query(script).bind(41).bind(40)),
            sqlx::query("INSERT INTO t VALUES (42)").execute(&set),
        );
        assert_eq!(set.commits() - before, 1, "the three went together");
        first.unwrap();
        last.unwrap();
        assert_breaks_a_key(failed);
        let kept = ids(&set).await;
        assert_eq!(
            kept[32..],
            [40, 42],
            "41 went with the statement that failed"
        );
    }

    #[tokio::test]
    async fn a_read_while_nobody_writes_runs_on_the_writer_and_one_beside_a_write_on_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        insert(&set, 1).await;
        let readers = || set.shared.readers.lock().unwrap().len();
        assert_eq!(ids(&set).await, [1]);
        assert_eq!(readers(), 0, "no reader was opened");
        let tx = set.begin().await.unwrap();
        assert_eq!(ids(&set).await, [1]);
        assert_eq!(readers(), 1, "the writer was taken: a reader read");
        drop(tx);
    }

    #[tokio::test]
    async fn a_write_whose_caller_went_before_it_was_taken_is_not_made() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let tx = set.begin().await.unwrap();
        let mut gone = Box::pin(insert(&set, 1));
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut gone).await;
        assert!(waited.is_err(), "it waits for the writer, queued");
        let stays = {
            let set = set.clone();
            tokio::spawn(async move { insert(&set, 2).await })
        };
        drop(gone);
        tx.commit().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), stays)
            .await
            .expect("the writer came back")
            .unwrap();
        assert_eq!(ids(&set).await, [2]);
    }

    #[tokio::test]
    async fn reads_do_not_wait_for_a_transaction_and_see_only_what_it_committed() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        insert(&set, 1).await;
        let mut tx = set.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES (2)")
            .execute(&mut *tx)
            .await
            .unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), ids(&set))
            .await
            .expect("a read does not wait for the writer");
        assert_eq!(read, [1]);
        tx.commit().await.unwrap();
        assert_eq!(ids(&set).await, [1, 2]);
    }

    #[tokio::test]
    async fn writes_wait_for_the_writer_and_a_closed_set_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let tx = set.begin().await.unwrap();
        let second = tokio::time::timeout(Duration::from_millis(200), set.begin()).await;
        assert!(second.is_err(), "a second transaction waits for the first");
        let write = {
            let set = set.clone();
            tokio::spawn(async move { insert(&set, 7).await })
        };
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), write)
            .await
            .expect("the writer came back")
            .unwrap();
        assert_eq!(ids(&set).await, [7]);

        set.close(Duration::from_secs(5)).await;
        assert!(matches!(set.begin().await, Err(sqlx::Error::PoolClosed)));
        let read = sqlx::query("SELECT 1").execute(&set).await;
        assert!(matches!(read, Err(sqlx::Error::PoolClosed)));
    }

    /// Another process, as SQLite sees it: a connection of its own holding the write lock.
    #[tokio::test(flavor = "current_thread")]
    async fn a_write_waits_for_another_process_lock_without_holding_its_thread() {
        let dir = tempfile::tempdir().unwrap();
        let set = Connections::open(options(&dir).busy_timeout(Duration::from_millis(300)))
            .await
            .unwrap();
        sqlx::raw_sql("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .execute(&set)
            .await
            .unwrap();
        let other = rusqlite::Connection::open(dir.path().join("set.db")).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();

        let gave_up = sqlx::query("INSERT INTO t VALUES (1)").execute(&set).await;
        assert!(
            matches!(&gave_up, Err(e) if error::is_busy(e)),
            "busy after its timeout: {gave_up:?}"
        );
        let write = {
            let set = set.clone();
            tokio::spawn(async move { insert(&set, 2).await })
        };
        // On this one thread: the write waits, and lets this task run meanwhile.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!write.is_finished(), "it waits for the lock");
        other.execute_batch("COMMIT").unwrap();
        tokio::time::timeout(Duration::from_secs(5), write)
            .await
            .expect("written once the lock is let go")
            .unwrap();
        assert_eq!(ids(&set).await, [2]);
    }

    #[tokio::test]
    async fn the_wal_is_checkpointed_off_the_writers_thread_and_does_not_grow_without_bound() {
        let dir = tempfile::tempdir().unwrap();
        let set = Connections::open(options(&dir)).await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
            .execute(&set)
            .await
            .unwrap();
        let wal = dir.path().join("set.db-wal");
        let checkpoints = || set.shared.checkpoints.load(Ordering::Acquire);
        let mut largest = 0;
        // Rows of 2 KiB: without checkpoints the WAL would pass 25 MiB.
        for round in 0..40 {
            for _ in 0..CHECKPOINT_EVERY {
                sqlx::query("INSERT INTO t (v) VALUES (zeroblob(2048))")
                    .execute(&set)
                    .await
                    .unwrap();
            }
            // Bounded: about five seconds for this round's checkpoint.
            for _ in 0..100 {
                if checkpoints() > round {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(checkpoints() > round, "round {round} was not checkpointed");
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        assert!(
            largest < 8 << 20,
            "the WAL is reused once checkpointed, yet grew to {largest} bytes"
        );
    }

    #[tokio::test]
    async fn closing_waits_for_the_writer_in_use_only_as_long_as_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let set = set(&dir).await;
        let tx = set.begin().await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            set.close(Duration::from_millis(100)),
        )
        .await
        .expect("closing is bounded");
        drop(tx);
        assert!(set.shared.readers.lock().unwrap().is_empty());
        assert!(matches!(set.begin().await, Err(sqlx::Error::PoolClosed)));
    }
}
