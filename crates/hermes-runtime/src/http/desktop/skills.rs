//! `/api/skills…`: the skills in a profile's `skills/` (each a `SKILL.md` with `name:` and
//! `description:` in its front matter) and which are switched off (`skills.disabled`). This
//! runtime's agent does not load skills; the routes keep the files and the switch as Hermes
//! does, so a home moves between runtimes with them.

use std::path::Path;
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

/// Every `SKILL.md` under `dir`, sorted by path.
pub fn skill_files(dir: &Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&path, found);
            } else if entry.file_name() == "SKILL.md" {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found.sort();
    found
}

/// `name` and `description` from the front matter (or the directory's name and the first line
/// of text).
fn read_skill(path: &Path) -> (String, String) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    let mut fields = std::collections::HashMap::new();
    let mut body_start = 0;
    if text.starts_with("---") {
        lines.next();
        for (i, line) in lines.by_ref().enumerate() {
            if line.trim() == "---" {
                body_start = i + 2;
                break;
            }
            if let Some((key, value)) = line.split_once(':') {
                let value = value.trim().trim_matches(['"', '\'']).to_owned();
                fields.insert(key.trim().to_owned(), value);
            }
        }
    }
    let directory = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = fields.remove("name").unwrap_or(directory);
    let description = fields.remove("description").unwrap_or_else(|| {
        text.lines()
            .skip(body_start)
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or_default()
            .to_owned()
    });
    (name, description)
}

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
    let root = home.join("skills");
    let files = skill_files(&root);
    let listed: Vec<Skill> = files
        .iter()
        .map(|file| {
            let (name, description) = read_skill(file);
            let depth = file
                .strip_prefix(&root)
                .map(|p| p.components().count())
                .unwrap_or(0);
            // `skills/<category>/<skill>/SKILL.md`
            let category = (depth >= 3)
                .then(|| file.strip_prefix(&root).ok()?.components().next())
                .flatten()
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            Skill {
                enabled: !disabled.contains(&name),
                name,
                description,
                category,
                usage: 0,
                provenance: "agent".to_owned(),
            }
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
