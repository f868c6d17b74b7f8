//! Turn events of many turns appended in one statement on SQLite (group commit).
//!
//! SQLite writes one transaction at a time, so when many turns run at once their appends queue
//! behind each other anyway, and each pays for its own statement (`edith-sqlite` commits the
//! writes queued together in one transaction, but each is still a statement of its own, its
//! JSON built and the log's last event looked up). Here the first caller lets the tasks ready to run go first (a
//! statement runs on its caller's thread without yielding, so nothing could queue behind it
//! otherwise), then writes its events; those who came meanwhile, or while its write was under
//! way, wait, and are written together in one statement when it is done, by a task of their own
//! rather than by a caller (who could be dropped midway and leave the others without an answer).
//! Nobody is answered before the statement that wrote their events has committed.
//!
//! A batch holds at most one append per turn, in the order they came: each is numbered after its
//! log's last event as the statement found it, so two appends to one log go to two statements.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use edith_sqlite::Connections;
use edith_types::{Timestamp, TurnId};
use serde::Serialize;
use tokio::sync::oneshot;

use super::{Result, StoreError};

/// Appends `$1`'s events: a JSON array of `{"t": turn id, "b": [event body, …]}`, each body
/// numbered after its log's last event by its place, all at the time `$2`. Appends to a turn
/// that has finished are left out: nothing follows a turn's end. SQLite reads the whole `SELECT`
/// before inserting what it found (it reads the table it inserts into), so every body of a turn
/// is numbered from the same last event.
const APPEND: &str = concat!(
    "INSERT INTO turn_events (turn_id, seq, at, body) \
     SELECT a.value ->> '$.t', \
     (SELECT COALESCE(MAX(seq), 0) FROM turn_events WHERE turn_id = a.value ->> '$.t') + b.key + 1, \
     $2, b.value \
     FROM json_each($1) AS a, json_each(a.value, '$.b') AS b \
     WHERE EXISTS (SELECT 1 FROM turns WHERE id = a.value ->> '$.t' \
     AND ",
    unfinished!("state"),
    ") \
     RETURNING turn_id, seq"
);

/// At most this many events go to one statement (SQLite reads its JSON argument whole).
const MOST_EVENTS: usize = 2048;

/// What one append wrote: the numbers its events were given (none when the turn had ended),
/// and when.
#[derive(Debug)]
pub(super) struct Written {
    pub at: Timestamp,
    pub seqs: Vec<i64>,
}

/// The appends to turn logs of one SQLite store.
#[derive(Debug)]
pub(super) struct TurnLogs {
    connections: Connections,
    queue: Mutex<Queue>,
    /// Statements that appended to turn logs, for [`super::Store::turn_log_writes`].
    writes: AtomicU64,
}

#[derive(Debug, Default)]
struct Queue {
    /// A write is under way: later appends wait for it.
    writing: bool,
    waiting: VecDeque<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    turn: TurnId,
    bodies: Vec<String>,
    answer: oneshot::Sender<Result<Written>>,
}

/// One element of [`APPEND`]'s argument.
#[derive(Serialize)]
struct Entry<'a> {
    t: &'a str,
    b: &'a [String],
}

impl TurnLogs {
    pub(super) fn new(connections: Connections) -> Arc<Self> {
        Arc::new(Self {
            connections,
            queue: Mutex::default(),
            writes: AtomicU64::new(0),
        })
    }

    pub(super) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Appends `bodies` to `turn`'s log, numbered after its last event, all or none.
    pub(super) async fn append(
        self: &Arc<Self>,
        turn: &TurnId,
        bodies: Vec<String>,
    ) -> Result<Written> {
        let waiting = {
            let mut queue = self.queue.lock().expect("not poisoned");
            if queue.writing {
                let (answer, answered) = oneshot::channel();
                queue.waiting.push_back(Waiting {
                    turn: turn.clone(),
                    bodies,
                    answer,
                });
                Err(answered)
            } else {
                queue.writing = true;
                Ok(bodies)
            }
        };
        match waiting {
            Ok(bodies) => {
                // Whether this write ends or its caller is dropped midway, those who came
                // meanwhile are written next.
                let _next = HandOver(self);
                // Alone, this costs a turn of the scheduler; under load, the appends of the
                // tasks ready meanwhile share the next statement.
                tokio::task::yield_now().await;
                Ok(self.write(&[(turn, &bodies)]).await?.take(turn))
            }
            Err(answered) => answered.await.unwrap_or(Err(StoreError::Closing)),
        }
    }

    /// Writes what waits, batch after batch, until nothing does.
    async fn write_waiting(self: Arc<Self>) {
        // Should this task be dropped or panic midway, nobody is left waiting for it.
        let mut stopped = Stopped {
            logs: &self,
            finished: false,
        };
        loop {
            let batch = {
                let mut queue = self.queue.lock().expect("not poisoned");
                let batch = next_batch(&mut queue.waiting);
                if batch.is_empty() {
                    queue.writing = false;
                    stopped.finished = true;
                    return;
                }
                batch
            };
            let appends: Vec<(&TurnId, &Vec<String>)> =
                batch.iter().map(|w| (&w.turn, &w.bodies)).collect();
            match self.write(&appends).await {
                Ok(mut written) => {
                    for waiting in batch {
                        let _ = waiting.answer.send(Ok(written.take(&waiting.turn)));
                    }
                }
                // What fails one statement (the database busy, closed or failing) fails any:
                // each is told. The statement wrote nothing (SQLite undoes a statement that
                // fails, and a transaction lost with it is rolled back whole).
                Err(e) => {
                    let e = Arc::new(e);
                    for waiting in batch {
                        let _ = waiting.answer.send(Err(StoreError::Shared(Arc::clone(&e))));
                    }
                }
            }
        }
    }

    /// One statement appending each of `appends` (at most one per turn) to its turn's log.
    async fn write(&self, appends: &[(&TurnId, &Vec<String>)]) -> Result<Batch> {
        let entries: Vec<Entry<'_>> = appends
            .iter()
            .map(|(turn, bodies)| Entry {
                t: turn.as_str(),
                b: bodies,
            })
            .collect();
        let at = Timestamp::now();
        let rows: Vec<(String, i64)> = sqlx::query_as(APPEND)
            .bind(super::to_json(&entries))
            .bind(at.as_str())
            .fetch_all(&self.connections)
            .await?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut seqs: HashMap<String, Vec<i64>> = HashMap::new();
        for (turn, seq) in rows {
            seqs.entry(turn).or_default().push(seq);
        }
        Ok(Batch { at, seqs })
    }
}

/// What one statement wrote: each turn's new numbers, in any order.
struct Batch {
    at: Timestamp,
    seqs: HashMap<String, Vec<i64>>,
}

impl Batch {
    /// What the statement wrote for `turn` (no numbers: its turn had ended).
    fn take(&mut self, turn: &TurnId) -> Written {
        Written {
            at: self.at.clone(),
            seqs: self.seqs.remove(turn.as_str()).unwrap_or_default(),
        }
    }
}

/// Tells whoever waits that nothing will write for them.
fn fail_waiting(queue: &mut Queue) {
    queue.writing = false;
    for waiting in queue.waiting.drain(..) {
        let _ = waiting.answer.send(Err(StoreError::Closing));
    }
}

/// Hands what waits to a task of its own when dropped, or marks that nothing is being written.
struct HandOver<'a>(&'a Arc<TurnLogs>);

impl Drop for HandOver<'_> {
    fn drop(&mut self) {
        let logs = self.0;
        let mut queue = logs.queue.lock().expect("not poisoned");
        if queue.waiting.is_empty() {
            queue.writing = false;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(queue);
                runtime.spawn(Arc::clone(logs).write_waiting());
            }
            // No runtime to write them on (it is going away).
            Err(_) => fail_waiting(&mut queue),
        }
    }
}

/// Dropped with the writer task: unless it finished (nothing left to write), it was dropped or
/// panicked midway, and those still waiting are told so (the batch it was writing learns it from
/// its dropped answers).
struct Stopped<'a> {
    logs: &'a TurnLogs,
    finished: bool,
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Not poisoned: the lock is never held across code that can panic.
            if let Ok(mut queue) = self.logs.queue.lock() {
                fail_waiting(&mut queue);
            }
        }
    }
}

/// The next appends to write together, taken from the front of `waiting` in order: at most
/// one per turn (a turn's later appends wait for the next batch, behind its earlier ones) and
/// [`MOST_EVENTS`] events in all. Appends whose callers have gone are dropped unwritten.
fn next_batch(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut batch = Vec::new();
    let mut events = 0;
    let mut seen: HashSet<TurnId> = HashSet::new();
    let mut later = VecDeque::new();
    while let Some(append) = waiting.pop_front() {
        if append.answer.is_closed() {
            continue;
        }
        let first_of_its_turn = seen.insert(append.turn.clone());
        let fits = batch.is_empty() || events + append.bodies.len() <= MOST_EVENTS;
        if first_of_its_turn && fits {
            events += append.bodies.len();
            batch.push(append);
        } else {
            later.push_back(append);
        }
    }
    *waiting = later;
    batch
}
