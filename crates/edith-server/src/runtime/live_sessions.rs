//! The live sessions a gateway connection has open, with when each was last used: one per
//! control-plane session that used it, and those an application opened through native calls on
//! the same connection (`native_call`). A live session holds the runtime's resources until it is
//! closed (the real Hermes 0.19 runs a Python process of about 50 MB for each, and never reaps
//! one whose client is still connected), so those left unused are closed (`take_idle`); a
//! session's next turn resumes its stored session, and an application resumes its own. Two
//! control-plane sessions continuing one stored session hold the same live session (the runtime
//! gives both the one that is open): it is closed once neither uses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use edith_types::SessionId;
use hermes_native::LiveSessionId;
use tokio::sync::OwnedMutexGuard;

#[derive(Default)]
pub struct LiveSessions {
    by_holder: Mutex<HashMap<Holder, Entry>>,
}

/// Whose a live session is.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Holder {
    /// A control-plane session's, which its turns use.
    Session(SessionId),
    /// Opened by a native call, named by itself: the application that opened it uses it
    /// through native calls.
    Native(LiveSessionId),
}

enum Entry {
    Open {
        sid: LiveSessionId,
        used: Instant,
    },
    /// Being closed on the runtime: whoever wants the session waits for the gate, which the
    /// closer holds until the runtime has answered. (Our runtime's `session.resume` of a
    /// stored session that is still live gives back that live session, which a close arriving
    /// after the next prompt would cut short.)
    Closing {
        sid: LiveSessionId,
        gate: Gate,
    },
}

impl Entry {
    fn sid(&self) -> &LiveSessionId {
        match self {
            Entry::Open { sid, .. } | Entry::Closing { sid, .. } => sid,
        }
    }
}

pub type Gate = Arc<tokio::sync::Mutex<()>>;

/// What a session's live session is now ([`LiveSessions::used`]).
pub enum Live {
    Open(LiveSessionId),
    /// Being closed: [`LiveSessions::wait_closed`] returns once it is.
    Closing(Gate),
    None,
}

/// A live session taken to be closed: the entries of those who held it stay `Closing` until
/// this is dropped.
pub struct Closing<'a> {
    sessions: &'a LiveSessions,
    gate: Gate,
    _held: OwnedMutexGuard<()>,
    pub sid: LiveSessionId,
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        // Forgotten before the gate opens: a waiter then finds no live session, and opens one.
        self.sessions.forget_closing(&self.gate);
    }
}

impl LiveSessions {
    /// The session's live session, taken to be used from now on if it is open.
    pub fn used(&self, session: &SessionId) -> Live {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        match sessions.get_mut(&Holder::Session(session.clone())) {
            Some(Entry::Open { sid, used }) => {
                *used = Instant::now();
                Live::Open(sid.clone())
            }
            Some(Entry::Closing { gate, .. }) => Live::Closing(gate.clone()),
            None => Live::None,
        }
    }

    /// Waits, up to `limit`, for a live session being closed to be closed.
    pub async fn wait_closed(&self, gate: Gate, limit: Duration) {
        let _ = tokio::time::timeout(limit, gate.lock()).await;
        // A closer that went away without saying (the server stopping) leaves it closed too.
        self.forget_closing(&gate);
    }

    /// Counts the session's live session, if one is open, as used now.
    pub fn touch(&self, session: &SessionId) {
        let _ = self.used(session);
    }

    /// The session's open live session, if there is one, leaving when it was used as it is.
    pub fn get(&self, session: &SessionId) -> Option<LiveSessionId> {
        let sessions = self.by_holder.lock().expect("not poisoned");
        match sessions.get(&Holder::Session(session.clone())) {
            Some(Entry::Open { sid, .. }) => Some(sid.clone()),
            _ => None,
        }
    }

    /// The session's live session from now on. One a native call opened (the same live
    /// session, resumed by both) is the session's from then on: its turns decide when it is idle.
    /// One being closed (gone unused by native calls, or by another session that held it) is
    /// not taken: the close's gate comes back, to wait for it before opening another.
    pub fn insert(&self, session: SessionId, sid: LiveSessionId) -> Result<(), Gate> {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        let closing = sessions.values().find_map(|entry| match entry {
            Entry::Closing { sid: closed, gate } if *closed == sid => Some(gate.clone()),
            _ => None,
        });
        if let Some(gate) = closing {
            return Err(gate);
        }
        sessions.remove(&Holder::Native(sid.clone()));
        let entry = Entry::Open {
            sid,
            used: Instant::now(),
        };
        sessions.insert(Holder::Session(session), entry);
        Ok(())
    }

    /// Forgets the session's live session (the runtime closed it); one being closed is its
    /// closer's to forget.
    pub fn forget(&self, session: &SessionId) {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        let holder = Holder::Session(session.clone());
        if matches!(sessions.get(&holder), Some(Entry::Open { .. })) {
            sessions.remove(&holder);
        }
    }

    /// Takes the session's live session to be closed (the session is deleted), unless another
    /// session holds it too: then the session's hold is forgotten, and the live session left to
    /// the other. Taken, it stays `Closing` until the returned [`Closing`] is dropped, so a
    /// session given it meanwhile (by resuming the same stored session) waits for the close.
    pub fn take_to_close(&self, session: &SessionId) -> Option<Closing<'_>> {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        let holder = Holder::Session(session.clone());
        let Some(Entry::Open { sid, .. }) = sessions.get(&holder) else {
            // Being closed: its closer forgets it.
            return None;
        };
        let sid = sid.clone();
        let shared = sessions
            .iter()
            .any(|(other, entry)| *other != holder && *entry.sid() == sid);
        if shared {
            sessions.remove(&holder);
            return None;
        }
        let gate = Gate::default();
        let held = gate.clone().try_lock_owned().expect("a new gate is open");
        let closing = Entry::Closing {
            sid: sid.clone(),
            gate: gate.clone(),
        };
        sessions.insert(holder, closing);
        Some(Closing {
            sessions: self,
            gate,
            _held: held,
            sid,
        })
    }

    /// A live session a native call opened (or resumed): used now. One a control-plane session
    /// holds stays that session's.
    pub fn opened_natively(&self, sid: LiveSessionId) {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        let holder = Holder::Native(sid.clone());
        let a_sessions = |(held_by, entry): (&Holder, &Entry)| matches!((held_by, entry), (Holder::Session(_), Entry::Open { sid: open, .. }) if *open == sid);
        if sessions.contains_key(&holder) || sessions.iter().any(a_sessions) {
            drop(sessions);
            self.used_natively(&sid);
            return;
        }
        let entry = Entry::Open {
            sid,
            used: Instant::now(),
        };
        sessions.insert(holder, entry);
    }

    /// Counts a live session a native call named as used now, if a native call opened it.
    pub fn used_natively(&self, sid: &LiveSessionId) {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        if let Some(Entry::Open { used, .. }) = sessions.get_mut(&Holder::Native(sid.clone())) {
            *used = Instant::now();
        }
    }

    /// Forgets a live session a native call closed, whoever held it (a session's next turn
    /// resumes its stored session); one being closed is its closer's to forget.
    pub fn closed_natively(&self, sid: &LiveSessionId) {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        sessions.retain(|_, entry| !matches!(entry, Entry::Open { sid: open, .. } if open == sid));
    }

    /// How many live sessions are open on the runtime, those being closed included (one two
    /// sessions hold counts once).
    pub fn len(&self) -> usize {
        let sessions = self.by_holder.lock().expect("not poisoned");
        let sids: std::collections::HashSet<_> = sessions.values().map(Entry::sid).collect();
        sids.len()
    }

    /// Takes the live sessions last used more than `idle` ago by all who hold them, and not
    /// `in_use` now (a turn follows it, or it sent events lately), to be closed: their entries
    /// stay `Closing` until its [`Closing`] is dropped.
    /// Decided under the same lock as `used`: a turn that takes a live session either finds it
    /// before (and it is not idle) or after (and waits for the close, then opens another).
    pub fn take_idle(
        &self,
        idle: Duration,
        in_use: impl Fn(&LiveSessionId) -> bool,
    ) -> Vec<Closing<'_>> {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        let mut last_used: HashMap<LiveSessionId, Instant> = HashMap::new();
        for entry in sessions.values() {
            if let Entry::Open { sid, used } = entry {
                let last = last_used.entry(sid.clone()).or_insert(*used);
                *last = (*last).max(*used);
            }
        }
        let mut taken = Vec::new();
        for (sid, used) in last_used {
            if used.elapsed() < idle || in_use(&sid) {
                continue;
            }
            let gate = Gate::default();
            let held = gate.clone().try_lock_owned().expect("a new gate is open");
            for entry in sessions.values_mut() {
                if matches!(entry, Entry::Open { sid: open, .. } if *open == sid) {
                    *entry = Entry::Closing {
                        sid: sid.clone(),
                        gate: gate.clone(),
                    };
                }
            }
            taken.push(Closing {
                sessions: self,
                gate,
                _held: held,
                sid,
            });
        }
        taken
    }

    /// Forgets the entries still being closed behind `gate`.
    fn forget_closing(&self, gate: &Gate) {
        let mut sessions = self.by_holder.lock().expect("not poisoned");
        sessions.retain(
            |_, entry| !matches!(entry, Entry::Closing { gate: g, .. } if Arc::ptr_eq(g, gate)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(name: &str) -> LiveSessionId {
        LiveSessionId::new(name)
    }

    fn open(live: Live) -> Option<LiveSessionId> {
        match live {
            Live::Open(sid) => Some(sid),
            _ => None,
        }
    }

    #[test]
    fn only_sessions_unused_for_long_and_not_in_use_are_taken() {
        let live = LiveSessions::default();
        let (a, b, c) = (
            SessionId::generate(),
            SessionId::generate(),
            SessionId::generate(),
        );
        live.insert(a.clone(), sid("a")).expect("nothing closing");
        live.insert(b.clone(), sid("b")).expect("nothing closing");
        live.insert(c.clone(), sid("c")).expect("nothing closing");
        std::thread::sleep(Duration::from_millis(30));
        // Used just now, or followed by a turn: kept.
        assert_eq!(open(live.used(&a)), Some(sid("a")));
        let taken = live.take_idle(Duration::from_millis(20), |s| *s == sid("b"));
        let names: Vec<_> = taken.iter().map(|c| c.sid.clone()).collect();
        assert_eq!(names, [sid("c")]);
        // Being closed: no longer given out, still counted until closed.
        assert_eq!(live.get(&c), None);
        assert!(matches!(live.used(&c), Live::Closing(_)));
        live.forget(&c);
        assert!(live.take_to_close(&c).is_none());
        assert_eq!(live.len(), 3, "its closer forgets it");
        drop(taken);
        assert!(matches!(live.used(&c), Live::None), "forgotten once closed");
        assert_eq!(live.len(), 2);
        // `get` does not count as a use.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(live.get(&a), Some(sid("a")));
        assert_eq!(
            live.take_idle(Duration::from_millis(20), |_| false).len(),
            2
        );
        assert_eq!(live.len(), 0);
    }

    #[test]
    fn a_live_session_two_sessions_share_is_idle_once_unused_by_both() {
        let live = LiveSessions::default();
        let (idle, pause) = (Duration::from_millis(200), Duration::from_millis(300));
        let (first, second) = (SessionId::generate(), SessionId::generate());
        live.insert(first.clone(), sid("shared"))
            .expect("nothing closing");
        live.insert(second.clone(), sid("shared"))
            .expect("nothing closing");
        std::thread::sleep(pause);
        assert_eq!(open(live.used(&second)), Some(sid("shared")));
        assert!(
            live.take_idle(idle, |_| false).is_empty(),
            "used by the second just now"
        );
        std::thread::sleep(pause);
        let taken = live.take_idle(idle, |_| false);
        assert_eq!(taken.len(), 1, "closed once");
        assert!(matches!(live.used(&first), Live::Closing(_)));
        assert!(matches!(live.used(&second), Live::Closing(_)));
        // A third session given it meanwhile waits for the close.
        let third = SessionId::generate();
        assert!(live.insert(third.clone(), sid("shared")).is_err());
        drop(taken);
        assert_eq!(live.len(), 0, "both forgotten once closed");
        live.insert(third.clone(), sid("shared"))
            .expect("closed by then");

        // A session deleted leaves the live session to the other: not to be closed.
        live.insert(first.clone(), sid("shared"))
            .expect("nothing closing");
        assert!(
            live.take_to_close(&first).is_none(),
            "the third holds it too"
        );
        assert_eq!(live.get(&first), None);
        let closing = live.take_to_close(&third).expect("held by none now");
        assert_eq!(closing.sid, sid("shared"));
        // Given to another session meanwhile, it is waited for.
        assert!(live.insert(second.clone(), sid("shared")).is_err());
        drop(closing);
        assert_eq!(live.len(), 0);
        live.insert(second.clone(), sid("shared"))
            .expect("closed by then");
    }

    #[test]
    fn live_sessions_opened_by_native_calls_are_counted_used_and_closed() {
        let live = LiveSessions::default();
        // Far apart, so that a loaded machine does not blur them: what was used before the
        // pause is idle, what was used after it is not.
        let (idle, pause) = (Duration::from_millis(200), Duration::from_millis(300));
        let taken_sids = |live: &LiveSessions, in_use: &dyn Fn(&LiveSessionId) -> bool| {
            let mut sids: Vec<_> = (live.take_idle(idle, in_use).iter())
                .map(|closing| closing.sid.clone())
                .collect();
            sids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            sids
        };
        live.opened_natively(sid("a"));
        live.opened_natively(sid("b"));
        live.opened_natively(sid("c"));
        // Opened again (resumed while live): one entry still.
        live.opened_natively(sid("a"));
        assert_eq!(live.len(), 3);
        // Closed by a native call: forgotten at once.
        live.closed_natively(&sid("c"));
        assert_eq!(live.len(), 2);
        std::thread::sleep(pause);
        // Named by a native call just now: used.
        live.used_natively(&sid("a"));
        assert_eq!(taken_sids(&live, &|_| false), [sid("b")]);
        assert_eq!(live.len(), 1);
        std::thread::sleep(pause);
        // Sending events (a turn a native call started): in use, kept.
        assert!(taken_sids(&live, &|s| *s == sid("a")).is_empty());

        // A control-plane session's live session, resumed by a native call, stays the session's.
        let session = SessionId::generate();
        live.insert(session.clone(), sid("s"))
            .expect("nothing closing");
        live.opened_natively(sid("s"));
        assert_eq!(live.len(), 2);
        // One a native call opened first becomes the session's once its turns use it.
        let other = SessionId::generate();
        live.opened_natively(sid("n"));
        live.insert(other.clone(), sid("n"))
            .expect("nothing closing");
        assert_eq!(live.len(), 3);
        // Closed by a native call: gone for the session too, whose next turn resumes.
        live.closed_natively(&sid("n"));
        assert_eq!(live.get(&other), None);
        live.insert(other.clone(), sid("n2"))
            .expect("nothing closing");

        // One being closed is not taken by a session: its close is waited for first.
        live.opened_natively(sid("m"));
        std::thread::sleep(pause);
        let closing = live.take_idle(idle, |s| *s != sid("m"));
        assert_eq!(closing.len(), 1);
        let third = SessionId::generate();
        assert!(live.insert(third.clone(), sid("m")).is_err());
        assert_eq!(live.get(&third), None);
        drop(closing);
        live.insert(third.clone(), sid("m"))
            .expect("closed by then");
    }

    #[tokio::test]
    async fn a_session_being_closed_is_waited_for() {
        let live = LiveSessions::default();
        let session = SessionId::generate();
        live.insert(session.clone(), sid("s"))
            .expect("nothing closing");
        let mut taken = live.take_idle(Duration::ZERO, |_| false);
        let closing = taken.pop().expect("taken");
        let Live::Closing(gate) = live.used(&session) else {
            panic!("being closed");
        };
        let limit = Duration::from_secs(10);
        let waited = async {
            live.wait_closed(gate, limit).await;
            // Closed by then: nothing left to use, another is opened.
            matches!(live.used(&session), Live::None)
        };
        let close = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(closing);
        };
        let (found_none, ()) = tokio::time::timeout(limit, async { tokio::join!(waited, close) })
            .await
            .expect("in time");
        assert!(found_none);
        // A close that never ends does not keep its waiters past their limit.
        live.insert(session.clone(), sid("t"))
            .expect("nothing closing");
        let taken = live.take_idle(Duration::ZERO, |_| false);
        let Live::Closing(gate) = live.used(&session) else {
            panic!("being closed");
        };
        std::mem::forget(taken);
        live.wait_closed(gate, Duration::from_millis(50)).await;
        assert!(matches!(live.used(&session), Live::None));
    }
}
