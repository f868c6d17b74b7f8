//! Accepts connections and serves them over HTTP/1.1: a client that does not send a whole
//! request head within the header timeout — a slow one, or an idle keep-alive connection — is
//! disconnected. `axum::serve` sets no such timeout, hence this loop. At most
//! `Limits::max_connections` are served at once: beyond that, new ones wait in the listen
//! backlog until one ends, so a flood of sockets costs no more than that many descriptors.
//! (A body's own deadline is `http::body`'s.) Stopping lets requests in flight finish, for a
//! bounded time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::http::limits::Limits;
use crate::state::stopped;

/// How long stopping waits for requests in flight (streams end on their own when it stops).
const DRAIN: Duration = Duration::from_secs(10);

/// Connections the kernel completes and holds before the server accepts them (it caps this at
/// `net.core.somaxconn`). Thousands of clients connecting at once wait there; with tokio's
/// default of 1024, a burst of 2000 had hundreds of its SYNs dropped, and each of those clients
/// waited a second for its retry.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as tokio's own `bind`).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The next connection, or `None` once `stopping` flips. Meanwhile the connections that end are
/// forgotten: a task that ended keeps its memory (about a kilobyte) until it is taken out of the
/// set, and after a burst no new connection may come to take it out.
async fn next_connection(
    listener: &TcpListener,
    connections: &mut JoinSet<()>,
    stopping: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<std::io::Result<TcpStream>> {
    loop {
        tokio::select! {
            accepted = listener.accept() => return Some(accepted.map(|(stream, _)| stream)),
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = stopped(stopping) => return None,
        }
    }
}

/// Serves `app` on `listener` until `stopping` flips.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        let place = tokio::select! {
            place = places.clone().acquire_owned() => place.expect("never closed"),
            () = stopped(&mut stopping) => break,
        };
        let stream = match next_connection(&listener, &mut connections, &mut stopping).await {
            None => break,
            Some(Ok(stream)) => stream,
            Some(Err(e)) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_that_ended_are_forgotten_while_none_arrive() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (_stop, mut stopping) = tokio::sync::watch::channel(false);
        let mut connections = JoinSet::new();
        connections.spawn(async {});
        // Bounded: about five seconds in all.
        for _ in 0..100 {
            let waiting = next_connection(&listener, &mut connections, &mut stopping);
            let waited = tokio::time::timeout(Duration::from_millis(50), waiting).await;
            assert!(waited.is_err(), "nobody connects");
            if connections.is_empty() {
                return;
            }
        }
        panic!("a connection that ended is still in the set");
    }

    /// 1500 clients connecting at once to a server that has not accepted any yet all get
    /// their connection; tokio's own backlog (1024) drops the SYNs of about 500, which then
    /// wait a second or more for their retries.
    #[tokio::test]
    async fn a_burst_of_connections_beyond_tokios_default_backlog_waits_in_the_kernel() {
        const BURST: usize = 1500;
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .map_or(BURST, |text| text.trim().parse().expect("a number"));
        assert!(
            somaxconn >= BURST,
            "net.core.somaxconn is {somaxconn}: the kernel caps the listen backlog there, and \
             this machine drops the SYNs of a burst of {BURST} connections"
        );
        let open_files = testkit::raise_open_files();
        assert!(
            open_files > BURST as u64 + 100,
            "this process may open {open_files} files, too few for a burst of {BURST} sockets"
        );
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut connecting = JoinSet::new();
        for _ in 0..BURST {
            connecting.spawn(async move {
                // A connection the backlog holds is made in microseconds; one whose SYN was
                // dropped is not made at all while nothing is accepted (its retries meet the
                // same full queue), however long it is given.
                tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await
            });
        }
        let mut connected = Vec::with_capacity(BURST);
        while let Some(joined) = connecting.join_next().await {
            if let Ok(Ok(stream)) = joined.unwrap() {
                connected.push(stream);
            }
        }
        assert_eq!(connected.len(), BURST, "connections made without an accept");
    }

    #[tokio::test]
    async fn waiting_for_a_connection_ends_when_stopping() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        let mut connections = JoinSet::new();
        stop.send(true).unwrap();
        let waiting = next_connection(&listener, &mut connections, &mut stopping);
        let next = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(matches!(next, Ok(None)), "stopping ends the wait");
    }
}
