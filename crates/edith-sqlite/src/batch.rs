//! Writes of many callers committed in one transaction (group commit).
//!
//! A commit costs more than the statements in it: every page it changed is written to the WAL
//! again (a log's last page, an index's), with a frame header and a checksum each, and the WAL's
//! index is locked and updated. When many turns run at once their writes queue for the one
//! writer anyway; here whoever takes the writer runs every write queued by then, each all or
//! nothing as alone, and commits them together. Nobody is answered before the commit that holds
//! their write.
//!
//! A script (several statements) runs in a savepoint of its own. A write of one statement needs
//! none: SQLite undoes a statement that fails and keeps the transaction, and a savepoint would
//! copy every page the statement changes to a journal first.

use std::collections::VecDeque;

use rusqlite::Connection;
use sqlx::SqlStr;
use tokio::sync::oneshot;

use crate::database::Arguments;
use crate::error::{SqliteError, from_rusqlite};
use crate::run::{Results, is_script, run};

/// At most this many writes go to one transaction; the rest wait for the next.
const MOST_AT_ONCE: usize = 256;

/// What a write is answered with.
pub(crate) type Answer = Result<Results, sqlx::Error>;

/// A write waiting for the writer.
#[derive(Debug)]
pub(crate) struct Pending {
    id: u64,
    sql: SqlStr,
    arguments: Arguments,
    answer: oneshot::Sender<Answer>,
}

/// The writes waiting for the writer, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    next_id: u64,
    waiting: VecDeque<Pending>,
}

impl Queue {
    /// Queues `sql` with `arguments`; its id, to take it out again, and where its answer comes.
    pub fn push(&mut self, sql: SqlStr, arguments: Arguments) -> (u64, oneshot::Receiver<Answer>) {
        let (answer, answered) = oneshot::channel();
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.push_back(Pending {
            id,
            sql,
            arguments,
            answer,
        });
        (id, answered)
    }

    /// Takes write `id` out, if it still waits (its caller has gone).
    pub fn remove(&mut self, id: u64) {
        // Ids grow in the order writes are queued, and the queue keeps that order.
        if let Ok(at) = self.waiting.binary_search_by_key(&id, |pending| pending.id) {
            self.waiting.remove(at);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The writes that go to the next transaction, oldest first.
    pub fn take(&mut self) -> Vec<Pending> {
        let count = self.waiting.len().min(MOST_AT_ONCE);
        self.waiting.drain(..count).collect()
    }
}

/// Runs `batch` in the transaction open on `connection` (`BEGIN IMMEDIATE` done), each write in
/// a savepoint of its own, commits, and answers each. A write that fails is undone alone and
/// answered with its error; when the transaction itself is lost (the commit fails, or a
/// statement's failure rolled everything back), every write is answered with that error.
/// Runs to its end without awaiting: a caller dropped midway cannot leave a write unanswered.
/// Returns how many writes it ran.
pub(crate) fn commit(connection: &Connection, batch: Vec<Pending>) -> usize {
    let ran = batch.len();
    // Each write's answer; `None` for those the lost transaction took with it.
    let mut answers: Vec<(oneshot::Sender<Answer>, Option<Answer>)> = Vec::with_capacity(ran);
    let mut lost = None;
    let mut batch = batch.into_iter();
    for pending in batch.by_ref() {
        match run_undoable(connection, &pending) {
            Err(e) if connection.is_autocommit() => {
                lost = Some(e);
                answers.push((pending.answer, None));
                break;
            }
            answer => answers.push((pending.answer, Some(answer))),
        }
    }
    answers.extend(batch.map(|pending| (pending.answer, None)));
    if lost.is_none()
        && let Err(e) = execute(connection, "COMMIT")
    {
        if !connection.is_autocommit() {
            let _ = execute(connection, "ROLLBACK");
        }
        lost = Some(e);
    }
    for (answer, result) in answers {
        let result = match &lost {
            Some(e) => Err(copy(e)),
            None => result.expect("every write ran when the transaction was kept"),
        };
        // A caller that has gone is not waiting for it.
        let _ = answer.send(result);
    }
    ran
}

/// Runs one write, all or nothing: a script in a savepoint, released when it ran whole, else
/// rolled back to.
fn run_undoable(connection: &Connection, pending: &Pending) -> Answer {
    let (sql, arguments) = (pending.sql.as_str(), &pending.arguments.0);
    if !is_script(sql) {
        return run(connection, sql, arguments);
    }
    execute(connection, "SAVEPOINT write")?;
    let ran = run(connection, sql, arguments);
    if ran.is_err() && !connection.is_autocommit() {
        execute(connection, "ROLLBACK TO write")?;
    }
    if !connection.is_autocommit() {
        execute(connection, "RELEASE write")?;
    }
    ran
}

/// Runs `sql`, one statement that returns no rows, its preparation kept.
pub(crate) fn execute(connection: &Connection, sql: &str) -> Result<(), sqlx::Error> {
    connection
        .prepare_cached(sql)
        .and_then(|mut statement| statement.raw_execute())
        .map(drop)
        .map_err(from_rusqlite)
}

/// The same error again, for each of the writes it undid.
fn copy(error: &sqlx::Error) -> sqlx::Error {
    match error {
        sqlx::Error::Database(e) => match e.try_downcast_ref::<SqliteError>() {
            Some(e) => sqlx::Error::Database(Box::new(e.clone())),
            None => sqlx::Error::Protocol(e.to_string()),
        },
        other => sqlx::Error::Protocol(other.to_string()),
    }
}
