//! Turns of a session and their event logs.

use edith_types::{
    InstanceId, Page, ProfileId, SessionId, Timestamp, Turn, TurnEvent, TurnEventKind, TurnId,
    TurnState,
};
use sqlx::Row;

use super::{
    Channel, Db, Result, Store, StoreError, from_body, is_postgres, one_more, page, seq_bound,
    to_json,
};

/// [`insert_events`]'s statement `$sql`, made by `$make` (`sqlx::query`, say), with its values
/// bound: the turn `$turn`, and each of `$bodies` at the time `$at`.
macro_rules! bind_events {
    ($make:expr, $sql:expr, $turn:expr, $at:expr, $bodies:expr) => {{
        // Only constant text and numbers are spliced into the statement.
        let mut query = $make(sqlx::AssertSqlSafe($sql.as_str())).bind($turn.as_str());
        for body in $bodies {
            query = query.bind($at.as_str()).bind(body.as_str());
        }
        query
    }};
}

/// How many times a turn is tried when other turns of its session keep starting and ending.
const INSERT_ATTEMPTS: usize = 8;

/// Rewrites an unfinished turn's state and resource (a finished turn is never written again:
/// another replica may have ended it while its driver, cut off, still ran): the turn whose id
/// is the parameter numbered `id`, with those numbered `state` and `body`.
fn update_unfinished(state: usize, body: usize, id: usize) -> String {
    format!(
        "UPDATE turns SET state = ${state}, body = ${body} WHERE id = ${id} \
         AND {unfinished}",
        unfinished = unfinished!("state")
    )
}

impl Store {
    /// Inserts a turn unless the session already has one that has not finished; returns the
    /// unfinished one in that case. The check is the database's own: a unique index on a
    /// session's unfinished turn, which the insert meets and then does nothing (a statement that
    /// looked for such a turn first would read the table it writes, which SQLite does through a
    /// copy of what it read). `turn` must be unfinished itself (it is new): the index keeps out
    /// only a second unfinished turn. `driver` names the replica that drives it.
    pub async fn insert_turn_if_idle(&self, turn: &Turn, driver: &str) -> Result<Option<TurnId>> {
        debug_assert!(!turn.state.is_terminal(), "a new turn is unfinished");
        // The turn that kept this one out may finish before it is looked up: then try again.
        for _ in 0..INSERT_ATTEMPTS {
            let inserted: bool = on_db!(self, pool => {
                // The turn's id is new: what conflicts is the session's unfinished turn.
                let inserted = sqlx::query(
                    "INSERT INTO turns (id, session_id, state, body, driver) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                )
                .bind(turn.id.as_str())
                .bind(turn.session_id.as_str())
                .bind(turn.state.as_str())
                .bind(to_json(turn))
                .bind(driver)
                .execute(pool)
                .await?;
                inserted.rows_affected() == 1
            });
            if inserted {
                return Ok(None);
            }
            if let Some(busy) = self.unfinished_turn_of_session(&turn.session_id).await? {
                return Ok(Some(busy));
            }
        }
        Err(StoreError::Duplicate(
            "an unfinished turn in this session (turns kept starting and ending)".to_owned(),
        ))
    }

    /// The session's turn that has not finished, if it has one.
    pub async fn unfinished_turn_of_session(&self, session: &SessionId) -> Result<Option<TurnId>> {
        let id: Option<String> = on_db!(self, pool => {
            sqlx::query_scalar(
                concat!("SELECT id FROM turns WHERE session_id = $1 \
                 AND ", unfinished!("state"), " LIMIT 1"),
            )
            .bind(session.as_str())
            .fetch_optional(pool)
            .await?
        });
        Ok(id.and_then(|id| id.parse().ok()))
    }

    /// A page of the session's turns, oldest first (only those in `state`, if given).
    pub async fn list_turns(
        &self,
        session: &SessionId,
        cursor: Option<&TurnId>,
        limit: usize,
        state: Option<TurnState>,
    ) -> Result<Page<Turn>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT body FROM turns WHERE session_id = $3 \
                 AND ($2 IS NULL OR rowid > (SELECT rowid FROM turns WHERE id = $2)) \
                 AND ($4 IS NULL OR state = $4) ORDER BY rowid LIMIT $1",
            )
            .bind(one_more(limit))
            .bind(cursor.map(|c| c.as_str()))
            .bind(session.as_str())
            .bind(state.map(|s| s.as_str()))
            .fetch_all(pool)
            .await?;
            let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
            Ok(page(items, limit, |t: &Turn| t.id.to_string()))
        })
    }

    pub async fn turn(&self, session: &SessionId, id: &TurnId) -> Result<Option<Turn>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM turns WHERE id = $1 AND session_id = $2")
                .bind(id.as_str())
                .bind(session.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    /// Turn `id`, when it is a turn of session `session` of profile `profile` of instance
    /// `instance`: the whole path checked in the one read. `None` says only that something on
    /// the path is missing; [`Store::session_path`] says what.
    pub async fn turn_on_path(
        &self,
        instance: &InstanceId,
        profile: &ProfileId,
        session: &SessionId,
        id: &TurnId,
    ) -> Result<Option<Turn>> {
        on_db!(self, pool => {
            let row = sqlx::query(
                "SELECT t.body FROM turns t \
                 JOIN sessions s ON s.id = t.session_id AND s.profile_id = $3 \
                 JOIN profiles p ON p.id = s.profile_id AND p.instance_id = $4 \
                 WHERE t.id = $1 AND t.session_id = $2",
            )
            .bind(id.as_str())
            .bind(session.as_str())
            .bind(profile.as_str())
            .bind(instance.as_str())
            .fetch_optional(pool)
            .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    pub async fn update_turn(&self, turn: &Turn) -> Result<()> {
        on_db!(self, pool => {
            let done = sqlx::query(sqlx::AssertSqlSafe(update_unfinished(1, 2, 3)))
                .bind(turn.state.as_str())
                .bind(to_json(turn))
                .bind(turn.id.as_str())
                .execute(pool)
                .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::TurnEnded(turn.id.to_string()));
            }
            Ok(())
        })
    }

    /// Whether a turn of the instance is still queued, running or waiting for an answer.
    pub async fn instance_has_unfinished_turns(&self, instance: &InstanceId) -> Result<bool> {
        on_db!(self, pool => {
            let found: bool = sqlx::query_scalar(
                concat!("SELECT EXISTS (SELECT 1 FROM turns \
                 JOIN sessions ON sessions.id = turns.session_id \
                 JOIN profiles ON profiles.id = sessions.profile_id \
                 WHERE profiles.instance_id = $1 \
                 AND ", unfinished!("turns.state"), ")"),
            )
            .bind(instance.as_str())
            .fetch_one(pool)
            .await?;
            Ok(found)
        })
    }

    /// Finished turns whose log lacks its final event (written by a version that recorded the
    /// two apart, and stopped between them).
    pub async fn finished_turns_without_their_end(&self) -> Result<Vec<Turn>> {
        on_db!(self, pool => {
            let sql = if is_postgres(pool) {
                concat!("SELECT body FROM turns t \
                 WHERE NOT ", unfinished!("state"), " \
                 AND NOT EXISTS (SELECT 1 FROM turn_events e WHERE e.turn_id = t.id \
                 AND e.body::jsonb ->> 'type' = 'turn.finished')")
            } else {
                concat!("SELECT body FROM turns t \
                 WHERE NOT ", unfinished!("state"), " \
                 AND NOT EXISTS (SELECT 1 FROM turn_events e WHERE e.turn_id = t.id \
                 AND json_extract(e.body, '$.type') = 'turn.finished')")
            };
            let rows = sqlx::query(sql).fetch_all(pool).await?;
            rows.iter().map(from_body).collect()
        })
    }

    /// Appends an event to a turn's log, numbered after the last one.
    pub async fn append_turn_event(
        &self,
        turn: &TurnId,
        kind: &TurnEventKind,
    ) -> Result<TurnEvent> {
        let mut appended = self
            .append_turn_events(turn, std::slice::from_ref(kind))
            .await?;
        Ok(appended.pop().expect("the one event was appended"))
    }

    /// Appends `kinds` to the turn's log, in order, as one write (the events that arrived while
    /// the last write was under way, say): numbered after the last one, all or none. Nothing is
    /// appended after a turn's end ([`StoreError::TurnEnded`]).
    pub async fn append_turn_events(
        &self,
        turn: &TurnId,
        kinds: &[TurnEventKind],
    ) -> Result<Vec<TurnEvent>> {
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        let bodies: Vec<String> = kinds.iter().map(to_json).collect();
        let (at, seqs) = match &self.db {
            Db::Sqlite(_, logs) => {
                let written = logs.append(turn, bodies).await?;
                (written.at, written.seqs)
            }
            Db::Postgres(pool) => {
                let at = Timestamp::now();
                let sql = insert_events(kinds.len(), Guard::OnlyUnfinished);
                let query = bind_events!(sqlx::query_scalar::<_, i64>, sql, turn, at, &bodies);
                let mut tx = begin!(pool);
                lock_log!(tx, pool, turn.as_str());
                let seqs = query.fetch_all(&mut *tx).await?;
                announce!(tx, self, pool, Channel::TurnEvents, turn.as_str());
                tx.commit().await?;
                (at, seqs)
            }
        };
        if seqs.is_empty() {
            return Err(StoreError::TurnEnded(turn.to_string()));
        }
        Ok(numbered(turn, seqs, &at, kinds))
    }

    /// How many statements have appended events to turn logs through
    /// [`Store::append_turn_events`] since the store was opened, on SQLite, where one may carry
    /// the appends of many turns; `None` on PostgreSQL (one transaction per append there).
    pub fn turn_log_writes(&self) -> Option<u64> {
        match &self.db {
            Db::Sqlite(_, logs) => Some(logs.writes()),
            Db::Postgres(_) => None,
        }
    }

    /// Appends the final event a finished turn's log lacks (an older version recorded the two
    /// apart, and could stop between them).
    pub async fn append_missing_end(&self, turn: &TurnId, end: &TurnEventKind) -> Result<()> {
        let at = Timestamp::now();
        let body = to_json(end);
        on_db!(self, pool => {
            append_alone!(self, pool, Channel::TurnEvents, "turn_events", "turn_id", turn.as_str(), at.as_str(), &body);
            Ok(())
        })
    }

    /// Records a turn's final state and the last events of its log together: `before` (what
    /// the runtime sent last, its completed message say) and then `last`, the turn's end. A crash
    /// leaves all or none (a finished turn whose log lacks its end would keep its readers
    /// waiting). A turn that has finished already (another replica ended it, its driver having
    /// stopped answering) is left as it is: `None`. Otherwise the events appended, `last` the
    /// final one.
    pub async fn finish_turn(
        &self,
        turn: &Turn,
        before: &[TurnEventKind],
        last: &TurnEventKind,
    ) -> Result<Option<Vec<TurnEvent>>> {
        let kinds: Vec<TurnEventKind> = before.iter().chain([last]).cloned().collect();
        self.update_turn_and_log(turn, &kinds).await
    }

    /// Rewrites an unfinished turn (its state and resource) and appends `kinds` to its log after
    /// it, together: the events that explain the new state are never seen without it, and a
    /// crash leaves all or none. A turn that has finished already (another replica may have
    /// ended it) is left as it is, and nothing is appended: `None`.
    pub async fn update_turn_and_log(
        &self,
        turn: &Turn,
        kinds: &[TurnEventKind],
    ) -> Result<Option<Vec<TurnEvent>>> {
        if kinds.is_empty() {
            return match self.update_turn(turn).await {
                Ok(()) => Ok(Some(Vec::new())),
                Err(StoreError::TurnEnded(_)) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let at = Timestamp::now();
        let bodies: Vec<String> = kinds.iter().map(to_json).collect();
        let n = kinds.len();
        let seqs: Vec<i64> = match &self.db {
            // One script, all or nothing: the turn rewritten, then its events if it was.
            Db::Sqlite(connections, _) => {
                let script = format!(
                    "{}; {}",
                    update_unfinished(2 * n + 2, 2 * n + 3, 1),
                    insert_events(n, Guard::AfterTheUpdate)
                );
                let rows = connections
                    .transact(
                        bind_events!(sqlx::query, script, turn.id, at, &bodies)
                            .bind(turn.state.as_str())
                            .bind(to_json(turn)),
                    )
                    .await?;
                let seqs = rows
                    .iter()
                    .map(|row| row.try_get::<i64, _>(0))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                if seqs.is_empty() {
                    return Ok(None);
                }
                seqs
            }
            Db::Postgres(pool) => {
                let mut tx = begin!(pool);
                lock_log!(tx, pool, turn.id.as_str());
                let ended = sqlx::query(sqlx::AssertSqlSafe(update_unfinished(1, 2, 3)))
                    .bind(turn.state.as_str())
                    .bind(to_json(turn))
                    .bind(turn.id.as_str())
                    .execute(&mut *tx)
                    .await?;
                if ended.rows_affected() == 0 {
                    return Ok(None);
                }
                // The turn has just been rewritten in the same transaction: the events follow.
                let sql = insert_events(n, Guard::None);
                let seqs = bind_events!(sqlx::query_scalar::<_, i64>, sql, turn.id, at, &bodies)
                    .fetch_all(&mut *tx)
                    .await?;
                announce!(tx, self, pool, Channel::TurnEvents, turn.id.as_str());
                tx.commit().await?;
                seqs
            }
        };
        Ok(Some(numbered(&turn.id, seqs, &at, kinds)))
    }

    pub async fn turn_events_after(&self, turn: &TurnId, after: u64) -> Result<Vec<TurnEvent>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT seq, at, body FROM turn_events WHERE turn_id = $1 AND seq > $2 \
                 ORDER BY seq",
            )
            .bind(turn.as_str())
            .bind(seq_bound(after))
            .fetch_all(pool)
            .await?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = row.try_get("seq")?;
                    let at = Timestamp::from_stored(row.try_get("at")?);
                    Ok(turn_event(turn, seq, at, from_body(row)?))
                })
                .collect()
        })
    }
}

/// Which turns [`insert_events`] appends to.
enum Guard {
    /// Only to a turn that has not finished: nothing follows a turn's end.
    OnlyUnfinished,
    /// To any (the caller rewrote the unfinished turn in the same transaction).
    None,
    /// Only after the statement before it changed one row: in a script that rewrites the turn
    /// first ([`update_unfinished`]), the events follow what it wrote, and none is written when
    /// the turn had already ended.
    AfterTheUpdate,
}

/// The statement appending `n` events to a turn's log (`$1`), each numbered after the log's last
/// one by its place: `$2`, `$3` are the first's time and body, `$4`, `$5` the second's, and so
/// on. It returns the numbers given. The last number is a subquery the database runs once, not
/// a table joined (which SQLite would copy aside first, as it does the `VALUES`).
fn insert_events(n: usize, guard: Guard) -> String {
    let values: Vec<String> = (0..n)
        .map(|i| format!("({}, ${}, ${})", i + 1, 2 * i + 2, 2 * i + 3))
        .collect();
    let guard = match guard {
        Guard::OnlyUnfinished => {
            concat!(
                " WHERE EXISTS (SELECT 1 FROM turns WHERE id = $1 \
             AND ",
                unfinished!("state"),
                ")"
            )
        }
        Guard::None => "",
        Guard::AfterTheUpdate => " WHERE changes() = 1",
    };
    format!(
        "INSERT INTO turn_events (turn_id, seq, at, body) \
         SELECT $1, (SELECT COALESCE(MAX(seq), 0) FROM turn_events WHERE turn_id = $1) \
         + added.column1, added.column2, added.column3 \
         FROM (VALUES {}) AS added{guard} RETURNING seq",
        values.join(", ")
    )
}

/// The events `kinds`, in order, given the numbers `seqs` the store gave them (in any order).
fn numbered(
    turn: &TurnId,
    mut seqs: Vec<i64>,
    at: &Timestamp,
    kinds: &[TurnEventKind],
) -> Vec<TurnEvent> {
    seqs.sort_unstable();
    seqs.into_iter()
        .zip(kinds)
        .map(|(seq, kind)| turn_event(turn, seq, at.clone(), kind.clone()))
        .collect()
}

fn turn_event(turn: &TurnId, seq: i64, at: Timestamp, kind: TurnEventKind) -> TurnEvent {
    TurnEvent {
        seq: seq as u64,
        turn_id: turn.clone(),
        at,
        kind,
    }
}
