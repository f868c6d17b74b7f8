//! The home's skills as a client manages them: listed by category, read again on request.

use serde_json::json;

use crate::conformance;
use crate::harness::{Peer, Target};

conformance!(skills_are_listed_by_category_and_reloaded, skills);

fn write_skill(peer: &Peer, path: &str, name: &str) {
    let file = peer.home.join("skills").join(path).join("SKILL.md");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let text = format!("---\nname: {name}\ndescription: The {name} skill\n---\nDo it.\n");
    std::fs::write(file, text).unwrap();
}

async fn skills(target: Target) {
    let peer = Peer::start(target).await;
    write_skill(&peer, "alpha", "alpha");
    write_skill(&peer, "ops/deploy", "deploy");
    write_skill(&peer, "off", "off");
    let config = peer.home.join("config.yaml");
    let mut yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    yaml["skills"] = serde_yaml::to_value(json!({"disabled": ["off"]})).unwrap();
    std::fs::write(&config, serde_yaml::to_string(&yaml).unwrap()).unwrap();
    let mut client = peer.connect().await;

    // By category (`general` when none), without the skills switched off.
    let listed = client
        .call("skills.manage", json!({"action": "list"}))
        .await;
    assert_eq!(
        listed,
        json!({"skills": {"general": ["alpha"], "ops": ["deploy"]}})
    );
    assert_eq!(client.call("skills.manage", json!({})).await, listed);

    // The first reload finds every skill new; later ones what changed since.
    let reloaded = client.call("skills.reload", json!({})).await;
    assert_eq!(
        reloaded,
        json!({
            "output": "Reloading skills...\nAdded skills:\n  - alpha\n  - deploy\n2 skill(s) available",
            "result": {
                "added": [
                    {"name": "alpha", "description": "The alpha skill"},
                    {"name": "deploy", "description": "The deploy skill"},
                ],
                "removed": [], "unchanged": [], "total": 2, "commands": 2,
            },
        })
    );
    let same = client.call("skills.reload", json!({})).await;
    assert_eq!(
        same["output"],
        "Reloading skills...\nNo new skills detected.\n2 skill(s) available"
    );
    write_skill(&peer, "gamma", "gamma");
    std::fs::remove_dir_all(peer.home.join("skills/alpha")).unwrap();
    let changed = client.call("skills.reload", json!({})).await;
    assert_eq!(
        changed["output"],
        "Reloading skills...\nAdded skills:\n  - gamma\nRemoved skills:\n  - alpha\n2 skill(s) available"
    );
    assert_eq!(changed["result"]["unchanged"], json!(["deploy"]));
    let (code, message) = client
        .refusal("skills.manage", json!({"action": "zap"}))
        .await;
    assert_eq!(
        (code, message.as_str()),
        (4017, "unknown skills action: zap")
    );
    peer.stop().await;
}

/// The hub's actions, with no hub to reach: nothing found, as the real Hermes 0.19.0 answers
/// on this machine (observed 2026-12-03: the same replies). Ours only: Hermes tries GitHub and
/// its other hubs with retries and back-off first, about a minute here, even with every
/// address off the machine refused.
#[tokio::test]
async fn the_skills_hub_finds_nothing_when_it_cannot_be_reached() {
    let peer = Peer::start(Target::Ours).await;
    let mut client = peer.connect().await;
    let search = json!({"action": "search", "query": "anything"});
    assert_eq!(
        client.call("skills.manage", search).await,
        json!({"results": []})
    );
    assert_eq!(
        client
            .call("skills.manage", json!({"action": "browse"}))
            .await,
        json!({"items": [], "page": 1, "total_pages": 1, "total": 0})
    );
    let inspect = json!({"action": "inspect", "query": "deploy"});
    assert_eq!(
        client.call("skills.manage", inspect).await,
        json!({"info": {}})
    );
    // Differs: Hermes answers `{installed: true}` although nothing was installed.
    let install = json!({"action": "install", "query": "deploy-helper"});
    let (code, message) = client.refusal("skills.manage", install).await;
    assert_eq!(code, 5024);
    assert!(
        message.contains("deploy-helper was not installed"),
        "{message}"
    );
    peer.stop().await;
}
