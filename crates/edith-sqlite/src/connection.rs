//! One connection to a database file, as sqlx's traits want it: opened with [`Options`], its
//! statements run on the thread that polls them.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use rusqlite::OpenFlags;
use sqlx::{Either, Execute, Executor, SqlStr};

use crate::database::{Arguments, QueryResult, Sqlite, SqliteRow, Statement, TypeInfo};
use crate::error::from_rusqlite;
use crate::run::{Results, STATEMENTS_KEPT, run};

/// How the connections to one database file are opened. The file is made if missing and kept
/// in WAL mode, with [`Synchronous::Normal`] unless told otherwise. SQLite's automatic
/// checkpoints are off: [`crate::Connections`] runs them on a thread of their own.
#[derive(Debug, Clone)]
pub struct Options {
    path: PathBuf,
    busy_timeout: Duration,
    foreign_keys: bool,
    cache_kib: u32,
    writer_cache_kib: Option<u32>,
    synchronous: Synchronous,
}

/// What a commit waits for (SQLite's `synchronous`, in WAL mode). Neither ever corrupts the
/// file, and with either a crash of the process loses nothing that was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// A commit is written to the WAL, not synced: a power cut or a crash of the system may
    /// drop the last commits. The WAL is synced at each checkpoint.
    #[default]
    Normal,
    /// A commit returns once the WAL is synced to the disk: nothing committed is lost to a
    /// power cut either. One sync per commit (a commit holds every write queued beside it).
    Full,
}

impl Synchronous {
    /// As SQLite's `PRAGMA synchronous` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// From its name in any case (`normal`, `full`), as an operator writes it.
impl std::str::FromStr for Synchronous {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        [Synchronous::Normal, Synchronous::Full]
            .into_iter()
            .find(|mode| mode.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("`{name}`: the SQLite sync mode is `normal` or `full`"))
    }
}

impl Options {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            busy_timeout: Duration::from_secs(5),
            // As sqlx's own driver: on unless turned off.
            foreign_keys: true,
            cache_kib: 2048,
            writer_cache_kib: None,
            synchronous: Synchronous::Normal,
        }
    }

    /// What a commit waits for.
    pub fn synchronous(self, synchronous: Synchronous) -> Self {
        Self {
            synchronous,
            ..self
        }
    }

    /// How long a statement waits for another process's lock on the file before it fails. It
    /// waits without holding its thread: tried again after a pause, until then.
    pub fn busy_timeout(self, busy_timeout: Duration) -> Self {
        Self {
            busy_timeout,
            ..self
        }
    }

    /// Whether foreign keys are enforced.
    pub fn foreign_keys(self, foreign_keys: bool) -> Self {
        Self {
            foreign_keys,
            ..self
        }
    }

    /// How much page cache each connection keeps, in KiB.
    pub fn cache_kib(self, cache_kib: u32) -> Self {
        Self { cache_kib, ..self }
    }

    /// How much page cache the writer keeps, in KiB, when it is to differ from the readers'
    /// ([`Options::cache_kib`]). A reader's cache is dropped at every commit another connection
    /// makes; the writer's is not, so the pages its writes keep going back to stay in it.
    pub fn writer_cache_kib(self, writer_cache_kib: u32) -> Self {
        Self {
            writer_cache_kib: Some(writer_cache_kib),
            ..self
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long [`Options::busy_timeout`] says to wait for another process's lock.
    pub(crate) fn busy_limit(&self) -> Duration {
        self.busy_timeout
    }

    /// The writer: a connection with the writer's page cache.
    pub(crate) fn open_writer(&self) -> Result<rusqlite::Connection, sqlx::Error> {
        let connection = self.open()?;
        if let Some(kib) = self.writer_cache_kib {
            connection
                .execute_batch(&format!("PRAGMA cache_size = -{kib};"))
                .map_err(from_rusqlite)?;
        }
        Ok(connection)
    }

    pub(crate) fn open(&self) -> Result<rusqlite::Connection, sqlx::Error> {
        let connection = rusqlite::Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(from_rusqlite)?;
        connection
            .busy_timeout(self.busy_timeout)
            .map_err(from_rusqlite)?;
        connection.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        let foreign_keys = if self.foreign_keys { "ON" } else { "OFF" };
        // `temp_store`: the journals SQLite keeps to undo one statement of a transaction (and
        // a script's savepoint) stay in memory instead of going to temporary files; every
        // write runs in a transaction here.
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; \
                 PRAGMA foreign_keys = {foreign_keys}; PRAGMA cache_size = -{}; \
                 PRAGMA wal_autocheckpoint = 0; PRAGMA temp_store = MEMORY;",
                self.synchronous.as_str(),
                self.cache_kib
            ))
            .map_err(from_rusqlite)?;
        // From now on a statement that meets another process's lock fails at once, and is
        // tried again by a caller that does not hold its thread meanwhile (SQLite's own
        // handler sleeps on it).
        connection
            .busy_timeout(Duration::ZERO)
            .map_err(from_rusqlite)?;
        Ok(connection)
    }
}

impl FromStr for Options {
    type Err = sqlx::Error;

    /// `sqlite://PATH` or `sqlite:PATH`.
    fn from_str(url: &str) -> Result<Self, sqlx::Error> {
        let path = url
            .strip_prefix("sqlite:")
            .ok_or_else(|| sqlx::Error::Configuration("not a `sqlite:` URL".into()))?;
        Ok(Self::new(path.strip_prefix("//").unwrap_or(path)))
    }
}

impl sqlx::ConnectOptions for Options {
    type Connection = Connection;

    fn from_url(url: &url::Url) -> Result<Self, sqlx::Error> {
        url.as_str().parse()
    }

    fn connect(&self) -> impl Future<Output = Result<Connection, sqlx::Error>> + Send + '_ {
        std::future::ready(self.open().map(Connection))
    }

    // Statements are not logged (the store logs what it does in its own words).
    fn log_statements(self, _level: log::LevelFilter) -> Self {
        self
    }

    fn log_slow_statements(self, _level: log::LevelFilter, _duration: Duration) -> Self {
        self
    }
}

/// A connection whose statements run on the thread that polls them.
#[derive(Debug)]
pub struct Connection(pub(crate) rusqlite::Connection);

impl Connection {
    /// Runs `query` to its end.
    pub(crate) fn run<'q, E: Execute<'q, Sqlite>>(&self, query: E) -> Result<Results, sqlx::Error> {
        let (sql, arguments) = parts(query)?;
        run(&self.0, sql.as_str(), &arguments.0)
    }

    /// Rolls back the transaction left open, if one is.
    pub(crate) fn roll_back(&self) -> Result<(), sqlx::Error> {
        if self.0.is_autocommit() {
            return Ok(());
        }
        self.0.execute_batch("ROLLBACK").map_err(from_rusqlite)
    }
}

/// A query's text and the values bound to it.
pub(crate) fn parts<'q, E: Execute<'q, Sqlite>>(
    mut query: E,
) -> Result<(SqlStr, Arguments), sqlx::Error> {
    let arguments = query
        .take_arguments()
        .map_err(sqlx::Error::Encode)?
        .unwrap_or_default();
    Ok((query.sql(), arguments))
}

impl sqlx::Connection for Connection {
    type Database = Sqlite;
    type Options = Options;

    fn close(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'static {
        std::future::ready(self.0.close().map_err(|(_, e)| from_rusqlite(e)))
    }

    fn close_hard(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'static {
        drop(self);
        std::future::ready(Ok(()))
    }

    fn ping(&mut self) -> impl Future<Output = Result<(), sqlx::Error>> + Send + '_ {
        std::future::ready(Ok(()))
    }

    fn begin(
        &mut self,
    ) -> impl Future<Output = Result<sqlx::Transaction<'_, Sqlite>, sqlx::Error>> + Send + '_ {
        sqlx::Transaction::begin(self, None)
    }

    fn shrink_buffers(&mut self) {}

    fn flush(&mut self) -> impl Future<Output = Result<(), sqlx::Error>> + Send + '_ {
        std::future::ready(Ok(()))
    }

    fn should_flush(&self) -> bool {
        false
    }
}

/// Transactions on one connection, for sqlx's `Transaction` (not nested).
#[derive(Debug)]
pub struct Transactions;

impl sqlx_core::transaction::TransactionManager for Transactions {
    type Database = Sqlite;

    fn begin(
        connection: &mut Connection,
        statement: Option<SqlStr>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + '_ {
        let begun = if connection.0.is_autocommit() {
            let statement = statement.as_ref().map_or("BEGIN", SqlStr::as_str);
            connection.0.execute_batch(statement).map_err(from_rusqlite)
        } else {
            Err(sqlx::Error::InvalidSavePointStatement)
        };
        std::future::ready(begun)
    }

    fn commit(
        connection: &mut Connection,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + '_ {
        std::future::ready(connection.0.execute_batch("COMMIT").map_err(from_rusqlite))
    }

    fn rollback(
        connection: &mut Connection,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + '_ {
        std::future::ready(connection.roll_back())
    }

    fn start_rollback(connection: &mut Connection) {
        let _ = connection.roll_back();
    }

    fn get_transaction_depth(connection: &Connection) -> usize {
        usize::from(!connection.0.is_autocommit())
    }
}

/// Rows and what changed, as sqlx's streams hand them out.
pub(crate) fn stream<'e>(
    results: Result<Results, sqlx::Error>,
) -> BoxStream<'e, Result<Either<QueryResult, SqliteRow>, sqlx::Error>> {
    match results {
        Ok(results) => futures_util::stream::iter(results.into_iter().map(Ok)).boxed(),
        Err(e) => futures_util::stream::once(std::future::ready(Err(e))).boxed(),
    }
}

/// The first row of `results`, if any.
pub(crate) fn first_row(results: Results) -> Option<SqliteRow> {
    results.into_iter().find_map(Either::right)
}

/// This driver keeps its prepared statements in each connection's cache: sqlx's own are not
/// handed out, nor described.
pub(crate) fn not_prepared() -> sqlx::Error {
    sqlx::Error::Protocol("this SQLite driver does not hand out prepared statements".into())
}

impl<'c> Executor<'c> for &'c mut Connection {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<QueryResult, SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        futures_util::stream::once(async move { self.run(query) })
            .map(stream)
            .flatten()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        Box::pin(async move { self.run(query).map(first_row) })
    }

    fn prepare_with<'e>(
        self,
        _sql: SqlStr,
        _parameters: &'e [TypeInfo],
    ) -> BoxFuture<'e, Result<Statement, sqlx::Error>>
    where
        'c: 'e,
    {
        Box::pin(std::future::ready(Err(not_prepared())))
    }

    fn describe<'e>(
        self,
        _sql: SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Sqlite>, sqlx::Error>>
    where
        'c: 'e,
    {
        Box::pin(std::future::ready(Err(not_prepared())))
    }
}

#[cfg(test)]
mod tests {
    use super::Synchronous;

    #[test]
    fn a_sync_mode_is_read_from_its_name_in_any_case_and_nothing_else() {
        assert_eq!("normal".parse(), Ok(Synchronous::Normal));
        assert_eq!("FULL".parse(), Ok(Synchronous::Full));
        let refused = "extra".parse::<Synchronous>().unwrap_err();
        assert!(refused.contains("`normal` or `full`"), "{refused}");
    }
}
