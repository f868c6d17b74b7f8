//! `GET /api/status`: public; what the runtime is, its profiles and its recent activity. The
//! messaging gateway, updates and hosted sign-in are not part of this runtime: they answer as a
//! Hermes without them does.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{DashboardPlugin, Status};
use hermes_native::desktop::{McpCatalogListQuery, StatusGetQuery};
use serde_json::{Value, json};

use super::profiles::home_of_exact;
use crate::http::extract::Params;
use crate::http::reply::internal;
use crate::runtime::Runtime;

/// The config schema version Hermes 0.19.0 writes.
const LATEST_CONFIG_VERSION: i64 = 33;
/// The release date of the Hermes version whose protocol this runtime speaks.
const HERMES_RELEASE_DATE: &str = "2026.7.20";

pub async fn status(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<StatusGetQuery>,
) -> Response {
    let profile = query.profile;
    let (home, _) = match home_of_exact(&runtime, profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let config_version = HermesConfig::load(&home)
        .await
        .ok()
        .and_then(|config| config.other.get("_config_version").and_then(|v| v.as_i64()))
        .unwrap_or(0);
    let active_sessions = match runtime.db(&home).await {
        Ok(db) => db.active_session_count().await.unwrap_or(0),
        Err(_) => 0,
    };
    let shown = |name: &str| Some(home.join(name).to_string_lossy().into_owned());
    Json(Status {
        version: crate::HERMES_COMPAT_VERSION.to_owned(),
        release_date: HERMES_RELEASE_DATE.to_owned(),
        config_version,
        latest_config_version: LATEST_CONFIG_VERSION,
        can_update_hermes: false,
        gateway_running: false,
        gateway_state: None,
        gateway_platforms: json!({}),
        gateway_exit_reason: None,
        gateway_updated_at: None,
        active_agents: 0,
        gateway_busy: false,
        gateway_drainable: false,
        restart_drain_timeout: 0.0,
        active_sessions,
        auth_required: false,
        auth_providers: Vec::new(),
        nous_session_valid: Value::from("unknown"),
        profiles: runtime
            .profile_homes()
            .into_iter()
            .map(|(name, _)| name)
            .collect(),
        gateway_mode: "none".to_owned(),
        hermes_home: Some(home.to_string_lossy().into_owned()),
        config_path: shown("config.yaml"),
        env_path: shown(".env"),
        gateway_pid: None,
        gateway_health_url: None,
        gateways: Vec::new(),
        runtime: Some("hermes-runtime".to_owned()),
        runtime_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
    })
    .into_response()
}

/// `GET /api/dashboard/plugins` (public): this runtime has no dashboard plugins.
pub async fn plugins() -> Json<Vec<DashboardPlugin>> {
    Json(Vec::new())
}

/// `GET /api/mcp/catalog`: the MCP servers of the catalog (`HERMES_OPTIONAL_MCPS`), marked
/// installed and enabled for the profile asked about (checked as Hermes checks it).
pub async fn mcp_catalog(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<McpCatalogListQuery>,
) -> Response {
    let (home, _) = match home_of_exact(&runtime, query.profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let read = tokio::task::spawn_blocking(move || {
        crate::mcp_catalog::read(crate::mcp_catalog::catalog_dir().as_deref(), &home)
    });
    match read.await {
        Ok(catalog) => Json(catalog).into_response(),
        Err(e) => internal("reading the MCP catalog", e),
    }
}
