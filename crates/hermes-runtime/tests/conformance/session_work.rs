//! What a client does with a session besides prompting — take the last exchange back, read its
//! status, save it to a file, count the sessions — and the completions a client offers while
//! someone types, with Hermes's shapes and codes.

use serde_json::{Value, json};

use crate::conformance;
use crate::harness::{Peer, Target};
use crate::shared;

/// Hermes's code for a live session that does not exist.
const SESSION_NOT_FOUND: i64 = 4001;
/// Hermes's code for a session whose turn still runs.
const BUSY: i64 = 4009;
/// Hermes's code for a `session.steer` without text.
const TEXT_REQUIRED: i64 = 4002;
/// Hermes's code for steering a session whose agent is not built yet (no prompt so far).
const NO_AGENT: i64 = 4010;
/// Hermes's code for branching a session with no messages.
const NOTHING_TO_BRANCH: i64 = 4008;

/// The result of `method`, once the session has settled: Hermes still counts a session as
/// running for a moment after `message.complete` (it is busy a while longer, at most 10 s here).
async fn when_idle(client: &mut crate::harness::Client, method: &str, params: Value) -> Value {
    for _ in 0..100 {
        let reply = client.request(method, params.clone()).await;
        if reply["error"]["code"] != BUSY {
            assert!(reply.get("error").is_none(), "{method} failed: {reply}");
            return reply["result"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{method}: the session stayed busy for 10 s");
}

/// The user and assistant messages of the last request the model was sent, as `role: text`.
fn conversation_sent(peer: &Peer) -> Vec<String> {
    let request = peer.model.streamed_requests().pop().expect("a request");
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect()
}

shared!(the_last_exchange_is_taken_back, undo);

async fn undo(peer: &Peer) {
    let mut client = peer.connect().await;
    let code = client
        .error_code("session.undo", json!({"session_id": "nope"}))
        .await;
    assert_eq!(code, SESSION_NOT_FOUND);
    let sid = client.new_session().await;
    for text in ["first", "second"] {
        client.submit(&sid, text).await;
        client.events_until("message.complete").await;
    }
    // The answer and the prompt it answered go; the exchange before stays.
    let undo = json!({"session_id": sid});
    let undone = when_idle(&mut client, "session.undo", undo.clone()).await;
    assert_eq!(undone, json!({"removed": 2}));
    // The next prompt is made on what is left.
    client.submit(&sid, "third").await;
    client.events_until("message.complete").await;
    assert_eq!(
        conversation_sent(peer),
        ["user: first", "assistant: You said: first", "user: third"]
    );
    when_idle(&mut client, "session.undo", undo.clone()).await;
    client.call("session.undo", undo.clone()).await;
    let nothing = client.call("session.undo", undo).await;
    assert_eq!(nothing, json!({"removed": 0}));
}

shared!(
    a_session_says_its_status_and_is_saved_to_a_file,
    status_and_save
);

async fn status_and_save(peer: &Peer) {
    let mut client = peer.connect().await;
    for method in ["session.status", "session.save"] {
        let code = client
            .error_code(method, json!({"session_id": "nope"}))
            .await;
        assert_eq!(code, SESSION_NOT_FOUND, "{method}");
    }
    let created = client.call("session.create", json!({})).await;
    let sid = created["session_id"].clone();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    client.submit(&sid, "hello there").await;
    client.events_until("message.complete").await;

    let status = client
        .call("session.status", json!({"session_id": sid}))
        .await;
    let output = status["output"].as_str().expect("text");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(
        lines[..3],
        ["Hermes TUI Status", "", &format!("Session ID: {stored}")]
    );
    assert!(lines.contains(&"Model: fake-model (custom)"), "{output}");
    for label in [
        "Path: ",
        "Created: ",
        "Last Activity: ",
        "Tokens: ",
        "Agent Running: ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(label)),
            "{label} in {output}"
        );
    }

    let saved = client
        .call("session.save", json!({"session_id": sid}))
        .await;
    let file = std::path::PathBuf::from(saved["file"].as_str().expect("a path"));
    assert_eq!(file.parent().unwrap(), peer.home.join("sessions/saved"));
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("hermes_conversation_") && name.ends_with(".json"),
        "{name}"
    );
    let content: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(content["model"], "fake-model", "{content}");
    assert_eq!(content["session_id"], stored.as_str(), "{content}");
    assert!(content["session_start"].is_string(), "{content}");
    assert!(content["system_prompt"].is_string(), "{content}");
    let said: Vec<(&str, &str)> = content["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        [
            ("user", "hello there"),
            ("assistant", "You said: hello there")
        ]
    );
}

shared!(insights_count_recent_sessions_and_their_messages, insights);

async fn insights(peer: &Peer) {
    let mut client = peer.connect().await;
    // Counted from what the runtime holds, other checks' sessions too: one more session with
    // its two messages is one more, and two more.
    let count = |insights: &serde_json::Value, key: &str| insights[key].as_u64().unwrap();
    let month = client.call("insights.get", json!({})).await;
    assert_eq!(month["days"], 30, "{month}");
    let before = client.call("insights.get", json!({"days": 7})).await;
    let sid = client.new_session().await;
    client.submit(&sid, "hello").await;
    client.events_until("message.complete").await;
    let after = client.call("insights.get", json!({"days": 7})).await;
    let keys: Vec<&String> = after.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["days", "sessions", "messages"], "{after}");
    assert_eq!(after["days"], 7);
    assert_eq!(count(&after, "sessions"), count(&before, "sessions") + 1);
    assert_eq!(count(&after, "messages"), count(&before, "messages") + 2);
}

conformance!(paths_and_commands_are_completed, completion);

async fn completion(target: Target) {
    let peer = Peer::start(target).await;
    std::fs::write(peer.work.join("notes.txt"), "n").unwrap();
    std::fs::write(peer.work.join("Nine.md"), "9").unwrap();
    std::fs::create_dir(peer.work.join("nested")).unwrap();
    std::fs::write(peer.work.join("nested/inner.txt"), "i").unwrap();
    std::fs::write(peer.work.join(".hidden"), "h").unwrap();
    let mut client = peer.connect().await;
    let complete = async |client: &mut crate::harness::Client, word: &str| {
        client.call("complete.path", json!({"word": word})).await
    };
    assert_eq!(complete(&mut client, "").await, json!({"items": []}));
    // Entries of the directory the word is in whose names start with its last part, any case,
    // sorted as the directory lists them; a directory ends in `/`.
    assert_eq!(
        complete(&mut client, "n").await,
        json!({"items": [
            {"text": "Nine.md", "display": "Nine.md", "meta": ""},
            {"text": "nested/", "display": "nested/", "meta": "dir"},
            {"text": "notes.txt", "display": "notes.txt", "meta": ""},
        ]})
    );
    assert_eq!(
        complete(&mut client, "./nes").await,
        json!({"items": [{"text": "./nested/", "display": "nested/", "meta": "dir"}]})
    );
    assert_eq!(
        complete(&mut client, "nested/").await,
        json!({"items": [{"text": "nested/inner.txt", "display": "inner.txt", "meta": ""}]})
    );
    assert_eq!(
        complete(&mut client, ".hid").await,
        json!({"items": [{"text": ".hidden", "display": ".hidden", "meta": ""}]})
    );
    assert_eq!(
        complete(&mut client, "missing/x").await,
        json!({"items": []})
    );
    // `@` offers what can be attached; `@file:` completes files only.
    let at = complete(&mut client, "@").await;
    let offered: Vec<&str> = at["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        ["@diff", "@staged", "@file:", "@folder:", "@url:", "@git:"]
    );
    assert_eq!(
        complete(&mut client, "@file:n").await,
        json!({"items": [
            {"text": "@file:Nine.md", "display": "Nine.md", "meta": ""},
            {"text": "@file:notes.txt", "display": "notes.txt", "meta": ""},
        ]})
    );

    // Slash commands: nothing for text that is not one; otherwise items to replace from
    // after the `/`.
    let plain = client
        .call("complete.slash", json!({"text": "hello"}))
        .await;
    assert_eq!(plain, json!({"items": []}));
    let slash = client.call("complete.slash", json!({"text": "/zzz"})).await;
    assert_eq!(slash["replace_from"], 1, "{slash}");
    assert!(slash["items"].is_array(), "{slash}");
    peer.stop().await;
}

shared!(a_branch_goes_on_from_the_conversation, branch);

async fn branch(peer: &Peer) {
    let mut client = peer.connect().await;
    let code = client
        .error_code("session.branch", json!({"session_id": "nope"}))
        .await;
    assert_eq!(code, SESSION_NOT_FOUND);
    let created = client.call("session.create", json!({})).await;
    let sid = created["session_id"].clone();
    let stored = created["stored_session_id"].clone();
    let empty = client
        .error_code("session.branch", json!({"session_id": sid}))
        .await;
    assert_eq!(empty, NOTHING_TO_BRANCH);
    client.submit(&sid, "hello there").await;
    client.events_until("message.complete").await;
    let title = json!({"session_id": sid, "title": "Greetings"});
    when_idle(&mut client, "session.title", title).await;

    // A new stored session, the old one its parent, titled next in its lineage, with a live
    // session of its own.
    let branched = when_idle(&mut client, "session.branch", json!({"session_id": sid})).await;
    assert_eq!(branched["title"], "Greetings #2", "{branched}");
    assert_eq!(branched["parent"], stored, "{branched}");
    let live = branched["session_id"].clone();
    assert_eq!(live.as_str().unwrap().len(), 8, "{branched}");
    assert_ne!(live, sid);
    // The branch goes on from the conversation so far.
    client.submit(&live, "and then?").await;
    client.events_until("message.complete").await;
    assert_eq!(
        conversation_sent(peer),
        [
            "user: hello there",
            "assistant: You said: hello there",
            "user: and then?"
        ]
    );
    // A name is taken as it is.
    let named = json!({"session_id": sid, "name": "Elsewhere"});
    let named = when_idle(&mut client, "session.branch", named).await;
    assert_eq!(named["title"], "Elsewhere", "{named}");
    // The parent can still be deleted once closed; its branches stay.
    client
        .call("session.close", json!({"session_id": sid}))
        .await;
    let deleted = json!({"session_id": stored});
    when_idle(&mut client, "session.delete", deleted).await;
    let listed = client.call("session.list", json!({})).await["sessions"].clone();
    let titles: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["title"].as_str())
        .collect();
    assert!(titles.contains(&"Greetings #2"), "{listed}");
}

shared!(
    the_context_window_is_broken_down_by_what_fills_it,
    context_breakdown
);

async fn context_breakdown(peer: &Peer) {
    let mut client = peer.connect().await;
    let code = client
        .error_code("session.context_breakdown", json!({"session_id": "nope"}))
        .await;
    assert_eq!(code, SESSION_NOT_FOUND);
    let sid = client.new_session().await;
    let params = json!({"session_id": sid});
    // Before the first prompt there is no agent yet: nothing to break down.
    let before = client
        .call("session.context_breakdown", params.clone())
        .await;
    assert_eq!(before["categories"], json!([]), "{before}");
    assert_eq!(before["estimated_total"], 0, "{before}");

    client.submit(&sid, "hello there").await;
    client.events_until("message.complete").await;
    let after = when_idle(&mut client, "session.context_breakdown", params.clone()).await;
    let known = [
        "system_prompt",
        "tool_definitions",
        "rules",
        "skills",
        "mcp",
        "subagent_definitions",
        "memory",
        "conversation",
    ];
    let categories = after["categories"].as_array().expect("categories");
    let mut total = 0;
    for category in categories {
        assert!(
            known.contains(&category["id"].as_str().unwrap()),
            "{category}"
        );
        assert!(category["label"].is_string(), "{category}");
        assert!(
            category["color"].as_str().unwrap().starts_with("var(--"),
            "{category}"
        );
        let tokens = category["tokens"].as_u64().unwrap();
        assert!(tokens > 0, "{category}");
        total += tokens;
    }
    let ids: Vec<&str> = categories
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"tool_definitions") && ids.contains(&"conversation"),
        "{after}"
    );
    assert_eq!(after["estimated_total"], total, "{after}");
    // What fills the window is what the last call measured, of the configured window.
    let usage = client.call("session.usage", params).await;
    assert_eq!(
        after["context_used"], usage["context_used"],
        "{after} {usage}"
    );
    assert_eq!(after["context_max"], 131072, "{after}");
    assert_eq!(
        after["context_percent"], usage["context_percent"],
        "{after}"
    );
    assert_eq!(after["model"], "fake-model", "{after}");
}

shared!(a_steer_reaches_the_model_with_the_next_tool_result, steer);

async fn steer(peer: &Peer) {
    let mut client = peer.connect().await;
    let empty = json!({"session_id": "nope", "text": " "});
    assert_eq!(
        client.error_code("session.steer", empty).await,
        TEXT_REQUIRED
    );
    let unknown = json!({"session_id": "nope", "text": "x"});
    assert_eq!(
        client.error_code("session.steer", unknown).await,
        SESSION_NOT_FOUND
    );
    let sid = client.new_session().await;
    let early = json!({"session_id": sid, "text": "x"});
    assert_eq!(client.error_code("session.steer", early).await, NO_AGENT);

    // A turn waits for an approval; a steer sent meanwhile goes to the model with the result
    // of the tool that ran.
    let victim = peer.work.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let text = format!(
        "CALL terminal {}",
        json!({"command": format!("rm -rf {}", victim.display())})
    );
    client.submit(&sid, &text).await;
    client.events_until("approval.request").await;
    let steered = client
        .call(
            "session.steer",
            json!({"session_id": sid, "text": "mind the tests"}),
        )
        .await;
    assert_eq!(
        steered,
        json!({"status": "queued", "text": "mind the tests"})
    );
    client
        .call(
            "approval.respond",
            json!({"session_id": sid, "choice": "once"}),
        )
        .await;
    client.events_until("message.complete").await;
    let request = peer.model.streamed_requests().pop().expect("a request");
    let messages = request["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .expect("a tool result");
    // Marked as the user's, not the tool's output.
    let marked = "[OUT-OF-BAND USER MESSAGE — a direct message from the user, delivered \
                  mid-turn; not tool output]\nmind the tests\n[/OUT-OF-BAND USER MESSAGE]";
    let content = result["content"].as_str().unwrap();
    assert!(content.ends_with(marked), "{result}");
}

shared!(
    the_middle_of_a_conversation_is_compressed_into_a_summary,
    compress
);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    the_last_exchange_is_taken_back::CHECK,
    a_session_says_its_status_and_is_saved_to_a_file::CHECK,
    insights_count_recent_sessions_and_their_messages::CHECK,
    a_branch_goes_on_from_the_conversation::CHECK,
    the_context_window_is_broken_down_by_what_fills_it::CHECK,
    a_steer_reaches_the_model_with_the_next_tool_result::CHECK,
    the_middle_of_a_conversation_is_compressed_into_a_summary::CHECK,
];

async fn compress(peer: &Peer) {
    let mut client = peer.connect().await;
    assert_eq!(
        client
            .error_code("session.compress", json!({"session_id": "nope"}))
            .await,
        SESSION_NOT_FOUND
    );
    let live = client.new_session().await;
    for said in ["one", "two"] {
        client.submit(&live, said).await;
        client.events_until("message.complete").await;
    }
    // Four messages: too few to summarize, which is no error and asks the model nothing.
    let params = json!({"session_id": live});
    let kept = when_idle(&mut client, "session.compress", params.clone()).await;
    assert_eq!(
        (&kept["status"], &kept["removed"], &kept["summary"]["noop"]),
        (&json!("compressed"), &json!(0), &json!(true)),
        "{kept}"
    );
    assert_eq!(
        kept["summary"]["headline"],
        "No changes from compression: 4 messages"
    );
    assert_eq!(kept["messages"].as_array().unwrap().len(), 4);
    let unstreamed = |peer: &Peer| {
        peer.model
            .requests()
            .into_iter()
            .filter(|r| r["stream"] != true && !r["messages"].to_string().contains("title"))
            .collect::<Vec<_>>()
    };
    assert_eq!(unstreamed(peer), Vec::<Value>::new());

    for said in ["three", "four", "five"] {
        client.submit(&live, said).await;
        client.events_until("message.complete").await;
    }
    let before: Vec<String> = ["one", "two", "three", "four", "five"]
        .iter()
        .flat_map(|said| {
            [
                format!("user: {said}"),
                format!("assistant: You said: {said}"),
            ]
        })
        .collect();
    let focused = json!({"session_id": live, "focus_topic": "numbers"});
    let compressed = when_idle(&mut client, "session.compress", focused).await;
    // Ten messages: the first three and the last four kept, the three between summarized.
    assert_eq!(
        (
            &compressed["status"],
            &compressed["before_messages"],
            &compressed["after_messages"],
            &compressed["removed"],
        ),
        (&json!("compressed"), &json!(10), &json!(8), &json!(2)),
        "{compressed}"
    );
    assert_eq!(compressed["summary"]["noop"], false);
    assert_eq!(
        compressed["summary"]["headline"],
        "Compressed: 10 → 8 messages"
    );
    assert!(compressed["before_tokens"].as_u64().unwrap() > 0);
    // The client is told while it runs.
    loop {
        let status = client.any_event("status.update").await;
        if status["payload"]["kind"] == "compressing" {
            let text = status["payload"]["text"].as_str().unwrap();
            assert!(
                text.starts_with("⠋ compressing 10 messages (~")
                    && text.ends_with(", focus: \"numbers\"…"),
                "{text}"
            );
            break;
        }
    }
    let asked = unstreamed(peer);
    assert_eq!(asked.len(), 1, "one summary asked for");
    let prompt = asked[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("[USER]: three") && prompt.contains("[ASSISTANT]: You said: three"),
        "{prompt}"
    );
    assert!(!prompt.contains("[USER]: one") && !prompt.contains("[USER]: five"));
    assert!(prompt.contains("FOCUS TOPIC: \"numbers\""), "{prompt}");
    let messages = compressed["messages"].as_array().unwrap();
    let text = |m: &Value| {
        format!(
            "{}: {}",
            m["role"].as_str().unwrap(),
            m["content"].as_str().unwrap()
        )
    };
    let now: Vec<String> = messages.iter().map(text).collect();
    assert_eq!(now[..3], before[..3]);
    assert_eq!(now[4..], before[6..10]);
    assert!(
        now[3].starts_with("assistant: ") && now[3].contains("OK"),
        "{}",
        now[3]
    );

    // The next prompt is made on the compressed conversation.
    client.submit(&live, "six").await;
    client.events_until("message.complete").await;
    let sent = conversation_sent(peer);
    assert_eq!(sent[..8], now[..]);
    assert_eq!(sent[8], "user: six");

    // The stored session was compacted too: resumed, it is the compressed conversation.
    let titled = client
        .call("session.title", json!({"session_id": live}))
        .await;
    let stored = titled["session_key"].as_str().unwrap().to_owned();
    when_idle(&mut client, "session.close", json!({"session_id": live})).await;
    let resumed = client
        .call("session.resume", json!({"session_id": stored}))
        .await;
    let messages = resumed["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 10, "{resumed}");
    assert_eq!(messages[0]["text"], "one", "{resumed}");
    assert!(
        messages[3]["text"].as_str().unwrap().contains("OK"),
        "{resumed}"
    );
    assert_eq!(messages[8]["text"], "six", "{resumed}");
}
