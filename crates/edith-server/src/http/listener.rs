//! Accepts connections and serves them over HTTP/1.1: a client that does not send a whole
//! request head within the header timeout — a slow one, or an idle keep-alive connection — is
//! disconnected. `axum::serve` sets no such timeout, hence this loop. At most
//! `Limits::max_connections` are served at once: beyond that, new ones wait in the listen
//! backlog until one ends, so a flood of sockets costs no more than that many descriptors.
//! (A body's own deadline is `http::body`'s.) Stopping lets requests in flight finish, for a
//! bounded time.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::http::limits::Limits;
use crate::state::stopped;

/// How long stopping waits for requests in flight (streams end on their own when it stops).
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stopping` flips.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let place = tokio::select! {
            place = places.clone().acquire_owned() => place.expect("never closed"),
            () = stopped(&mut stopping) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut stopping) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: try again shortly rather than spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Small frames (stream pieces) go out at once instead of waiting on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()))
            .with_upgrades();
        let mut stop = stopping.clone();
        connections.spawn(async move {
            let _place = place; // given back when the connection ends
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended");
                    }
                }
                () = stopped(&mut stop) => {
                    // Finishes the request in flight, then closes.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        // Forget the connections that ended.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let drained = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("requests still in flight after {DRAIN:?}; stopping anyway");
        connections.abort_all();
    }
}
