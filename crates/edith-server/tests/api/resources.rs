//! Profiles and sessions are changed and deleted: a profile's model is rewritten in its native
//! config, deleting takes what belongs to it along, and nothing is deleted from under a turn.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Ctx, assert_problem};

impl Ctx {
    /// Starts a turn on `turns` that waits for an approval; its path.
    pub(crate) async fn waiting_turn(&self, turns: &str) -> String {
        let input = r#"{"input": "terminal {\"command\": \"rm -rf /tmp/edith-delete-nothing\"}"}"#;
        let (status, turn) = self.post(turns, input).await;
        assert_eq!(status, 202, "{turn}");
        let path = format!("{turns}/{}", turn["id"].as_str().unwrap());
        for _ in 0..200 {
            if self.get(&path).await.1["state"] == "requires_action" {
                return path;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the turn never asked for an approval");
    }

    /// Cancels the turn at `path` and waits for its end.
    pub(crate) async fn cancel_turn(&self, path: &str) {
        let (status, body) = self.post(&format!("{path}/cancel"), "{}").await;
        assert!(status < 300, "{body}");
        self.sse(&format!("{path}/events"), None).await;
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    /// A ready instance with a profile named `p`: the instance's id and the profile's path.
    async fn profile_named_p(&self) -> (String, String) {
        let iid = self.ready_instance().await;
        let profiles = format!("/v1/instances/{iid}/profiles");
        let (status, profile) = self.post(&profiles, r#"{"name": "p"}"#).await;
        assert_eq!(status, 201, "{profile}");
        let path = format!("{profiles}/{}", profile["id"].as_str().unwrap());
        (iid, path)
    }
}

#[tokio::test]
async fn a_profiles_model_is_changed_in_its_native_config() {
    let ctx = Ctx::start().await;
    let (iid, path) = ctx.profile_named_p().await;
    let model = json!({"model": {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
        "model": "m", "api_key": "sk-secret-never-shown"}});
    let (status, changed) = ctx
        .send(reqwest::Method::PATCH, &path, Some(&model.to_string()))
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["model"]["provider"], "openai_compatible");
    assert_eq!(changed["model"]["api_key_set"], true);
    assert!(!changed.to_string().contains("sk-secret"));
    assert_eq!(ctx.get(&path).await.1, changed);
    let config = ctx
        .dir
        .path()
        .join("instances")
        .join(&iid)
        .join("home/profiles/p/config.yaml");
    let written = std::fs::read_to_string(config).unwrap();
    assert!(written.contains("http://127.0.0.1:9/v1"), "{written}");
    let bad =
        json!({"model": {"provider": "openai_compatible", "base_url": "ftp://x", "model": "m"}});
    let refused = ctx
        .send(reqwest::Method::PATCH, &path, Some(&bad.to_string()))
        .await;
    assert_problem(&refused, 400, "invalid_request");
}

#[tokio::test]
async fn a_profiles_model_changed_twice_at_once_ends_the_same_in_its_row_and_its_config() {
    let ctx = Ctx::start().await;
    let (iid, path) = ctx.profile_named_p().await;
    let config = (ctx.dir.path().join("instances").join(&iid)).join("home/profiles/p/config.yaml");
    let model = |name: &str| {
        json!({"model": {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
            "model": name}})
        .to_string()
    };
    let (one, other) = (model("model-one"), model("model-other"));
    for _ in 0..10 {
        let (a, b) = tokio::join!(
            ctx.send(reqwest::Method::PATCH, &path, Some(&one)),
            ctx.send(reqwest::Method::PATCH, &path, Some(&other)),
        );
        assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
        let (_, stored) = ctx.get(&path).await;
        let written = std::fs::read_to_string(&config).unwrap();
        let in_row = stored["model"]["model"].as_str().unwrap();
        assert!(
            written.contains(&format!("default: {in_row}")),
            "{stored} {written}"
        );
    }
    // A deletion and a change at once: the deleted profile's home is not written again.
    let (deleted, changed) = tokio::join!(
        ctx.delete(&path),
        ctx.send(reqwest::Method::PATCH, &path, Some(&one)),
    );
    assert_eq!(deleted.0, 200, "{deleted:?}");
    assert!(matches!(changed.0, 200 | 404), "{changed:?}");
    assert!(!config.exists(), "the deleted profile's config is gone");

    // Deleted and made again under its name at once: the new one keeps its home.
    let profiles = format!("/v1/instances/{iid}/profiles");
    for _ in 0..10 {
        let (_, made) = ctx.post(&profiles, r#"{"name": "p"}"#).await;
        let path = format!("{profiles}/{}", made["id"].as_str().unwrap());
        let (deleted, again) =
            tokio::join!(ctx.delete(&path), ctx.post(&profiles, r#"{"name": "p"}"#),);
        assert_eq!(deleted.0, 200, "{deleted:?}");
        match again.0 {
            201 => {
                assert!(config.exists(), "the new profile's config: {again:?}");
                let path = format!("{profiles}/{}", again.1["id"].as_str().unwrap());
                assert_eq!(ctx.delete(&path).await.0, 200);
            }
            // It came while the name was still taken.
            _ => assert_problem(&again, 409, "conflict"),
        }
    }
}

#[tokio::test]
async fn deleting_takes_what_belongs_along_but_never_from_under_a_turn() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let session = turns.trim_end_matches("/turns").to_owned();
    let profile = session[..session.find("/sessions/").unwrap()].to_owned();
    let home = ctx
        .dir
        .path()
        .join("instances")
        .join(&iid)
        .join("home/profiles/p");
    assert!(home.is_dir());

    // A session: titled, then deleted; its turns go with it.
    let (status, titled) = ctx
        .send(
            reqwest::Method::PATCH,
            &session,
            Some(r#"{"title": "first"}"#),
        )
        .await;
    assert_eq!((status, titled["title"].as_str()), (200, Some("first")));
    let finished = ctx.turn_on(&turns, "hello").await;
    let turn = format!("{turns}/{}", finished["turn_id"].as_str().unwrap());
    assert_eq!(ctx.get(&turn).await.0, 200);
    // The same turn under another session, or a profile that is not there: the 404 names
    // what is missing.
    let (_, beside) = ctx.post(&format!("{profile}/sessions"), "{}").await;
    let turn_id = finished["turn_id"].as_str().unwrap();
    let beside = format!(
        "{profile}/sessions/{}/turns/{turn_id}",
        beside["id"].as_str().unwrap()
    );
    let unknown = "prof_00000000000000000000000000000000";
    let nowhere = turn.replace(&profile, &format!("/v1/instances/{iid}/profiles/{unknown}"));
    for (path, missing) in [
        (beside.clone(), format!("turn `{turn_id}`")),
        (format!("{beside}/events"), format!("turn `{turn_id}`")),
        (nowhere, format!("profile `{unknown}`")),
    ] {
        let refused = ctx.get(&path).await;
        assert_problem(&refused, 404, "not_found");
        let detail = refused.1["detail"].as_str().unwrap();
        assert!(detail.contains(&missing), "{path}: {detail}");
    }
    let waiting = ctx.waiting_turn(&turns).await;
    // The refusal names the turn that keeps the session and the profile.
    let waiting_id = waiting.rsplit('/').next().unwrap().to_owned();
    for refused in [ctx.delete(&session).await, ctx.delete(&profile).await] {
        assert_problem(&refused, 409, "conflict");
        let detail = refused.1["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("turn `{waiting_id}`")), "{detail}");
    }
    ctx.cancel_turn(&waiting).await;
    let (status, deleted) = ctx.delete(&session).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(ctx.get(&session).await.0, 404);
    assert_eq!(ctx.get(&turn).await.0, 404);
    let refused = ctx.post(&turns, r#"{"input": "still there?"}"#).await;
    assert_problem(&refused, 404, "not_found");

    // The profile: its sessions and its native home go too.
    let (_, other) = ctx.post(&format!("{profile}/sessions"), "{}").await;
    let other = format!("{profile}/sessions/{}", other["id"].as_str().unwrap());
    let (status, deleted) = ctx.delete(&profile).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(ctx.get(&profile).await.0, 404);
    assert_eq!(ctx.get(&other).await.0, 404);
    assert!(!home.exists(), "the native profile's home is removed");
    // Its name is free again.
    let (status, again) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), r#"{"name": "p"}"#)
        .await;
    assert_eq!(status, 201, "{again}");
}

#[tokio::test]
async fn instances_are_listed_by_state_and_label() {
    let ctx = Ctx::start().await;
    let labelled = json!({"name": "a", "labels": {"team": "ai", "env": "prod"}});
    let (status, a) = ctx.post("/v1/instances", &labelled.to_string()).await;
    assert_eq!(status, 202, "{a}");
    assert_eq!(a["instance"]["labels"]["team"], "ai");
    let other = json!({"name": "b", "labels": {"team": "web"}});
    let (_, b) = ctx.post("/v1/instances", &other.to_string()).await;
    let (a, b) = (
        a["instance"]["id"].as_str().unwrap().to_owned(),
        b["instance"]["id"].as_str().unwrap().to_owned(),
    );
    ctx.instance_when(&a, |i| i["state"] == "ready").await;
    ctx.instance_when(&b, |i| i["state"] == "ready").await;
    let ids = |page: Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, ai) = ctx.get("/v1/instances?label=team%3Dai").await;
    assert_eq!(ids(ai), std::slice::from_ref(&a));
    let (_, both) = ctx.get("/v1/instances?state=ready").await;
    assert_eq!(ids(both), [a.clone(), b.clone()]);
    let (_, none) = ctx.get("/v1/instances?state=lost").await;
    assert!(ids(none).is_empty());
    let (_, web_ready) = ctx.get("/v1/instances?state=ready&label=team%3Dweb").await;
    assert_eq!(ids(web_ready), [b]);

    for bad in [
        "label=team",
        "label=Team%3Dai",
        "label=a%22b%3Dc",
        "state=happy",
    ] {
        let refused = ctx.get(&format!("/v1/instances?{bad}")).await;
        assert_eq!(refused.0, 400, "{bad}: {}", refused.1);
    }
    let bad_key = json!({"name": "c", "labels": {"Team": "x"}});
    assert_problem(
        &ctx.post("/v1/instances", &bad_key.to_string()).await,
        400,
        "invalid_request",
    );
}

#[tokio::test]
async fn deleting_the_default_profile_removes_its_config_and_the_key_in_it() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let body = json!({"name": "default", "model": {"provider": "openai_compatible",
        "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-gone-with-it"}});
    let (status, profile) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), &body.to_string())
        .await;
    assert_eq!(status, 201, "{profile}");
    let config = ctx
        .dir
        .path()
        .join("instances")
        .join(&iid)
        .join("home/config.yaml");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("sk-gone-with-it")
    );
    let path = format!(
        "/v1/instances/{iid}/profiles/{}",
        profile["id"].as_str().unwrap()
    );
    assert_eq!(ctx.delete(&path).await.0, 200);
    assert!(
        !config.exists(),
        "the root's config.yaml, with the key, is removed"
    );
    assert!(
        config.parent().unwrap().is_dir(),
        "the runtime's own home stays"
    );
}

#[tokio::test]
async fn tools_and_tool_hosts_are_changed_and_the_next_call_uses_the_change() {
    let ctx = Ctx::start().await;
    let tool = ctx.echo_tool().await;
    let (_, registered) = ctx.get(&format!("/v1/tools/{tool}")).await;
    let host = format!("/v1/tool-hosts/{}", registered["host_id"].as_str().unwrap());
    let path = format!("/v1/tools/{tool}");
    let change = json!({"description": "Says it back",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}});
    let (status, changed) = ctx
        .send(reqwest::Method::PATCH, &path, Some(&change.to_string()))
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["description"], "Says it back");
    assert_eq!(changed["name"], "echo", "the name stays");
    let bad = json!({"input_schema": {"type": "string"}}).to_string();
    assert_problem(
        &ctx.send(reqwest::Method::PATCH, &path, Some(&bad)).await,
        400,
        "invalid_request",
    );

    let iid = ctx.ready_instance().await;
    let (_, profile) = ctx
        .post(
            &format!("/v1/instances/{iid}/profiles"),
            &json!({"name": "p", "tools": [tool]}).to_string(),
        )
        .await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    let call = r#"echo {"text": "hi"}"#;
    assert_eq!(
        ctx.turn_on(&turns, call).await["output"],
        "echo returned hi."
    );

    // A wrong secret from now on: the host refuses the next call, and says so in the turn.
    let wrong = json!({"secret": "not-the-hosts-secret"}).to_string();
    let (status, moved) = ctx.send(reqwest::Method::PATCH, &host, Some(&wrong)).await;
    assert_eq!(status, 200, "{moved}");
    assert!(!moved.to_string().contains("not-the-hosts-secret"));
    let refused = ctx.turn_on(&turns, call).await;
    assert_ne!(refused["output"], "echo returned hi.", "{refused}");
    let right = json!({"secret": "0123456789abcdef"}).to_string();
    ctx.send(reqwest::Method::PATCH, &host, Some(&right)).await;
    assert_eq!(
        ctx.turn_on(&turns, call).await["output"],
        "echo returned hi."
    );
}

#[tokio::test]
async fn turns_are_listed_by_state() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let finished = ctx.turn_on(&turns, "one").await;
    assert_eq!(finished["state"], "completed", "{finished}");
    let (status, completed) = ctx.get(&format!("{turns}?state=completed")).await;
    assert_eq!(status, 200, "{completed}");
    assert_eq!(completed["items"].as_array().unwrap().len(), 1);
    let (_, failed) = ctx.get(&format!("{turns}?state=failed&limit=5")).await;
    assert_eq!(failed["items"], json!([]), "{failed}");
    let wrong = ctx.get(&format!("{turns}?state=sideways")).await;
    assert_problem(&wrong, 400, "invalid_request");
}

#[tokio::test]
async fn a_turn_is_running_with_its_start_logged_while_its_model_has_not_answered() {
    // The first piece of the answer comes ten seconds after the model is asked: the turn's
    // start is logged when the runtime takes the prompt, not held back for what it says.
    let model = testkit::FakeModel::start_with(testkit::FakeModelOptions {
        piece_delay: Duration::from_secs(10),
        ..Default::default()
    })
    .await;
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let profile = ctx.profile_on(&iid, &model, json!({"name": "slow"})).await;
    let turns = ctx.new_session_turns(&iid, &profile).await;
    let (status, turn) = ctx.post(&turns, r#"{"input": "hello"}"#).await;
    assert_eq!(status, 202, "{turn}");
    let path = format!("{turns}/{}", turn["id"].as_str().unwrap());
    let mut state = Value::Null;
    for _ in 0..200 {
        state = ctx.get(&path).await.1["state"].clone();
        if state != "queued" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state, "running");
    ctx.cancel_turn(&path).await;
    let events = ctx.sse(&format!("{path}/events"), None).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"turn.started"), "{kinds:?}");
    assert!(!kinds.contains(&"message.delta"), "{kinds:?}");
    assert_eq!(events.last().unwrap()["state"], "cancelled", "{events:?}");
}
