//! Queries. Every method is one short transaction; callers never see SQL.
//!
//! One store, two backends: SQLite (one WAL file, the embedded default) and PostgreSQL. Each
//! query is written once, in SQL both accept (`$1`-style placeholders, `ON CONFLICT DO NOTHING`,
//! `RETURNING`), and compiled for each backend's own driver by [`on_db!`]; the few statements
//! whose dialects differ (reading inside a JSON body) say so with [`is_postgres`].

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use edith_types::Page;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;

/// Runs `$body` with `$pool` bound to the store's pool: the same text compiles once for SQLite
/// and once for PostgreSQL, so a query and the code reading its rows exist once.
macro_rules! on_db {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.db {
            $crate::store::Db::Sqlite($pool, _) => $body,
            $crate::store::Db::Postgres($pool) => $body,
        }
    };
}

/// A transaction on `$pool`, the future that begins it boxed. sqlx's PostgreSQL `begin` future
/// is some 8.5 KB (its pool's `acquire`): held inline, it made every store call that can begin
/// one as large, and so every future that awaits such a call (a turn's driver, a request's
/// handler), which are moved into fresh memory when they are spawned.
macro_rules! begin {
    ($pool:expr) => {
        Box::pin($pool.begin()).await?
    };
}

/// Whether the column `$column` holds the state of a turn that has not finished, as SQL: a
/// macro, so statements `concat!` it and stay constant text. The partial index of migration
/// `0005` (re-made on SQLite by `0009`) names the states too. Comparisons, not `IN (…)`: for a
/// list of more than two, SQLite builds a throwaway index of it at every run of a statement,
/// and an `UPDATE` of a turn builds two more for the partial index. (Where the column leads an
/// index the statement reads, SQLite's planner makes a list of the comparisons again; no such
/// statement is on a turn's way.)
macro_rules! unfinished {
    ($column:literal) => {
        concat!(
            "(",
            $column,
            " = 'queued' OR ",
            $column,
            " = 'running' OR ",
            $column,
            " = 'requires_action')"
        )
    };
}

/// The query of a page of `$table`'s bodies in the order they were written, after the row whose
/// id is `$2`, at most `$1` rows (for [`Store::page_in_order`]).
macro_rules! in_order {
    ($table:literal) => {
        concat!(
            "SELECT body FROM ",
            $table,
            " WHERE ($2 IS NULL OR rowid > (SELECT rowid FROM ",
            $table,
            " WHERE id = $2)) ORDER BY rowid LIMIT $1"
        )
    };
}

/// The statement that records a new job, for callers that insert one inside their own
/// transaction.
macro_rules! insert_job {
    ($job:expr) => {{
        let job: &edith_types::Job = $job;
        sqlx::query("INSERT INTO jobs (id, instance_id, state, body) VALUES ($1, $2, $3, $4)")
            .bind(job.id.as_str())
            .bind(job.instance_id.as_str())
            .bind(job.state.as_str())
            .bind($crate::store::to_json(job))
    }};
}

/// Appends an event to a log (`turn_events` or `job_events`, keyed by `turn_id` or `job_id`),
/// numbered after the last one, on `$executor`; evaluates to its `seq`. Appends to one log must
/// not run side by side (see [`lock_log!`]).
macro_rules! append_event {
    ($executor:expr, $table:literal, $key:literal, $id:expr, $at:expr, $body:expr) => {
        sqlx::query_scalar::<_, i64>(concat!(
            "INSERT INTO ",
            $table,
            " (",
            $key,
            ", seq, at, body) \
             SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM ",
            $table,
            " WHERE ",
            $key,
            " = $1 RETURNING seq"
        ))
        .bind($id)
        .bind($at)
        .bind($body)
        .fetch_one($executor)
        .await
    };
}

/// On PostgreSQL, takes a lock on the log `$id` until the end of the transaction `$tx`, so
/// appends to one log run one after the other and each sees the number before it (statements
/// running side by side would both take the same one). SQLite runs one writer at a time.
macro_rules! lock_log {
    ($tx:expr, $pool:expr, $id:expr) => {
        if $crate::store::is_postgres($pool) {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                .bind($id)
                .execute(&mut *$tx)
                .await?;
        }
    };
}

/// On PostgreSQL, locks the row `$id` of `$table` until the end of the transaction `$tx`, so a
/// delete that first checks that nothing refers to the row sees every reference committed
/// before it, and an insert that refers to the row waits for the delete (and then fails on its
/// foreign key). Without it the check could miss an insert in flight, and the cascade remove
/// what that insert had just committed. SQLite runs one writer at a time.
macro_rules! lock_row {
    ($tx:expr, $pool:expr, $table:literal, $id:expr) => {
        if $crate::store::is_postgres($pool) {
            sqlx::query(concat!(
                "SELECT 1 FROM ",
                $table,
                " WHERE id = $1 FOR UPDATE"
            ))
            .bind($id)
            .execute(&mut *$tx)
            .await?;
        }
    };
}

/// Reads the body of row `$id` of `$table` in the transaction `$tx`, the row locked on
/// PostgreSQL (SQLite runs one writer at a time) until `$tx` ends: where a change made to the
/// row as it is stored starts, so that two made at once never undo each other. `None` when
/// there is no such row.
macro_rules! locked_body {
    ($tx:expr, $pool:expr, $table:literal, $id:expr) => {{
        lock_row!($tx, $pool, $table, $id);
        sqlx::query(concat!("SELECT body FROM ", $table, " WHERE id = $1"))
            .bind($id)
            .fetch_optional(&mut *$tx)
            .await?
            .map(|row| $crate::store::from_body(&row))
            .transpose()?
    }};
}

/// On PostgreSQL, tells the other replicas listening on `$channel` (see [`Store::listen`]) that
/// `$id` changed, once the transaction `$tx` commits (a notification sent in a transaction is
/// delivered at its commit, or never). `$store` names the sender, so it does not hear itself.
macro_rules! announce {
    ($tx:expr, $store:expr, $pool:expr, $channel:expr, $id:expr) => {
        if $crate::store::is_postgres($pool) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind($channel.name())
                .bind($crate::store::Announcement::payload(
                    $store.origin.as_deref(),
                    $id,
                ))
                .execute(&mut *$tx)
                .await?;
        }
    };
}

/// Appends an event to a log on its own, as [`append_event!`] does: in one statement on
/// SQLite, in a transaction holding the log's lock ([`lock_log!`]) on PostgreSQL, where the
/// append is announced on `$channel`.
macro_rules! append_alone {
    ($store:expr, $pool:expr, $channel:expr, $table:literal, $key:literal, $id:expr, $at:expr, $body:expr) => {
        if $crate::store::is_postgres($pool) {
            let mut tx = begin!($pool);
            lock_log!(tx, $pool, $id);
            let seq = append_event!(&mut *tx, $table, $key, $id, $at, $body)?;
            announce!(tx, $store, $pool, $channel, $id);
            tx.commit().await?;
            seq
        } else {
            append_event!($pool, $table, $key, $id, $at, $body)?
        }
    };
}

mod group_commit;
mod idempotency;
mod instances;
mod jobs;
mod keys;
mod known_paths;
mod paths;
mod profiles;
mod replicas;
mod sessions;
mod tools;
mod turns;

use edith_sqlite::Connections;
pub use edith_sqlite::Synchronous;
use group_commit::TurnLogs;
pub use idempotency::Idempotency;
pub use replicas::{Announcement, Channel, Claim, Listener};
pub use sessions::SessionChange;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored record is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
    /// A uniqueness rule was broken (e.g. a second profile with the same name).
    #[error("already exists: {0}")]
    Duplicate(String),
    /// The database URL is not one this store opens.
    #[error("{0}")]
    Url(String),
    /// The turn has ended (another replica may have ended it): nothing more is written to it.
    #[error("turn `{0}` has ended; nothing more is written to it")]
    TurnEnded(String),
    /// Other writers kept changing what a write depends on.
    #[error("{0}; try again")]
    Contended(String),
    /// The write was not made: the store's writer stopped (the process is stopping).
    #[error("the store stopped writing; the write was not made")]
    Closing,
    /// An error that failed the writes of several callers at once (see `group_commit.rs`).
    #[error("{0}")]
    Shared(std::sync::Arc<StoreError>),
}

impl StoreError {
    /// Whether the same write may succeed if made again: the database failed it (a lost
    /// connection, a database restarting, a conflict with other writers), not the write's own
    /// content, and the store is not closing.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::PoolClosed) => false,
            StoreError::Db(_) | StoreError::Contended(_) => true,
            StoreError::Shared(e) => e.is_transient(),
            _ => false,
        }
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// The database behind a store.
#[derive(Debug, Clone)]
enum Db {
    /// On SQLite, appends to turn logs go through their own writer (group commit).
    Sqlite(Connections, std::sync::Arc<TurnLogs>),
    Postgres(PgPool),
}

/// Which backend a pool in an [`on_db!`] arm belongs to, for the statements whose dialects
/// differ.
trait Backend {
    const POSTGRES: bool;
}

impl Backend for Connections {
    const POSTGRES: bool = false;
}

impl Backend for PgPool {
    const POSTGRES: bool = true;
}

fn is_postgres<P: Backend>(_pool: &P) -> bool {
    P::POSTGRES
}

/// Handle to the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
    /// Session paths kept between reads (SQLite only, see [`known_paths`]).
    paths: Option<std::sync::Arc<known_paths::KnownPaths>>,
    /// The replica this store writes for, named in its announcements (see [`Store::named`]).
    origin: Option<std::sync::Arc<str>>,
}

/// How long closing a store waits for the queries under way to end.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

/// The schemes [`Store::open`] takes.
const URL_SCHEMES: &str = "postgres://, postgresql:// or sqlite:";

impl Store {
    /// Opens the store `url` names: `postgres://…` (or `postgresql://…`) for PostgreSQL,
    /// `sqlite:PATH` (or `sqlite://PATH`) for a SQLite file. Pending migrations are applied.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, Synchronous::default()).await
    }

    /// Like [`Store::open`], a SQLite file's commits waiting for `synchronous` (PostgreSQL's
    /// wait for what the server's `synchronous_commit` says).
    pub async fn open_with(url: &str, synchronous: Synchronous) -> Result<Self> {
        let store = Self::connect(url, synchronous).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// The same store, writing for the replica `name`: what it announces says so, and what
    /// [`Store::listen`] hears leaves out its own announcements.
    pub fn named(self, name: &str) -> Self {
        Self {
            origin: Some(name.into()),
            ..self
        }
    }

    /// Opens (creating) the SQLite database at `path` and applies pending migrations.
    pub async fn open_sqlite(path: &Path) -> Result<Self> {
        let store = Self::connect_sqlite(path, Synchronous::default()).await?;
        store.migrate().await?;
        Ok(store)
    }

    async fn connect(url: &str, synchronous: Synchronous) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // Refused, not ignored: whoever asked expects it to hold.
            if synchronous != Synchronous::default() {
                return Err(StoreError::Url(
                    "the SQLite sync setting applies to a SQLite database only; PostgreSQL's \
                     commits wait for what its server's `synchronous_commit` says"
                        .to_owned(),
                ));
            }
            return Self::connect_postgres(url).await;
        }
        match url.strip_prefix("sqlite:") {
            Some(path) => {
                let path = path.strip_prefix("//").unwrap_or(path);
                Self::connect_sqlite(Path::new(path), synchronous).await
            }
            // Not taken for a file name: a libpq `key=value` string would become one.
            None => Err(StoreError::Url(format!(
                "the database URL must start with {URL_SCHEMES}"
            ))),
        }
    }

    async fn connect_sqlite(path: &Path, synchronous: Synchronous) -> Result<Self> {
        let options = edith_sqlite::Options::new(path)
            .synchronous(synchronous)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // 256 KiB of page cache per reader, not SQLite's 2 MiB: every commit makes the
            // readers drop theirs, and the system keeps the file's pages. The writer's cache
            // outlives its commits, and holds the pages its writes keep going back to.
            .cache_kib(256)
            .writer_cache_kib(4096);
        let pool = Connections::open(options).await?;
        Ok(Self {
            db: Db::Sqlite(pool.clone(), TurnLogs::new(pool)),
            paths: Some(std::sync::Arc::default()),
            origin: None,
        })
    }

    /// The PostgreSQL database must exist; the store makes its own tables in it.
    async fn connect_postgres(url: &str) -> Result<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Url(format!("the PostgreSQL URL is not valid: {e}")))?
            .application_name("edith");
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // A database that does not answer is reported, never waited on for ever.
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self {
            db: Db::Postgres(pool),
            paths: None,
            origin: None,
        })
    }

    async fn migrate(&self) -> Result<()> {
        match &self.db {
            // With sqlx's own SQLite driver, on a pool of its own: sqlx's migrator takes a
            // pool, or a connection in a way that makes futures that are not `Send`.
            Db::Sqlite(connections, _) => {
                let options = SqliteConnectOptions::new()
                    .filename(connections.options().path())
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10));
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options)
                    .await?;
                let migrated = crate::migrate::run_sqlite(&pool).await;
                pool.close().await;
                migrated?
            }
            Db::Postgres(pool) => crate::migrate::run_postgres(pool).await?,
        }
        Ok(())
    }

    /// Which backend this is, for logs: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.db {
            Db::Sqlite(..) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite(connections, _) => connections.close(CLOSE_LIMIT).await,
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("wire types always serialize")
}

/// The resource stored in a row's `body` column.
fn from_body<T, R>(row: &R) -> Result<T>
where
    T: DeserializeOwned,
    R: sqlx::Row,
    for<'r> &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    &'static str: sqlx::ColumnIndex<R>,
{
    Ok(serde_json::from_str(row.try_get::<&str, _>("body")?)?)
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn duplicate_or_db(e: sqlx::Error, what: impl Into<String>) -> StoreError {
    if is_unique_violation(&e) {
        StoreError::Duplicate(what.into())
    } else {
        StoreError::Db(e)
    }
}

/// Cuts a page from `limit + 1` rows (the extra row only tells that a next page exists). List
/// queries select the rows after the cursor's row: `rowid > (SELECT rowid … WHERE id = cursor)`
/// (SQLite's own rowid; on PostgreSQL an identity column of that name).
fn page<T>(mut items: Vec<T>, limit: usize, id_of: impl Fn(&T) -> String) -> Page<T> {
    let next_cursor = if items.len() > limit {
        items.truncate(limit);
        items.last().map(id_of)
    } else {
        None
    };
    Page { items, next_cursor }
}

impl Store {
    /// A page of the bodies `query` (made by `in_order!`) selects, after the row `cursor` names.
    async fn page_in_order<T: DeserializeOwned>(
        &self,
        query: &'static str,
        cursor: Option<&str>,
        limit: usize,
        id_of: impl Fn(&T) -> String,
    ) -> Result<Page<T>> {
        on_db!(self, pool => {
            let rows = sqlx::query(query)
                .bind(one_more(limit))
                .bind(cursor)
                .fetch_all(pool)
                .await?;
            let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
            Ok(page(items, limit, id_of))
        })
    }
}

/// `limit + 1`, as the list queries bind it.
fn one_more(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
}

/// A sequence number as the database keeps it (numbers past `i64::MAX` are past every log).
fn seq_bound(after: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX)
}
