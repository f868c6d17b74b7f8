//! Live sessions whose client went away are closed as Hermes 0.19 closes them
//! (`tui_gateway/server.py`): those of a connection that dropped once a grace period has passed
//! (at once for those opened with `close_on_disconnect`), unless a client resumed them or they
//! run a turn then; and, in a scan every few minutes, any session with no client that has been
//! idle for hours, which is where those a running turn kept from the first end up. A session
//! running a turn, or waiting for an answer, is never closed by either.

use std::sync::Arc;

use crate::runtime::Runtime;
use crate::session::LiveSession;
use crate::store::unix_now;

use super::methods::close;

/// A gateway connection opened: its sessions have a client.
pub fn attach_connection(runtime: &Runtime, connection: u64) {
    (runtime.open_connections.lock().expect("not poisoned")).insert(connection);
}

/// A connection went away: its sessions are closed after the grace period unless a client
/// resumed them elsewhere or they run a turn then (at once, when they asked for
/// `close_on_disconnect`). A grace of zero leaves them to the scan, as in Hermes.
pub fn detach_connection(runtime: &Arc<Runtime>, connection: u64) {
    (runtime.open_connections.lock().expect("not poisoned")).remove(&connection);
    let orphans: Vec<Arc<LiveSession>> = runtime
        .sessions
        .lock()
        .expect("not poisoned")
        .values()
        .filter(|s| s.state.lock().expect("not poisoned").transport.connection == connection)
        .cloned()
        .collect();
    let grace = runtime.reaping.orphan_grace;
    for session in orphans {
        let immediate = session
            .state
            .lock()
            .expect("not poisoned")
            .close_on_disconnect;
        if !immediate && grace.is_zero() {
            continue;
        }
        let runtime = runtime.clone();
        tokio::spawn(async move {
            if !immediate {
                tokio::time::sleep(grace).await;
                if !still_orphaned(&runtime, &session, connection) {
                    return;
                }
            }
            close(&runtime, &session, "ws_disconnect").await;
        });
    }
}

/// Whether `session`, left by `connection`, is still on it (no client resumed it) and idle.
fn still_orphaned(runtime: &Runtime, session: &LiveSession, connection: u64) -> bool {
    let state = session.state.lock().expect("not poisoned");
    state.transport.connection == connection
        && state.running.is_none()
        && !runtime.prompts.waits(&session.sid)
}

/// Runs the scan every `Reaping::scan_every` until the runtime stops.
pub fn spawn(runtime: Arc<Runtime>) {
    let mut stopping = runtime.stopping.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopping.wait_for(|stop| *stop) => return,
                () = tokio::time::sleep(runtime.reaping.scan_every) => {}
            }
            for session in idle_without_a_client(&runtime) {
                close(&runtime, &session, "idle_timeout").await;
            }
        }
    });
}

/// The live sessions with no client, no turn and no question pending, started and last active
/// longer than `Reaping::idle_ttl` ago.
fn idle_without_a_client(runtime: &Runtime) -> Vec<Arc<LiveSession>> {
    let ttl = runtime.reaping.idle_ttl.as_secs_f64();
    let now = unix_now();
    let open = runtime.open_connections.lock().expect("not poisoned");
    let sessions = runtime.sessions.lock().expect("not poisoned");
    (sessions.values())
        .filter(|session| {
            let state = session.state.lock().expect("not poisoned");
            !open.contains(&state.transport.connection)
                && state.running.is_none()
                && !runtime.prompts.waits(&session.sid)
                && now - state.last_active > ttl
                && now - session.started_at > ttl
        })
        .cloned()
        .collect()
}
