//! Live sessions left unused are closed on their runtime: a live session holds the runtime's
//! resources (on the real Hermes 0.19, a Python process of about 50 MB, which it never reaps
//! while its client is connected), and a session's next turn resumes its stored session
//! (`runtime/live_sessions.rs` decides which, under the lock turns take them under). Those an
//! application opened through native calls on the control plane's connection go the same way.

use std::time::Duration;

use hermes_native::codes;
use hermes_native::methods::{LiveSessionParams, SessionClose};

use crate::state::AppState;

/// The shortest a live session stays open after its last use: far longer than a turn takes from
/// taking its live session to following it (a close in between would cut its prompt short).
const LEAST_IDLE: Duration = Duration::from_secs(1);

/// `Limits::live_session_idle`, at least [`LEAST_IDLE`].
fn live_session_idle(state: &AppState) -> Duration {
    state.gate.limits().live_session_idle.max(LEAST_IDLE)
}

/// Closes, on every runtime this replica is connected to, the live sessions no turn has used
/// for `Limits::live_session_idle` (nor follows now): a live session holds the runtime's
/// resources (on the real Hermes, a process of its own), and a session's next turn resumes its
/// stored session. The closes are sent all at once, each bounded by the gateway's timeout.
pub async fn close(state: &AppState) {
    let idle = live_session_idle(state);
    let links = state.gateways.open_links();
    let closes = links.iter().flat_map(|(instance, link)| {
        let gateway = &link.gateway;
        // In use: followed by a turn, or sending events nobody follows (a native call's turn).
        let in_use = |sid: &_| gateway.is_followed(sid) || gateway.heard_within(sid, idle);
        let taken = link.live.take_idle(idle, in_use);
        taken.into_iter().map(move |closing| async move {
            let params = LiveSessionParams::new(&closing.sid);
            // Closed already on the runtime is closed all the same.
            if let Err(e) = gateway.request::<SessionClose>(&params).await
                && e.code() != Some(codes::LIVE_SESSION_NOT_FOUND)
            {
                tracing::warn!(instance = %instance, error = %e, "an idle live session was not closed");
            }
            // Whoever waits for the session opens another from here on.
            drop(closing);
        })
    });
    futures_util::future::join_all(closes).await;
}

/// How often [`close`] runs: a quarter of the idle time, at least once a minute.
pub fn sweep_every(state: &AppState) -> Duration {
    (live_session_idle(state) / 4).clamp(LEAST_IDLE / 4, Duration::from_secs(60))
}
