//! `HermesDesktop::capabilities()`: which route groups a server has, found from `/api/status`
//! and by asking one cheap route of each group, which dashboard plugins serve routes, and which
//! MCP servers its catalog offers. (Hosted connectors and the reviewed plugin catalog arrived
//! after Hermes 0.19: a 0.19 server has neither, and the pinned contracts bind neither.)

use hermes_native::desktop::{
    ConfigGetQuery, CronJobListQuery, GitBranchesQuery, RouteGroup, SessionListQuery,
    SkillListQuery, StatusGetQuery, ToolsetListQuery,
};

use super::HermesDesktop;
use crate::error::{Error, Result};

/// What a Desktop server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct DesktopCapabilities {
    /// The Hermes release whose routes it serves (`/api/status` `version`).
    pub version: String,
    /// `hermes-runtime` for this project's runtime; `None` for Hermes itself.
    pub runtime: Option<String>,
    /// The route groups it serves; calling a route of another group is `Error::Unsupported`.
    pub groups: Vec<RouteGroup>,
    /// The dashboard plugins that serve routes of their own (under `/api/plugins/<name>/`).
    pub plugin_routes: Vec<String>,
    /// The MCP servers its catalog offers to install (`GET /api/mcp/catalog`), by name; empty
    /// when it has no catalog (see [`RouteGroup::McpCatalog`]) or an empty one.
    pub mcp_catalog: Vec<String>,
}

impl DesktopCapabilities {
    /// Whether the server serves `group`.
    pub fn has(&self, group: RouteGroup) -> bool {
        self.groups.contains(&group)
    }
}

impl HermesDesktop {
    /// Asks the server what it offers: its status, then one cheap reading route of each group.
    /// A route's own refusal of the probe (400, 404, 422: the empty path it was given) shows
    /// the group is there; so does a control plane's `forbidden` (it is there, this key may not
    /// use it). Anything else — no key, a server error — fails the call.
    pub async fn capabilities(&self) -> Result<DesktopCapabilities> {
        let status = self.status_get(&StatusGetQuery::default()).await?;
        let mut groups = vec![RouteGroup::Status];
        let mut plugin_routes = Vec::new();
        let mut mcp_catalog = Vec::new();
        for group in RouteGroup::ALL.iter().copied() {
            let probe = match group {
                RouteGroup::Status => continue,
                RouteGroup::Sessions => {
                    let query = SessionListQuery {
                        limit: Some(0),
                        ..Default::default()
                    };
                    self.session_list(&query).await.map(drop)
                }
                RouteGroup::Profiles => self.profile_list().await.map(drop),
                RouteGroup::Cron => self
                    .cron_job_list(&CronJobListQuery::default())
                    .await
                    .map(drop),
                RouteGroup::Skills => self.skill_list(&SkillListQuery::default()).await.map(drop),
                RouteGroup::Toolsets => self
                    .toolset_list(&ToolsetListQuery::default())
                    .await
                    .map(drop),
                RouteGroup::Config => self.config_get(&ConfigGetQuery::default()).await.map(drop),
                // An empty path is refused by the route itself: enough to know it is there,
                // without reading anything.
                RouteGroup::Fs => self
                    .fs_list(&hermes_native::desktop::FsListQuery {
                        path: String::new(),
                    })
                    .await
                    .map(drop),
                RouteGroup::Git => self
                    .git_branches(&GitBranchesQuery {
                        path: String::new(),
                    })
                    .await
                    .map(drop),
                RouteGroup::Plugins => match self.plugin_list().await {
                    // A control plane forwards the contract's routes only, never a plugin's
                    // own: through one, no plugin routes are offered.
                    Ok(plugins) if !self.through_a_control_plane() => {
                        plugin_routes = plugins
                            .into_iter()
                            .filter(|p| p.has_api)
                            .map(|p| p.name)
                            .collect();
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                },
                RouteGroup::McpCatalog => {
                    self.mcp_catalog_list(&Default::default())
                        .await
                        .map(|catalog| {
                            mcp_catalog = catalog.entries.into_iter().map(|e| e.name).collect();
                        })
                }
            };
            if present(probe)? {
                groups.push(group);
            }
        }
        Ok(DesktopCapabilities {
            version: status.version,
            runtime: status.runtime,
            groups,
            plugin_routes,
            mcp_catalog,
        })
    }
}

/// Whether a probe's outcome shows its group is served; `Err` when it shows nothing either way.
fn present(probe: Result<()>) -> Result<bool> {
    match probe {
        Ok(()) => Ok(true),
        Err(Error::Runtime {
            status: 400 | 404 | 422,
            ..
        }) => Ok(true),
        Err(Error::Api {
            code: edith_types::ErrorCode::Forbidden,
            ..
        }) => Ok(true),
        Err(Error::Unsupported { .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(status: u16) -> Result<()> {
        Err(Error::Runtime {
            route: "GET /api/x".to_owned(),
            status,
            detail: String::new(),
        })
    }

    #[test]
    fn a_probe_counts_only_what_shows_the_group_is_there() {
        assert!(present(Ok(())).unwrap());
        for refusal in [400, 404, 422] {
            assert!(present(runtime(refusal)).unwrap(), "{refusal}");
        }
        let unsupported = Err(Error::Unsupported {
            operation: "skill_list".to_owned(),
        });
        assert!(!present(unsupported).unwrap());
        for broken in [401, 500, 503] {
            assert!(present(runtime(broken)).is_err(), "{broken}");
        }
    }
}
