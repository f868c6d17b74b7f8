//! The log of `edith serve`: with `--log-format json`, one JSON object a line, each naming the
//! ids of what it is about; as text, without colour codes unless it goes to a terminal.

use std::time::Duration;

use edith_types::{InstanceId, JobId, ProfileId, SessionId, TurnId};
use serde_json::Value;

use crate::Ctx;

/// The ids a line carries in its spans (`name` → value), and its message.
fn read(line: &str) -> (String, std::collections::HashMap<String, String>) {
    let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let message = entry["fields"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut ids = std::collections::HashMap::new();
    for span in entry["spans"].as_array().into_iter().flatten() {
        for (field, value) in span.as_object().unwrap() {
            if let Some(value) = value.as_str() {
                ids.insert(field.clone(), value.to_owned());
            }
        }
    }
    (message, ids)
}

#[tokio::test]
async fn json_log_lines_name_the_instance_session_and_turn() {
    let ctx = Ctx::serve_with(tempfile::tempdir().unwrap(), &["--log-format", "json"]).await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let (status, turn) = ctx.post(&turns, r#"{"input": "hello"}"#).await;
    assert_eq!(status, 202, "{turn}");
    let tid = turn["id"].as_str().unwrap().to_owned();
    let events = ctx.sse(&format!("{turns}/{tid}/events"), None).await;
    assert_eq!(events.last().unwrap()["state"], "completed");

    let mut finished = None;
    for _ in 0..100 {
        let lines = ctx.server_log();
        finished = lines
            .iter()
            .map(|line| read(line))
            .find(|(message, _)| message == "turn finished");
        if finished.is_some() {
            // Every line is JSON (`read` panics on one that is not).
            let job = lines
                .iter()
                .map(|l| read(l))
                .find(|(m, _)| m == "job finished");
            let (_, job_ids) = job.expect("a `job finished` line");
            assert_eq!(job_ids["instance"], iid);
            assert!(job_ids["job"].starts_with("job_"), "{job_ids:?}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, ids) = finished.expect("a `turn finished` line within 5 s");
    assert_eq!(ids["instance"], iid);
    assert_eq!(ids["turn"], tid);
    assert_eq!(ids["session"], turn["session_id"].as_str().unwrap());
    assert!(ids["profile"].starts_with("prof_"), "{ids:?}");

    // Every line that is about something says so in its fields, under the same names, the
    // requests' lines too (their paths name what they are about).
    let lines = ctx.server_log();
    let mut named = 0;
    for line in &lines {
        let (_, ids) = read(line);
        for (kind, id) in ids_in(line) {
            assert_eq!(ids.get(kind), Some(&id), "`{kind}` of: {line}");
            named += 1;
        }
    }
    let about_the_turn = lines
        .iter()
        .filter(|line| read(line).1.get("turn") == Some(&tid))
        .count();
    // Its events' request, its end; at least.
    assert!(about_the_turn >= 2, "{lines:#?}");
    assert!(named >= 10, "{lines:#?}");
}

/// The instance, profile, session, turn and job ids written anywhere in a log line, by the
/// field that names them (`sess_…` → `session`).
fn ids_in(line: &str) -> Vec<(&'static str, String)> {
    let kinds = [
        (InstanceId::PREFIX, "instance"),
        (ProfileId::PREFIX, "profile"),
        (SessionId::PREFIX, "session"),
        (TurnId::PREFIX, "turn"),
        (JobId::PREFIX, "job"),
    ];
    let mut found = Vec::new();
    for (prefix, kind) in kinds {
        let prefix = format!("{prefix}_");
        for (at, _) in line.match_indices(&prefix) {
            let id: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // An id is its prefix and 32 hex digits; a field's name (`"turn":`) is not one.
            if id.len() == prefix.len() + 32 {
                found.push((kind, id));
            }
        }
    }
    found
}

/// The text log carries no terminal colours when it goes to a file or a pipe (as here).
#[tokio::test]
async fn a_text_log_that_is_not_on_a_terminal_has_no_colour_codes() {
    let ctx = Ctx::serve(tempfile::tempdir().unwrap()).await;
    ctx.ready_instance().await;
    let mut lines = ctx.server_log();
    for _ in 0..100 {
        if lines.iter().any(|line| line.contains("job finished")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        lines = ctx.server_log();
    }
    assert!(
        lines.iter().any(|line| line.contains("job finished")),
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|line| !line.contains('\u{1b}')),
        "{lines:?}"
    );
}
