//! Running a query on a connection, on the caller's thread: its values bound, every row read.

use std::sync::Arc;

use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::{ToSqlOutput, ValueRef as SqlValueRef};
use sqlx::Either;

use crate::database::{Column, QueryResult, SqliteRow, Value};
use crate::error::{from_rusqlite, is_busy};

/// What a query gave back: each statement's rows, then what it changed.
pub(crate) type Results = Vec<Either<QueryResult, SqliteRow>>;

/// How many statements each connection keeps prepared (SQLite's own default is 16; the store
/// has more distinct statements than that on its busy paths).
pub(crate) const STATEMENTS_KEPT: usize = 128;

/// Runs `sql` on `connection` with `arguments`, each statement to its end. A script (several
/// statements separated by `;`) runs its statements in order and stops at the first that fails.
/// Placeholders are `?`, `?N` or `$N`: numbered ones name an argument by its place in the whole
/// script, bare ones take the arguments after those of the statements before.
pub(crate) fn run(
    connection: &rusqlite::Connection,
    sql: &str,
    arguments: &[Value],
) -> Result<Results, Failed> {
    let mut results = Vec::new();
    let mut ran = 0;
    let failed = |error, ran| Failed { error, ran };
    if is_script(sql) {
        let mut statements = rusqlite::Batch::new(connection, sql);
        let mut bound = 0;
        while let Some(mut statement) = statements
            .next()
            .map_err(|e| failed(from_rusqlite(e), ran))?
        {
            bound += bind(&mut statement, arguments, bound).map_err(|e| failed(e, ran))?;
            step(connection, &mut statement, &mut results).map_err(|e| failed(e, ran))?;
            ran += 1;
        }
    } else {
        let mut statement = connection
            .prepare_cached(sql)
            .map_err(|e| failed(from_rusqlite(e), ran))?;
        bind(&mut statement, arguments, 0).map_err(|e| failed(e, ran))?;
        step(connection, &mut statement, &mut results).map_err(|e| failed(e, ran))?;
    }
    Ok(results)
}

/// A query that failed, and how many of its statements had run to their end before.
#[derive(Debug)]
pub(crate) struct Failed {
    pub error: sqlx::Error,
    ran: usize,
}

impl Failed {
    /// Whether it can be run again as if for the first time: it did nothing, as another
    /// connection (another process) held the lock it needed.
    pub fn may_retry(&self) -> bool {
        self.ran == 0 && is_busy(&self.error)
    }
}

impl From<Failed> for sqlx::Error {
    fn from(failed: Failed) -> Self {
        failed.error
    }
}

/// Whether `sql` holds more than one statement. A `;` inside a literal also counts: such a
/// statement runs as a script of one, correctly, only without its preparation kept.
fn is_script(sql: &str) -> bool {
    sql.trim_end().trim_end_matches(';').contains(';')
}

/// Whether `sql` is one statement that only reads, so that any connection may run it.
pub(crate) fn only_reads(connection: &rusqlite::Connection, sql: &str) -> bool {
    !is_script(sql)
        && connection
            .prepare_cached(sql)
            .is_ok_and(|statement| statement.readonly())
}

/// Binds `statement`'s parameters, the first bare one to the argument after `before`; returns
/// how many it has.
fn bind(
    statement: &mut rusqlite::Statement<'_>,
    arguments: &[Value],
    before: usize,
) -> Result<usize, sqlx::Error> {
    let count = statement.parameter_count();
    for index in 1..=count {
        let place = match statement.parameter_name(index) {
            None => before + index,
            Some(name) => name
                .strip_prefix(['?', '$'])
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    sqlx::Error::Protocol(format!(
                        "the parameter `{name}` is not numbered (`?`, `?N` or `$N`)"
                    ))
                })?,
        };
        let value = arguments.get(place - 1).ok_or_else(|| {
            sqlx::Error::Protocol(format!(
                "the statement takes argument {place}, {} were bound",
                arguments.len()
            ))
        })?;
        statement
            .raw_bind_parameter(index, value)
            .map_err(from_rusqlite)?;
    }
    Ok(count)
}

/// Steps `statement` to its end, its rows and then what it changed added to `results`.
fn step(
    connection: &rusqlite::Connection,
    statement: &mut rusqlite::Statement<'_>,
    results: &mut Results,
) -> Result<(), sqlx::Error> {
    let changes = !statement.readonly();
    let width = statement.column_count();
    let columns: Arc<[Column]> = statement
        .column_names()
        .into_iter()
        .enumerate()
        .map(|(ordinal, name)| Column {
            name: name.into(),
            ordinal,
        })
        .collect();
    let mut rows = statement.raw_query();
    while let Some(row) = rows.next().map_err(from_rusqlite)? {
        let values = (0..width)
            .map(|i| row.get_ref(i).map(owned))
            .collect::<Result<_, _>>()
            .map_err(from_rusqlite)?;
        results.push(Either::Right(SqliteRow {
            columns: columns.clone(),
            values,
        }));
    }
    results.push(Either::Left(QueryResult {
        // SQLite counts only what `INSERT`, `UPDATE` and `DELETE` changed, and keeps the count
        // of the last one: a statement that only reads changed nothing.
        changes: if changes { connection.changes() } else { 0 },
        last_insert_rowid: connection.last_insert_rowid(),
    }));
    Ok(())
}

fn owned(value: SqlValueRef<'_>) -> Value {
    match value {
        SqlValueRef::Null => Value::Null,
        SqlValueRef::Integer(i) => Value::Integer(i),
        SqlValueRef::Real(r) => Value::Real(r),
        SqlValueRef::Text(bytes) => Value::Text(bytes.into()),
        SqlValueRef::Blob(bytes) => Value::Blob(bytes.into()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => SqlValueRef::Null,
            Value::Integer(i) => SqlValueRef::Integer(*i),
            Value::Real(r) => SqlValueRef::Real(*r),
            Value::Text(bytes) => SqlValueRef::Text(bytes),
            Value::Blob(bytes) => SqlValueRef::Blob(bytes),
        }))
    }
}
