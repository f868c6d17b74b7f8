//! The live sessions a gateway connection has open, one per control-plane session that used it,
//! with when each was last used. A live session holds the runtime's resources until it is
//! closed (the real Hermes 0.19 runs a Python process of about 50 MB for each, and never
//! reaps one whose client is still connected), so those left unused are closed (`take_idle`);
//! the session's next turn resumes its stored session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use edith_types::SessionId;
use hermes_native::LiveSessionId;

#[derive(Default)]
pub struct LiveSessions {
    by_session: Mutex<HashMap<SessionId, Live>>,
}

struct Live {
    sid: LiveSessionId,
    used: Instant,
}

impl LiveSessions {
    /// The session's live session, if one is open; taken to be used from now on.
    pub fn used(&self, session: &SessionId) -> Option<LiveSessionId> {
        let mut sessions = self.by_session.lock().expect("not poisoned");
        let live = sessions.get_mut(session)?;
        live.used = Instant::now();
        Some(live.sid.clone())
    }

    /// Counts the session's live session, if one is open, as used now.
    pub fn touch(&self, session: &SessionId) {
        let _ = self.used(session);
    }

    /// The session's live session, if one is open, leaving when it was used as it is.
    pub fn get(&self, session: &SessionId) -> Option<LiveSessionId> {
        let sessions = self.by_session.lock().expect("not poisoned");
        sessions.get(session).map(|live| live.sid.clone())
    }

    pub fn insert(&self, session: SessionId, sid: LiveSessionId) {
        let live = Live {
            sid,
            used: Instant::now(),
        };
        self.by_session
            .lock()
            .expect("not poisoned")
            .insert(session, live);
    }

    pub fn remove(&self, session: &SessionId) -> Option<LiveSessionId> {
        let mut sessions = self.by_session.lock().expect("not poisoned");
        sessions.remove(session).map(|live| live.sid)
    }

    pub fn len(&self) -> usize {
        self.by_session.lock().expect("not poisoned").len()
    }

    /// Forgets the live sessions last used more than `idle` ago and not `in_use` now (a turn
    /// follows it), and returns them, to be closed. Decided under the same lock as `used`: a
    /// turn that takes a live session either finds it before (and it is not idle) or after
    /// (and opens another).
    pub fn take_idle(
        &self,
        idle: Duration,
        in_use: impl Fn(&LiveSessionId) -> bool,
    ) -> Vec<LiveSessionId> {
        let mut sessions = self.by_session.lock().expect("not poisoned");
        let mut taken = Vec::new();
        sessions.retain(|_, live| {
            let keep = live.used.elapsed() < idle || in_use(&live.sid);
            if !keep {
                taken.push(live.sid.clone());
            }
            keep
        });
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sessions_unused_for_long_and_not_in_use_are_taken() {
        let live = LiveSessions::default();
        let (a, b, c) = (
            SessionId::generate(),
            SessionId::generate(),
            SessionId::generate(),
        );
        let sid = |name: &str| LiveSessionId::new(name);
        live.insert(a.clone(), sid("a"));
        live.insert(b.clone(), sid("b"));
        live.insert(c.clone(), sid("c"));
        std::thread::sleep(Duration::from_millis(30));
        // Used just now, or followed by a turn: kept.
        assert_eq!(live.used(&a), Some(sid("a")));
        let taken = live.take_idle(Duration::from_millis(20), |s| *s == sid("b"));
        assert_eq!(taken, [sid("c")]);
        assert_eq!(live.get(&c), None, "forgotten once taken");
        assert_eq!(live.len(), 2);
        // `get` does not count as a use.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(live.get(&a), Some(sid("a")));
        let taken = live.take_idle(Duration::from_millis(20), |_| false);
        assert_eq!(taken.len(), 2, "{taken:?}");
        assert_eq!(live.len(), 0);
    }
}
