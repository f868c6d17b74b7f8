//! Callback tools and the hosts that serve them.

use edith_types::{Page, Tool, ToolHost, ToolHostId, ToolId, UpdateTool, UpdateToolHost};

use super::{Channel, Result, Store, duplicate_or_db, from_body, to_json};
use crate::records::ToolHostRecord;

impl Store {
    pub async fn insert_tool_host(&self, record: &ToolHostRecord) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query("INSERT INTO tool_hosts (id, body, secret) VALUES ($1, $2, $3)")
                .bind(record.host.id.as_str())
                .bind(to_json(&record.host))
                .bind(&record.secret)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    /// Applies `change` to tool host `id` as it is stored (its place, its secret: what the
    /// change gives), in one transaction, so that changes made at once never undo each other;
    /// the other replicas are told (their connections to it are to the old place or with the
    /// old secret). The host as it is then; `None` when there is none.
    pub async fn change_tool_host(
        &self,
        id: &ToolHostId,
        change: &UpdateToolHost,
    ) -> Result<Option<ToolHost>> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            let stored: Option<ToolHost> = locked_body!(tx, pool, "tool_hosts", id.as_str());
            let Some(mut host) = stored else { return Ok(None) };
            if let Some(url) = &change.url {
                host.url.clone_from(url);
            }
            sqlx::query(
                "UPDATE tool_hosts SET body = $1, secret = COALESCE($2, secret) WHERE id = $3",
            )
            .bind(to_json(&host))
            .bind(change.secret.as_deref())
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
            announce!(tx, self, pool, Channel::ToolHostChanged, id.as_str());
            tx.commit().await?;
            Ok(Some(host))
        })
    }

    pub async fn tool_host(&self, id: &ToolHostId) -> Result<Option<ToolHost>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM tool_hosts WHERE id = $1")
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    /// The tool hosts, in the order they were registered.
    pub async fn list_tool_hosts(
        &self,
        cursor: Option<&ToolHostId>,
        limit: usize,
    ) -> Result<Page<ToolHost>> {
        self.page_in_order(
            in_order!("tool_hosts"),
            cursor.map(|c| c.as_str()),
            limit,
            |h: &ToolHost| h.id.to_string(),
        )
        .await
    }

    /// The tools a host serves.
    pub async fn tools_of_host(&self, host: &ToolHostId) -> Result<Vec<ToolId>> {
        let ids: Vec<String> = on_db!(self, pool => {
            sqlx::query_scalar("SELECT id FROM tools WHERE host_id = $1 ORDER BY rowid")
                .bind(host.as_str())
                .fetch_all(pool)
                .await?
        });
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Deletes a tool host unless a tool uses it; returns whether it was.
    pub async fn delete_unused_tool_host(&self, host: &ToolHostId) -> Result<bool> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            lock_row!(tx, pool, "tool_hosts", host.as_str());
            let done = sqlx::query(
                "DELETE FROM tool_hosts WHERE id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM tools WHERE host_id = $1)",
            )
            .bind(host.as_str())
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() > 0 {
                announce!(tx, self, pool, Channel::ToolHostChanged, host.as_str());
            }
            tx.commit().await?;
            Ok(done.rows_affected() > 0)
        })
    }

    pub async fn insert_tool(&self, tool: &Tool) -> Result<()> {
        on_db!(self, pool => {
            sqlx::query("INSERT INTO tools (id, name, host_id, body) VALUES ($1, $2, $3, $4)")
                .bind(tool.id.as_str())
                .bind(&tool.name)
                .bind(tool.host_id.as_str())
                .bind(to_json(tool))
                .execute(pool)
                .await
                .map_err(|e| duplicate_or_db(e, format!("a tool named `{}`", tool.name)))?;
            Ok(())
        })
    }

    /// Rewrites a tool's resource (its name and host stay); the other replicas are told that
    /// tool lists changed.
    /// Applies `change` to tool `id` as it is stored (what the change gives: its description,
    /// its argument schema), in one transaction, so that changes made at once never undo each
    /// other; every profile's runtimes are told. The tool as it is then; `None` when there is
    /// none.
    pub async fn change_tool(&self, id: &ToolId, change: UpdateTool) -> Result<Option<Tool>> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            let stored: Option<Tool> = locked_body!(tx, pool, "tools", id.as_str());
            let Some(mut tool) = stored else { return Ok(None) };
            if let Some(description) = change.description {
                tool.description = description;
            }
            if let Some(schema) = change.input_schema {
                tool.input_schema = schema;
            }
            sqlx::query("UPDATE tools SET body = $1 WHERE id = $2")
                .bind(to_json(&tool))
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
            announce!(tx, self, pool, Channel::ToolsChanged, Channel::EVERY_PROFILE);
            tx.commit().await?;
            Ok(Some(tool))
        })
    }

    pub async fn tool(&self, id: &ToolId) -> Result<Option<Tool>> {
        on_db!(self, pool => {
            let row = sqlx::query("SELECT body FROM tools WHERE id = $1")
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?;
            row.map(|row| from_body(&row)).transpose()
        })
    }

    pub async fn list_tools(&self, cursor: Option<&ToolId>, limit: usize) -> Result<Page<Tool>> {
        self.page_in_order(
            in_order!("tools"),
            cursor.map(|c| c.as_str()),
            limit,
            |t: &Tool| t.id.to_string(),
        )
        .await
    }

    /// Deletes a tool unless a profile uses it (no attachment can slip in between the check and
    /// the delete); returns whether it was deleted.
    pub async fn delete_unused_tool(&self, tool: &ToolId) -> Result<bool> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            lock_row!(tx, pool, "tools", tool.as_str());
            let done = sqlx::query(
                "DELETE FROM tools WHERE id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM profile_tools WHERE tool_id = $1)",
            )
            .bind(tool.as_str())
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(done.rows_affected() > 0)
        })
    }
}
