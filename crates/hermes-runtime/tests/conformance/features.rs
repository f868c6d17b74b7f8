//! Optional features that depend on hosted services or assets (pets, the hosted account's
//! usage): a client that asks unprompted — Hermes's TUI asks for `pet.cells` as it draws — gets
//! the answer for "switched off", never an error.

use serde_json::json;

use crate::harness::Peer;
use crate::shared;

shared!(switched_off_features_answer_without_error, switched_off);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] =
    &[switched_off_features_answer_without_error::CHECK];

async fn switched_off(peer: &Peer) {
    let mut client = peer.connect().await;
    for method in ["pet.info", "pet.info.meta"] {
        let reply = client.call(method, json!({})).await;
        assert_eq!(reply, json!({"enabled": false}), "{method}");
    }
    let cells = client
        .call("pet.cells", json!({"state": "idle", "cols": 20}))
        .await;
    assert_eq!(cells, json!({"enabled": false}));
    let usage = client.call("usage.bars", json!({})).await;
    assert_eq!(usage["ok"], true, "{usage}");
    assert_eq!(usage["available"], false, "{usage}");
}
