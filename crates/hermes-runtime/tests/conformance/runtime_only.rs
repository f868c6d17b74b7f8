//! Behaviour of our runtime that the real Hermes does not show with a fake model.

use serde_json::json;

use crate::harness::{Peer, Target};

/// SIGTERM during a turn: the turn ends as interrupted and state.db stays consistent.
/// (Hermes 0.19 exits on SIGTERM without completing the turn; not a conformance expectation.)
#[tokio::test]
async fn sigterm_ends_in_flight_turns_as_interrupted() {
    let peer = Peer::start(Target::Ours).await;
    let mut client = peer.connect().await;
    let created = client.call("session.create", json!({})).await;
    let live = created["session_id"].clone();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    client
        .call(
            "prompt.submit",
            json!({"session_id": live, "text": "SLOW shutdown"}),
        )
        .await;
    loop {
        if client.event().await["type"] == "message.delta" {
            break;
        }
    }
    let mut peer = peer;
    let (status, events) = tokio::join!(peer.terminate(), client.events_until("message.complete"));
    assert_eq!(events.last().unwrap()["payload"]["status"], "interrupted");
    assert!(status.success(), "{status}");

    // The store is whole: a new process resumes the session with the user message.
    peer.restart().await;
    let mut client = peer.connect().await;
    let resumed = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    assert_eq!(
        resumed["messages"][0],
        json!({"role": "user", "text": "SLOW shutdown"})
    );
    peer.stop().await;
}
