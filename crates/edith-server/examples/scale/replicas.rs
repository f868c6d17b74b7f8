//! The control plane as one and as three replicas on one PostgreSQL database: turns per second
//! with the sessions spread over instances made on each replica and every turn sent to the next
//! replica in turn (as a load balancer without affinity would, so two turns in three are
//! forwarded to their instance's owner), and the fan-out of one turn's end to many event
//! streams spread over the replicas.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::ReadyProcess;

use crate::{ControlPlane, KEY, LIMIT, Round, WAITING_INPUT, Way, round_over};

/// What one deployment measured.
pub struct Figures {
    pub replicas: usize,
    pub next: Round,
    /// From the cancel that ends the turn until the last stream saw its end.
    pub fanout: Duration,
    pub stream_errors: Vec<String>,
}

/// `count` replicas of `edith serve` on a new database and one shared data dir.
async fn replicas(edith: &Path, dir: &Path, database: &str, count: usize) -> Vec<ReadyProcess> {
    let mut started = Vec::new();
    for n in 0..count {
        let mut command = tokio::process::Command::new(edith);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(["--replica", &format!("bench{n}")])
            .args(crate::UNLIMITED)
            .env("EDITH_API_KEY", KEY)
            .env("EDITH_DATABASE_URL", database);
        started
            .push(ReadyProcess::spawn(command, "EDITH_READY url=", Duration::from_secs(60)).await);
    }
    started
}

pub async fn measure(edith: &Path, count: usize, sessions: usize, streams: usize) -> Figures {
    let database = testkit::postgres::database().await;
    let dir = tempfile::tempdir().unwrap();
    let processes = replicas(edith, dir.path(), database.url(), count).await;
    let pids: Vec<u32> = processes.iter().map(ReadyProcess::pid).collect();
    let planes: Vec<ControlPlane> = processes
        .iter()
        .map(|process| ControlPlane::new(process.ready_value("url")))
        .collect();

    // An instance made on each replica (which owns it), its share of the sessions on it.
    let mut turns = Vec::new();
    let mut first_profiles = None;
    for (n, plane) in planes.iter().enumerate() {
        let profiles = plane.instance().await;
        let share = sessions / count + usize::from(n < sessions % count);
        turns.extend(plane.sessions(&profiles, "turns", share).await);
        first_profiles.get_or_insert(profiles);
    }
    // Each session's turns go to the next replica in turn, whichever owns its instance.
    let by_turn: Vec<(ControlPlane, String)> = turns
        .into_iter()
        .enumerate()
        .map(|(i, turns)| (planes[i % count].clone(), turns))
        .collect();
    round_over(&pids, &by_turn, Way::TwoRequests).await;
    let next = round_over(&pids, &by_turn, Way::TwoRequests).await;

    // One turn waiting for an approval, its stream open on every replica in turn; the cancel
    // that ends it, and how long until every stream saw the end.
    let profiles = first_profiles.expect("one replica at least");
    let session = planes[0].sessions(&profiles, "fanout", 1).await.remove(0);
    let turn = planes[0]
        .post(&session, json!({"input": WAITING_INPUT}))
        .await
        .unwrap();
    let turn = format!("{session}/{}", turn["id"].as_str().unwrap());
    let mut opened = Vec::new();
    for i in 0..streams {
        let plane = planes[i % count].clone();
        let path = format!("{turn}/events");
        opened.push(tokio::spawn(async move {
            let mut response = plane.send_get(&path).await?;
            let mut seen = String::new();
            while !seen.contains("approval.requested") {
                match tokio::time::timeout(LIMIT, response.chunk()).await {
                    Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => return Err(format!("{path}: no approval request in {seen:?}")),
                }
            }
            Ok(response)
        }));
    }
    let mut stream_errors = Vec::new();
    let mut open = Vec::new();
    for task in opened {
        match task.await.unwrap_or_else(|e| Err(e.to_string())) {
            Ok(response) => open.push(response),
            Err(e) => stream_errors.push(e),
        }
    }
    let cancelled_at = Instant::now();
    if let Err(e) = planes[0].post(&format!("{turn}/cancel"), json!({})).await {
        stream_errors.push(e);
    }
    let ends: Vec<_> = open
        .into_iter()
        .map(|response| {
            tokio::spawn(async move {
                match tokio::time::timeout(LIMIT, response.text()).await {
                    Ok(Ok(text)) if text.contains("turn.finished") => Ok(Instant::now()),
                    other => Err(format!("a stream did not see the turn end: {other:?}")),
                }
            })
        })
        .collect();
    let mut last_end = cancelled_at;
    for end in ends {
        match end.await.unwrap_or_else(|e| Err(e.to_string())) {
            Ok(at) => last_end = last_end.max(at),
            Err(e) => stream_errors.push(e),
        }
    }
    for process in processes {
        process.stop(Duration::from_secs(30)).await;
    }
    Figures {
        replicas: count,
        next,
        fanout: last_end - cancelled_at,
        stream_errors,
    }
}
