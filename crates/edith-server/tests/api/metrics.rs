//! `GET /metrics`: admin only, and its counters follow what happened.

use std::time::Duration;

use crate::{Ctx, client_with_key};

pub(crate) use testkit::metric_sample as sample;

pub(crate) async fn scrape(ctx: &Ctx) -> String {
    let response = ctx.http.get(ctx.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    text
}

#[tokio::test]
async fn metrics_need_an_admin_key() {
    let ctx = Ctx::start().await;
    let anonymous = reqwest::Client::new()
        .get(ctx.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let reader = client_with_key(&ctx.key_with("read").await);
    let refused = reader.get(ctx.url("/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 403);
}

#[tokio::test]
async fn metrics_follow_turns_jobs_streams_and_requests() {
    let ctx = Ctx::start().await;
    let iid = ctx.ready_instance().await;
    let turns = ctx.turns_path(&iid).await;
    for _ in 0..3 {
        let (status, turn) = ctx.post(&turns, r#"{"input": "hello"}"#).await;
        assert_eq!(status, 202, "{turn}");
        let events = format!("{turns}/{}/events", turn["id"].as_str().unwrap());
        let events = ctx.sse(&events, None).await;
        assert_eq!(events.last().unwrap()["state"], "completed");
    }
    // A turn waiting for an approval, its stream held open.
    let waiting = ctx.waiting_turn(&turns).await;
    let open = ctx
        .http
        .get(ctx.url(&format!("{waiting}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 200);

    let text = scrape(&ctx).await;
    assert_eq!(
        sample(&text, r#"edith_turns_total{state="completed"}"#),
        3.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"edith_turn_duration_seconds_count{state="completed"}"#
        ),
        3.0
    );
    // The control plane's own time: before each of the four prompts reached the runtime, and
    // after each of the three completed turns' last event.
    assert_eq!(
        sample(&text, r#"edith_turn_own_seconds_count{leg="to_runtime"}"#),
        4.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"edith_turn_own_seconds_count{leg="from_runtime"}"#),
        3.0,
        "{text}"
    );
    assert!(sample(&text, r#"edith_turn_own_seconds_sum{leg="from_runtime"}"#) > 0.0);
    // Each scripted turn appends at least its start, a message and its end.
    assert!(sample(&text, r#"edith_events_appended_total{log="turn"}"#) >= 9.0);
    assert!(sample(&text, r#"edith_events_appended_total{log="job"}"#) >= 2.0);
    // On SQLite: the statements that appended between changes of state, each at least one event.
    assert!(text.contains("\nedith_turn_log_writes_total "), "{text}");
    assert!(
        sample(&text, "edith_turn_log_writes_total")
            <= sample(&text, r#"edith_events_appended_total{log="turn"}"#)
    );
    assert_eq!(
        sample(
            &text,
            r#"edith_jobs_total{kind="instance.provision",outcome="succeeded"}"#
        ),
        1.0
    );
    assert!(
        text.contains("edith_job_step_duration_seconds_count{step="),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"edith_instances{provider="embedded",state="ready"}"#
        ),
        1.0
    );
    assert_eq!(sample(&text, "edith_event_streams_open"), 1.0, "{text}");
    // Only the waiting turn's log is followed: the finished turns' channels went with their
    // streams.
    assert_eq!(sample(&text, "edith_event_logs_followed"), 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            r#"edith_http_requests_total{method="POST",route="/v1/instances",status="202"}"#
        ),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "edith_runtime_restarts_total"), 0.0);

    // The stream closed, the gauge comes down (the server notices the client going).
    drop(open);
    let (status, _) = ctx.post(&format!("{waiting}/cancel"), "").await;
    assert_eq!(status, 202);
    let mut streams = 1.0;
    for _ in 0..100 {
        streams = sample(&scrape(&ctx).await, "edith_event_streams_open");
        if streams == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(streams, 0.0);
    assert_eq!(
        sample(&scrape(&ctx).await, "edith_event_logs_followed"),
        0.0
    );
}
