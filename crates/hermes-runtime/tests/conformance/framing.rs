//! JSON-RPC 2.0 framing and error codes.

use serde_json::json;

use crate::harness::{Peer, Target};
use crate::shared;

shared!(framing_errors_have_their_codes, framing_errors);
shared!(replies_are_matched_by_id, replies_by_id);
shared!(pings_are_answered, pings_answered);
shared!(
    pings_are_answered_while_a_turn_streams,
    pings_answered_mid_turn
);

async fn framing_errors(peer: &Peer) {
    let mut client = peer.connect().await; // the first frame is gateway.ready (checked there)

    client.send_raw("{not json").await;
    let parse = client.next_frame().await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["jsonrpc"], "2.0");

    client.send_raw(r#"{"jsonrpc":"2.0","id":"m1"}"#).await;
    let no_method = client.next_frame().await;
    assert_eq!(
        (&no_method["id"], &no_method["error"]["code"]),
        (&json!("m1"), &json!(-32600))
    );

    assert_eq!(client.error_code("no.such.method", json!({})).await, -32601);

    client
        .send_raw(r#"{"jsonrpc":"2.0","id":"p1","method":"session.list","params":[1]}"#)
        .await;
    let bad_params = client.next_frame().await;
    assert_eq!(
        (&bad_params["id"], &bad_params["error"]["code"]),
        (&json!("p1"), &json!(-32602))
    );
}

/// WebSocket pings get their pongs, as a client's heartbeat needs (`GatewayClient` closes a
/// socket that has brought nothing for a while, pongs included).
async fn pings_answered(peer: &Peer) {
    let mut client = peer.connect().await;
    client.ping(b"are you there").await;
    // Still a working gateway after it.
    let reply = client.request("session.list", json!({"limit": 1})).await;
    assert!(reply["result"]["sessions"].is_array(), "{reply}");
}

/// A runtime busy with a turn answers pings too, before the turn ends: the heartbeat does not
/// take a long turn for a hang. (How long each pong took is printed, not judged.)
async fn pings_answered_mid_turn(peer: &Peer) {
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    // Six seconds of streaming, a piece every 100 ms.
    client.submit(&live, "SLOW please").await;
    while client.event().await["type"] != "message.delta" {}
    for n in 0..3 {
        let asked = std::time::Instant::now();
        client.ping(format!("mid-turn {n}").as_bytes()).await;
        eprintln!("{:?}: pong {n} after {:?}", peer.target, asked.elapsed());
    }
    assert!(
        !client.has_waiting("message.complete"),
        "the pongs came while the turn streamed"
    );
    client
        .call("session.interrupt", json!({"session_id": live}))
        .await;
    let rest = client.events_until("message.complete").await;
    assert_eq!(rest.last().unwrap()["payload"]["status"], "interrupted");
}

async fn replies_by_id(peer: &Peer) {
    let mut client = peer.connect().await;
    // The home's state.db is made first: Hermes 0.19 opening it from several requests at once
    // on a fresh home can fail one of them (`vtable constructor failed: messages_fts`, seen in
    // CI), which is not what this check is about.
    client.call("session.list", json!({})).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let method = if i % 2 == 0 {
            "session.create"
        } else {
            "session.list"
        };
        ids.push((client.send_request(method, json!({})).await, method));
    }
    // Replies may come in any order; each id gets exactly its own method's reply.
    let mut replies = std::collections::HashMap::new();
    while replies.len() < ids.len() {
        let frame = client.next_frame().await;
        if let Some(id) = frame["id"].as_str() {
            assert!(
                replies.insert(id.to_owned(), frame.clone()).is_none(),
                "twice: {frame}"
            );
        }
    }
    for (id, method) in ids {
        let reply = &replies[&id];
        let result = &reply["result"];
        match method {
            "session.create" => assert!(result["session_id"].is_string(), "{reply}"),
            _ => assert!(result["sessions"].is_array(), "{reply}"),
        }
    }
}

shared!(generated_namespaces_call_the_runtime, generated_namespaces);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    framing_errors_have_their_codes::CHECK,
    replies_are_matched_by_id::CHECK,
    pings_are_answered::CHECK,
    pings_are_answered_while_a_turn_streams::CHECK,
    generated_namespaces_call_the_runtime::CHECK,
];

/// The generated native namespaces work against both; what our runtime lacks is `Unsupported`.
async fn generated_namespaces(peer: &Peer) {
    use hermes_native::{GatewayClient, Native, NativeError, SessionListParams};
    let gateway = GatewayClient::connect(
        &format!("ws://127.0.0.1:{}/api/ws", peer.port),
        crate::harness::TOKEN,
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("connect");
    let native = Native::new(&gateway);
    let listed = native
        .session()
        .list(&SessionListParams {
            limit: Some(5),
            ..Default::default()
        })
        .await
        .expect("session.list");
    // Typed and decoded; the runtime may hold other checks' sessions, never more than asked.
    assert!(listed.sessions.len() <= 5, "{listed:?}");
    let shown = native.plugins().list().await;
    match peer.target {
        Target::Ours => assert!(
            matches!(&shown, Err(NativeError::Unsupported { method }) if method == "plugins.list"),
            "{shown:?}"
        ),
        Target::Hermes => assert!(shown.is_ok(), "{shown:?}"),
    }
    drop(gateway);
}
