//! What the agent needs from the user besides approvals and answers: the sudo password, and
//! the home's `.env` read again.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::conformance;
use crate::harness::{Client, Peer, PeerOptions, Target};

conformance!(the_home_env_is_read_again_on_request, reload_env);
conformance!(a_sudo_command_asks_the_user_for_the_password, sudo);

/// Runs `command` with the agent's terminal tool; the tool's result.
async fn terminal(
    client: &mut Client,
    live: &serde_json::Value,
    command: &str,
) -> serde_json::Value {
    let text = format!("CALL terminal {}", json!({"command": command}));
    client.submit(live, &text).await;
    let events = client.events_until("message.complete").await;
    events
        .iter()
        .find(|e| e["type"] == "tool.complete")
        .unwrap_or_else(|| panic!("the tool ran: {events:?}"))["payload"]["result"]
        .clone()
}

async fn reload_env(target: Target) {
    let peer = Peer::start(target).await;
    let mut client = peer.connect().await;
    // Hermes also counts variables of its own that it set in its environment while it started
    // (`TERMINAL_ENV` from the config, at a moment of its choosing): first let it settle.
    let mut settled = false;
    for _ in 0..50 {
        if client.call("reload.env", json!({})).await == json!({"updated": 0}) {
            settled = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(settled, "reload.env kept finding changes");
    let env = peer.home.join(".env");
    std::fs::write(
        &env,
        "# set by the test\nCONFORMANCE_GREETING=hello there\n",
    )
    .unwrap();
    let reloaded = client.call("reload.env", json!({})).await;
    assert_eq!(reloaded, json!({"updated": 1}));
    assert_eq!(
        client.call("reload.env", json!({})).await,
        json!({"updated": 0})
    );
    std::fs::write(
        &env,
        "CONFORMANCE_GREETING=\"hello again\"\nexport CONFORMANCE_OTHER=2\n\
         OPENAI_API_KEY=sk-never-shown-0123\nSUDO_PASSWORD=never-shown\n",
    )
    .unwrap();
    assert_eq!(
        client.call("reload.env", json!({})).await,
        json!({"updated": 4})
    );
    // The agent's commands see the file's values, but not its credentials.
    let live = client.new_session().await;
    let result = terminal(
        &mut client,
        &live,
        "echo \"$CONFORMANCE_GREETING/$CONFORMANCE_OTHER/[$OPENAI_API_KEY][$SUDO_PASSWORD]\"",
    )
    .await;
    assert_eq!(
        result["output"].as_str().unwrap().trim(),
        "hello again/2/[][]",
        "{result}"
    );
    peer.stop().await;
}

/// A `sudo` that never runs without a password and, given one on its input (`-S`), says how
/// long it is and runs the command.
const FAKE_SUDO: &str = "#!/bin/sh\n\
case \"$1\" in\n\
  -n) exit 1 ;;\n\
  -S) shift; [ \"$1\" = \"-p\" ] && shift 2; read -r password; echo \"password of ${#password} characters\"; exec \"$@\" ;;\n\
  *) echo 'sudo: a terminal is required to read the password' >&2; exit 1 ;;\n\
esac\n";

async fn sudo(target: Target) {
    let bin = tempfile::tempdir().unwrap();
    let sudo = bin.path().join("sudo");
    std::fs::write(&sudo, FAKE_SUDO).unwrap();
    std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let options = PeerOptions {
        env: vec![("PATH".to_owned(), path)],
        ..Default::default()
    };
    let peer = Peer::start_with(target, options).await;
    // Hermes runs commands in a login shell, whose PATH the profile makes.
    let profile = format!("PATH=\"{}:$PATH\"\n", bin.path().display());
    std::fs::write(peer.home.parent().unwrap().join(".profile"), profile).unwrap();
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let text = format!("CALL terminal {}", json!({"command": "sudo echo elevated"}));
    client.submit(&live, &text).await;
    let asked = client.any_event("sudo.request").await;
    let request_id = asked["payload"]["request_id"].as_str().unwrap().to_owned();
    assert!(!request_id.is_empty(), "{asked}");
    let answer = json!({"session_id": live, "request_id": request_id, "password": "hunter2"});
    assert_eq!(
        client.call("sudo.respond", answer.clone()).await,
        json!({"status": "ok"})
    );
    let events = client.events_until("message.complete").await;
    let result = &events
        .iter()
        .find(|e| e["type"] == "tool.complete")
        .expect("the command ran")["payload"]["result"];
    assert_eq!(
        result["output"].as_str().unwrap().trim(),
        "password of 7 characters\nelevated",
        "{result}"
    );
    // Answered already; no request named at all.
    assert_eq!(
        client.call("sudo.respond", answer).await,
        json!({"status": "expired"})
    );
    assert_eq!(
        client
            .error_code("sudo.respond", json!({"password": "x"}))
            .await,
        4009
    );
    // The session keeps the password: the next sudo is not asked about.
    let result = terminal(&mut client, &live, "sudo echo again").await;
    assert_eq!(
        result["output"].as_str().unwrap().trim(),
        "password of 7 characters\nagain",
        "{result}"
    );
    peer.stop().await;
}

conformance!(
    a_skill_that_needs_a_secret_has_the_user_asked_for_it,
    skill_secret
);

async fn skill_secret(target: Target) {
    let peer = Peer::start(target).await;
    let skill = peer.home.join("skills/demo/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: demo\ndescription: A skill that needs a token\n\
         required_environment_variables:\n  - name: DEMO_TOKEN\n    prompt: Your demo token\n    \
         help: https://example.com/token\n---\n# Demo\n\nUse the token.\n",
    )
    .unwrap();
    let mut client = peer.connect().await;
    let live = client.new_session().await;
    let view = format!("CALL skill_view {}", json!({"name": "demo"}));
    client.submit(&live, &view).await;
    let asked = client.any_event("secret.request").await["payload"].clone();
    let request_id = asked["request_id"].as_str().unwrap().to_owned();
    assert_eq!(
        asked,
        json!({"prompt": "Your demo token", "env_var": "DEMO_TOKEN", "request_id": request_id,
               "metadata": {"skill_name": "demo", "help": "https://example.com/token"}})
    );
    let answer = json!({"session_id": live, "request_id": request_id, "value": "tok-123"});
    assert_eq!(
        client.call("secret.respond", answer.clone()).await,
        json!({"status": "ok"})
    );
    let events = client.events_until("message.complete").await;
    let result = &events
        .iter()
        .find(|e| e["type"] == "tool.complete")
        .expect("the skill was read")["payload"]["result"];
    assert_eq!(
        (
            &result["success"],
            &result["name"],
            &result["setup_needed"],
            &result["setup_skipped"],
            &result["readiness_status"],
            &result["missing_required_environment_variables"],
        ),
        (
            &json!(true),
            &json!("demo"),
            &json!(false),
            &json!(false),
            &json!("available"),
            &json!([])
        ),
        "{result}"
    );
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Use the token."),
        "{result}"
    );
    assert_eq!(result["path"], "demo/SKILL.md", "{result}");
    assert_eq!(
        result["required_environment_variables"],
        json!([{"name": "DEMO_TOKEN", "prompt": "Your demo token", "help": "https://example.com/token"}])
    );
    let env = std::fs::read_to_string(peer.home.join(".env")).unwrap();
    assert!(
        env.lines().any(|line| line == "DEMO_TOKEN=tok-123"),
        "{env}"
    );
    assert_eq!(
        client.call("secret.respond", answer).await,
        json!({"status": "expired"})
    );
    assert_eq!(
        client
            .error_code("secret.respond", json!({"value": "x"}))
            .await,
        4009
    );
    // Kept: the next read does not ask.
    client.submit(&live, &view).await;
    let events = client.events_until("message.complete").await;
    assert!(
        events.iter().all(|e| e["type"] != "secret.request"),
        "{events:?}"
    );
    peer.stop().await;
}
