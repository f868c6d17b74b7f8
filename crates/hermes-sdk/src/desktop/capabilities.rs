//! `HermesDesktop::capabilities()`: which route groups a server has, found from `/api/status`
//! and by asking one cheap route of each group.

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
}

impl DesktopCapabilities {
    /// Whether the server serves `group`.
    pub fn has(&self, group: RouteGroup) -> bool {
        self.groups.contains(&group)
    }
}

impl HermesDesktop {
    /// Asks the server what it offers: its status, then one cheap reading route of each group
    /// (a refusal other than "no such route" — a bad path, a missing profile — still shows the
    /// group is there).
    pub async fn capabilities(&self) -> Result<DesktopCapabilities> {
        let status = self.status_get(&StatusGetQuery::default()).await?;
        let mut groups = vec![RouteGroup::Status];
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
            };
            match probe {
                Ok(()) | Err(Error::Runtime { .. }) => groups.push(group),
                Err(Error::Unsupported { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(DesktopCapabilities {
            version: status.version,
            runtime: status.runtime,
            groups,
        })
    }
}
