//! How a client changes settings: `config.show`, `config.set` with and without a live
//! session, a session's working directory, toolsets switched off and on, and MCP servers
//! reloaded — with Hermes's replies, codes, events and the keys written to `config.yaml`.

use serde_json::{Value, json};

use crate::conformance;
use crate::harness::{Client, Peer, Target};
use crate::shared;
use crate::tools::{delete_without_asking, tool_result};

/// The value at a dotted path of the peer's `config.yaml`, as JSON (`null` when absent).
fn config_value(peer: &Peer, dotted: &str) -> Value {
    let text = std::fs::read_to_string(peer.home.join("config.yaml")).unwrap();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut value = serde_json::to_value(yaml).unwrap();
    for key in dotted.split('.') {
        value = value.get(key).cloned().unwrap_or(Value::Null);
    }
    value
}

/// A new live session, once its agent is announced (a `session.info` naming its provider).
async fn built_session(client: &mut Client) -> Value {
    let sid = client.new_session().await;
    loop {
        let info = client.any_event("session.info").await;
        if info["session_id"] == sid && info["payload"].get("provider").is_some() {
            return sid;
        }
    }
}

/// The next `session.info` whose payload has `key` at `value` (others, earlier ones, are
/// skipped; each wait for a frame is bounded).
async fn info_with(client: &mut Client, key: &str, value: Value) -> Value {
    info_where(client, |payload| payload[key] == value).await
}

async fn info_where(client: &mut Client, wanted: impl Fn(&Value) -> bool) -> Value {
    loop {
        let info = client.any_event("session.info").await;
        if wanted(&info["payload"]) {
            return info;
        }
    }
}

fn set(key: &str, value: impl Into<Value>) -> Value {
    json!({"key": key, "value": value.into()})
}

conformance!(
    the_configuration_is_shown_and_set_without_a_session,
    config_without_a_session
);

async fn config_without_a_session(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;

    let shown = client.call("config.show", json!({})).await;
    let rows = |title: &str| {
        shown["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["title"] == title)
            .unwrap_or_else(|| panic!("no {title} section: {shown}"))["rows"]
            .clone()
    };
    assert_eq!(
        rows("Model"),
        json!([
            ["Model", "fake-model"],
            ["Base URL", "(default)"],
            ["API Key", "(not set)"]
        ])
    );
    assert_eq!(
        rows("Agent"),
        json!([
            ["Max Turns", "90"],
            ["Toolsets", "all"],
            ["Verbose", "False"]
        ])
    );
    let environment = rows("Environment");
    let path_of =
        |row: usize| std::fs::canonicalize(environment[row][1].as_str().unwrap()).unwrap();
    assert_eq!(path_of(0), std::fs::canonicalize(&peer.work).unwrap());
    assert_eq!(
        path_of(1),
        std::fs::canonicalize(peer.home.join("config.yaml")).unwrap()
    );

    for (params, code, message) in [
        (json!({}), 4002, "unknown config key: "),
        (set("nope", "x"), 4002, "unknown config key: nope"),
        (set("model", ""), 4002, "model value required"),
        (set("verbose", "bogus"), 4002, "unknown verbose mode: bogus"),
        (
            set("approvals.mode", "weird"),
            4002,
            "unknown approval mode: weird; pick one of manual|smart|off",
        ),
        (
            set("reasoning", "bogus"),
            4002,
            "unknown reasoning value: bogus",
        ),
        (
            set("indicator", "bad"),
            4002,
            "unknown indicator: 'bad'; pick one of ascii|emoji|kaomoji|unicode",
        ),
        (
            set("cwd", "/nonexistent-dir"),
            4002,
            "working directory does not exist: /nonexistent-dir",
        ),
        (
            set("fast", "on"),
            4002,
            "fast mode is not available for this model",
        ),
        (set("busy", "later"), 4002, "unknown busy mode: later"),
        (
            set("details_mode.nope", "hidden"),
            4002,
            "unknown section: nope",
        ),
    ] {
        let got = client.refusal("config.set", params.clone()).await;
        assert_eq!(got, (code, message.to_owned()), "{params}");
    }

    let cases = [
        (
            set("verbose", "new"),
            set("verbose", "new"),
            "display.tool_progress",
            json!("new"),
        ),
        (
            set("verbose", ""),
            set("verbose", "all"),
            "display.tool_progress",
            json!("all"),
        ),
        (
            set("busy", "status"),
            set("busy", "interrupt"),
            "display.busy_input_mode",
            Value::Null,
        ),
        (
            set("busy", "queue"),
            set("busy", "queue"),
            "display.busy_input_mode",
            json!("queue"),
        ),
        (
            set("reasoning", "high"),
            set("reasoning", "high"),
            "agent.reasoning_effort",
            json!("high"),
        ),
        (
            set("reasoning", "show"),
            set("reasoning", "show"),
            "display.show_reasoning",
            json!(true),
        ),
        (
            set("details_mode", "expanded"),
            set("details_mode", "expanded"),
            "display.sections.tools",
            json!("expanded"),
        ),
        (
            set("details_mode.tools", ""),
            set("details_mode.tools", ""),
            "display.sections.tools",
            Value::Null,
        ),
        (
            set("compact", ""),
            set("compact", "on"),
            "display.tui_compact",
            json!(true),
        ),
        (
            set("statusbar", "bottom"),
            set("statusbar", "bottom"),
            "display.tui_statusbar",
            json!("bottom"),
        ),
        (
            set("mouse", "scroll"),
            set("mouse", "wheel"),
            "display.mouse_tracking",
            json!("wheel"),
        ),
        (
            set("indicator", "Emoji"),
            set("indicator", "emoji"),
            "display.tui_status_indicator",
            json!("emoji"),
        ),
        (
            set("prompt", "be brief"),
            set("prompt", "be brief"),
            "custom_prompt",
            json!("be brief"),
        ),
        (
            set("prompt", "clear"),
            set("prompt", ""),
            "custom_prompt",
            Value::Null,
        ),
        (
            set("fast", "status"),
            set("fast", "normal"),
            "agent.service_tier",
            Value::Null,
        ),
    ];
    for (params, reply, dotted, written) in cases {
        let got = client.call("config.set", params.clone()).await;
        assert_eq!(got, reply, "{params}");
        assert_eq!(config_value(&peer, dotted), written, "{params}: {dotted}");
    }
    assert_eq!(config_value(&peer, "display.sections.thinking"), "expanded");
    assert_eq!(
        config_value(&peer, "model.default"),
        "fake-model",
        "the rest is kept"
    );

    let work = peer.work.display().to_string();
    let moved = client.call("config.set", set("cwd", work.clone())).await;
    assert_eq!(
        moved,
        json!({"key": "terminal.cwd", "value": work, "cwd": work, "branch": ""})
    );
    assert_eq!(config_value(&peer, "terminal.cwd"), json!(work));

    // A skin is written as given; the change is announced to the caller.
    let skinned = client.call("config.set", set("skin", "default")).await;
    assert_eq!(skinned, set("skin", "default"));
    let changed = client.any_event("skin.changed").await;
    assert_eq!(changed["payload"]["name"], "default");
    assert_eq!(config_value(&peer, "display.skin"), "default");

    // A model name a letter off is taken as the listed one it was meant to be; without a
    // session, nothing is switched and the config keeps its model.
    let corrected = client.call("config.set", set("model", "fake-modl")).await;
    assert_eq!(
        corrected,
        json!({"key": "model", "value": "fake-model",
               "warning": "Auto-corrected `fake-modl` \u{2192} `fake-model`",
               "confirm_required": false, "confirm_message": "", "scope": "session"})
    );
    assert_eq!(config_value(&peer, "model.default"), "fake-model");

    // Without a session, yolo is the process's.
    let on = client.call("config.set", set("yolo", "")).await;
    assert_eq!(on, json!({"key": "yolo", "value": "1", "scope": "session"}));
    let off = client.call("config.set", set("yolo", "off")).await;
    assert_eq!(
        off,
        json!({"key": "yolo", "value": "0", "scope": "session"})
    );
    assert_eq!(config_value(&peer, "approvals.mode"), "manual");
    peer.stop().await;
}

/// The reply of `config.set model other-model` on the peer's endpoint, which lists only
/// `fake-model`.
fn switched_to_other_model(peer: &Peer) -> Value {
    let base_url = peer.model.hermes_model_config()["base_url"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    json!({
        "key": "model", "value": "other-model",
        "warning": format!(
            "Note: `other-model` was not found in this custom endpoint's model listing \
             ({base_url}/models). It may still work if the server supports hidden or aliased \
             models.\n  Similar models: `fake-model`"
        ),
        "confirm_required": false, "confirm_message": "", "scope": "session",
    })
}

conformance!(a_session_is_set_up_as_its_user_says, config_of_a_session);

async fn config_of_a_session(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let sid = built_session(&mut client).await;
    let with_session =
        |key: &str, value: &str| json!({"session_id": sid, "key": key, "value": value});

    // Another model for this session: taken with a warning (the endpoint does not list it);
    // the config keeps its own.
    let switched = client
        .call("config.set", with_session("model", "other-model"))
        .await;
    assert_eq!(switched, switched_to_other_model(&peer));
    info_with(&mut client, "model", json!("other-model")).await;
    assert_eq!(config_value(&peer, "model.default"), "fake-model");

    // Yolo for this session: dangerous commands run unasked; the config is left alone.
    let on = client.call("config.set", with_session("yolo", "on")).await;
    assert_eq!(on, json!({"key": "yolo", "value": "1", "scope": "session"}));
    info_with(&mut client, "yolo", json!(true)).await;
    assert_eq!(config_value(&peer, "approvals.mode"), "manual");
    delete_without_asking(&mut client, &sid, &peer.work.join("victim")).await;
    // That turn went to the switched model, which was told of the switch.
    let sent = peer.model.streamed_requests().pop().expect("a request");
    assert_eq!(sent["model"], "other-model");
    let told = sent["messages"].as_array().unwrap().iter().any(|m| {
        m["role"] == "user"
            && m["content"].as_str().is_some_and(|text| {
                text.starts_with(
                    "[System: The active model for this chat has changed to other-model \
                     via provider custom.",
                )
            })
    });
    assert!(told, "{sent}");
    let off = client.call("config.set", with_session("yolo", "off")).await;
    assert_eq!(off["value"], "0");
    info_with(&mut client, "yolo", json!(false)).await;

    // A reasoning effort for the session only.
    let low = client
        .call("config.set", with_session("reasoning", "low"))
        .await;
    assert_eq!(low, set("reasoning", "low"));
    info_with(&mut client, "reasoning_effort", json!("low")).await;
    assert_eq!(config_value(&peer, "agent.reasoning_effort"), Value::Null);

    // An approval mode is the config's, and every session hears of it.
    let smart = client
        .call("config.set", with_session("approval_mode", "Smart"))
        .await;
    assert_eq!(smart, set("approvals.mode", "smart"));
    info_with(&mut client, "approval_mode", json!("smart")).await;
    assert_eq!(config_value(&peer, "approvals.mode"), "smart");

    // Yolo for good: approvals off in the config.
    let global = json!({"session_id": sid, "key": "yolo", "value": "", "scope": "global"});
    let on = client.call("config.set", global).await;
    assert_eq!(on, json!({"key": "yolo", "value": "1", "scope": "global"}));
    let info = info_with(&mut client, "approval_mode", json!("off")).await;
    assert_eq!(info["payload"]["yolo"], true, "{info}");
    assert_eq!(config_value(&peer, "approvals.mode"), "off");
    delete_without_asking(&mut client, &sid, &peer.work.join("again")).await;
    // What is never run is refused even so (the device does not exist, should it run).
    let format = r#"CALL terminal {"command": "mkfs.ext4 /dev/edith-no-such-device"}"#;
    client.submit(&sid, format).await;
    let refused = tool_result(&mut client).await;
    assert_eq!(refused["exit_code"], -1, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("BLOCKED (hardline): format filesystem (mkfs)."),
        "{refused}"
    );

    // No personality: cleared, and the reply carries the session's info.
    let plain = client
        .call("config.set", with_session("personality", "none"))
        .await;
    assert_eq!(
        (&plain["value"], &plain["history_reset"]),
        (&json!("none"), &json!(false))
    );
    assert_eq!(plain["info"]["model"], "other-model", "{plain}");
    assert_eq!(config_value(&peer, "display.personality"), "");
    peer.stop().await;
}

shared!(a_session_works_where_it_is_told, working_directory);

async fn working_directory(peer: &Peer) {
    let mut client = peer.connect().await;
    let unknown = json!({"session_id": "nope", "cwd": "/tmp"});
    let got = client.refusal("session.cwd.set", unknown).await;
    assert_eq!(got, (4001, "session not found".to_owned()));
    let sid = built_session(&mut client).await;
    let got = client
        .refusal("session.cwd.set", json!({"session_id": sid}))
        .await;
    assert_eq!(got, (4016, "cwd required".to_owned()));
    let missing = json!({"session_id": sid, "cwd": "/nonexistent-xyz"});
    let got = client.refusal("session.cwd.set", missing).await;
    assert_eq!(
        got,
        (
            4017,
            "working directory does not exist: /nonexistent-xyz".to_owned()
        )
    );

    let elsewhere = peer.work.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let shown = elsewhere.display().to_string();
    let info = client
        .call("session.cwd.set", json!({"session_id": sid, "cwd": shown}))
        .await;
    for (key, value) in [
        ("cwd", json!(shown)),
        ("branch", json!("")),
        ("project", Value::Null),
        ("model", json!("fake-model")),
        ("provider", json!("custom")),
        ("approval_mode", json!("manual")),
        ("yolo", json!(false)),
        ("running", json!(false)),
        ("desktop_contract", json!(4)),
    ] {
        assert_eq!(info[key], value, "{key} in {info}");
    }
    let event = info_with(&mut client, "cwd", json!(shown)).await;
    assert_eq!(event["session_id"], sid);

    // The session's commands run there.
    assert_eq!(pwd(&mut client, &sid).await, shown);

    // A session opened in a directory works there from its start.
    let opened = peer.work.join("opened");
    std::fs::create_dir_all(&opened).unwrap();
    let created = client
        .call(
            "session.create",
            json!({"cwd": opened.display().to_string()}),
        )
        .await;
    let other = created["session_id"].clone();
    assert_eq!(pwd(&mut client, &other).await, opened.display().to_string());
}

/// Where the session's commands run: the output of `pwd` there.
async fn pwd(client: &mut Client, sid: &Value) -> String {
    client
        .submit(sid, r#"CALL terminal {"command": "pwd"}"#)
        .await;
    let result = tool_result(client).await;
    result["output"].as_str().unwrap().trim().to_owned()
}

conformance!(toolsets_are_switched_off_and_on, tools_configure);

async fn tools_configure(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let bad = json!({"action": "x", "names": ["terminal"]});
    assert_eq!(
        client.refusal("tools.configure", bad).await,
        (4017, "unknown tools action: x".to_owned())
    );
    let none = json!({"action": "disable", "names": []});
    assert_eq!(
        client.refusal("tools.configure", none).await,
        (4018, "names required".to_owned())
    );
    let cli_toolsets = |peer: &Peer| -> Vec<String> {
        serde_json::from_value(config_value(peer, "platform_toolsets.cli")).unwrap()
    };

    let off = json!({"action": "disable", "names": ["terminal", "bogus", "srv:tool"]});
    let done = client.call("tools.configure", off).await;
    assert_eq!(
        (&done["changed"], &done["unknown"], &done["missing_servers"]),
        (&json!(["terminal"]), &json!(["bogus"]), &json!(["srv"])),
        "{done}"
    );
    assert_eq!(
        (&done["reset"], &done["info"]),
        (&json!(false), &Value::Null)
    );
    let enabled: Vec<String> = serde_json::from_value(done["enabled_toolsets"].clone()).unwrap();
    let mut sorted = enabled.clone();
    sorted.sort();
    assert_eq!(enabled, sorted, "sorted");
    assert!(!enabled.contains(&"terminal".to_owned()), "{enabled:?}");
    assert!(enabled.contains(&"clarify".to_owned()), "{enabled:?}");
    assert!(!cli_toolsets(&peer).contains(&"terminal".to_owned()));

    // Toolsets the list names that this runtime lacks stay in it.
    let mut config: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(peer.home.join("config.yaml")).unwrap())
            .unwrap();
    config["platform_toolsets"]["cli"] = serde_yaml::to_value(["web", "clarify"]).unwrap();
    std::fs::write(
        peer.home.join("config.yaml"),
        serde_yaml::to_string(&config).unwrap(),
    )
    .unwrap();
    let off = json!({"action": "disable", "names": ["clarify"]});
    client.call("tools.configure", off).await;
    let listed = cli_toolsets(&peer);
    assert!(listed.contains(&"web".to_owned()) && !listed.contains(&"clarify".to_owned()));
    let on = json!({"action": "enable", "names": ["clarify"]});
    client.call("tools.configure", on).await;
    let listed = cli_toolsets(&peer);
    assert!(listed.contains(&"web".to_owned()) && listed.contains(&"clarify".to_owned()));

    // With a session, its agent is rebuilt on the new toolsets, with an empty context.
    let sid = built_session(&mut client).await;
    client.submit(&sid, "remember me").await;
    client.events_until("message.complete").await;
    // Hermes stays busy a moment after a turn's end: asked again for at most 10 s.
    let switch = json!({"session_id": sid, "key": "model", "value": "other-model"});
    let mut switched = client.request("config.set", switch.clone()).await;
    for _ in 0..100 {
        if switched["error"]["code"] != 4009 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        switched = client.request("config.set", switch.clone()).await;
    }
    assert_eq!(
        switched["result"],
        switched_to_other_model(&peer),
        "{switched}"
    );
    let on = json!({"session_id": sid, "action": "enable", "names": ["terminal"]});
    let done = client.call("tools.configure", on).await;
    assert_eq!(done["reset"], true, "{done}");
    assert_eq!(done["info"]["model"], "fake-model", "the switch is dropped");
    assert!(
        done["enabled_toolsets"]
            .as_array()
            .unwrap()
            .contains(&json!("terminal"))
    );
    assert!(cli_toolsets(&peer).contains(&"terminal".to_owned()));
    assert!(done["info"]["tools"].get("terminal").is_some(), "{done}");
    info_where(&mut client, |payload| {
        payload["tools"].get("terminal").is_some()
    })
    .await;
    // The rebuilt agent's context is empty: the next prompt goes to the model alone.
    client.submit(&sid, "anew").await;
    client.events_until("message.complete").await;
    let sent = peer.model.streamed_requests().pop().expect("a request");
    let said: Vec<&Value> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .collect();
    assert_eq!(said.len(), 1, "{sent}");
    assert_eq!(said[0]["content"], "anew");
    peer.stop().await;
}

conformance!(mcp_servers_are_reloaded_once_confirmed, reload_mcp);

async fn reload_mcp(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let asked = client.call("reload.mcp", json!({})).await;
    assert_eq!(asked["status"], "confirm_required");
    assert!(
        asked["message"]
            .as_str()
            .unwrap()
            .contains("/reload-mcp invalidates the prompt cache"),
        "{asked}"
    );
    let reloaded = client.call("reload.mcp", json!({"confirm": true})).await;
    assert_eq!(reloaded, json!({"status": "reloaded"}));
    assert_eq!(
        config_value(&peer, "approvals.mcp_reload_confirm"),
        Value::Null
    );
    let always = json!({"confirm": true, "always": true});
    assert_eq!(
        client.call("reload.mcp", always).await,
        json!({"status": "reloaded"})
    );
    assert_eq!(config_value(&peer, "approvals.mcp_reload_confirm"), false);
    assert_eq!(
        client.call("reload.mcp", json!({})).await,
        json!({"status": "reloaded"})
    );
    // With a session, the session hears its info anew.
    let sid = built_session(&mut client).await;
    let with_session = json!({"session_id": sid, "confirm": true});
    assert_eq!(
        client.call("reload.mcp", with_session).await,
        json!({"status": "reloaded"})
    );
    assert_eq!(client.any_event("session.info").await["session_id"], sid);
    peer.stop().await;
}

conformance!(the_models_a_client_may_pick_are_listed, model_options);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[a_session_works_where_it_is_told::CHECK];

async fn model_options(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    let base_url = peer.model.hermes_model_config()["base_url"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let endpoint = json!({
        "slug": "custom", "name": "Custom endpoint", "is_current": true,
        "is_user_defined": true, "models": ["fake-model"], "total_models": 1,
        "source": "model-config", "api_url": base_url, "authenticated": true,
        "capabilities": {"fake-model": {"fast": false, "reasoning": true}},
    });
    let all = client.call("model.options", json!({})).await;
    assert_eq!(
        (&all["model"], &all["provider"]),
        (&json!("fake-model"), &json!("custom"))
    );
    let providers = all["providers"].as_array().unwrap();
    assert!(providers.contains(&endpoint), "{all}");
    let configured = client
        .call("model.options", json!({"explicit_only": true}))
        .await;
    assert_eq!(configured["providers"], json!([endpoint]), "{configured}");
    // The models are the endpoint's, with the configured one first when it lists it not.
    let text = std::fs::read_to_string(peer.home.join("config.yaml")).unwrap();
    let mut config: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    config["model"]["default"] = "other-model".into();
    std::fs::write(
        peer.home.join("config.yaml"),
        serde_yaml::to_string(&config).unwrap(),
    )
    .unwrap();
    let listed = client
        .call("model.options", json!({"explicit_only": true}))
        .await;
    assert_eq!(listed["model"], "other-model");
    let models = &listed["providers"][0]["models"];
    assert_eq!(models, &json!(["other-model", "fake-model"]), "{listed}");
    peer.stop().await;
}
