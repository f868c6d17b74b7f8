//! The Desktop replies' shapes, ours against the real Hermes 0.19.0 side by side: both runtimes
//! are given the same things (a session made over the gateway, a profile, a cron job, a git
//! workspace), every reading route is asked the same on both, and every key Hermes's reply has
//! must be in ours too, at every depth (the typed client would read a missing key as `None` and
//! never notice).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::harness::{Peer, TOKEN, Target};
use crate::sessions::prompted_session;

/// Keys Hermes sends and ours does not, each stated in `docs/runtimes.md` (route, key path).
const KNOWN_GAPS: &[(&str, &str)] = &[];

/// What a peer was given, to name in the routes asked.
struct Given {
    session: String,
    job: String,
}

async fn give(peer: &Peer) -> Given {
    let mut client = peer.connect().await;
    let (_, session) = prompted_session(&mut client, "hello shapes").await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(peer.url(path))
            .header("X-Hermes-Session-Token", TOKEN)
            .json(&body)
            .send()
    };
    let profile = post("/api/profiles", json!({"name": "work"}))
        .await
        .unwrap();
    assert!(profile.status().is_success(), "{:?}", profile.text().await);
    let job = post(
        "/api/cron/jobs",
        json!({"prompt": "say hi", "schedule": "every 1h", "name": "hourly"}),
    )
    .await
    .unwrap();
    let job: Value = job.json().await.unwrap();
    let job = job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a job: {job}"))
        .to_owned();
    Given { session, job }
}

/// Every key path of `value`: object keys joined with `.`, array elements as `[]` (the first
/// element stands for all, so two replies with items of one shape compare).
fn key_paths(value: &Value, at: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = format!("{at}.{key}");
                out.insert(path.clone());
                key_paths(inner, &path, out);
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                key_paths(first, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `path` is under a part of the reply that ours has no element or value of to
/// compare (an empty list, or `null`, where Hermes has items).
fn unreachable_in(ours: &Value, path: &str) -> bool {
    let mut node = ours;
    for part in path.trim_start_matches('.').split('.') {
        let (key, arrays) = match part.find("[]") {
            Some(i) => (&part[..i], part[i..].matches("[]").count()),
            None => (part, 0),
        };
        if !key.is_empty() {
            node = match node.get(key) {
                Some(inner) => inner,
                None => return false,
            };
        }
        for _ in 0..arrays {
            match node.as_array().and_then(|items| items.first()) {
                Some(first) => node = first,
                None => return true,
            }
        }
        if node.is_null() {
            return true;
        }
    }
    false
}

async fn get(peer: &Peer, path: &str) -> Value {
    let reply = reqwest::Client::new()
        .get(peer.url(path))
        .header("X-Hermes-Session-Token", TOKEN)
        .timeout(std::time::Duration::from_secs(60))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(reply.status().is_success(), "{path}: {}", reply.status());
    reply.json().await.unwrap()
}

#[tokio::test]
async fn desktop_replies_carry_every_key_hermes_sends() {
    let (ours, hermes) = tokio::join!(Peer::start(Target::Ours), Peer::start(Target::Hermes));
    let (given_ours, given_hermes) = tokio::join!(give(&ours), give(&hermes));
    for peer in [&ours, &hermes] {
        let work = std::fs::canonicalize(&peer.work).unwrap();
        std::fs::write(work.join("notes.md"), "one\n").unwrap();
        crate::desktop::git(&work, &["init", "-q", "-b", "main"]);
        crate::desktop::git(&work, &["add", "notes.md"]);
        crate::desktop::git(&work, &["commit", "-q", "-m", "first"]);
        std::fs::write(work.join("notes.md"), "one\ntwo\n").unwrap();
    }
    let routes = |peer: &Peer, given: &Given| {
        let work = std::fs::canonicalize(&peer.work).unwrap();
        let work = work.to_string_lossy().into_owned();
        let (session, job) = (&given.session, &given.job);
        vec![
            ("status", "/api/status".to_owned()),
            ("sessions", "/api/sessions".to_owned()),
            ("sessions full", "/api/sessions?full=1".to_owned()),
            ("search", "/api/sessions/search?q=shapes".to_owned()),
            ("session", format!("/api/sessions/{session}")),
            ("messages", format!("/api/sessions/{session}/messages")),
            ("profiles", "/api/profiles".to_owned()),
            ("active profile", "/api/profiles/active".to_owned()),
            ("jobs", "/api/cron/jobs".to_owned()),
            ("job", format!("/api/cron/jobs/{job}")),
            ("runs", format!("/api/cron/jobs/{job}/runs")),
            ("skills", "/api/skills".to_owned()),
            ("toolsets", "/api/tools/toolsets".to_owned()),
            ("plugins", "/api/dashboard/plugins".to_owned()),
            ("fs list", format!("/api/fs/list?path={work}")),
            ("fs read", format!("/api/fs/read-text?path={work}/notes.md")),
            ("git status", format!("/api/git/status?path={work}")),
            ("git branches", format!("/api/git/branches?path={work}")),
        ]
    };
    let mut missing = Vec::new();
    for ((name, ours_path), (_, hermes_path)) in routes(&ours, &given_ours)
        .into_iter()
        .zip(routes(&hermes, &given_hermes))
    {
        let (ours_reply, hermes_reply) =
            tokio::join!(get(&ours, &ours_path), get(&hermes, &hermes_path));
        let (mut ours_keys, mut hermes_keys) = (BTreeSet::new(), BTreeSet::new());
        key_paths(&ours_reply, "", &mut ours_keys);
        key_paths(&hermes_reply, "", &mut hermes_keys);
        eprintln!(
            "{name}: Hermes {} key paths, ours {}",
            hermes_keys.len(),
            ours_keys.len()
        );
        for path in hermes_keys.difference(&ours_keys) {
            if unreachable_in(&ours_reply, path) || KNOWN_GAPS.contains(&(name, path.as_str())) {
                continue;
            }
            missing.push(format!("{name}: {path}"));
        }
    }
    assert!(
        missing.is_empty(),
        "keys Hermes sends that ours does not:\n{}",
        missing.join("\n")
    );
    ours.stop().await;
    hermes.stop().await;
}
