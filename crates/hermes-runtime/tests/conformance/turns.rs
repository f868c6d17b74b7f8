//! Prompts: streaming, interrupting, a second prompt while one streams, model failures.

use serde_json::json;

use crate::harness::{Peer, last_message_to_model, lifecycle_notes, streamed_text, types};
use crate::shared;

shared!(a_prompt_streams_start_deltas_complete, streaming);
shared!(an_interrupt_ends_the_turn_as_interrupted, interrupt);
shared!(a_prompt_while_streaming_is_queued_and_interrupts, busy);
shared!(
    a_prompt_from_another_connection_takes_the_running_turns_events,
    busy_elsewhere
);
shared!(
    a_session_closed_mid_turn_sends_nothing_more,
    closed_mid_turn
);
shared!(
    a_failing_model_ends_the_turn_with_status_error,
    model_failure
);
shared!(
    a_model_call_that_fails_once_is_tried_again_unseen,
    model_retry
);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    a_prompt_streams_start_deltas_complete::CHECK,
    an_interrupt_ends_the_turn_as_interrupted::CHECK,
    a_prompt_while_streaming_is_queued_and_interrupts::CHECK,
    a_prompt_from_another_connection_takes_the_running_turns_events::CHECK,
    a_session_closed_mid_turn_sends_nothing_more::CHECK,
    a_failing_model_ends_the_turn_with_status_error::CHECK,
    a_model_call_that_fails_once_is_tried_again_unseen::CHECK,
];

async fn streaming(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let reply = client
        .request(
            "prompt.submit",
            json!({"session_id": live, "text": "one two three"}),
        )
        .await;
    assert_eq!(reply["result"]["status"], "streaming");
    let events = client.events_until("message.complete").await;
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"message.start"), "{kinds:?}");
    assert!(
        kinds[1..kinds.len() - 1]
            .iter()
            .all(|k| *k == "message.delta"),
        "{kinds:?}"
    );
    assert!(kinds.len() >= 4, "streamed in pieces: {kinds:?}");
    assert!(events.iter().all(|e| e["session_id"] == live));
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(complete["status"], "complete");
    assert_eq!(complete["text"], "You said: one two three");
    assert_eq!(streamed_text(&events), "You said: one two three");
    let usage = &complete["usage"];
    assert_eq!(usage["model"], "fake-model");
    assert_eq!(usage["calls"], 1);
    assert_eq!(
        usage["total"].as_u64(),
        Some(usage["input"].as_u64().unwrap() + usage["output"].as_u64().unwrap())
    );
    // The model got the user's text as the last message, with streaming on.
    let last = last_message_to_model(&peer.model);
    assert_eq!(
        (&last["role"], &last["content"]),
        (&json!("user"), &json!("one two three"))
    );
}

async fn interrupt(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "SLOW please").await;
    let mut seen = String::new();
    loop {
        let event = client.event().await;
        if event["type"] == "message.delta" {
            seen.push_str(event["payload"]["text"].as_str().unwrap());
            if seen.matches("tick").count() == 2 {
                break;
            }
        }
    }
    let interrupted = client
        .call("session.interrupt", json!({"session_id": live}))
        .await;
    assert_eq!(interrupted["status"], "interrupted");
    let rest = client.events_until("message.complete").await;
    seen.push_str(&streamed_text(&rest));
    let complete = &rest.last().unwrap()["payload"];
    assert_eq!(complete["status"], "interrupted");
    let text = complete["text"].as_str().unwrap();
    assert!(text.starts_with("tick tick"), "{text}");
    assert!(text.matches("tick").count() < 60, "stopped early: {text}");
    assert_eq!(text.trim(), seen.trim(), "the text is what was streamed");
    // Interrupting an idle session is harmless.
    let idle = client
        .call("session.interrupt", json!({"session_id": live}))
        .await;
    assert_eq!(idle["status"], "interrupted");
}

async fn busy(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "SLOW first").await;
    loop {
        if client.event().await["type"] == "message.delta" {
            break;
        }
    }
    let second = client.submit(&live, "second").await;
    assert_eq!(second["status"], "queued");
    let first = client.events_until("message.complete").await;
    assert_eq!(first.last().unwrap()["payload"]["status"], "interrupted");
    let next = client.events_until("message.complete").await;
    assert_eq!(next.first().unwrap()["type"], "message.start");
    let complete = &next.last().unwrap()["payload"];
    assert_eq!(
        (&complete["status"], &complete["text"]),
        (&json!("complete"), &json!("You said: second"))
    );
}

/// A prompt sent by another connection to a live session that runs a turn is queued, and the
/// session is bound to that connection at once: the interrupted turn's end goes there, as does
/// the next turn, and the first connection hears no more of the session.
async fn busy_elsewhere(peer: &Peer) {
    let mut first = peer.connect().await;
    let live = first.new_session().await;
    first.submit(&live, "SLOW first").await;
    while first.event().await["type"] != "message.delta" {}
    let mut other = peer.connect().await;
    assert_eq!(other.submit(&live, "second").await["status"], "queued");
    let ended = other.events_until("message.complete").await;
    assert_eq!(ended.last().unwrap()["payload"]["status"], "interrupted");
    let next = other.events_until("message.complete").await;
    let complete = &next.last().unwrap()["payload"];
    assert_eq!(
        (&complete["status"], &complete["text"]),
        (&json!("complete"), &json!("You said: second"))
    );
    // A round trip reads whatever the first connection was sent before its reply.
    first
        .call("session.usage", json!({"session_id": live}))
        .await;
    assert!(!first.has_waiting("message.complete"));
}

/// A session closed while it runs a turn is gone at once, and its client hears nothing more of
/// it: no end of that turn.
async fn closed_mid_turn(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "SLOW first").await;
    while client.event().await["type"] != "message.delta" {}
    let closed = client
        .call("session.close", json!({"session_id": live}))
        .await;
    assert_eq!(closed, json!({"closed": true}));
    // A moment for an end to come, had there been one; the round trip reads what came.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let usage = json!({"session_id": live});
    assert_eq!(client.error_code("session.usage", usage).await, 4001);
    assert!(!client.has_waiting("message.complete"));
}

async fn model_failure(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "FAIL please").await;
    let events = client.all_events_until("message.complete").await;
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(complete["status"], "error", "{complete}");
    // A server error may pass: the call is made three times (Hermes's `agent.api_max_retries`)
    // with a pause between, and the client is told of the retries once they all failed.
    assert_eq!(
        complete["text"],
        "API call failed after 3 retries: HTTP 500: the fake model was asked to fail",
        "the model's error reaches the client: {complete}"
    );
    let asked = peer
        .model
        .streamed_requests()
        .iter()
        .filter(|r| r["messages"].to_string().contains("FAIL please"))
        .count();
    assert_eq!(asked, 3, "three attempts");
    let notes = lifecycle_notes(&events);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes[0].starts_with("⏳ Retrying in ") && notes[0].ends_with("s (attempt 1/3)..."),
        "{notes:?}"
    );
    assert!(notes[1].ends_with("s (attempt 2/3)..."), "{notes:?}");
    assert_eq!(
        notes[2],
        "❌ API failed after 3 retries — HTTP 500: the fake model was asked to fail"
    );
    // The session is usable again afterwards. The prompt left unanswered goes to the model with
    // the next one, in one user message (the roles must alternate).
    client.submit(&live, "still there?").await;
    let events = client.events_until("message.complete").await;
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(complete["status"], "complete");
    let last = last_message_to_model(&peer.model);
    assert_eq!(
        (&last["role"], &last["content"]),
        (&json!("user"), &json!("FAIL please\n\nstill there?"))
    );
    assert_eq!(complete["text"], "You said: FAIL please\n\nstill there?");
}

async fn model_retry(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    client.submit(&live, "FLAKY once").await;
    let events = client.all_events_until("message.complete").await;
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(
        (&complete["status"], &complete["text"]),
        (&json!("complete"), &json!("You said: FLAKY once")),
        "{complete}"
    );
    let asked = peer.model.streamed_requests();
    let asked = asked
        .iter()
        .filter(|r| r.to_string().contains("FLAKY once"));
    assert_eq!(asked.count(), 2, "asked twice");
    // A retry that worked is not reported.
    assert_eq!(lifecycle_notes(&events), Vec::<&str>::new());
    assert_eq!(streamed_text(&events), "You said: FLAKY once");
}
