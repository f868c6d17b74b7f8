//! `/api/profiles…`: the runtime's profiles — the root home (`default`) and each home under
//! `<root>/profiles/` — listed, created, renamed and deleted as Hermes does. A profile made here
//! is one the gateway serves (`session.create {profile}`), and the other way round.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{
    ActiveProfile, ProfileCreated, ProfileDeleted, ProfileRenamed, ProfileSummary, Profiles,
};
use hermes_native::desktop::{ProfileCreateBody, ProfileRenameBody};
use hermes_native::profile::{DEFAULT_PROFILE, exact_profile_name, normalize_profile_name};

use crate::http::extract::Body;
use crate::http::reply::{Refusal, internal, refuse};
use crate::runtime::Runtime;

/// The directories a new profile starts with.
const PROFILE_DIRS: &[&str] = &[
    "memories",
    "sessions",
    "skills",
    "skins",
    "logs",
    "plans",
    "workspace",
    "cron",
    "home",
];
/// A new profile's `.env`.
const ENV_HEADER: &str = "# Per-profile secrets for this Hermes profile.\n\
    # API keys and tokens set here override the shell environment.\n\
    # Behavioral settings belong in config.yaml, not here.\n";
/// Never copied by a full clone: another profile's history and runtime state.
const NOT_CLONED: &[&str] = &[
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "sessions",
    "backups",
    "state-snapshots",
    "checkpoints",
    "profiles",
    "active_profile",
    "gateway.pid",
    "gateway_state.json",
    "processes.json",
];
/// The file that names the sticky active profile.
const ACTIVE_FILE: &str = "active_profile";

/// How a route reads the profile it is given: Hermes's session and cron routes normalize the
/// name (trimmed, lowercased), its status, config, skills and toolsets routes take it as it is
/// (and `current` as the runtime's own).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    Normalized,
    Exact,
}

/// The home a request's `profile` names (`None`: the runtime's own) and that profile's name,
/// refused as Hermes refuses it: 400 for a bad name, 404 for one that does not exist.
pub fn home_of(
    runtime: &Runtime,
    profile: Option<&str>,
) -> Result<(PathBuf, Option<String>), Refusal> {
    home_named(runtime, profile, Naming::Normalized)
}

/// [`home_of`] for the routes that take the name as it is.
pub fn home_of_exact(
    runtime: &Runtime,
    profile: Option<&str>,
) -> Result<(PathBuf, Option<String>), Refusal> {
    home_named(runtime, profile, Naming::Exact)
}

fn home_named(
    runtime: &Runtime,
    profile: Option<&str>,
    naming: Naming,
) -> Result<(PathBuf, Option<String>), Refusal> {
    let Some(raw) = profile.filter(|p| !p.trim().is_empty()) else {
        return Ok((runtime.root.clone(), None));
    };
    if naming == Naming::Exact && raw.eq_ignore_ascii_case("current") {
        return Ok((runtime.root.clone(), None));
    }
    let name = match naming {
        Naming::Normalized => normalize_profile_name(raw),
        Naming::Exact => exact_profile_name(raw),
    }
    .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let home = runtime.home_of_profile(&name);
    if !home.is_dir() {
        return Err(Refusal::new(
            StatusCode::NOT_FOUND,
            format!("Profile '{name}' does not exist."),
        ));
    }
    Ok((home, Some(name)))
}

fn missing(name: &str) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        format!("Profile '{name}' does not exist."),
    )
}

fn shown(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn active_name(root: &Path) -> String {
    std::fs::read_to_string(root.join(ACTIVE_FILE))
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| DEFAULT_PROFILE.to_owned())
}

async fn summary(name: &str, home: &Path) -> ProfileSummary {
    let config = HermesConfig::load(home).await.ok();
    let model = config.as_ref().map(|c| c.model.clone());
    let description = std::fs::read_to_string(home.join("profile.yaml"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("description:"))
                .map(|d| d.trim().to_owned())
        })
        .unwrap_or_default();
    ProfileSummary {
        name: name.to_owned(),
        path: shown(home),
        is_default: name == DEFAULT_PROFILE,
        model: model.as_ref().and_then(|m| m.default.clone()),
        provider: model.as_ref().and_then(|m| m.provider.clone()),
        has_env: home.join(".env").is_file(),
        skill_count: crate::skills::scan(home).len() as i64,
        gateway_running: false,
        description,
        description_auto: false,
        distribution_name: None,
        distribution_version: None,
        distribution_source: None,
        has_alias: false,
    }
}

pub async fn list(State(runtime): State<Arc<Runtime>>) -> Response {
    let mut profiles = Vec::new();
    for (name, home) in runtime.profile_homes() {
        profiles.push(summary(&name, &home).await);
    }
    Json(Profiles { profiles }).into_response()
}

pub async fn active(State(runtime): State<Arc<Runtime>>) -> Response {
    Json(ActiveProfile {
        active: active_name(&runtime.root),
        current: DEFAULT_PROFILE.to_owned(),
    })
    .into_response()
}

pub async fn create(
    State(runtime): State<Arc<Runtime>>,
    Body(body): Body<ProfileCreateBody>,
) -> Response {
    let bad = |detail: String| refuse(StatusCode::BAD_REQUEST, detail);
    let name = match normalize_profile_name(&body.name) {
        Ok(name) if name == DEFAULT_PROFILE => {
            return bad(
                "Cannot create a profile named 'default' — it is the built-in profile (~/.hermes)."
                    .to_owned(),
            );
        }
        Ok(name) => name,
        Err(e) => return bad(e.to_string()),
    };
    let unsupported = [
        (
            "mcp_servers",
            body.mcp_servers.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        (
            "keep_skills",
            body.keep_skills.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        (
            "hub_skills",
            body.hub_skills.as_ref().is_some_and(|v| !v.is_empty()),
        ),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, given)| *given) {
        return bad(format!("`{field}` is not supported by hermes-runtime"));
    }
    let home = runtime.home_of_profile(&name);
    let exists = || {
        bad(format!(
            "Profile '{name}' already exists at {}",
            home.display()
        ))
    };
    if home.exists() {
        return exists();
    }
    let clone_all = body.clone_all.unwrap_or(false);
    let source = match body
        .clone_from
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        Some(raw) => Some(match normalize_profile_name(raw) {
            Ok(source) => source,
            Err(e) => return bad(e.to_string()),
        }),
        None if clone_all || body.clone_from_default.unwrap_or(false) => {
            Some(DEFAULT_PROFILE.to_owned())
        }
        None => None,
    };
    if source.is_some() && body.no_skills.unwrap_or(false) {
        return bad(
            "--no-skills is mutually exclusive with --clone / --clone-from / --clone-all \
                    (cloning explicitly copies skills from the source profile)."
                .to_owned(),
        );
    }
    let source_home = source.as_deref().map(|s| runtime.home_of_profile(s));
    if let (Some(source), Some(source_home)) = (&source, &source_home)
        && !source_home.is_dir()
    {
        return bad(format!(
            "Source profile '{source}' does not exist at {}",
            source_home.display()
        ));
    }
    // Making the directory claims the name: of two requests for it, one gets it.
    let _ = std::fs::create_dir_all(runtime.root.join("profiles"));
    if std::fs::create_dir(&home).is_err() {
        return exists();
    }
    let made = tokio::task::spawn_blocking({
        let home = home.clone();
        let root = runtime.root.clone();
        move || make_profile(&root, &home, source_home.as_deref(), clone_all, &body)
    })
    .await;
    match made {
        Ok(Ok((model_set, name_given))) => Json(ProfileCreated {
            ok: true,
            name: name_given,
            path: shown(&home),
            model_set,
            mcp_written: 0,
            skills_disabled: 0,
            hub_installs: Vec::new(),
        })
        .into_response(),
        Ok(Err(e)) => {
            let _ = std::fs::remove_dir_all(&home);
            internal("creating a profile", e)
        }
        Err(e) => internal("creating a profile", e),
    }
}

/// Makes the profile's home: a copy of `source` (its configuration, or everything but its
/// history with `clone_all`), or a fresh one. Returns whether a model was set, and the name as
/// the request gave it.
fn make_profile(
    root: &Path,
    home: &Path,
    source: Option<&Path>,
    clone_all: bool,
    body: &ProfileCreateBody,
) -> std::io::Result<(bool, String)> {
    match source {
        Some(source) if clone_all => copy_tree(source, home, source == root)?,
        Some(source) => {
            make_dirs(home)?;
            for file in [
                "config.yaml",
                ".env",
                "SOUL.md",
                "memories/MEMORY.md",
                "memories/USER.md",
            ] {
                if source.join(file).is_file() {
                    std::fs::copy(source.join(file), home.join(file))?;
                }
            }
            if source.join("skills").is_dir() {
                copy_tree(&source.join("skills"), &home.join("skills"), false)?;
            }
        }
        None => {
            make_dirs(home)?;
            write_private(&home.join(".env"), ENV_HEADER)?;
            if root.join("SOUL.md").is_file() {
                std::fs::copy(root.join("SOUL.md"), home.join("SOUL.md"))?;
            }
            if body.no_skills.unwrap_or(false) {
                std::fs::write(
                    home.join(".no-bundled-skills"),
                    "This profile opted out of bundled-skill seeding.\n",
                )?;
            }
        }
    }
    if let Some(description) = body.description.as_deref().map(str::trim) {
        std::fs::write(
            home.join("profile.yaml"),
            format!("description: {description}\ndescription_auto: false\n"),
        )?;
    }
    let model_set = match (&body.provider, &body.model) {
        (Some(provider), Some(model)) => {
            let path = home.join("config.yaml");
            let mut config = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| HermesConfig::from_yaml(&text).ok())
                .unwrap_or_default();
            config.model.provider = Some(provider.clone());
            config.model.default = Some(model.clone());
            std::fs::write(path, config.to_yaml())?;
            true
        }
        _ => false,
    };
    Ok((model_set, body.name.clone()))
}

fn make_dirs(home: &Path) -> std::io::Result<()> {
    for dir in PROFILE_DIRS {
        std::fs::create_dir_all(home.join(dir))?;
    }
    Ok(())
}

/// Writes a file only its owner can read (it holds secrets).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Copies `from` into `to`, leaving out history and runtime state at the top.
fn copy_tree(from: &Path, to: &Path, top: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if top && NOT_CLONED.contains(&name.to_string_lossy().as_ref()) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name), false)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

pub async fn rename(
    State(runtime): State<Arc<Runtime>>,
    axum::extract::Path(old): axum::extract::Path<String>,
    Body(body): Body<ProfileRenameBody>,
) -> Response {
    let bad = |detail: String| refuse(StatusCode::BAD_REQUEST, detail);
    let old = match normalize_profile_name(&old) {
        Ok(name) if name == DEFAULT_PROFILE => {
            return bad("Cannot rename the default profile.".to_owned());
        }
        Ok(name) => name,
        Err(e) => return bad(e.to_string()),
    };
    let new = match normalize_profile_name(&body.new_name) {
        Ok(name) if name == DEFAULT_PROFILE => {
            return bad("Cannot rename to 'default' — it is reserved.".to_owned());
        }
        Ok(name) => name,
        Err(e) => return bad(e.to_string()),
    };
    let (from, to) = (runtime.home_of_profile(&old), runtime.home_of_profile(&new));
    if !from.is_dir() {
        return missing(&old);
    }
    if to.exists() {
        return bad(format!("Profile '{new}' already exists."));
    }
    // Its database must not stay open under the old path.
    runtime.forget_home(&from).await;
    let renamed = tokio::fs::rename(&from, &to).await;
    // Again: a config read meanwhile is not kept under the old path.
    HermesConfig::forget_under(&from);
    if let Err(e) = renamed {
        return internal("renaming a profile", e);
    }
    if active_name(&runtime.root) == old {
        let _ = tokio::fs::write(runtime.root.join(ACTIVE_FILE), format!("{new}\n")).await;
    }
    Json(ProfileRenamed {
        ok: true,
        name: body.new_name,
        path: shown(&to),
    })
    .into_response()
}

pub async fn delete(
    State(runtime): State<Arc<Runtime>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Response {
    let name = match normalize_profile_name(&name) {
        Ok(name) if name == DEFAULT_PROFILE => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Cannot delete the default profile (~/.hermes).\nTo remove everything, use: \
                 hermes uninstall",
            );
        }
        Ok(name) => name,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let home = runtime.home_of_profile(&name);
    if !home.is_dir() {
        return missing(&name);
    }
    runtime.forget_home(&home).await;
    let removed = tokio::fs::remove_dir_all(&home).await;
    // Again: a config read meanwhile is not kept.
    HermesConfig::forget_under(&home);
    if let Err(e) = removed {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not remove profile directory {}: {e}", home.display()),
        );
    }
    if active_name(&runtime.root) == name {
        let _ = tokio::fs::remove_file(runtime.root.join(ACTIVE_FILE)).await;
    }
    Json(ProfileDeleted {
        ok: true,
        path: shown(&home),
    })
    .into_response()
}
