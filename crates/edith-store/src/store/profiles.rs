//! Profiles and the tools attached to them.

use edith_types::{InstanceId, Page, Profile, ProfileId, Tool, ToolHost, ToolId, TurnId};
use sqlx::Row;

use super::known_paths::Changed;
use super::{Channel, Result, Store, duplicate_or_db, from_body, one_more, page, to_json};
use crate::records::ToolHostRecord;

/// Attaching twice is a no-op.
const ATTACH: &str =
    "INSERT INTO profile_tools (profile_id, tool_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";

impl Store {
    pub async fn insert_profile(&self, profile: &Profile) -> Result<()> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            sqlx::query(
                "INSERT INTO profiles (id, instance_id, native_name, body) VALUES ($1, $2, $3, $4)",
            )
            .bind(profile.id.as_str())
            .bind(profile.instance_id.as_str())
            .bind(&profile.native_name)
            .bind(to_json(&profile))
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                duplicate_or_db(
                    e,
                    format!("a profile named `{}` in this instance", profile.native_name),
                )
            })?;
            for tool in &profile.tools {
                sqlx::query(ATTACH)
                    .bind(profile.id.as_str())
                    .bind(tool.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// Removes a profile and, by cascade, its tool attachments, sessions and turns.
    pub async fn delete_profile(&self, id: &ProfileId) -> Result<()> {
        let id = id.clone();
        self.changing_paths(Changed::Profile(id.clone()), move |store| async move {
            on_db!(store, pool => {
                sqlx::query("DELETE FROM profiles WHERE id = $1")
                    .bind(id.as_str())
                    .execute(pool)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    /// Removes the profile and, by cascade, its tool attachments, sessions and turns — unless
    /// one of its sessions has a turn that has not finished (no turn can slip in between the
    /// check and the delete); returns whether it was removed.
    pub async fn delete_idle_profile(&self, id: &ProfileId) -> Result<bool> {
        let delete = concat!(
            "DELETE FROM profiles WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM turns \
             JOIN sessions ON sessions.id = turns.session_id \
             WHERE sessions.profile_id = $1 AND ",
            unfinished!("turns.state"),
            ")"
        );
        // These locks order the delete against a new session (its foreign key locks the
        // profile's row) and a new turn (its session's row): one that got its lock first is
        // seen by the delete, which then keeps the profile; one that comes after waits, and
        // fails if the profile went.
        let locks = &[
            "SELECT 1 FROM profiles WHERE id = $1 FOR UPDATE",
            "SELECT 1 FROM sessions WHERE profile_id = $1 FOR UPDATE",
        ];
        let changed = Changed::Profile(id.clone());
        (self.delete_locked(changed, id.to_string(), locks, delete)).await
    }

    /// Rewrites the profile's resource (its tool attachments live apart).
    pub async fn update_profile(&self, profile: &Profile) -> Result<()> {
        let profile = profile.clone();
        self.changing_paths(
            Changed::Profile(profile.id.clone()),
            move |store| async move {
                on_db!(store, pool => {
                    sqlx::query("UPDATE profiles SET body = $1 WHERE id = $2")
                        .bind(to_json(&profile))
                        .bind(profile.id.as_str())
                        .execute(pool)
                        .await?;
                    Ok(())
                })
            },
        )
        .await
    }

    /// A turn of the profile's sessions that has not finished, if there is one.
    pub async fn unfinished_turn_of_profile(&self, profile: &ProfileId) -> Result<Option<TurnId>> {
        let id: Option<String> = on_db!(self, pool => {
            sqlx::query_scalar(
                concat!("SELECT turns.id FROM turns JOIN sessions ON sessions.id = turns.session_id \
                 WHERE sessions.profile_id = $1 \
                 AND ", unfinished!("turns.state"), " LIMIT 1"),
            )
            .bind(profile.as_str())
            .fetch_optional(pool)
            .await?
        });
        Ok(id.and_then(|id| id.parse().ok()))
    }

    /// The MCP token of `instance` when it has the profile `id`: what the profile's MCP endpoint
    /// checks, in one read. `None` when either is missing.
    pub async fn mcp_token_of_profile(
        &self,
        instance: &InstanceId,
        id: &ProfileId,
    ) -> Result<Option<String>> {
        on_db!(self, pool => {
            let token = sqlx::query_scalar(
                "SELECT i.mcp_token FROM profiles p JOIN instances i ON i.id = p.instance_id \
                 WHERE p.id = $1 AND p.instance_id = $2",
            )
            .bind(id.as_str())
            .bind(instance.as_str())
            .fetch_optional(pool)
            .await?;
            Ok(token)
        })
    }

    pub async fn profile(&self, instance: &InstanceId, id: &ProfileId) -> Result<Option<Profile>> {
        let row = on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM profiles WHERE id = $1 AND instance_id = $2")
                .bind(id.as_str())
                .bind(instance.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body::<Profile, _>(&row)).transpose()?
        });
        match row {
            Some(mut profile) => {
                profile.tools = self.profile_tool_ids(id).await?;
                Ok(Some(profile))
            }
            None => Ok(None),
        }
    }

    pub async fn list_profiles(
        &self,
        instance: &InstanceId,
        cursor: Option<&ProfileId>,
        limit: usize,
    ) -> Result<Page<Profile>> {
        let profiles: Vec<Profile> = on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT body FROM profiles WHERE instance_id = $3 \
                 AND ($2 IS NULL OR rowid > (SELECT rowid FROM profiles WHERE id = $2)) \
                 ORDER BY rowid LIMIT $1",
            )
            .bind(one_more(limit))
            .bind(cursor.map(|c| c.as_str()))
            .bind(instance.as_str())
            .fetch_all(pool)
            .await?;
            rows.iter().map(from_body).collect::<Result<_>>()?
        });
        let mut items = Vec::with_capacity(profiles.len());
        for mut profile in profiles {
            profile.tools = self.profile_tool_ids(&profile.id).await?;
            items.push(profile);
        }
        Ok(page(items, limit, |p: &Profile| p.id.to_string()))
    }

    async fn profile_tool_ids(&self, profile: &ProfileId) -> Result<Vec<ToolId>> {
        let ids: Vec<String> = on_db!(self, pool => {
            sqlx::query_scalar(
                "SELECT tool_id FROM profile_tools WHERE profile_id = $1 ORDER BY rowid",
            )
            .bind(profile.as_str())
            .fetch_all(pool)
            .await?
        });
        Ok(tool_ids(&ids))
    }

    /// Attaches a tool; attaching twice is a no-op. The other replicas are told the profile's
    /// tools changed.
    pub async fn attach_tool(&self, profile: &ProfileId, tool: &ToolId) -> Result<()> {
        let (profile, tool) = (profile.clone(), tool.clone());
        self.changing_paths(Changed::Profile(profile.clone()), move |store| async move {
            on_db!(store, pool => {
                let mut tx = begin!(pool);
                sqlx::query(ATTACH)
                    .bind(profile.as_str())
                    .bind(tool.as_str())
                    .execute(&mut *tx)
                    .await?;
                announce!(tx, store, pool, Channel::ToolsChanged, profile.as_str());
                tx.commit().await?;
                Ok(())
            })
        })
        .await
    }

    /// Detaches a tool; returns whether it was attached. The other replicas are told the
    /// profile's tools changed.
    pub async fn detach_tool(&self, profile: &ProfileId, tool: &ToolId) -> Result<bool> {
        let (profile, tool) = (profile.clone(), tool.clone());
        self.changing_paths(Changed::Profile(profile.clone()), move |store| async move {
            on_db!(store, pool => {
                let mut tx = begin!(pool);
                let done =
                    sqlx::query("DELETE FROM profile_tools WHERE profile_id = $1 AND tool_id = $2")
                        .bind(profile.as_str())
                        .bind(tool.as_str())
                        .execute(&mut *tx)
                        .await?;
                announce!(tx, store, pool, Channel::ToolsChanged, profile.as_str());
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }

    /// The profiles a tool is attached to.
    pub async fn profiles_using_tool(&self, tool: &ToolId) -> Result<Vec<ProfileId>> {
        let ids: Vec<String> = on_db!(self, pool => {
            sqlx::query_scalar(
                "SELECT profile_id FROM profile_tools WHERE tool_id = $1 ORDER BY rowid",
            )
            .bind(tool.as_str())
            .fetch_all(pool)
            .await?
        });
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// The tools attached to a profile, each with the host that serves it.
    pub async fn profile_tools(&self, profile: &ProfileId) -> Result<Vec<(Tool, ToolHostRecord)>> {
        on_db!(self, pool => {
            let rows = sqlx::query(
                "SELECT t.body AS body, h.body AS host_body, h.secret AS secret \
                 FROM profile_tools pt JOIN tools t ON t.id = pt.tool_id \
                 JOIN tool_hosts h ON h.id = t.host_id WHERE pt.profile_id = $1 \
                 ORDER BY pt.rowid",
            )
            .bind(profile.as_str())
            .fetch_all(pool)
            .await?;
            rows.iter()
                .map(|row| {
                    let host: ToolHost =
                        serde_json::from_str(row.try_get::<&str, _>("host_body")?)?;
                    Ok((
                        from_body(row)?,
                        ToolHostRecord {
                            host,
                            secret: row.try_get("secret")?,
                        },
                    ))
                })
                .collect()
        })
    }
}

/// Tool ids as stored (every stored one is well formed).
pub(super) fn tool_ids(stored: &[String]) -> Vec<ToolId> {
    stored.iter().filter_map(|id| id.parse().ok()).collect()
}
