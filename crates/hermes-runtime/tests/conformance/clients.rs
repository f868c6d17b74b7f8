//! Hermes's own clients, replayed: what its terminal UI (`hermes --tui`, attached to a running
//! gateway) sends as it starts and while it waits, with the params it sends, and what it needs
//! back to show a ready session with its tools, release and context usage — and no error.

use serde_json::json;

use crate::harness::Peer;
use crate::shared;

shared!(the_terminal_ui_starts_without_an_error, terminal_ui_start);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] =
    &[the_terminal_ui_starts_without_an_error::CHECK];

async fn terminal_ui_start(peer: &Peer) {
    let mut client = peer.connect().await;
    // On `gateway.ready`: the slash-command catalog, the whole config, the first-run check.
    let catalog = client.call("commands.catalog", json!({})).await;
    assert!(catalog["pairs"].is_array(), "{catalog}");
    let full = client.call("config.get", json!({"key": "full"})).await;
    assert!(full["config"].is_object(), "{full}");
    let setup = client.call("setup.status", json!({})).await;
    assert_eq!(setup["provider_configured"], true, "{setup}");
    let created = client.call("session.create", json!({"cols": 80})).await;
    let sid = created["session_id"].clone();
    assert!(created["info"].is_object(), "{created}");
    // Then, while it waits, every few seconds.
    let mtime = client.call("config.get", json!({"key": "mtime"})).await;
    assert!(mtime["mtime"].as_f64().unwrap() > 0.0, "{mtime}");
    let active = client
        .call("session.active_list", json!({"current_session_id": sid}))
        .await;
    // Its own session is listed as the current one (a shared runtime lists others' too).
    let sessions = active["sessions"].as_array().unwrap();
    assert!(
        sessions
            .iter()
            .any(|s| s["id"] == sid && s["current"] == true),
        "{active}"
    );
    let pet = client
        .call("pet.cells", json!({"graphics": false, "state": "idle"}))
        .await;
    assert_eq!(pet["enabled"], false, "{pet}");

    // Once the agent is built, `session.info` names its tools and release: the TUI's banner
    // counts the tools, and "ready" needs the release.
    client.submit(&sid, "hello").await;
    let info = client.any_event("session.info").await["payload"].clone();
    let tools = info["tools"].as_object().expect("tools by toolset");
    assert!(
        tools
            .values()
            .any(|names| !names.as_array().unwrap().is_empty()),
        "{info}"
    );
    assert_eq!(info["version"], "0.19.0", "{info}");
    // The answer's usage says how full the context window is (the TUI's gauge).
    let complete = client.any_event("message.complete").await;
    let usage = &complete["payload"]["usage"];
    assert_eq!(usage["context_max"], 131072, "{complete}");
    assert!(usage["context_used"].as_u64().unwrap() > 0, "{complete}");
}
