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
use crate::run::{Results, controls_a_transaction, is_script, run};

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

    /// Takes write `id` out, if it still waits (its caller has gone); whether it did.
    pub fn remove(&mut self, id: u64) -> bool {
        // Ids grow in the order writes are queued, and the queue keeps that order.
        match self.waiting.binary_search_by_key(&id, |pending| pending.id) {
            Ok(at) => self.waiting.remove(at).is_some(),
            Err(_) => false,
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

/// What [`commit`] did.
pub(crate) struct Committed {
    /// How many writes it ran.
    pub writes: usize,
    /// Whether the transaction was committed (else every write was answered with the error
    /// that lost it).
    pub kept: bool,
}

/// Runs `batch` in the transaction open on `connection` (`BEGIN IMMEDIATE` done), each write
/// all or nothing (a script in a savepoint of its own), commits, and answers each. A write that
/// fails is undone alone and answered with its error. When the transaction itself is lost (the
/// commit fails, a statement's failure rolled everything back, a savepoint could not be undone
/// or let go), it is rolled back and every write is answered with that error. Runs to its end
/// without awaiting: a caller dropped midway cannot leave a write unanswered.
pub(crate) fn commit(connection: &Connection, batch: Vec<Pending>) -> Committed {
    let writes = batch.len();
    // Each write's answer; `None` for those the lost transaction took with it.
    let mut answers: Vec<(oneshot::Sender<Answer>, Option<Answer>)> = Vec::with_capacity(writes);
    let mut lost = None;
    let mut batch = batch.into_iter();
    for pending in batch.by_ref() {
        match run_undoable(connection, &pending) {
            Ok(answer) => answers.push((pending.answer, Some(answer))),
            Err(e) => {
                lost = Some(e);
                answers.push((pending.answer, None));
                break;
            }
        }
    }
    answers.extend(batch.map(|pending| (pending.answer, None)));
    if lost.is_none()
        && let Err(e) = execute(connection, "COMMIT")
    {
        lost = Some(e);
    }
    if lost.is_some() && !connection.is_autocommit() {
        let _ = execute(connection, "ROLLBACK");
    }
    for (answer, result) in answers {
        let result = match &lost {
            Some(e) => Err(copy(e)),
            None => result.expect("every write ran when the transaction was kept"),
        };
        // A caller that has gone is not waiting for it.
        let _ = answer.send(result);
    }
    Committed {
        writes,
        kept: lost.is_none(),
    }
}

/// Runs one write, all or nothing: a script in a savepoint, released when it ran whole, else
/// rolled back to; a statement alone, which SQLite undoes by itself when it fails. `Ok` with
/// the write's own answer; `Err` when the transaction is lost with it.
fn run_undoable(connection: &Connection, pending: &Pending) -> Result<Answer, sqlx::Error> {
    let (sql, arguments) = (pending.sql.as_str(), &pending.arguments.0);
    if let Some(statement) = controls_a_transaction(sql) {
        return Ok(Err(sqlx::Error::Protocol(format!(
            "a write must not begin or end a transaction of its own (`{statement}`): the set \
             runs each in one"
        ))));
    }
    let script = is_script(sql);
    if script {
        execute(connection, "SAVEPOINT write")?;
    }
    let ran = run(connection, sql, arguments);
    if connection.is_autocommit() {
        // The statement's failure rolled back the whole transaction (a full disk, an
        // interrupt), or a statement SQLite split out of a trigger's script ended it.
        return Err(match ran {
            Err(e) => e,
            Ok(_) => sqlx::Error::Protocol("a write ended the transaction it ran in".to_owned()),
        });
    }
    if script {
        if ran.is_err() {
            execute(connection, "ROLLBACK TO write")?;
        }
        execute(connection, "RELEASE write")?;
    }
    Ok(ran)
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
