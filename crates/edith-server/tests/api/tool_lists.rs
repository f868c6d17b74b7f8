//! Runtimes keep a profile's tool list between turns (told on the MCP endpoint's event stream
//! when it changes), and a turn started after a change always sees it.

use serde_json::{Value, json};

use crate::metrics::{sample, scrape};
use crate::{Ctx, echo_tool_host};

const SECRET: &str = "tool-lists-secret-0123456789";
const MCP_POSTS: &str = r#"edith_http_requests_total{method="POST",route="/v1/instances/{instance_id}/profiles/{profile_id}/mcp",status="200"}"#;

/// The tool calls a turn's log shows, by name.
fn tools_called(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["type"] == "tool.completed")
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

/// The tool `echo`, served by a tool host in this process; its id.
async fn echo_tool(ctx: &Ctx) -> String {
    let url = echo_tool_host(SECRET).await;
    let body = json!({"url": url, "secret": SECRET});
    let (status, host) = ctx.post("/v1/tool-hosts", &body.to_string()).await;
    assert_eq!(status, 201, "{host}");
    let body = json!({"name": "echo", "description": "Echoes its text",
        "input_schema": {"type": "object"}, "host_id": host["id"]});
    let (status, tool) = ctx.post("/v1/tools", &body.to_string()).await;
    assert_eq!(status, 201, "{tool}");
    tool["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn runtimes_keep_a_profiles_tools_until_they_change_and_a_turn_after_a_change_sees_it() {
    let ctx = Ctx::start().await;
    let tool = echo_tool(&ctx).await;

    for iid in [
        ctx.ready_instance().await,
        ctx.process_instance("hermes-runtime").await,
    ] {
        let profiles = format!("/v1/instances/{iid}/profiles");
        let (_, profile) = ctx.post(&profiles, r#"{"name": "lists"}"#).await;
        let pid = profile["id"].as_str().unwrap();
        let attachment = format!("{profiles}/{pid}/tools/{tool}");

        // The first turn lists the tools; the next ones ask nothing of the endpoint.
        let (turn, _) = ctx.turn(&iid, pid, "hello").await;
        assert_eq!(turn["state"], "completed", "{turn}");
        let posts = sample(&scrape(&ctx).await, MCP_POSTS);
        assert!(posts >= 1.0, "the first turn listed the tools");
        for _ in 0..3 {
            let (turn, _) = ctx.turn(&iid, pid, "hello").await;
            assert_eq!(turn["state"], "completed", "{turn}");
        }
        assert_eq!(
            sample(&scrape(&ctx).await, MCP_POSTS),
            posts,
            "kept between turns"
        );

        // Attached, the very next turn calls it; detached, the very next turn does not have it.
        for round in 0..5 {
            let input = format!(r#"echo {{"text": "round {round}"}}"#);
            let (status, attached) = ctx.send(reqwest::Method::PUT, &attachment, None).await;
            assert_eq!(status, 200, "{attached}");
            let (turn, events) = ctx.turn(&iid, pid, &input).await;
            assert_eq!(tools_called(&events), ["echo"], "{events:?}");
            assert_eq!(turn["output"], format!("echo returned round {round}."));
            let (status, detached) = ctx.send(reqwest::Method::DELETE, &attachment, None).await;
            assert_eq!(status, 200, "{detached}");
            let (turn, events) = ctx.turn(&iid, pid, &input).await;
            assert!(tools_called(&events).is_empty(), "{events:?}");
            assert_eq!(turn["output"], format!("You said: {input}"));
        }
    }
}

/// A turn waits for every runtime that keeps the profile's tools to list them after a change,
/// and goes on after a bound when one never does. Shown with a watcher of the test's own
/// beside the instance's runtime: an MCP client that declares it lists again on a change, holds
/// the event stream open, and lists when the test says.
#[tokio::test]
async fn a_turn_waits_until_the_profiles_watchers_listed_its_changed_tools() {
    let ctx = Ctx::start().await;
    let tool = echo_tool(&ctx).await;
    let iid = ctx.ready_instance().await;
    let profiles = format!("/v1/instances/{iid}/profiles");
    let (_, profile) = ctx.post(&profiles, r#"{"name": "watched"}"#).await;
    let pid = profile["id"].as_str().unwrap();
    let attachment = format!("{profiles}/{pid}/tools/{tool}");

    // The watcher: a session that declared it lists again, and its event stream.
    let token = ctx.mcp_token(&iid).await;
    let endpoint = ctx.url(&format!("{profiles}/{pid}/mcp"));
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "test", "version": "0"},
        "capabilities": {"experimental": {edith_mcp::RELISTS_ON_CHANGE: {}}}}});
    let response = http
        .post(&endpoint)
        .bearer_auth(&token)
        .json(&initialize)
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let reply: Value = response.json().await.unwrap();
    assert_eq!(
        reply["result"]["capabilities"]["tools"]["listChanged"],
        true
    );
    let mut stream = http
        .get(&endpoint)
        .bearer_auth(&token)
        .header("mcp-session-id", &session)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let list = async || {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let response = http
            .post(&endpoint)
            .bearer_auth(&token)
            .header("mcp-session-id", &session)
            .json(&body)
            .send()
            .await
            .unwrap();
        let reply: Value = response.json().await.unwrap();
        reply["result"]["tools"].as_array().unwrap().len()
    };

    // Attached: the watcher is told, and a turn started now waits for its listing.
    let (status, _) = ctx.send(reqwest::Method::PUT, &attachment, None).await;
    assert_eq!(status, 200);
    let told = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
        .await
        .expect("told in time")
        .unwrap()
        .unwrap();
    let told = String::from_utf8_lossy(&told);
    assert!(told.contains(edith_mcp::LIST_CHANGED), "{told}");
    let turns = ctx.new_session_turns(&iid, &profile).await;
    let input = json!({"input": r#"echo {"text": "waited"}"#}).to_string();
    let (status, turn) = ctx.post(&turns, &input).await;
    assert_eq!(status, 202, "{turn}");
    let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, waiting) = ctx.get(&turn_path).await;
    assert_eq!(waiting["state"], "queued", "{waiting}");
    assert_eq!(list().await, 1);
    let events = ctx.sse(&format!("{turn_path}/events"), None).await;
    assert_eq!(tools_called(&events), ["echo"], "{events:?}");

    // A watcher that does not list holds a turn up for a while only (the turn goes on after
    // the driver's bound, 2 s).
    let (status, _) = ctx.send(reqwest::Method::DELETE, &attachment, None).await;
    assert_eq!(status, 200);
    let (status, turn) = ctx.post(&turns, &input).await;
    assert_eq!(status, 202, "{turn}");
    let turn_path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, waiting) = ctx.get(&turn_path).await;
    assert_eq!(waiting["state"], "queued", "{waiting}");
    let events = ctx.sse(&format!("{turn_path}/events"), None).await;
    assert!(tools_called(&events).is_empty(), "{events:?}");
    assert_eq!(events.last().unwrap()["state"], "completed", "{events:?}");

    // The profile deleted, its event streams end.
    let (status, deleted) = ctx
        .send(reqwest::Method::DELETE, &format!("{profiles}/{pid}"), None)
        .await;
    assert_eq!(status, 200, "{deleted}");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while stream.chunk().await.unwrap().is_some() {}
    });
    ended.await.expect("the stream ended with its profile");
}
