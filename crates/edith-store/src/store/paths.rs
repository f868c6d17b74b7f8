//! What a request's path names — an instance, a profile of it, a session of that — read in one
//! query, since nearly every request starts by loading them; on SQLite whole paths are kept
//! between reads (`known_paths`).

use edith_types::{InstanceId, Profile, ProfileId, Session, SessionId};
use sqlx::Row;

use super::instances::instance_record;
use super::known_paths::Changed;
use super::profiles::tool_ids;
use super::{Result, Store, StoreError, is_postgres};
use crate::records::SessionPath;

/// The path query, with `$tools` (a profile's tool ids as a JSON array, in the backend's
/// dialect) spliced in at compile time.
macro_rules! session_path_sql {
    ($tools:literal) => {
        concat!(
            "SELECT i.body, i.runtime_token, i.mcp_token, p.body AS profile, ",
            $tools,
            " AS tools, s.body AS session FROM instances i \
             LEFT JOIN profiles p ON p.id = $2 AND p.instance_id = i.id \
             LEFT JOIN sessions s ON s.id = $3 AND s.profile_id = p.id \
             WHERE i.id = $1"
        )
    };
}

impl Store {
    /// Instance `instance`, its profile `profile` and, when `session` is given, that profile's
    /// session: as much of the path as exists (`None` when the instance does not).
    pub async fn session_path(
        &self,
        instance: &InstanceId,
        profile: &ProfileId,
        session: Option<&SessionId>,
    ) -> Result<Option<SessionPath>> {
        let (Some(paths), Some(session)) = (&self.paths, session) else {
            return self.read_session_path(instance, profile, session).await;
        };
        let seen = match paths.get(instance, profile, session) {
            Ok(kept) => return Ok(Some(kept)),
            Err(seen) => seen,
        };
        let read = self
            .read_session_path(instance, profile, Some(session))
            .await?;
        if let Some(path) = &read {
            paths.keep(path, seen);
        }
        Ok(read)
    }

    /// Runs `write` (given this store), which changes what `changed` names, then forgets the
    /// paths kept through it (also when the write failed: what it did is not known). Where
    /// paths are kept, the two run on a task of their own, to their end even if the caller goes
    /// away meanwhile (a client that hangs up): a write that commits in another caller's batch
    /// after its own caller is gone would otherwise leave the old path kept.
    pub(super) async fn changing_paths<T, W>(
        &self,
        changed: Changed,
        write: impl FnOnce(Store) -> W,
    ) -> Result<T>
    where
        W: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let Some(paths) = self.paths.clone() else {
            return write(self.clone()).await;
        };
        // Boxed: a store call's future is some 10 KB (it holds either backend's statements), and
        // a task holding it inline would be twice that, copied into fresh memory at each spawn.
        let written = Box::pin(write(self.clone()));
        let finished = tokio::spawn(async move {
            let written = written.await;
            paths.forget(&changed);
            written
        });
        match finished.await {
            Ok(written) => written,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only a runtime shutting down drops the task.
            Err(_) => Err(StoreError::Closing),
        }
    }

    /// Runs `delete`, bound to `id`, in a transaction that first takes the row locks
    /// `pg_locks` (each bound to `id`) on PostgreSQL, where SQLite's one writer needs none: the
    /// delete's own condition (no unfinished turn, say) then holds against rows being added at
    /// once. Whether a row was deleted.
    pub(super) async fn delete_locked(
        &self,
        changed: Changed,
        id: String,
        pg_locks: &'static [&'static str],
        delete: &'static str,
    ) -> Result<bool> {
        self.changing_paths(changed, move |store| async move {
            on_db!(store, pool => {
                let mut tx = begin!(pool);
                if is_postgres(pool) {
                    for &lock in pg_locks {
                        sqlx::query(lock).bind(&id).execute(&mut *tx).await?;
                    }
                }
                let done = sqlx::query(delete).bind(&id).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    async fn read_session_path(
        &self,
        instance: &InstanceId,
        profile: &ProfileId,
        session: Option<&SessionId>,
    ) -> Result<Option<SessionPath>> {
        on_db!(self, pool => {
            let sql = if is_postgres(pool) {
                session_path_sql!(
                    "(SELECT COALESCE(json_agg(tool_id ORDER BY rowid), '[]')::text \
                     FROM profile_tools WHERE profile_id = p.id)"
                )
            } else {
                session_path_sql!(
                    "(SELECT json_group_array(tool_id) FROM \
                     (SELECT tool_id FROM profile_tools WHERE profile_id = p.id ORDER BY rowid))"
                )
            };
            let row = sqlx::query(sql)
                .bind(instance.as_str())
                .bind(profile.as_str())
                .bind(session.map(SessionId::as_str))
                .fetch_optional(pool)
                .await?;
            let Some(row) = row else { return Ok(None) };
            let instance = instance_record(&row)?;
            let profile = match row.try_get::<Option<&str>, _>("profile")? {
                Some(body) => {
                    let mut profile: Profile = serde_json::from_str(body)?;
                    let tools: Vec<String> =
                        serde_json::from_str(row.try_get::<Option<&str>, _>("tools")?.unwrap_or("[]"))?;
                    profile.tools = tool_ids(&tools);
                    Some(profile)
                }
                None => None,
            };
            let session = row
                .try_get::<Option<&str>, _>("session")?
                .map(serde_json::from_str::<Session>)
                .transpose()?;
            Ok(Some(SessionPath { instance, profile, session }))
        })
    }
}
