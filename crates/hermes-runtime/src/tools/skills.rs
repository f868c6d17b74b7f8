//! `skills_list` and `skill_view`: the agent reads the home's skills as Hermes's agent does —
//! a list of names and descriptions, then one skill's instructions and the files beside them.
//! A skill that needs a variable the home lacks has the user asked for it (`secret.request` →
//! `secret.respond`, 300 s, then `secret.expire`); the answer is kept in the home's `.env`.

use std::path::{Component, Path};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use hermes_native::NativeEvent;
use hermes_native::events::{PendingRequest, SecretRequest};
use serde_json::{Value, json};

use super::TurnContext;
use crate::model::ToolSpec;
use crate::skills::{self, RequiredVar, SUPPORT_DIRS, Skill};

/// How long the user has to give a secret.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

pub fn list_spec() -> ToolSpec {
    static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
        name: "skills_list".to_owned(),
        description: "List the available skills (name and description). Use skill_view(name) \
                          to read one."
            .to_owned(),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": {
                "category": {"type": "string", "description": "Only the skills of this category."},
            },
            "required": [],
        })),
    });
    SPEC.clone()
}

pub fn view_spec() -> ToolSpec {
    static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
        name: "skill_view".to_owned(),
        description: "Read a skill: its SKILL.md instructions and the files beside them \
                          (references, templates, assets, scripts). The first call lists those \
                          files; call again with file_path to read one."
            .to_owned(),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name (see skills_list)."},
                "file_path": {"type": "string", "description": "A file of the skill, e.g. 'references/api.md'. Leave out for SKILL.md."},
            },
            "required": ["name"],
        })),
    });
    SPEC.clone()
}

pub async fn list(ctx: &TurnContext<'_>, args: &Value) -> Value {
    let home = &ctx.session.home;
    let mut found = skills::available(home).await;
    if found.is_empty() {
        let _ = std::fs::create_dir_all(home.join("skills"));
        return json!({"success": true, "skills": [], "categories": [],
                      "message": "No skills found in skills/ directory."});
    }
    if let Some(category) = args["category"].as_str() {
        found.retain(|s| s.category.as_deref() == Some(category));
    }
    found.sort_by(|a, b| {
        let key = |s: &skills::Skill| (s.category.clone().unwrap_or_default(), s.name.clone());
        key(a).cmp(&key(b))
    });
    let categories: std::collections::BTreeSet<&str> =
        found.iter().filter_map(|s| s.category.as_deref()).collect();
    let listed: Vec<Value> = found
        .iter()
        .map(|s| json!({"name": s.name, "description": s.description, "category": s.category}))
        .collect();
    json!({
        "success": true,
        "skills": listed,
        "categories": categories,
        "count": found.len(),
        "hint": "Use skill_view(name) to see full content, tags, and linked files",
    })
}

pub async fn view(ctx: &TurnContext<'_>, args: &Value) -> Value {
    let Some(name) = args["name"].as_str().filter(|n| !n.trim().is_empty()) else {
        return failure("`name` is required");
    };
    let available = skills::available(&ctx.session.home).await;
    let Some(skill) = available.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = available.iter().map(|s| s.name.as_str()).collect();
        return json!({"success": false, "error": format!("Skill '{name}' not found."),
                      "available_skills": known});
    };
    match args["file_path"].as_str().filter(|p| !p.is_empty()) {
        Some(path) => linked_file(skill, path),
        None => instructions(ctx, skill).await,
    }
}

/// A skill's `SKILL.md`, with what it needs asked for first.
async fn instructions(ctx: &TurnContext<'_>, skill: &Skill) -> Value {
    let required = skill.required_env();
    let home = &ctx.session.home;
    let present = |var: &RequiredVar| {
        ctx.runtime
            .env_var(home, &var.name)
            .is_some_and(|v| !v.is_empty())
    };
    let mut skipped = false;
    for var in required.iter().filter(|v| !v.optional && !present(v)) {
        match ask(ctx, skill, var).await {
            Some(value) => {
                if let Err(e) = ctx.runtime.dotenv(home).save(&var.name, &value) {
                    tracing::warn!(variable = %var.name, error = %e, "could not keep a secret");
                    skipped = true;
                }
            }
            None => skipped = true,
        }
    }
    let missing: Vec<&str> = required
        .iter()
        .filter(|v| !v.optional && !present(v))
        .map(|v| v.name.as_str())
        .collect();
    // What the skill needs and has reaches the session's commands, credentials included.
    ctx.session
        .state
        .lock()
        .expect("not poisoned")
        .passthrough
        .extend(
            required
                .iter()
                .filter(|v| present(v))
                .map(|v| v.name.clone()),
        );
    let linked = linked_files(skill.dir());
    let mut result = json!({
        "success": true,
        "name": skill.name,
        "description": skill.description,
        "tags": skill.front.get("metadata").and_then(|m| m.get("hermes")).and_then(|h| h.get("tags")).map_or(json!([]), yaml_to_json),
        "related_skills": skill.front.get("metadata").and_then(|m| m.get("hermes")).and_then(|h| h.get("related_skills")).map_or(json!([]), yaml_to_json),
        "content": skill.text,
        "path": skill.file.strip_prefix(ctx.session.home.join("skills")).map(|p| p.display().to_string()).unwrap_or_default(),
        "skill_dir": skill.dir().display().to_string(),
        "linked_files": linked,
        "usage_hint": (!linked.is_null()).then_some("To view linked files, call skill_view(name, file_path) where file_path is e.g. 'references/api.md' or 'assets/config.yaml'"),
        "required_environment_variables": required,
        "required_commands": [],
        "missing_required_environment_variables": missing,
        "missing_credential_files": [],
        "missing_required_commands": [],
        "setup_needed": !missing.is_empty(),
        "setup_skipped": skipped,
        "readiness_status": if missing.is_empty() { "available" } else { "setup_needed" },
    });
    if let Some(help) = required.iter().find_map(|v| v.help.clone()) {
        result["setup_help"] = json!(help);
    }
    result
}

/// Asks the user for a variable; `None` when they give none in time.
async fn ask(ctx: &TurnContext<'_>, skill: &Skill, var: &RequiredVar) -> Option<String> {
    let prompts = &ctx.runtime.prompts;
    let (request_id, answer) = prompts.question(&ctx.session.sid);
    let mut metadata = json!({"skill_name": skill.name});
    if let Some(help) = &var.help {
        metadata["help"] = json!(help);
    }
    if let Some(required_for) = &var.required_for {
        metadata["required_for"] = json!(required_for);
    }
    ctx.session.emit(NativeEvent::SecretRequest(SecretRequest {
        prompt: var.prompt.clone(),
        env_var: var.name.clone(),
        metadata: Some(metadata),
        request_id: request_id.clone(),
    }));
    match tokio::time::timeout(ASK_TIMEOUT, answer).await {
        Ok(Ok(value)) => Some(value).filter(|v| !v.is_empty()),
        Ok(Err(_)) => None,
        Err(_) => {
            prompts.forget_question(&request_id);
            ctx.session
                .emit(NativeEvent::SecretExpire(PendingRequest { request_id }));
            None
        }
    }
}

/// The files beside `SKILL.md`, by kind (`references`, `templates`, `assets`, `scripts`), or
/// null when there are none.
fn linked_files(dir: &Path) -> Value {
    let mut linked = serde_json::Map::new();
    for kind in SUPPORT_DIRS {
        let mut files = Vec::new();
        collect(&dir.join(kind), dir, &mut files);
        files.sort();
        if !files.is_empty() {
            linked.insert((*kind).to_owned(), json!(files));
        }
    }
    match linked.is_empty() {
        true => Value::Null,
        false => Value::Object(linked),
    }
}

fn collect(dir: &Path, base: &Path, files: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect(&path, base, files),
            Ok(t) if t.is_file() => {
                if let Ok(relative) = path.strip_prefix(base) {
                    files.push(relative.display().to_string());
                }
            }
            _ => {}
        }
    }
}

/// One file of a skill, answered as Hermes answers: a relative path that stays inside the
/// skill's directory; a file that is not there lists those that are.
fn linked_file(skill: &Skill, path: &str) -> Value {
    let outside = |error: String| {
        json!({"success": false, "error": error,
               "hint": "Use a relative path within the skill directory"})
    };
    let relative = Path::new(path);
    if relative.components().any(|c| c == Component::ParentDir) {
        return outside("Path traversal ('..') is not allowed.".to_owned());
    }
    let file = skill.dir().join(relative);
    let dir = skill
        .dir()
        .canonicalize()
        .unwrap_or_else(|_| skill.dir().to_path_buf());
    if let Ok(resolved) = file.canonicalize()
        && !resolved.starts_with(&dir)
    {
        return outside(format!(
            "Path escapes allowed directory: {} is not inside {}",
            resolved.display(),
            dir.display()
        ));
    }
    if !file.is_file() {
        return json!({
            "success": false,
            "error": format!("File '{path}' not found in skill '{}'.", skill.name),
            "available_files": available_files(skill.dir()),
            "hint": "Use one of the available file paths listed above",
        });
    }
    let extension = file
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    match std::fs::read(&file).map(String::from_utf8) {
        Ok(Ok(content)) => json!({"success": true, "name": skill.name, "file": path,
                                  "content": content, "file_type": extension}),
        Ok(Err(bytes)) => {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            let size = bytes.into_bytes().len();
            json!({"success": true, "name": skill.name, "file": path, "is_binary": true,
                   "content": format!("[Binary file: {name}, size: {size} bytes]")})
        }
        Err(e) => failure(&format!("File '{path}' could not be read: {e}")),
    }
}

/// The files of a skill besides `SKILL.md`, by kind (`other`: text files elsewhere).
fn available_files(dir: &Path) -> Value {
    let mut files = Vec::new();
    collect(dir, dir, &mut files);
    files.sort();
    let mut by_kind = serde_json::Map::new();
    for file in files.into_iter().filter(|f| f != skills::SKILL_FILE) {
        let kind = SUPPORT_DIRS
            .iter()
            .find(|kind| file.starts_with(&format!("{kind}/")))
            .map(|kind| (*kind).to_owned())
            .or_else(|| {
                let text = [".md", ".py", ".yaml", ".yml", ".json", ".tex", ".sh"];
                text.iter()
                    .any(|e| file.ends_with(e))
                    .then(|| "other".to_owned())
            });
        if let Some(kind) = kind {
            let entry = by_kind.entry(kind).or_insert_with(|| json!([]));
            if let Value::Array(list) = entry {
                list.push(json!(file));
            }
        }
    }
    Value::Object(by_kind)
}

fn failure(message: &str) -> Value {
    json!({"success": false, "error": message})
}

fn yaml_to_json(value: &serde_yaml::Value) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
