//! `/api/tools/toolsets…`: this runtime's built-in toolsets and whether each is on for the
//! `cli` platform (`platform_toolsets.cli` in the profile's config). A toolset switched off
//! here is not offered to the agent.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{Toolset, ToolsetUpdated};
use hermes_native::desktop::{ToolsetListQuery, ToolsetUpdateBody, ToolsetUpdateQuery};

use super::profiles::home_of_exact;
use crate::http::extract::{Body, Params};
use crate::http::reply::{internal, refuse};
use crate::runtime::Runtime;
use crate::tools::{BUILT_IN_TOOLSETS, PLATFORM, enabled_toolsets};

pub async fn list(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<ToolsetListQuery>,
) -> Response {
    let (home, _) = match home_of_exact(&runtime, query.profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let config = match HermesConfig::load(&home).await {
        Ok(config) => config,
        Err(e) => return internal("reading config.yaml", e),
    };
    let enabled = enabled_toolsets(&config);
    let listed: Vec<Toolset> = BUILT_IN_TOOLSETS
        .iter()
        .map(|toolset| {
            let on = enabled.iter().any(|e| e == toolset.name);
            Toolset {
                name: toolset.name.to_owned(),
                label: toolset.label.to_owned(),
                description: toolset.description.to_owned(),
                platform: PLATFORM.to_owned(),
                platform_label: "CLI".to_owned(),
                enabled: on,
                available: on,
                configured: true,
                tools: toolset.tools.iter().map(|t| (*t).to_owned()).collect(),
            }
        })
        .collect();
    Json(listed).into_response()
}

pub async fn update(
    State(runtime): State<Arc<Runtime>>,
    Path(name): Path<String>,
    Params(query): Params<ToolsetUpdateQuery>,
    Body(body): Body<ToolsetUpdateBody>,
) -> Response {
    if !BUILT_IN_TOOLSETS.iter().any(|t| t.name == name) {
        return refuse(StatusCode::BAD_REQUEST, format!("Unknown toolset: {name}"));
    }
    let profile = body.profile.as_deref().or(query.profile.as_deref());
    let (home, _) = match home_of_exact(&runtime, profile) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let switched = super::config::change(&runtime, home, |config| {
        let mut enabled = enabled_toolsets(config);
        enabled.retain(|t| *t != name);
        if body.enabled {
            enabled.push(name.clone());
        }
        enabled.sort();
        config.set_platform_toolsets(PLATFORM, enabled);
    })
    .await;
    match switched {
        Ok(()) => Json(ToolsetUpdated {
            ok: true,
            name,
            platform: PLATFORM.to_owned(),
            enabled: body.enabled,
        })
        .into_response(),
        Err(failed) => failed,
    }
}
