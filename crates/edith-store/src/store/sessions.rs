//! Sessions of a profile.

use edith_types::{NativeSessionId, Page, ProfileId, Session, SessionId};

use super::known_paths::Changed;
use serde::Serialize;

use super::{Result, Store, from_body, is_postgres, one_more, page, to_json};

impl Store {
    pub async fn insert_session(&self, session: &Session) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query("INSERT INTO sessions (id, profile_id, body) VALUES ($1, $2, $3)")
                .bind(session.id.as_str())
                .bind(session.profile_id.as_str())
                .bind(to_json(&session))
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    pub async fn session(&self, profile: &ProfileId, id: &SessionId) -> Result<Option<Session>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM sessions WHERE id = $1 AND profile_id = $2")
                .bind(id.as_str())
                .bind(profile.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    /// The session of `profile` that continues the runtime's stored session `native`, if one
    /// does (the oldest, should two).
    pub async fn session_continuing(
        &self,
        profile: &ProfileId,
        native: &NativeSessionId,
    ) -> Result<Option<Session>> {
        // Found as text in the stored body, as serde writes it: a JSON path would make
        // PostgreSQL parse every body, and it refuses one whose title holds U+0000. Inside a
        // string value the quotes are escaped, so only the field itself matches.
        let field = format!(
            "\"native_session_id\":{}",
            serde_json::to_string(native.as_str()).expect("a string serialises")
        );
        on_db!(self, pool => {
            let found_in = if is_postgres(pool) { "strpos(body, $2)" } else { "instr(body, $2)" };
            let sql = format!(
                "SELECT body FROM sessions WHERE profile_id = $1 AND {found_in} > 0 ORDER BY rowid"
            );
            // Only constant text is spliced into `sql`.
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(profile.as_str())
                .bind(&field)
                .fetch_all(pool)
                .await?;
            for row in &rows {
                let session: Session = from_body(row)?;
                if session.native_session_id.as_ref() == Some(native) {
                    return Ok(Some(session));
                }
            }
            Ok(None)
        })
    }

    pub async fn list_sessions(
        &self,
        profile: &ProfileId,
        cursor: Option<&SessionId>,
        limit: usize,
    ) -> Result<Page<Session>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT body FROM sessions WHERE profile_id = $3 \
                 AND ($2 IS NULL OR rowid > (SELECT rowid FROM sessions WHERE id = $2)) \
                 ORDER BY rowid LIMIT $1",
            )
            .bind(one_more(limit))
            .bind(cursor.map(|c| c.as_str()))
            .bind(profile.as_str())
            .fetch_all(pool)
            .await?;
            let items = rows.iter().map(from_body).collect::<Result<Vec<_>>>()?;
            Ok(page(items, limit, |s: &Session| s.id.to_string()))
        })
    }

    /// Removes the session and, by cascade, its turns and their events — unless one of its
    /// turns has not finished (no turn can slip in between the check and the delete); returns
    /// whether it was removed.
    pub async fn delete_idle_session(&self, id: &SessionId) -> Result<bool> {
        let delete = concat!(
            "DELETE FROM sessions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM turns \
             WHERE session_id = $1 AND ",
            unfinished!("state"),
            ")"
        );
        let locks = &["SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE"];
        let changed = Changed::Session(id.clone());
        (self.delete_locked(changed, id.to_string(), locks, delete)).await
    }

    /// Makes `change` to session `id`, that field alone; the session as it is stored then
    /// (`None` when there is none).
    pub async fn change_session(
        &self,
        id: &SessionId,
        change: SessionChange,
    ) -> Result<Option<Session>> {
        let id = id.clone();
        self.changing_paths(Changed::Session(id.clone()), move |store| async move {
            on_db!(store, pool => {
                if !is_postgres(pool) {
                    // One statement, which SQLite's single writer runs whole: it joins the
                    // writes committed together (a first turn's native id among many).
                    let row = sqlx::query(
                        "UPDATE sessions SET body = json_patch(body, $1) WHERE id = $2 \
                         RETURNING body",
                    )
                    .bind(change.merge_patch())
                    .bind(id.as_str())
                    .fetch_optional(pool)
                    .await?;
                    return row.map(|row| from_body(&row)).transpose();
                }
                // PostgreSQL's `jsonb` refuses a `\u0000` that a title may hold: the session is
                // changed here, its row locked.
                let mut tx = begin!(pool);
                let stored: Option<Session> = locked_body!(tx, pool, "sessions", id.as_str());
                let Some(mut session) = stored else { return Ok(None) };
                change.apply(&mut session);
                sqlx::query("UPDATE sessions SET body = $1 WHERE id = $2")
                    .bind(to_json(&session))
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Some(session))
            })
        })
        .await
    }
}

/// What may change of a session once it is made. A change is made to the session as it is
/// stored at that moment, so that two made at once (a caller's new title, and the runtime
/// session its first turn opened) never undo each other, as writing a whole session read
/// before the other change would.
///
/// It serializes as a JSON merge patch (RFC 7396) of the stored session: an object with the one
/// field it sets, named as [`Session`] names it (a test holds the two together).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChange {
    Title(String),
    NativeSessionId(NativeSessionId),
}

impl SessionChange {
    fn apply(self, session: &mut Session) {
        match self {
            Self::Title(title) => session.title = Some(title),
            Self::NativeSessionId(id) => session.native_session_id = Some(id),
        }
    }

    fn merge_patch(&self) -> String {
        to_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edith_types::{InstanceId, Timestamp};
    use serde_json::Value;

    /// RFC 7396, for patches of objects whose values are never null.
    fn merged(target: &mut Value, patch: Value) {
        match (target, patch) {
            (Value::Object(target), Value::Object(patch)) => {
                for (key, value) in patch {
                    merged(target.entry(key).or_insert(Value::Null), value);
                }
            }
            (target, patch) => *target = patch,
        }
    }

    #[test]
    fn a_change_patches_the_stored_session_as_applying_it_does() {
        let session = Session {
            id: SessionId::generate(),
            profile_id: ProfileId::generate(),
            instance_id: InstanceId::generate(),
            title: Some("before".to_owned()),
            native_session_id: None,
            created_at: Timestamp::now(),
        };
        let changes = [
            SessionChange::Title("after \u{0}".to_owned()),
            SessionChange::NativeSessionId(NativeSessionId::new("20261206_000000_abcdef")),
        ];
        for change in changes {
            let mut patched = serde_json::to_value(&session).unwrap();
            let patch = serde_json::from_str(&change.merge_patch()).unwrap();
            merged(&mut patched, patch);
            let mut applied = session.clone();
            change.apply(&mut applied);
            assert_eq!(patched, serde_json::to_value(&applied).unwrap());
        }
    }
}
