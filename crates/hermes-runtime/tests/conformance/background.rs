//! Work besides the turn a client watches: a session taken over by another connection
//! (`session.activate`), a prompt run in the background, and the background processes and
//! subagents a client may stop — with Hermes's replies, codes and events.

use serde_json::{Value, json};

use crate::harness::{Client, Peer};
use crate::shared;

/// The result of `method` once the session has settled (Hermes stays busy a moment after a
/// turn's `message.complete`; at most 10 s here).
async fn when_idle(client: &mut Client, method: &str, params: Value) -> Value {
    for _ in 0..100 {
        let reply = client.request(method, params.clone()).await;
        let settled = reply.get("error").is_some() || reply["result"]["status"] == "idle";
        if settled || reply["result"]["running"] == false {
            assert!(reply.get("error").is_none(), "{method} failed: {reply}");
            return reply["result"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{method}: the session stayed busy for 10 s");
}

shared!(
    a_session_is_taken_over_by_the_connection_that_activates_it,
    activate
);

async fn activate(peer: &Peer) {
    let mut client = peer.connect().await;
    for params in [json!({}), json!({"session_id": "nope"})] {
        let got = client.refusal("session.activate", params).await;
        assert_eq!(got, (4001, "session not found".to_owned()));
    }
    let created = client.call("session.create", json!({})).await;
    let sid = created["session_id"].clone();
    let fresh = client
        .call("session.activate", json!({"session_id": sid}))
        .await;
    let mut keys: Vec<&str> = fresh
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "info",
            "message_count",
            "messages",
            "running",
            "session_id",
            "session_key",
            "started_at",
            "status"
        ]
    );
    assert_eq!(
        (
            &fresh["message_count"],
            &fresh["messages"],
            &fresh["running"]
        ),
        (&json!(0), &json!([]), &json!(false)),
        "{fresh}"
    );
    // Hermes says `starting` while it still builds the session's agent.
    let status = fresh["status"].as_str().unwrap();
    assert!(["idle", "starting"].contains(&status), "{fresh}");
    assert_eq!(fresh["session_id"], sid);
    assert_eq!(fresh["session_key"], created["stored_session_id"]);

    client.submit(&sid, "one").await;
    client.events_until("message.complete").await;
    let after = when_idle(&mut client, "session.activate", json!({"session_id": sid})).await;
    assert_eq!(
        after["messages"],
        json!([{"role": "user", "text": "one"}, {"role": "assistant", "text": "You said: one"}])
    );
    assert_eq!(after["message_count"], 2);

    // Mid-turn: what runs and for which prompt.
    client.submit(&sid, "SLOW please").await;
    loop {
        if client.event().await["type"] == "message.delta" {
            break;
        }
    }
    let busy = client
        .call("session.activate", json!({"session_id": sid}))
        .await;
    assert_eq!(
        (&busy["running"], &busy["status"]),
        (&json!(true), &json!("working"))
    );
    assert_eq!(busy["inflight"]["user"], "SLOW please", "{busy}");
    let so_far = busy["inflight"]["assistant"].as_str().unwrap_or_default();
    assert!(so_far.contains("tick"), "what has streamed: {busy}");
    assert_eq!(busy["inflight"]["streaming"], true);
    client
        .call("session.interrupt", json!({"session_id": sid}))
        .await;
    client.events_until("message.complete").await;

    // Another connection that activates the session gets its events from then on.
    let mut other = peer.connect().await;
    when_idle(&mut other, "session.activate", json!({"session_id": sid})).await;
    let started = client
        .call(
            "prompt.background",
            json!({"session_id": sid, "text": "hello background"}),
        )
        .await;
    let done = other.any_event("background.complete").await;
    assert_eq!(done["session_id"], sid);
    assert_eq!(done["payload"]["task_id"], started["task_id"]);
}

shared!(
    a_prompt_runs_in_the_background_on_its_own,
    background_prompt
);

async fn background_prompt(peer: &Peer) {
    let mut client = peer.connect().await;
    let unknown = json!({"session_id": "nope", "text": "x"});
    let got = client.refusal("prompt.background", unknown).await;
    assert_eq!(got, (4001, "session not found".to_owned()));
    let sid = client.new_session().await;
    let empty = json!({"session_id": sid, "text": ""});
    let got = client.refusal("prompt.background", empty).await;
    assert_eq!(got, (4012, "text required".to_owned()));

    let started = client
        .call(
            "prompt.background",
            json!({"session_id": sid, "text": "hello background"}),
        )
        .await;
    let task = started["task_id"].as_str().unwrap().to_owned();
    assert!(
        task.len() == 9
            && task.starts_with("bg_")
            && task[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{task}"
    );
    let done = client.any_event("background.complete").await;
    assert_eq!(done["session_id"], sid);
    assert_eq!(
        done["payload"],
        json!({"task_id": task, "text": "You said: hello background"})
    );
    // It ran with no history of the asking session, which it left as it was.
    let asked = peer.model.streamed_requests().pop().expect("a request");
    let users: Vec<&Value> = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "{asked}");
    assert_eq!(users[0]["content"], "hello background");
    let history = client
        .call("session.history", json!({"session_id": sid}))
        .await;
    assert_eq!(history["count"], 0, "{history}");

    // A turn running on the session does not hold it up.
    client.submit(&sid, "SLOW please").await;
    let again = client
        .call(
            "prompt.background",
            json!({"session_id": sid, "text": "while busy"}),
        )
        .await;
    loop {
        let done = client.any_event("background.complete").await;
        if done["payload"]["task_id"] == again["task_id"] {
            assert_eq!(done["payload"]["text"], "You said: while busy");
            break;
        }
    }
    client
        .call("session.interrupt", json!({"session_id": sid}))
        .await;
    client.events_until("message.complete").await;
}

shared!(
    background_processes_and_subagents_are_stopped_by_id,
    processes_and_subagents
);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    a_session_is_taken_over_by_the_connection_that_activates_it::CHECK,
    a_prompt_runs_in_the_background_on_its_own::CHECK,
    background_processes_and_subagents_are_stopped_by_id::CHECK,
];

async fn processes_and_subagents(peer: &Peer) {
    let mut client = peer.connect().await;
    for params in [json!({}), json!({"subagent_id": "  "})] {
        let got = client.refusal("subagent.interrupt", params).await;
        assert_eq!(got, (4000, "subagent_id required".to_owned()));
    }
    for (id, shown) in [
        (json!("sa-0-deadbeef"), "sa-0-deadbeef"),
        (json!(123), "123"),
    ] {
        let none = client
            .call("subagent.interrupt", json!({"subagent_id": id}))
            .await;
        assert_eq!(none, json!({"found": false, "subagent_id": shown}));
    }
    assert_eq!(
        client.call("process.stop", json!({})).await,
        json!({"killed": 0})
    );
    let got = client
        .refusal("process.kill", json!({"session_id": "nope"}))
        .await;
    assert_eq!(got, (4001, "session not found".to_owned()));
    let sid = client.new_session().await;
    let got = client
        .refusal("process.kill", json!({"session_id": sid}))
        .await;
    assert_eq!(got, (4012, "process_id required".to_owned()));
    let unknown = json!({"session_id": sid, "process_id": "proc_000000000000"});
    let got = client.refusal("process.kill", unknown).await;
    assert_eq!(got, (4044, "no such process: proc_000000000000".to_owned()));
}
