//! Live sessions whose client went away are closed as Hermes 0.19 closes them
//! (`tui_gateway/server.py`): those of a connection that dropped once a grace period has passed
//! (at once for those opened with `close_on_disconnect`), unless a client resumed them or they
//! run a turn then; and, in a scan every few minutes, any session with no client that has been
//! idle for hours, which is where those a running turn kept from the first end up. A session
//! running a turn, or waiting for an answer, is never closed by either.

use std::sync::Arc;
use std::time::Duration;

use crate::runtime::Runtime;
use crate::session::{LiveSession, SessionState};
use crate::store::unix_now;

use super::methods::close_if;

/// A gateway connection opened: its sessions have a client.
pub fn attach_connection(runtime: &Runtime, connection: u64) {
    (runtime.open_connections.lock().expect("not poisoned")).insert(connection);
}

/// A connection went away: its sessions are closed after the grace period unless a client
/// resumed them elsewhere or they run a turn then (at once, when they asked for
/// `close_on_disconnect`). A grace of zero (or one that never ends) leaves them to the scan.
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
    let left_to_the_scan = grace.is_zero() || grace == Duration::MAX;
    for session in orphans {
        let immediate = session
            .state
            .lock()
            .expect("not poisoned")
            .close_on_disconnect;
        if !immediate && left_to_the_scan {
            continue;
        }
        let runtime = runtime.clone();
        let mut stopping = runtime.stopping.clone();
        tokio::spawn(async move {
            // Unless a client resumed it meanwhile.
            let left = |state: &SessionState| state.transport.connection == connection;
            if immediate {
                close_if(&runtime, &session, "ws_disconnect", left).await;
                return;
            }
            tokio::select! {
                // The runtime stops: its turns are interrupted, and the process ends.
                _ = stopping.wait_for(|stop| *stop) => return,
                () = tokio::time::sleep(grace) => {}
            }
            let orphaned = |state: &SessionState| left(state) && idle(&runtime, &session, state);
            close_if(&runtime, &session, "ws_disconnect", orphaned).await;
        });
    }
}

/// Whether the session runs no turn and waits for no answer.
fn idle(runtime: &Runtime, session: &LiveSession, state: &SessionState) -> bool {
    state.running.is_none() && !runtime.prompts.waits(&session.sid)
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
            let sessions: Vec<Arc<LiveSession>> = (runtime.sessions.lock())
                .expect("not poisoned")
                .values()
                .cloned()
                .collect();
            for session in sessions {
                // Decided as it is closed: a connection that resumed it since has it now.
                let forgotten = |state: &SessionState| {
                    let open = runtime.open_connections.lock().expect("not poisoned");
                    !open.contains(&state.transport.connection)
                        && idle(&runtime, &session, state)
                        && idle_for_longer_than_the_ttl(&runtime, &session, state)
                };
                close_if(&runtime, &session, "idle_timeout", forgotten).await;
            }
        }
    });
}

/// Whether the session was started and last active longer than `Reaping::idle_ttl` ago.
fn idle_for_longer_than_the_ttl(
    runtime: &Runtime,
    session: &LiveSession,
    state: &SessionState,
) -> bool {
    let ttl = runtime.reaping.idle_ttl.as_secs_f64();
    let now = unix_now();
    now - state.last_active > ttl && now - session.started_at > ttl
}
