//! `skills.manage` and `skills.reload`: the home's skills as a client manages them. This
//! runtime reaches no skills hub, so the hub's actions answer as Hermes answers when it cannot
//! reach one — nothing found — except `install`, which says that nothing was installed.

use std::collections::BTreeMap;

use hermes_native::codes;
use hermes_native::methods::{
    NamedSkill, NoParams, SkillsChange, SkillsManageParams, SkillsReloaded,
};
use serde_json::{Value, json};

use super::methods::{Result, RpcError};
use crate::runtime::Runtime;

/// Skills without a category are listed under this one.
const GENERAL: &str = "general";

pub async fn manage(runtime: &Runtime, p: SkillsManageParams) -> Result<Value> {
    let action = p.action.as_deref().unwrap_or("list");
    let query = p.query.unwrap_or_default();
    Ok(match action {
        "list" => {
            let mut by_category: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for skill in crate::skills::available(&runtime.root).await {
                let category = skill.category.unwrap_or_else(|| GENERAL.to_owned());
                by_category.entry(category).or_default().push(skill.name);
            }
            json!({"skills": by_category})
        }
        "search" => json!({"results": []}),
        "browse" => {
            let page = p
                .page
                .filter(|page| *page > 0)
                .or_else(|| query.parse().ok())
                .unwrap_or(1);
            json!({"items": [], "page": page, "total_pages": 1, "total": 0})
        }
        "inspect" => json!({"info": {}}),
        "install" => {
            return Err(RpcError::new(
                codes::SKILLS_FAILED,
                format!("no skills hub is reachable from this runtime: {query} was not installed"),
            ));
        }
        other => {
            return Err(RpcError::new(
                codes::UNKNOWN_SKILLS_ACTION,
                format!("unknown skills action: {other}"),
            ));
        }
    })
}

/// Reads the skills again and says what changed since the last time (the first time, every
/// skill is new, as in Hermes).
pub async fn reload(runtime: &Runtime, _: NoParams) -> Result<SkillsReloaded> {
    let now: BTreeMap<String, String> = crate::skills::available(&runtime.root)
        .await
        .into_iter()
        .map(|skill| (skill.name, skill.description))
        .collect();
    let before = std::mem::replace(
        &mut *runtime.known_skills.lock().expect("not poisoned"),
        now.clone(),
    );
    let named = |names: &BTreeMap<String, String>, other: &BTreeMap<String, String>| {
        names
            .iter()
            .filter(|(name, _)| !other.contains_key(*name))
            .map(|(name, description)| NamedSkill {
                name: name.clone(),
                description: description.clone(),
            })
            .collect::<Vec<_>>()
    };
    let change = SkillsChange {
        added: named(&now, &before),
        removed: named(&before, &now),
        unchanged: now
            .keys()
            .filter(|name| before.contains_key(*name))
            .cloned()
            .collect(),
        total: now.len() as u64,
        commands: now.len() as u64,
    };
    let mut lines = vec!["Reloading skills...".to_owned()];
    if change.added.is_empty() && change.removed.is_empty() {
        lines.push("No new skills detected.".to_owned());
    }
    for (heading, skills) in [
        ("Added skills:", &change.added),
        ("Removed skills:", &change.removed),
    ] {
        if !skills.is_empty() {
            lines.push(heading.to_owned());
            lines.extend(skills.iter().map(|skill| format!("  - {}", skill.name)));
        }
    }
    lines.push(format!("{} skill(s) available", change.total));
    Ok(SkillsReloaded {
        output: lines.join("\n"),
        result: change,
    })
}
