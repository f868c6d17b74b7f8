//! `/api/skills…`: the skills in a profile's `skills/` (`crate::skills`) and which are switched
//! off (`skills.disabled`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{Skill, SkillToggled};
use hermes_native::desktop::{SkillListQuery, SkillToggleBody, SkillToggleQuery};

use super::profiles::home_of_exact;
use crate::http::extract::{Body, Params};
use crate::runtime::Runtime;

pub async fn list(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<SkillListQuery>,
) -> Response {
    let (home, _) = match home_of_exact(&runtime, query.profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let disabled = HermesConfig::load(&home)
        .await
        .map(|c| c.disabled_skills())
        .unwrap_or_default();
    let listed: Vec<Skill> = crate::skills::scan(&home)
        .into_iter()
        .map(|skill| Skill {
            enabled: !disabled.contains(&skill.name),
            name: skill.name,
            description: skill.description,
            category: skill.category,
            usage: 0,
            provenance: "agent".to_owned(),
        })
        .collect();
    Json(listed).into_response()
}

pub async fn toggle(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<SkillToggleQuery>,
    Body(body): Body<SkillToggleBody>,
) -> Response {
    let profile = body.profile.as_deref().or(query.profile.as_deref());
    let (home, _) = match home_of_exact(&runtime, profile) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let name = body.name.clone();
    let toggled = super::config::change(&runtime, home, |config| {
        let mut disabled = config.disabled_skills();
        disabled.retain(|s| *s != name);
        if !body.enabled {
            disabled.push(name);
        }
        disabled.sort();
        config.set_disabled_skills(disabled);
    })
    .await;
    match toggled {
        Ok(()) => Json(SkillToggled {
            ok: true,
            name: body.name,
            enabled: body.enabled,
        })
        .into_response(),
        Err(failed) => failed,
    }
}
