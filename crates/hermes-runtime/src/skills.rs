//! Skills: each a `SKILL.md` under a home's `skills/` — YAML front matter (`name`,
//! `description`, what it needs) and instructions the agent reads with `skill_view`. Read as
//! Hermes reads them, for the agent's skill tools, `skills.manage`, `skills.reload` and the
//! Desktop skill routes alike.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml::Value;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// A skill's directories of extra files, which hold no skills of their own.
pub const SUPPORT_DIRS: &[&str] = &["references", "templates", "assets", "scripts"];
/// Directories never searched for skills.
const SKIPPED_DIRS: &[&str] = &["node_modules", "__pycache__", ".git", ".venv", "venv"];
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// One skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// `name:`, else the directory's name.
    pub name: String,
    /// `description:`, else the first line of text.
    pub description: String,
    /// The directory under `skills/` it sits in, when it sits two deep
    /// (`skills/<category>/<skill>/SKILL.md`).
    pub category: Option<String>,
    pub file: PathBuf,
    /// The whole file.
    pub text: String,
    /// The front matter (null when there is none).
    pub front: Value,
}

impl Skill {
    /// The skill's directory.
    pub fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new(""))
    }

    /// The environment variables it needs, as Hermes reads them from `required_environment_
    /// variables` (names or entries), `setup.collect_secrets` and `prerequisites.env_vars`.
    pub fn required_env(&self) -> Vec<RequiredVar> {
        let text = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let setup = self.front.get("setup").cloned().unwrap_or(Value::Null);
        let setup_help = text(&setup, "help");
        let mut entries: Vec<Value> = match self.front.get("required_environment_variables") {
            Some(Value::Sequence(items)) => items.clone(),
            Some(one @ Value::Mapping(_)) => vec![one.clone()],
            _ => Vec::new(),
        };
        if let Some(Value::Sequence(secrets)) = setup.get("collect_secrets") {
            for secret in secrets {
                let mut entry = serde_yaml::Mapping::new();
                for (from, to) in [("env_var", "name"), ("prompt", "prompt")] {
                    if let Some(value) = secret.get(from) {
                        entry.insert(to.into(), value.clone());
                    }
                }
                if let Some(url) = secret.get("provider_url").or_else(|| secret.get("url")) {
                    entry.insert("help".into(), url.clone());
                }
                entries.push(Value::Mapping(entry));
            }
        }
        if let Some(Value::Sequence(legacy)) = self
            .front
            .get("prerequisites")
            .and_then(|p| p.get("env_vars"))
        {
            entries.extend(legacy.iter().cloned());
        }
        let mut required: Vec<RequiredVar> = Vec::new();
        for entry in entries {
            let name = match &entry {
                Value::String(name) => Some(name.trim().to_owned()),
                _ => text(&entry, "name").or_else(|| text(&entry, "env_var")),
            };
            let Some(name) = name.filter(|n| is_variable_name(n)) else {
                continue;
            };
            if required.iter().any(|r| r.name == name) {
                continue;
            }
            required.push(RequiredVar {
                prompt: text(&entry, "prompt").unwrap_or_else(|| format!("Enter value for {name}")),
                help: text(&entry, "help")
                    .or_else(|| text(&entry, "provider_url"))
                    .or_else(|| text(&entry, "url"))
                    .or_else(|| setup_help.clone()),
                required_for: text(&entry, "required_for"),
                optional: entry.get("optional").and_then(Value::as_bool) == Some(true),
                name,
            });
        }
        required
    }
}

/// A variable a skill needs, as `skill_view` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequiredVar {
    pub name: String,
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_for: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every skill of a home for this machine (a skill for other platforms only is left out), in
/// the order of their paths.
pub fn scan(home: &Path) -> Vec<Skill> {
    let root = home.join("skills");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .filter_map(|file| read(&root, file))
        .filter(for_this_platform)
        .collect()
}

/// The skills of a home the agent and clients are offered: those its config does not switch
/// off (`skills.disabled`).
pub async fn available(home: &Path) -> Vec<Skill> {
    let disabled = hermes_native::config::HermesConfig::load(home)
        .await
        .map(|config| config.disabled_skills())
        .unwrap_or_default();
    let mut skills = scan(home);
    skills.retain(|skill| !disabled.contains(&skill.name));
    skills
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let is_skill = dir.join(SKILL_FILE).is_file();
    if is_skill {
        found.push(dir.join(SKILL_FILE));
    }
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let skipped = name.starts_with('.')
                || SKIPPED_DIRS.contains(&name.as_str())
                || (is_skill && SUPPORT_DIRS.contains(&name.as_str()));
            !skipped
        })
        .map(|entry| entry.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        walk(&dir, found);
    }
}

fn read(root: &Path, file: PathBuf) -> Option<Skill> {
    let text = std::fs::read_to_string(&file).ok()?;
    let (front, body) = front_matter(&text);
    let directory = file
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let field = |key: &str| {
        front
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let name: String = field("name")
        .unwrap_or(directory)
        .chars()
        .take(MAX_NAME_CHARS)
        .collect();
    let description = field("description").unwrap_or_else(|| {
        body.lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with('#'))
            .unwrap_or_default()
            .to_owned()
    });
    let description = match description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((cut, _)) => {
            let kept: String = description[..cut]
                .chars()
                .take(MAX_DESCRIPTION_CHARS - 3)
                .collect();
            format!("{kept}...")
        }
        None => description,
    };
    let relative = file.strip_prefix(root).ok()?;
    let category = (relative.components().count() >= 3)
        .then(|| relative.components().next())
        .flatten()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    Some(Skill {
        name,
        description,
        category,
        text: text.clone(),
        front,
        file,
    })
}

/// The YAML between a leading `---` line and the next, and the text after it.
fn front_matter(text: &str) -> (Value, &str) {
    let Some(rest) = text.strip_prefix("---") else {
        return (Value::Null, text);
    };
    let Some(end) = rest.find("\n---") else {
        return (Value::Null, text);
    };
    let yaml = &rest[..end];
    let body = rest[end + 4..]
        .trim_start_matches(['-'])
        .trim_start_matches('\n');
    let front = serde_yaml::from_str(yaml).unwrap_or(Value::Null);
    (front, body)
}

/// A skill that names the platforms it runs on must name Linux for this runtime to offer it.
fn for_this_platform(skill: &Skill) -> bool {
    match skill.front.get("platforms") {
        Some(Value::Sequence(platforms)) => platforms
            .iter()
            .filter_map(Value::as_str)
            .any(|p| p.eq_ignore_ascii_case("linux")),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(home: &Path, path: &str, text: &str) {
        let file = home.join("skills").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    #[test]
    fn skills_are_found_named_described_and_categorised_as_hermes_does() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        write(home, "plain/SKILL.md", "# Plain\n\nDoes plain things.\n");
        write(
            home,
            "mlops/axolotl/SKILL.md",
            "---\nname: axolotl\ndescription: Fine-tune models\n---\nBody\n",
        );
        write(
            home,
            "mlops/axolotl/references/SKILL.md",
            "---\nname: hidden\n---\n",
        );
        write(home, ".git/SKILL.md", "---\nname: hidden\n---\n");
        write(
            home,
            "mac/SKILL.md",
            "---\nname: mac-only\nplatforms: [macos]\n---\n",
        );
        let found: Vec<(String, String, Option<String>)> = scan(home)
            .into_iter()
            .map(|s| (s.name, s.description, s.category))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "axolotl".into(),
                    "Fine-tune models".into(),
                    Some("mlops".into())
                ),
                ("plain".into(), "Does plain things.".into(), None),
            ]
        );
    }

    #[test]
    fn what_a_skill_needs_is_read_from_every_place_hermes_reads() {
        let home = tempfile::tempdir().unwrap();
        write(
            home.path(),
            "needs/SKILL.md",
            "---\nname: needs\nrequired_environment_variables:\n  - name: API_TOKEN\n    \
             prompt: Your token\n    help: https://example.com\n  - OTHER\n  - name: SOFT\n    \
             optional: true\n  - name: not-a-name\nsetup:\n  collect_secrets:\n    - env_var: \
             SECRET\n      provider_url: https://secret.example\nprerequisites:\n  env_vars: \
             [LEGACY, OTHER]\n---\n",
        );
        let needs = scan(home.path()).remove(0).required_env();
        let names: Vec<&str> = needs.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["API_TOKEN", "OTHER", "SOFT", "SECRET", "LEGACY"]);
        assert_eq!(
            serde_json::to_value(&needs[0]).unwrap(),
            serde_json::json!({"name": "API_TOKEN", "prompt": "Your token", "help": "https://example.com"})
        );
        assert_eq!(needs[1].prompt, "Enter value for OTHER");
        assert!(needs[2].optional);
        assert_eq!(needs[3].help.as_deref(), Some("https://secret.example"));
    }
}
