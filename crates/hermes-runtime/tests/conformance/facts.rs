//! What a client asks about the runtime without running a turn — whether a model provider is
//! set up, the toolsets and tools, the configuration, background work — answered with Hermes's
//! shapes. Hermes's own clients ask some of these unprompted (its TUI, on `gateway.ready`, asks
//! for `setup.status` and `config.get full`, then polls `config.get mtime`).

use serde_json::{Value, json};

use crate::harness::Peer;
use crate::shared;

/// Hermes's code for a live session that does not exist.
const SESSION_NOT_FOUND: i64 = 4001;
/// Hermes's code for a `config.get` key it does not know.
const UNKNOWN_CONFIG_KEY: i64 = 4002;

shared!(setup_and_background_work_are_reported, setup_and_work);

async fn setup_and_work(peer: &Peer) {
    let mut client = peer.connect().await;
    let setup = client.call("setup.status", json!({})).await;
    assert_eq!(setup, json!({"provider_configured": true}));
    let agents = client.call("agents.list", json!({})).await;
    assert_eq!(agents, json!({"processes": []}));
    for params in [json!({}), json!({"session_id": "no-such-session"})] {
        let code = client.error_code("process.list", params).await;
        assert_eq!(code, SESSION_NOT_FOUND);
    }
    let sid = client.new_session().await;
    let processes = client
        .call("process.list", json!({"session_id": sid}))
        .await;
    assert_eq!(processes, json!({"processes": []}));
}

shared!(toolsets_and_tools_are_listed_by_name, toolsets_and_tools);

async fn toolsets_and_tools(peer: &Peer) {
    let mut client = peer.connect().await;
    let toolsets = client.call("toolsets.list", json!({})).await["toolsets"].clone();
    let toolsets = toolsets.as_array().expect("a list of toolsets");
    let names: Vec<&str> = toolsets
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.is_sorted(), "sorted by name: {names:?}");
    for toolset in toolsets {
        assert!(toolset["description"].is_string(), "{toolset}");
        assert!(toolset["tool_count"].is_u64(), "{toolset}");
        assert!(toolset["enabled"].is_boolean(), "{toolset}");
    }
    let terminal = toolsets.iter().find(|t| t["name"] == "terminal");
    assert_eq!(terminal.expect("a terminal toolset")["enabled"], true);

    // `tools.list` is the same list, each toolset with its tools' names.
    let listed = client.call("tools.list", json!({})).await["toolsets"].clone();
    let listed = listed.as_array().expect("a list of toolsets");
    assert_eq!(listed.len(), toolsets.len());
    for (with_tools, toolset) in listed.iter().zip(toolsets) {
        let mut without = with_tools.clone();
        let tools = without.as_object_mut().unwrap().remove("tools").unwrap();
        assert_eq!(&without, toolset);
        assert!(
            tools.as_array().unwrap().iter().all(Value::is_string),
            "{tools}"
        );
    }
    let terminal = listed.iter().find(|t| t["name"] == "terminal").unwrap();
    assert!(
        terminal["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("terminal")),
        "{terminal}"
    );

    // `tools.show`: the enabled tools by toolset, each with the first sentence of its
    // description, and how many there are.
    let shown = client.call("tools.show", json!({})).await;
    let sections = shown["sections"].as_array().expect("sections");
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.is_sorted(), "sorted by name: {names:?}");
    let mut total = 0;
    for section in sections {
        for tool in section["tools"].as_array().unwrap() {
            let description = tool["description"].as_str().unwrap();
            assert!(!description.contains('\n'), "one line: {tool}");
            total += 1;
        }
    }
    assert_eq!(shown["total"], total, "{shown}");
    let terminal = sections.iter().find(|s| s["name"] == "terminal").unwrap();
    let tools = terminal["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.is_sorted(), "sorted by name: {names:?}");
    let tool = tools.iter().find(|t| t["name"] == "terminal");
    let description = tool.expect("the terminal tool")["description"].as_str();
    assert!(!description.unwrap().is_empty(), "{terminal}");
}

shared!(configuration_is_read_by_key, configuration);

async fn configuration(peer: &Peer) {
    let mut client = peer.connect().await;
    let full = client.call("config.get", json!({"key": "full"})).await;
    let config = &full["config"];
    assert_eq!(config["model"]["default"], "fake-model", "{full}");
    assert_eq!(config["model"]["base_url"], peer.model.base_url(), "{full}");
    assert_eq!(config["approvals"]["mode"], "manual", "{full}");
    let mtime = client.call("config.get", json!({"key": "mtime"})).await;
    assert!(mtime["mtime"].as_f64().unwrap() > 0.0, "{mtime}");
    for (key, reply) in [
        ("skin", json!({"value": "default"})),
        ("personality", json!({"value": "none"})),
        ("prompt", json!({"prompt": ""})),
    ] {
        assert_eq!(
            client.call("config.get", json!({"key": key})).await,
            reply,
            "{key}"
        );
    }
    for key in [json!("no-such-key"), json!("")] {
        let code = client.error_code("config.get", json!({"key": key})).await;
        assert_eq!(code, UNKNOWN_CONFIG_KEY, "{key}");
    }
}

shared!(the_command_catalog_has_hermes_shape, command_catalog);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    setup_and_background_work_are_reported::CHECK,
    toolsets_and_tools_are_listed_by_name::CHECK,
    configuration_is_read_by_key::CHECK,
    the_command_catalog_has_hermes_shape::CHECK,
];

/// The catalog's shape (ours offers no commands: see `docs/runtimes.md`).
async fn command_catalog(peer: &Peer) {
    let mut client = peer.connect().await;
    let catalog = client.call("commands.catalog", json!({})).await;
    let is_command = |pair: &Value| {
        let pair = pair.as_array().unwrap();
        pair.len() == 2 && pair[0].as_str().unwrap().starts_with('/') && pair[1].is_string()
    };
    let pairs = catalog["pairs"].as_array().expect("pairs");
    assert!(pairs.iter().all(is_command), "{catalog}");
    for category in catalog["categories"].as_array().expect("categories") {
        assert!(category["name"].is_string(), "{category}");
        for pair in category["pairs"].as_array().unwrap() {
            assert!(pairs.contains(pair), "{pair} of {category} is listed");
        }
    }
    for (alias, command) in catalog["canon"].as_object().expect("canon") {
        assert_eq!(alias, &alias.to_lowercase());
        assert!(command.as_str().unwrap().starts_with('/'), "{command}");
    }
    assert!(catalog["sub"].is_object(), "{catalog}");
    assert!(catalog["skill_count"].is_u64(), "{catalog}");
    assert!(catalog["warning"].is_string(), "{catalog}");
}
