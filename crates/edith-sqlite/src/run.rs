//! Running a query on a connection, on the caller's thread: its values bound, every row read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::{ToSqlOutput, ValueRef as SqlValueRef};
use sqlx::Either;

use crate::database::{Column, QueryResult, SqliteRow, Value};
use crate::error::from_rusqlite;

/// What a query gave back: each statement's rows, then what it changed.
pub(crate) type Results = Vec<Either<QueryResult, SqliteRow>>;

/// How many statements each connection keeps prepared (SQLite's own default is 16; the store
/// has more distinct statements than that on its busy paths).
pub(crate) const STATEMENTS_KEPT: usize = 128;

/// Runs `sql` on `connection` with `arguments`, each statement to its end, and returns what
/// they gave back. A script (several statements separated by `;`) runs its statements in order
/// and stops at the first that fails. Placeholders are `?`, `?N` or `$N`: numbered ones name an
/// argument by its place in the whole script; bare ones take the arguments after those of the
/// statements before (within a statement, SQLite numbers a bare `?` after the highest number
/// before it). An argument missing is an error, not a `NULL`.
pub(crate) fn run(
    connection: &rusqlite::Connection,
    sql: &str,
    arguments: &[Value],
) -> Result<Results, sqlx::Error> {
    let mut results = Results::new();
    // The bare `?` the statements before took.
    let mut bound = 0;
    match statements(sql) {
        Some(statements) => {
            for sql in statements {
                let mut statement = connection.prepare_cached(sql).map_err(from_rusqlite)?;
                bound += run_one(connection, &mut statement, arguments, bound, &mut results)?;
            }
        }
        // SQLite finds where each statement ends, and this query's preparations are not kept.
        None => {
            let mut statements = rusqlite::Batch::new(connection, sql);
            while let Some(mut statement) = statements.next().map_err(from_rusqlite)? {
                bound += run_one(connection, &mut statement, arguments, bound, &mut results)?;
            }
        }
    }
    Ok(results)
}

/// Runs one statement of a query, its first bare `?` bound to the argument after `before`;
/// returns how many parameters it has.
fn run_one(
    connection: &rusqlite::Connection,
    statement: &mut rusqlite::Statement<'_>,
    arguments: &[Value],
    before: usize,
    results: &mut Results,
) -> Result<usize, sqlx::Error> {
    let bound = bind(statement, arguments, before)?;
    step(connection, statement, results)?;
    Ok(bound)
}

/// Whether `sql` holds more than one statement. A `;` inside a literal also counts: such a
/// statement is split as a script, correctly.
pub(crate) fn is_script(sql: &str) -> bool {
    sql.trim_end().trim_end_matches(';').contains(';')
}

/// The statements of `sql`, each to be prepared (and kept) on its own: split at each `;` outside
/// quotes, brackets and comments. `None` where splitting so could be wrong: a trigger's body
/// holds statements of its own.
fn statements(sql: &str) -> Option<Vec<&str>> {
    if !is_script(sql) {
        return Some(vec![sql]);
    }
    let ends = SPLIT_LATELY.with_borrow_mut(|split| {
        if let Some(ends) = split.get(sql) {
            return ends.clone();
        }
        if split.len() >= MOST_SPLITS_KEPT {
            split.clear();
        }
        let ends = split_script(sql);
        split.insert(sql.into(), ends.clone());
        ends
    })?;
    Some(ends.iter().map(|range| &sql[range.clone()]).collect())
}

/// How many scripts each thread keeps split (more distinct ones than this forget them all).
const MOST_SPLITS_KEPT: usize = 128;

thread_local! {
    /// Scripts split lately on this thread, by their text: the same few run again and again
    /// (their text differing only in how many rows they write), and splitting one looks at its
    /// every byte, where finding it again costs a hash of its text.
    static SPLIT_LATELY: RefCell<HashMap<Box<str>, Option<Split>>> = RefCell::new(HashMap::new());
}

/// Where each statement of a script lies in its text.
type Split = Rc<[Range<usize>]>;

/// Where each statement of the script `sql` lies in it (see [`statements`]).
fn split_script(sql: &str) -> Option<Split> {
    if sql
        .split_ascii_whitespace()
        .any(|word| word.eq_ignore_ascii_case("TRIGGER"))
    {
        return None;
    }
    let bytes = sql.as_bytes();
    let (mut statements, mut start, mut has_code, mut i) = (Vec::new(), 0, false, 0);
    // Where the quote, bracket or comment opening at `i` ends, past its closing mark.
    let end_of = |i: usize, close: &[u8]| {
        bytes[i + 1..]
            .windows(close.len())
            .position(|w| w == close)
            .map_or(bytes.len(), |at| i + 1 + at + close.len())
    };
    while i < bytes.len() {
        i = match (bytes[i], bytes.get(i + 1)) {
            (quote @ (b'\'' | b'"' | b'`'), _) => {
                has_code = true;
                end_of(i, &[quote])
            }
            (b'[', _) => {
                has_code = true;
                end_of(i, b"]")
            }
            (b'-', Some(b'-')) => end_of(i, b"\n"),
            (b'/', Some(b'*')) => end_of(i + 1, b"*/"),
            (b';', _) => {
                if has_code {
                    statements.push(start..i);
                }
                (start, has_code) = (i + 1, false);
                i + 1
            }
            (byte, _) => {
                has_code |= !byte.is_ascii_whitespace();
                i + 1
            }
        };
    }
    if has_code {
        statements.push(start..bytes.len());
    }
    Some(statements.into())
}

/// The first keyword of a statement that begins or ends a transaction or a savepoint in `sql`
/// (`BEGIN`, `COMMIT`, `END`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`), if it has one. A script
/// SQLite splits itself (a trigger's) is not looked into.
pub(crate) fn controls_a_transaction(sql: &str) -> Option<&str> {
    const CONTROLS: [&str; 6] = ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"];
    statements(sql)?.into_iter().find_map(|statement| {
        let word = first_word(statement);
        CONTROLS
            .iter()
            .any(|control| word.eq_ignore_ascii_case(control))
            .then_some(word)
    })
}

/// The first word of a statement, past blanks and comments.
fn first_word(mut statement: &str) -> &str {
    loop {
        statement = statement.trim_start();
        if let Some(rest) = statement.strip_prefix("--") {
            statement = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = statement.strip_prefix("/*") {
            statement = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            let end = statement
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(statement.len());
            return &statement[..end];
        }
    }
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
        // Exactly as many as the columns: collected through a `Result`, the size would be
        // unknown and the values moved again once read.
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(owned(row.get_ref(i).map_err(from_rusqlite)?));
        }
        let values = values.into_boxed_slice();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_is_split_at_each_semicolon_outside_quotes_brackets_and_comments() {
        let script = "INSERT INTO t VALUES ('a;b', \"c;d\", [e;f]); -- a note; here\n\
                      /* and; this */ SELECT `g;h` ; ;  UPDATE t SET x = 'it''s;'";
        assert_eq!(
            statements(script).unwrap(),
            [
                "INSERT INTO t VALUES ('a;b', \"c;d\", [e;f])",
                " -- a note; here\n/* and; this */ SELECT `g;h` ",
                "  UPDATE t SET x = 'it''s;'",
            ]
        );
        assert_eq!(statements("SELECT 1;").unwrap(), ["SELECT 1;"]);
        assert_eq!(statements("SELECT 1; -- the end").unwrap(), ["SELECT 1"]);
        assert!(
            statements("CREATE TRIGGER g AFTER INSERT ON t BEGIN DELETE FROM u; END; SELECT 1")
                .is_none(),
            "a trigger's body is left to SQLite"
        );
    }

    #[test]
    fn a_script_split_before_is_found_again_by_its_whole_text() {
        let script =
            |n: usize| format!("INSERT INTO t VALUES ({n}); SELECT ';'; UPDATE t SET x = {n}");
        // More scripts than are kept, each twice: every one split as its own, the kept ones
        // and those split again after the rest were forgotten alike.
        for n in 0..MOST_SPLITS_KEPT * 2 + 1 {
            for _ in 0..2 {
                let script = script(n);
                assert_eq!(
                    statements(&script).unwrap(),
                    [
                        format!("INSERT INTO t VALUES ({n})").as_str(),
                        " SELECT ';'",
                        format!(" UPDATE t SET x = {n}").as_str(),
                    ]
                );
            }
        }
        let trigger = "CREATE TRIGGER g AFTER INSERT ON t BEGIN DELETE FROM u; END; SELECT 1";
        assert!(statements(trigger).is_none() && statements(trigger).is_none());
    }

    #[test]
    fn a_statement_that_begins_or_ends_a_transaction_is_found_past_comments() {
        assert_eq!(
            controls_a_transaction("INSERT INTO t VALUES (1); -- done\n /* now */ commit"),
            Some("commit")
        );
        assert_eq!(controls_a_transaction("Savepoint s"), Some("Savepoint"));
        assert_eq!(controls_a_transaction("  END TRANSACTION;"), Some("END"));
        assert_eq!(
            controls_a_transaction("UPDATE t SET x = 'BEGIN'; INSERT INTO committed VALUES (1)"),
            None
        );
    }
}
