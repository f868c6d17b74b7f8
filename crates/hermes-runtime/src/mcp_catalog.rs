//! The catalog of MCP servers a user may install: `<dir>/<name>/manifest.yaml` files in Hermes
//! 0.19's manifest format (version 1), read from the directory `HERMES_OPTIONAL_MCPS` names, as
//! Hermes reads it. This runtime ships no manifests of its own, so without that variable the
//! catalog is empty. Each entry is marked installed and enabled from a profile's
//! `mcp_servers:`.

use std::path::{Path, PathBuf};

use hermes_native::desktop::replies::{
    McpCatalog, McpCatalogDiagnostic, McpCatalogEntry, McpRequiredEnv,
};
use serde_yaml::{Mapping, Value};

/// The variable naming the catalog's directory (Hermes's own name for it).
pub const CATALOG_DIR_VAR: &str = "HERMES_OPTIONAL_MCPS";
const MANIFEST_VERSION: u64 = 1;

/// The catalog's directory, if one is configured.
pub fn catalog_dir() -> Option<PathBuf> {
    std::env::var_os(CATALOG_DIR_VAR)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// The catalog in `dir` (sorted by directory name), as the profile whose home is `home` sees
/// it: manifests that do not read are left out and named in `diagnostics`.
pub fn read(dir: Option<&Path>, home: &Path) -> McpCatalog {
    let mut catalog = McpCatalog::default();
    let Some(mut children) = dir
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .map(|read| read.flatten().map(|e| e.path()).collect::<Vec<_>>())
    else {
        return catalog;
    };
    children.sort();
    let servers = installed_servers(home);
    for child in children {
        let manifest = child.join("manifest.yaml");
        if !manifest.is_file() {
            continue;
        }
        let dir_name = child
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match parse(&manifest) {
            Ok(mut entry) => {
                if let Some(server) = servers.get(entry.name.as_str()) {
                    entry.installed = true;
                    entry.enabled = is_enabled(server);
                }
                catalog.entries.push(entry);
            }
            Err(message) => catalog.diagnostics.push(McpCatalogDiagnostic {
                name: dir_name,
                kind: if message.contains("manifest_version") && message.contains("unsupported") {
                    "future_manifest"
                } else {
                    "invalid"
                }
                .to_owned(),
                message,
            }),
        }
    }
    catalog
}

/// The profile's `mcp_servers:` entries (read from the file as it is: a server this runtime
/// cannot run still counts as installed).
fn installed_servers(home: &Path) -> Mapping {
    std::fs::read_to_string(home.join(hermes_native::config::CONFIG_FILE))
        .ok()
        .and_then(|text| serde_yaml::from_str::<Value>(&text).ok())
        .and_then(|config| config.get("mcp_servers")?.as_mapping().cloned())
        .unwrap_or_default()
}

/// Whether a server entry is switched on, as Hermes reads it: an empty entry is not; no
/// `enabled:` is; otherwise the value's truth.
fn is_enabled(server: &Value) -> bool {
    if !truthy(server) {
        return false;
    }
    match server.get("enabled") {
        None => true,
        Some(Value::String(text)) => {
            matches!(text.to_lowercase().as_str(), "true" | "1" | "yes" | "on")
        }
        Some(value) => truthy(value),
    }
}

/// A value's truth as Python's `bool()` sees what PyYAML reads (YAML 1.1 reads `no`, `off`,
/// `false` as false, where serde_yaml keeps them as text).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => {
            !text.is_empty() && !matches!(text.to_lowercase().as_str(), "no" | "off" | "false")
        }
        Value::Sequence(items) => !items.is_empty(),
        Value::Mapping(map) => !map.is_empty(),
        Value::Tagged(tagged) => truthy(&tagged.value),
    }
}

fn is_name(text: &str, extra: &[char]) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
}

fn text_at(map: &Value, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(text) => Some(text.clone()),
        Value::Null => None,
        other => serde_yaml::to_string(other)
            .ok()
            .map(|t| t.trim().to_owned()),
    }
}

fn strings(list: &Value, what: &str) -> Result<Vec<String>, String> {
    match list {
        Value::Null => Ok(Vec::new()),
        Value::Sequence(items) => Ok(items
            .iter()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            })
            .collect()),
        _ => Err(format!("{what} must be a list")),
    }
}

/// One manifest, checked as Hermes checks it.
fn parse(path: &Path) -> Result<McpCatalogEntry, String> {
    let at = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("failed to read {at}: {e}"))?;
    let data: Value =
        serde_yaml::from_str(&text).map_err(|e| format!("failed to read {at}: {e}"))?;
    let data = if data.is_null() {
        Value::Mapping(Mapping::new())
    } else {
        data
    };
    if !data.is_mapping() {
        return Err(format!("{at}: manifest must be a mapping"));
    }
    let version = data.get("manifest_version").unwrap_or(&Value::Null);
    if version.as_u64() != Some(MANIFEST_VERSION) {
        let shown = serde_yaml::to_string(version).unwrap_or_default();
        return Err(format!(
            "{at}: manifest_version {} unsupported (this runtime understands version \
             {MANIFEST_VERSION})",
            shown.trim()
        ));
    }
    let name = text_at(&data, "name").unwrap_or_default();
    if !is_name(&name, &['_', '-']) {
        return Err(format!("{at}: invalid or missing 'name'"));
    }
    let description = text_at(&data, "description").unwrap_or_default();
    let description = description.trim();
    if description.is_empty() {
        return Err(format!("{at}: 'description' required"));
    }
    let empty = Value::Mapping(Mapping::new());
    let section = |key: &str| match data.get(key) {
        None | Some(Value::Null) => Ok(&empty),
        Some(value) if value.is_mapping() => Ok(value),
        Some(_) => Err(format!("{at}: '{key}' must be a mapping")),
    };

    let transport = section("transport")?;
    let transport_type = text_at(transport, "type").unwrap_or_default();
    if transport_type != "stdio" && transport_type != "http" {
        return Err(format!("{at}: transport.type must be 'stdio' or 'http'"));
    }
    let command = text_at(transport, "command");
    let url = text_at(transport, "url");
    let args = strings(
        transport.get("args").unwrap_or(&Value::Null),
        &format!("{at}: transport.args"),
    )?;
    if transport_type == "stdio" && command.as_deref().is_none_or(str::is_empty) {
        return Err(format!("{at}: stdio transport requires 'command'"));
    }
    if transport_type == "http" && url.as_deref().is_none_or(str::is_empty) {
        return Err(format!("{at}: http transport requires 'url'"));
    }

    let auth = match data.get("auth") {
        None | Some(Value::Null) => &empty,
        Some(value) if value.is_mapping() => value,
        Some(_) => return Err(format!("{at}: 'auth' must be a mapping")),
    };
    let auth_type = text_at(auth, "type")
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "none".to_owned());
    if !["api_key", "oauth", "none"].contains(&auth_type.as_str()) {
        return Err(format!("{at}: auth.type must be 'api_key'|'oauth'|'none'"));
    }
    let required_env = match auth.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| env_spec(item).map_err(|e| format!("{at}: {e}")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("{at}: auth.env must be a list")),
    };

    let tools = section("tools")?;
    let default_enabled = match tools.get("default_enabled") {
        None | Some(Value::Null) => None,
        Some(Value::Sequence(items)) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect(),
        ),
        Some(_) => {
            return Err(format!(
                "{at}: tools.default_enabled must be a list of strings"
            ));
        }
    };

    let (install_url, install_ref, bootstrap) = match data.get("install") {
        None | Some(Value::Null) => (None, None, Vec::new()),
        Some(install) if install.is_mapping() => {
            let kind = text_at(install, "type");
            if kind.as_deref() != Some("git") {
                return Err(format!("{at}: install.type must be 'git' (got {kind:?})"));
            }
            let (url, git_ref) = (
                text_at(install, "url").unwrap_or_default(),
                text_at(install, "ref").unwrap_or_default(),
            );
            if url.is_empty() || git_ref.is_empty() {
                return Err(format!("{at}: install.url and install.ref are required"));
            }
            let bootstrap = strings(
                install.get("bootstrap").unwrap_or(&Value::Null),
                &format!("{at}: install.bootstrap"),
            )?;
            (Some(url), Some(git_ref), bootstrap)
        }
        Some(_) => return Err(format!("{at}: 'install' must be a mapping")),
    };

    Ok(McpCatalogEntry {
        name,
        description: description.to_owned(),
        source: text_at(&data, "source")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        transport: transport_type,
        auth_type,
        required_env,
        command,
        args,
        url,
        needs_install: install_url.is_some(),
        install_url,
        install_ref,
        bootstrap,
        default_enabled,
        post_install: text_at(&data, "post_install").unwrap_or_default(),
        installed: false,
        enabled: false,
    })
}

/// A variable of `auth.env`.
fn env_spec(raw: &Value) -> Result<McpRequiredEnv, String> {
    if !raw.is_mapping() {
        return Err("env entry must be a mapping".to_owned());
    }
    let name = text_at(raw, "name").unwrap_or_default();
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && is_name(&name, &['_']);
    if !valid {
        return Err(format!("invalid env var name: {name:?}"));
    }
    Ok(McpRequiredEnv {
        prompt: text_at(raw, "prompt")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| name.clone()),
        required: raw.get("required").is_none_or(truthy),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("manifest.yaml"), text).unwrap();
    }

    #[test]
    fn manifests_are_read_checked_and_marked_from_the_profiles_servers() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        manifest(
            dir.path(),
            "b-tracker",
            "manifest_version: 1\nname: tracker\ndescription: Tracks.\nsource: https://x\n\
             transport: {type: http, url: 'https://t/mcp'}\nauth: {type: oauth}\n",
        );
        manifest(
            dir.path(),
            "a-files",
            "manifest_version: 1\nname: files\ndescription: ' Files. '\n\
             transport: {type: stdio, command: node, args: [serve, 3]}\n\
             auth: {type: api_key, env: [{name: FILES_KEY, prompt: 'Key?'}, {name: OPT, required: null}]}\n\
             tools: {default_enabled: [read]}\n\
             install: {type: git, url: 'https://g', ref: v1, bootstrap: [npm ci]}\n",
        );
        manifest(
            dir.path(),
            "c-future",
            "manifest_version: 2\nname: future\n",
        );
        manifest(
            dir.path(),
            "d-broken",
            "manifest_version: 1\nname: 'no spaces'\n",
        );
        std::fs::write(
            home.path().join("config.yaml"),
            "mcp_servers:\n  files: {command: node, enabled: 'no'}\n  tracker: {}\n",
        )
        .unwrap();

        let catalog = read(Some(dir.path()), home.path());
        let names: Vec<&str> = catalog.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["files", "tracker"]);
        let files = &catalog.entries[0];
        assert_eq!(files.description, "Files.");
        assert_eq!(files.args, ["serve", "3"]);
        assert_eq!(files.required_env[0].prompt, "Key?");
        assert_eq!(files.required_env[1].prompt, "OPT");
        assert!(!files.required_env[1].required);
        assert_eq!(files.default_enabled, Some(vec!["read".to_owned()]));
        assert!(files.needs_install && files.installed && !files.enabled);
        let tracker = &catalog.entries[1];
        assert_eq!(
            (
                tracker.auth_type.as_str(),
                tracker.installed,
                tracker.enabled
            ),
            ("oauth", true, false),
            "an empty entry is installed, not enabled"
        );
        let kinds: Vec<(&str, &str)> = catalog
            .diagnostics
            .iter()
            .map(|d| (d.name.as_str(), d.kind.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [("c-future", "future_manifest"), ("d-broken", "invalid")]
        );
        assert_eq!(read(None, home.path()), McpCatalog::default());
    }
}
