//! The pinned catalog of Hermes 0.19.0's gateway methods, compiled in.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// Where a method acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// On a live session (`session_id`).
    Session,
    /// Per profile (a `profile` param re-binds the home).
    Profile,
    /// Runtime-wide.
    Instance,
}

/// One method of the gateway, as the catalog pins it.
#[derive(Debug, Clone, Deserialize)]
pub struct MethodInfo {
    /// Its name (`session.create`, `prompt.submit`, …).
    pub name: String,
    /// The names of the params it takes.
    pub params: Vec<String>,
    /// What it acts on, which decides who may call it.
    pub scope: Scope,
    /// Changes the runtime's configuration, credentials or components, or runs commands.
    pub admin: bool,
    /// Implemented by `hermes-runtime` (the real Hermes implements them all).
    pub implemented: bool,
}

/// The pinned catalog of a Hermes version's gateway: its methods and its events.
#[derive(Debug, Deserialize)]
pub struct Catalog {
    /// The `hermes-agent` version it was taken from.
    pub hermes_agent_version: String,
    /// Every method, sorted by name.
    pub methods: Vec<MethodInfo>,
    /// Every event type a gateway sends.
    pub events: Vec<String>,
    #[serde(skip)]
    by_name: HashMap<String, usize>,
}

/// Methods that read a file of the runtime's machine given by a `path` param (to attach it).
const READS_A_PATH: &[&str] = &[
    "file.attach",
    "image.attach",
    "pdf.attach",
    "spawn_tree.load",
];

impl MethodInfo {
    /// Whether calling it with `params` needs the `admin` scope: an administering method; a
    /// read that hands back credentials — `config.get` of the `full` file, which Hermes returns
    /// with its model and MCP keys as they are; or a read of any file of the runtime's machine
    /// by its path, as the Desktop file routes are.
    pub fn administers(&self, params: &serde_json::Value) -> bool {
        self.admin
            || (self.name == "config.get" && params["key"] == "full")
            || (READS_A_PATH.contains(&self.name.as_str()) && !params["path"].is_null())
    }
}

impl Catalog {
    /// The method called `name`, if the gateway has one.
    pub fn method(&self, name: &str) -> Option<&MethodInfo> {
        self.by_name.get(name).map(|i| &self.methods[*i])
    }
}

/// The catalog of `contracts/hermes-native.catalog.json`.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut catalog: Catalog = serde_json::from_str(include_str!(
            "../../../contracts/hermes-native.catalog.json"
        ))
        .expect("the checked-in catalog parses");
        catalog.by_name = catalog
            .methods
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.clone(), i))
            .collect();
        catalog
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_credentials_or_a_file_by_its_path_administers() {
        let method = |name: &str| catalog().method(name).unwrap();
        let params = |value: serde_json::Value| value;
        assert!(method("config.set").administers(&params(serde_json::json!({}))));
        let get = method("config.get");
        assert!(get.administers(&params(serde_json::json!({"key": "full"}))));
        assert!(!get.administers(&params(serde_json::json!({"key": "mtime"}))));
        for name in READS_A_PATH {
            let attach = method(name);
            assert!(!attach.admin, "{name} is not marked in the catalog");
            assert!(attach.administers(&params(serde_json::json!({"path": "/etc/passwd"}))));
        }
        let bytes = method("file.attach");
        assert!(!bytes.administers(&params(serde_json::json!({"data_url": "data:,x"}))));
        assert!(!method("session.list").administers(&params(serde_json::json!({}))));
    }

    #[test]
    fn the_pinned_catalog_is_hermes_0_19_0() {
        let catalog = catalog();
        assert_eq!(catalog.hermes_agent_version, "0.19.0");
        let create = catalog.method("session.create").unwrap();
        assert_eq!(create.scope, Scope::Profile);
        assert!(create.implemented);
        assert_eq!(
            catalog.method("session.list").unwrap().scope,
            Scope::Instance
        );
        assert_eq!(
            catalog.method("prompt.submit").unwrap().scope,
            Scope::Session
        );
        assert!(catalog.method("config.set").unwrap().admin);
        assert!(catalog.events.iter().any(|e| e == "gateway.ready"));
    }
}
