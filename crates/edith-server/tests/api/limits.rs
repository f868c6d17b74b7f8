//! Limits: a caller over one is refused clearly, and others go on being served.

use std::time::Duration;

use edith_server::Limits;
use serde_json::json;

use crate::{Ctx, assert_problem, client_with_key};

#[tokio::test]
async fn bodies_and_inputs_beyond_the_limits_are_refused_and_the_server_goes_on() {
    let ctx = Ctx::start_limited(Limits {
        max_body_bytes: 4096,
        max_input_chars: 100,
        ..Limits::default()
    })
    .await;
    let huge = json!({"name": "x".repeat(10_000)}).to_string();
    assert_problem(
        &ctx.post("/v1/instances", &huge).await,
        413,
        "payload_too_large",
    );
    let response = ctx
        .http
        .post(ctx.url("/v1/instances"))
        .header("content-type", "application/json")
        .header("Idempotency-Key", "big")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413, "also through Idempotency-Key");

    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let long = json!({"input": "y".repeat(101)}).to_string();
    let refused = ctx.post(&turns, &long).await;
    assert_problem(&refused, 400, "invalid_request");
    assert!(
        refused.1["detail"].as_str().unwrap().contains("100"),
        "{}",
        refused.1
    );
    let (status, _) = ctx.post(&turns, r#"{"input": "short"}"#).await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn a_key_flooding_the_server_is_slowed_and_other_keys_are_not() {
    let ctx = Ctx::start_limited(Limits {
        requests_per_second: 0.5,
        burst: 8.0,
        ..Limits::default()
    })
    .await;
    let flooding = client_with_key(&ctx.key_with("read").await);
    let calm = client_with_key(&ctx.key_with("read").await);
    let mut refused = 0;
    for _ in 0..20 {
        let response = flooding.get(ctx.url("/v1/instances")).send().await.unwrap();
        if response.status() == 429 {
            assert!(response.headers().get("retry-after").is_some());
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["code"], "too_many_requests", "{body}");
            refused += 1;
        }
    }
    assert!(
        refused >= 10,
        "the flood was slowed: {refused} of 20 refused"
    );
    let response = calm.get(ctx.url("/v1/instances")).send().await.unwrap();
    assert_eq!(response.status(), 200, "another key is served");
}

#[tokio::test]
async fn a_key_holds_a_bounded_number_of_open_streams() {
    let ctx = Ctx::start_limited(Limits {
        streams_per_key: 2,
        ..Limits::default()
    })
    .await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    // A turn that waits for an approval keeps its stream open.
    let (status, turn) = ctx
        .post(
            &turns,
            r#"{"input": "terminal {\"command\": \"rm -rf /tmp/edith-limits-nothing\"}"}"#,
        )
        .await;
    assert_eq!(status, 202, "{turn}");
    let events = ctx.url(&format!("{turns}/{}/events", turn["id"].as_str().unwrap()));
    let reader = client_with_key(&ctx.key_with("read").await);
    let first = reader.get(&events).send().await.unwrap();
    let second = reader.get(&events).send().await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = reader.get(&events).send().await.unwrap();
    assert_eq!(third.status(), 429);
    assert!(third.headers().get("retry-after").is_some());
    // Another key still streams.
    let other = client_with_key(&ctx.key_with("read").await);
    assert_eq!(other.get(&events).send().await.unwrap().status(), 200);
    // A gateway relay socket counts as a stream too.
    let writer_key = ctx.key_with("write").await;
    let writer = client_with_key(&writer_key);
    let streams = [
        writer.get(&events).send().await.unwrap(),
        writer.get(&events).send().await.unwrap(),
    ];
    assert!(streams.iter().all(|s| s.status() == 200));
    let gateway = format!("{}/gateway", turns.split("/sessions").next().unwrap());
    let (status, problem) = ctx.relay(&gateway, Some(&writer_key)).await.unwrap_err();
    assert_eq!(status, 429, "{problem}");
    // So does a turn streamed in its POST: refused before it starts.
    let sessions = format!("{}/sessions", turns.split("/sessions/").next().unwrap());
    let (_, session) = ctx.post(&sessions, "{}").await;
    let other_turns = format!("{sessions}/{}/turns", session["id"].as_str().unwrap());
    let stream_turn = || {
        writer
            .post(ctx.url(&format!("{other_turns}/stream")))
            .header("content-type", "application/json")
            .header("Idempotency-Key", "streamed-1")
            .body(r#"{"input": "hello"}"#)
            .send()
    };
    assert_eq!(stream_turn().await.unwrap().status(), 429);
    let (_, listed) = ctx.get(&other_turns).await;
    assert_eq!(listed["items"], serde_json::json!([]), "no turn started");

    // Once the streams end, the same request (same key: a 429 is not kept) starts its turn.
    let cancel = format!("{turns}/{}/cancel", turn["id"].as_str().unwrap());
    ctx.post(&cancel, "").await;
    for stream in streams {
        let ended = tokio::time::timeout(Duration::from_secs(30), stream.text()).await;
        assert!(
            ended
                .expect("the stream ends")
                .unwrap()
                .contains("turn.finished")
        );
    }
    let mut started = None;
    for _ in 0..100 {
        let response = stream_turn().await.unwrap();
        if response.status() != 429 {
            started = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = started.expect("the stream limit let the retry through within 5 s");
    assert_eq!(started.status(), 201);
    assert!(
        crate::read_sse(started, Duration::from_secs(30))
            .await
            .len()
            > 1
    );
}

/// `edith serve --streams-per-key` sets the limit it names.
#[tokio::test]
async fn the_operator_sets_the_streams_a_key_may_hold() {
    let flags = ["--streams-per-key", "1"];
    let ctx = Ctx::serve_with(tempfile::tempdir().expect("temp dir"), &flags).await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    let (status, turn) = ctx
        .post(
            &turns,
            r#"{"input": "terminal {\"command\": \"rm -rf /tmp/edith-flags-nothing\"}"}"#,
        )
        .await;
    assert_eq!(status, 202, "{turn}");
    let events = ctx.url(&format!("{turns}/{}/events", turn["id"].as_str().unwrap()));
    let reader = client_with_key(&ctx.key_with("read").await);
    let first = reader.get(&events).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = reader.get(&events).send().await.unwrap();
    assert_eq!(second.status(), 429, "one stream per key");
    drop((first, second));
    let cancel = format!("{turns}/{}/cancel", turn["id"].as_str().unwrap());
    ctx.post(&cancel, "").await;
    ctx.stop().await;
}

/// `edith serve --max-connections` sets the limit it names: a connection beyond it waits to be
/// served until one of the others ends.
#[tokio::test]
async fn the_operator_sets_the_connections_served_at_once() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let flags = ["--max-connections", "2"];
    let ctx = Ctx::serve_with(tempfile::tempdir().expect("temp dir"), &flags).await;
    let addr = ctx.url("").trim_start_matches("http://").to_owned();
    let first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    let early = tokio::time::timeout(Duration::from_millis(500), third.read_to_end(&mut reply));
    assert!(early.await.is_err(), "not served while two others are open");
    drop(first);
    tokio::time::timeout(Duration::from_secs(10), third.read_to_end(&mut reply))
        .await
        .expect("served once one of the others ended")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    ctx.stop().await;
}

#[tokio::test]
async fn slow_and_idle_clients_are_disconnected_and_others_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ctx = Ctx::start_limited(Limits {
        header_timeout: std::time::Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let addr = ctx.url("").trim_start_matches("http://").to_owned();
    // Many sockets: one sends half a request head, the others nothing at all.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut idle = Vec::new();
    for _ in 0..50 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // And one that was served, then kept its connection open without another request.
    let mut kept_alive = tokio::net::TcpStream::connect(&addr).await.unwrap();
    kept_alive
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Meanwhile everyone else is served (each time on a new connection: one kept from an
    // earlier request would be closed by the same timeout, racing the request sent on it).
    let fresh = || client_with_key(crate::ADMIN_KEY);
    let list = async || {
        (ctx.send_with(&fresh(), reqwest::Method::GET, "/v1/instances", None)
            .await)
            .0
    };
    assert_eq!(list().await, 200);
    let served = read_to_close(&mut kept_alive).await;
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert_eq!(served.matches("HTTP/1.1").count(), 1, "{served}");
    for socket in std::iter::once(&mut slow).chain(idle.iter_mut()) {
        let mut buffer = [0u8; 256];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(10), socket.read(&mut buffer))
                .await
                .expect("disconnected within 10 s");
        // Closed: end of stream (hyper may first answer 408), or a reset.
        match read {
            Ok(0) | Err(_) => {}
            Ok(n) => {
                let text = String::from_utf8_lossy(&buffer[..n]);
                assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            }
        }
    }
    assert_eq!(list().await, 200);
}

/// Reads what the server sends on `socket` until it closes it (bounded).
async fn read_to_close(socket: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        socket.read_to_end(&mut received),
    )
    .await
    .expect("closed within 10 s");
    if let Err(e) = read {
        // A reset after the reply is a close too.
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_refused_and_others_are_served() {
    use tokio::io::AsyncWriteExt;
    let ctx = Ctx::start_limited(Limits {
        body_timeout: std::time::Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let addr = ctx.url("").trim_start_matches("http://").to_owned();
    let mut trickling = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/instances HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\":",
        crate::ADMIN_KEY
    );
    trickling.write_all(head.as_bytes()).await.unwrap();
    // Meanwhile everyone else is served.
    assert_eq!(ctx.get("/v1/instances").await.0, 200);
    let reply = read_to_close(&mut trickling).await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("request_timeout"), "{reply}");
    // Nothing was created from half a body.
    let (_, listed) = ctx.get("/v1/instances").await;
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_ends() {
    use tokio::io::AsyncWriteExt;
    let ctx = Ctx::start_limited(Limits {
        max_connections: 4,
        header_timeout: std::time::Duration::from_millis(500),
        ..Limits::default()
    })
    .await;
    let addr = ctx.url("").trim_start_matches("http://").to_owned();
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // The kernel takes a fifth connection into its backlog; the server answers it only once a
    // place is free, that is once a silent one was cut at the header timeout.
    let mut waiting = tokio::net::TcpStream::connect(&addr).await.unwrap();
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let reply = read_to_close(&mut waiting).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let mut buffer = [0u8; 64];
    // Closed (perhaps after a 408) or reset: cut; still waiting to be read: holding a place.
    let cut = silent
        .iter()
        .filter(|socket| match socket.try_read(&mut buffer) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count();
    assert!(
        cut >= 1,
        "the fifth was answered while every silent one still held a place"
    );
    assert_eq!(ctx.get("/v1/instances").await.0, 200);
}
