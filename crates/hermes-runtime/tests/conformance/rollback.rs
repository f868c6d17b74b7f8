//! Checkpoints of what the agent changed, and going back to one.

use serde_json::{Value, json};

use crate::conformance;
use crate::harness::{Peer, PeerOptions, Target};
use crate::shared;

conformance!(a_changed_file_is_restored_from_its_checkpoint, rollback);
shared!(without_checkpoints_none_are_listed, no_checkpoints);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[without_checkpoints_none_are_listed::CHECK];

/// Hermes's gateway keeps checkpoints when `hermes --tui --checkpoints` starts it: that flag
/// sets this variable.
fn with_checkpoints() -> PeerOptions {
    PeerOptions {
        env: vec![("HERMES_TUI_CHECKPOINTS".to_owned(), "1".to_owned())],
        ..Default::default()
    }
}

async fn rollback(target: Target) {
    let peer = Peer::start_with(target, with_checkpoints()).await;
    let notes = peer.work.join("notes.txt");
    std::fs::write(&notes, "first line\n").unwrap();
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let session = json!({"session_id": live});
    assert_eq!(
        client.call("rollback.list", session.clone()).await,
        json!({"enabled": true, "checkpoints": []})
    );
    let text = format!("CALL terminal {}", json!({"command": "rm notes.txt"}));
    client.submit(&live, &text).await;
    client.events_until("message.complete").await;
    assert!(!notes.exists(), "the command ran");

    let listed = client.call("rollback.list", session.clone()).await;
    let checkpoints = listed["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 1, "{listed}");
    let hash = checkpoints[0]["hash"].as_str().unwrap().to_owned();
    assert_eq!(hash.len(), 40, "{listed}");
    assert!(
        checkpoints[0]["timestamp"].as_str().unwrap().contains('T'),
        "{listed}"
    );

    let diff = client
        .call("rollback.diff", json!({"session_id": live, "hash": "1"}))
        .await;
    assert!(
        diff["stat"].as_str().unwrap().contains("notes.txt"),
        "{diff}"
    );
    assert!(
        diff["diff"].as_str().unwrap().contains("-first line"),
        "{diff}"
    );

    let restored = client
        .call(
            "rollback.restore",
            json!({"session_id": live, "hash": hash}),
        )
        .await;
    assert_eq!(
        (
            &restored["success"],
            &restored["restored_to"],
            &restored["reason"],
            &restored["history_removed"]
        ),
        (
            &json!(true),
            &json!(&hash[..8]),
            &json!("before terminal: rm notes.txt"),
            &json!(4)
        ),
        "{restored}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first line\n");
    // The state before the restore was kept too.
    let listed = client.call("rollback.list", session.clone()).await;
    assert_eq!(
        listed["checkpoints"].as_array().unwrap().len(),
        2,
        "{listed}"
    );

    // One file only: the last exchange stays (the file's state first snapshot too).
    std::fs::write(&notes, "changed\n").unwrap();
    let one = json!({"session_id": live, "hash": hash, "file_path": "notes.txt"});
    let restored = client.call("rollback.restore", one).await;
    assert_eq!(
        (
            &restored["success"],
            &restored["file"],
            restored.get("history_removed")
        ),
        (&json!(true), &json!("notes.txt"), None),
        "{restored}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first line\n");
    let outside = json!({"session_id": live, "hash": hash, "file_path": "../elsewhere"});
    assert_eq!(
        client.call("rollback.restore", outside).await,
        json!({"success": false,
               "error": "File path escapes the working directory via traversal: '../elsewhere'"})
    );

    // Refusals, in Hermes's codes.
    let code = |reply: Value| reply["error"]["code"].as_i64();
    let no_hash = client.request("rollback.diff", session.clone()).await;
    assert_eq!(code(no_hash), Some(4014));
    let too_far = json!({"session_id": live, "hash": "9"});
    let (number, message) = client.refusal("rollback.restore", too_far.clone()).await;
    assert_eq!(
        (number, message.as_str()),
        (5021, "Invalid checkpoint number. Use 1-3.")
    );
    let (number, message) = client.refusal("rollback.diff", too_far).await;
    assert_eq!(
        (number, message.as_str()),
        (5022, "Invalid checkpoint number. Use 1-3.")
    );
    let unknown = json!({"session_id": live, "hash": "deadbeef"});
    let failed = client.call("rollback.restore", unknown).await;
    assert_eq!(
        failed["success"], false,
        "a checkpoint that does not exist: {failed}"
    );
    let gone = client
        .request("rollback.list", json!({"session_id": "nope"}))
        .await;
    assert_eq!(code(gone), Some(4001));
    peer.stop().await;
}

async fn no_checkpoints(peer: &Peer) {
    let notes = peer.work.join("notes.txt");
    std::fs::write(&notes, "kept\n").unwrap();
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let text = format!("CALL terminal {}", json!({"command": "rm notes.txt"}));
    client.submit(&live, &text).await;
    client.events_until("message.complete").await;
    assert_eq!(
        client
            .call("rollback.list", json!({"session_id": live}))
            .await,
        json!({"enabled": false, "checkpoints": []})
    );
}
