//! Live and stored sessions: ids, listing, history, titles, usage, closing, resuming, deleting.

use serde_json::{Value, json};

use crate::conformance;
use crate::harness::{Client, Peer, PeerOptions, Target, streamed_text};
use crate::shared;

shared!(the_session_lifecycle_matches_hermes, lifecycle);
conformance!(stored_sessions_survive_a_restart, restart);
conformance!(a_profile_keeps_its_own_state_db, profiles);
conformance!(the_model_titles_a_session_after_its_first_exchange, titles);
shared!(a_turn_ends_with_the_sessions_info, info_after_turns);
conformance!(
    a_dropped_clients_sessions_are_closed_after_the_grace_unless_they_run_a_turn,
    orphans
);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    the_session_lifecycle_matches_hermes::CHECK,
    a_turn_ends_with_the_sessions_info::CHECK,
];

/// Creates a session and runs one prompt to completion; returns (live id, stored id).
pub async fn prompted_session(client: &mut Client, text: &str) -> (String, String) {
    let created = client
        .call("session.create", json!({"source": "conformance"}))
        .await;
    let live = created["session_id"].as_str().unwrap().to_owned();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    let submitted = client.submit(&live, text).await;
    assert_eq!(submitted["status"], "streaming");
    let events = client.events_until("message.complete").await;
    assert_eq!(events.last().unwrap()["payload"]["status"], "complete");
    (live, stored)
}

fn is_hex8(id: &str) -> bool {
    id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `YYYYMMDD_HHMMSS_xxxxxx`
fn is_stored_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('_').collect();
    parts.len() == 3
        && parts[0].len() == 8
        && parts[1].len() == 6
        && parts[2].len() == 6
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

async fn lifecycle(peer: &Peer) {
    let mut client = peer.connect().await;

    let created = client
        .call("session.create", json!({"source": "conformance"}))
        .await;
    let live = created["session_id"].as_str().unwrap().to_owned();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    assert!(is_hex8(&live), "live id {live}");
    assert!(is_stored_id(&stored), "stored id {stored}");
    assert_eq!(created["message_count"], 0);
    assert_eq!(created["messages"], json!([]));
    assert_eq!(created["info"]["model"], "fake-model");

    // Nothing is stored before the first prompt (the runtime may hold other checks' sessions).
    let listed = client.call("session.list", json!({})).await;
    let is_this = |listed: &Value| listed["id"] == stored.as_str();
    assert!(
        !listed["sessions"].as_array().unwrap().iter().any(is_this),
        "{listed}"
    );
    assert_ne!(
        client.call("session.most_recent", json!({})).await["session_id"],
        stored.as_str()
    );

    client.submit(&live, "hello there").await;
    let events = client.events_until("message.complete").await;
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(complete["text"], "You said: hello there");
    assert_eq!(streamed_text(&events).trim(), "You said: hello there");

    let history = client
        .call("session.history", json!({"session_id": live}))
        .await;
    assert_eq!(
        history,
        json!({"count": 2, "messages": [
            {"role": "user", "text": "hello there"},
            {"role": "assistant", "text": "You said: hello there"}
        ]})
    );
    let listed = client.call("session.list", json!({})).await["sessions"].clone();
    let this = (listed.as_array().unwrap().iter())
        .find(|listed| is_this(listed))
        .unwrap_or_else(|| panic!("{stored} listed: {listed}"));
    assert_eq!(this["message_count"], 2);
    assert_eq!(this["preview"], "hello there");
    assert_eq!(this["source"], "conformance");
    let recent = client.call("session.most_recent", json!({})).await;
    assert_eq!(recent["session_id"], stored.as_str());

    let usage = client
        .call("session.usage", json!({"session_id": live}))
        .await;
    assert_eq!(usage["calls"], 1, "{usage}");
    assert!(usage["input"].as_u64().unwrap() > 0 && usage["output"].as_u64().unwrap() > 0);
    // How full the context window is: the last call's prompt, of the configured window.
    assert_eq!(usage["context_max"], 131072, "{usage}");
    assert_eq!(usage["context_used"], usage["input"], "{usage}");
    let used = usage["context_used"].as_f64().unwrap();
    let percent = (used / 131072.0 * 100.0).round();
    assert_eq!(usage["context_percent"], percent as u64, "{usage}");

    let titled = client
        .call(
            "session.title",
            json!({"session_id": live, "title": "Lifecycle greetings"}),
        )
        .await;
    assert_eq!(titled["title"], "Lifecycle greetings");
    let title = client
        .call("session.title", json!({"session_id": live}))
        .await;
    assert_eq!(
        (&title["title"], &title["session_key"]),
        (&json!("Lifecycle greetings"), &json!(stored))
    );
    assert_eq!(
        client
            .error_code("session.title", json!({"session_id": live, "title": " "}))
            .await,
        4021
    );

    let active = client
        .call("session.active_list", json!({"current_session_id": live}))
        .await["sessions"]
        .clone();
    let mine = active
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == live.as_str())
        .expect("the live session is active");
    assert_eq!(mine["session_key"], stored.as_str());
    assert_eq!(mine["current"], true);
    assert_eq!(mine["status"], "idle");
    assert_eq!(mine["title"], "Lifecycle greetings");

    // Unknown ids, by kind: a live session that is missing or unknown is 4001; a stored one
    // that is not given is 4006, unknown 4007.
    assert_eq!(
        client
            .error_code("prompt.submit", json!({"text": "x"}))
            .await,
        4001
    );
    assert_eq!(client.error_code("session.resume", json!({})).await, 4006);
    assert_eq!(
        client
            .error_code(
                "prompt.submit",
                json!({"session_id": "00000000", "text": "x"})
            )
            .await,
        4001
    );
    assert_eq!(
        client
            .error_code(
                "session.resume",
                json!({"session_id": "20000101_000000_abcdef"})
            )
            .await,
        4007
    );
    assert_eq!(
        client
            .error_code("session.delete", json!({"session_id": stored}))
            .await,
        4023,
        "a live session cannot be deleted"
    );

    // Resuming a stored session that is live gives back that live session.
    let again = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    assert_eq!(again["session_id"], live.as_str());

    assert_eq!(
        client
            .call("session.close", json!({"session_id": live}))
            .await["closed"],
        true
    );
    assert_eq!(
        client
            .call("session.close", json!({"session_id": live}))
            .await["closed"],
        false
    );

    // Resuming it now: a new live id, with the stored messages.
    let resumed = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    let new_live = resumed["session_id"].as_str().unwrap();
    assert!(is_hex8(new_live) && new_live != live, "{resumed}");
    assert_eq!(resumed["resumed"], stored.as_str());
    assert_eq!(resumed["message_count"], 2);
    assert_eq!(resumed["messages"], history["messages"]);
    // And by title.
    client
        .call("session.close", json!({"session_id": new_live}))
        .await;
    let by_title = client
        .call(
            "session.resume",
            json!({"session_id": "Lifecycle greetings"}),
        )
        .await;
    assert_eq!(by_title["resumed"], stored.as_str());
    let by_title_live = by_title["session_id"].as_str().unwrap().to_owned();
    client
        .call("session.close", json!({"session_id": by_title_live}))
        .await;

    assert_eq!(
        client
            .call("session.delete", json!({"session_id": stored}))
            .await["deleted"],
        stored.as_str()
    );
    assert_eq!(
        client
            .error_code("session.delete", json!({"session_id": stored}))
            .await,
        4007
    );
    let listed = client.call("session.list", json!({})).await;
    assert!(
        !listed["sessions"].as_array().unwrap().iter().any(is_this),
        "{listed}"
    );
}

async fn restart(target: Target) {
    let mut peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let (_, stored) = prompted_session(&mut client, "remember me").await;
    drop(client);
    peer.restart().await;

    let mut client = peer.connect().await;
    let resumed = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    assert_eq!(resumed["resumed"], stored.as_str());
    assert_eq!(
        resumed["messages"],
        json!([
            {"role": "user", "text": "remember me"},
            {"role": "assistant", "text": "You said: remember me"}
        ])
    );
    // The conversation goes on: the model gets the earlier messages too.
    let live = resumed["session_id"].as_str().unwrap().to_owned();
    client.submit(&live, "and now").await;
    client.events_until("message.complete").await;
    let last = peer.model.streamed_requests().pop().unwrap();
    let texts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        texts.ends_with(&[
            "remember me".to_owned(),
            "You said: remember me".to_owned(),
            "and now".to_owned()
        ]),
        "{texts:?}"
    );
    peer.stop().await;
}

async fn profiles(target: Target) {
    let peer = Peer::start(target).await;
    let profile_home = peer.home.join("profiles").join("work");
    std::fs::create_dir_all(&profile_home).unwrap();
    std::fs::copy(
        peer.home.join("config.yaml"),
        profile_home.join("config.yaml"),
    )
    .unwrap();

    let mut client = peer.connect().await;
    // Named in another case: the same profile, as Hermes reads names.
    let created = client
        .call(
            "session.create",
            json!({"profile": "Work", "source": "conformance"}),
        )
        .await;
    let live = created["session_id"].as_str().unwrap().to_owned();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    client.submit(&live, "in the work profile").await;
    client.events_until("message.complete").await;
    client
        .call("session.close", json!({"session_id": live}))
        .await;

    // The session lives in the profile's own state.db, not in the root's.
    assert!(profile_home.join("state.db").is_file());
    if target == Target::Hermes {
        // Hermes 0.19 keeps to the rest only when it is not busy: under load its background
        // threads (title generation, sometimes the turn's own writes) lose the profile and
        // write into the root's state.db (seen with 12 Hermes peers at once; see
        // docs/runtimes.md). Checked for ours, not expected of Hermes.
        peer.stop().await;
        return;
    }
    let root_sessions = client.call("session.list", json!({})).await["sessions"].clone();
    assert!(
        !root_sessions.to_string().contains(&stored),
        "the root lists the profile's session: {root_sessions}"
    );
    assert_eq!(
        client
            .error_code("session.resume", json!({"session_id": stored}))
            .await,
        4007,
        "not in the root profile"
    );
    let resumed = client
        .call(
            "session.resume",
            json!({"session_id": stored, "profile": "work"}),
        )
        .await;
    assert_eq!(resumed["message_count"], 2, "{resumed}");
    peer.stop().await;
}

async fn titles(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let (live, stored) = prompted_session(&mut client, "plan a trip to Lisbon").await;
    // Asked once, unstreamed, with the exchange; the fake model answers `OK`.
    let titled = client.any_event("session.title").await;
    assert_eq!(
        titled["payload"],
        json!({"session_id": stored, "title": "OK"}),
        "{titled}"
    );
    assert_eq!(titled["session_id"], live.as_str());
    let asked: Vec<Value> = peer
        .model
        .requests()
        .into_iter()
        .filter(|r| r["stream"] != true)
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let messages = asked[0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "User: plan a trip to Lisbon\n\nAssistant: You said: plan a trip to Lisbon"})
    );
    assert_eq!(asked[0]["temperature"], 0.3, "{}", asked[0]);
    assert!(asked[0].get("tools").is_none(), "{}", asked[0]);
    let listed = client.call("session.list", json!({})).await["sessions"].clone();
    assert_eq!(listed[0]["title"], "OK", "{listed}");

    // A titled session is not asked about again; another session with the same answer gets the
    // next title of its lineage.
    client.submit(&live, "and then Porto").await;
    client.events_until("message.complete").await;
    let (_, second) = prompted_session(&mut client, "something else").await;
    let titled = client.any_event("session.title").await;
    assert_eq!(
        titled["payload"],
        json!({"session_id": second, "title": "OK #2"}),
        "{titled}"
    );
    let asked = peer
        .model
        .requests()
        .into_iter()
        .filter(|r| r["stream"] != true)
        .count();
    assert_eq!(asked, 2);
    peer.stop().await;
}

async fn info_after_turns(peer: &Peer) {
    let mut client = peer.connect().await;
    let (live, stored) = prompted_session(&mut client, "hello").await;
    // After `message.complete`: the session's info, no longer running, with the turn's usage.
    let info = client.any_event("session.info").await;
    assert_eq!(info["session_id"], live.as_str());
    let payload = &info["payload"];
    assert_eq!(
        (
            &payload["running"],
            &payload["stored_session_id"],
            &payload["model"]
        ),
        (&json!(false), &json!(stored), &json!("fake-model")),
        "{payload}"
    );
    assert_eq!(payload["usage"]["calls"], 1, "{payload}");
    assert!(
        payload["tools"].as_object().is_some_and(|t| !t.is_empty()),
        "{payload}"
    );
}

/// A connection that drops leaves its live sessions for a client to resume. Once the grace
/// (`HERMES_TUI_WS_ORPHAN_REAP_GRACE_S`, 1 s here) has passed, an idle one is closed; one that
/// runs a turn then is kept, its turn runs on, and a client that resumes its stored session is
/// given the same live session and the rest of the turn.
async fn orphans(target: Target) {
    let grace = (
        "HERMES_TUI_WS_ORPHAN_REAP_GRACE_S".to_owned(),
        "1".to_owned(),
    );
    let options = PeerOptions {
        env: vec![grace],
        ..Default::default()
    };
    let peer = Peer::start_with(target, options).await;
    let mut gone = peer.connect().await;
    let idle = gone
        .call("session.create", json!({"source": "conformance"}))
        .await;
    let busy = gone
        .call("session.create", json!({"source": "conformance"}))
        .await;
    // 60 pieces, one every 100 ms: it runs for 6 s.
    gone.submit(&busy["session_id"], "SLOW please").await;
    while gone.event().await["type"] != "message.delta" {}
    drop(gone);

    // The grace has passed; the turn still runs.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let mut back = peer.connect().await;
    let usage = json!({"session_id": idle["session_id"]});
    assert_eq!(
        back.error_code("session.usage", usage).await,
        4001,
        "the idle session is closed"
    );
    let resume = json!({"session_id": busy["stored_session_id"]});
    let resumed = back.call("session.resume", resume).await;
    assert_eq!(resumed["session_id"], busy["session_id"], "{resumed}");
    let events = back.events_until("message.complete").await;
    let complete = &events.last().unwrap()["payload"];
    assert_eq!(complete["status"], "complete", "{complete}");
    let text = complete["text"].as_str().unwrap();
    assert_eq!(text.matches("tick").count(), 60, "{complete}");
    peer.stop().await;
}
