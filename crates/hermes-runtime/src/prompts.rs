//! Blocking prompts: a tool that needs the user (an approval, a clarifying question) emits a
//! `*.request` event and waits here until a client answers with `*.respond`, the turn is
//! interrupted, or the prompt times out.
//!
//! As in Hermes 0.19, approvals carry no request id: `approval.respond` resolves the oldest
//! pending approval of the session (or all of them). Clarify questions carry a `request_id`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use hermes_native::LiveSessionId;
use hermes_native::methods::ApprovalChoice;
use tokio::sync::oneshot;

/// How long a question waits for its answer.
pub const CLARIFY_TIMEOUT: Duration = Duration::from_secs(300);
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Default)]
pub struct Prompts {
    /// Pending approvals per live session, oldest first.
    approvals: Mutex<HashMap<LiveSessionId, VecDeque<oneshot::Sender<ApprovalChoice>>>>,
    /// Pending questions by request id, with the session that asked.
    questions: Mutex<HashMap<String, (LiveSessionId, oneshot::Sender<String>)>>,
    /// Patterns approved for the rest of a live session.
    session_allowed: Mutex<HashMap<LiveSessionId, HashSet<String>>>,
    /// Patterns approved for good, per home (also kept in `<home>/approvals.json`).
    always_allowed: Mutex<HashMap<PathBuf, HashSet<String>>>,
}

impl Prompts {
    /// Waits for the session's next approval answer (deny on timeout or release).
    pub fn approval(&self, session: &LiveSessionId) -> oneshot::Receiver<ApprovalChoice> {
        let (tx, rx) = oneshot::channel();
        self.approvals
            .lock()
            .expect("not poisoned")
            .entry(session.clone())
            .or_default()
            .push_back(tx);
        rx
    }

    /// Resolves the oldest pending approval (or all); returns how many were resolved.
    pub fn resolve_approvals(
        &self,
        session: &LiveSessionId,
        choice: ApprovalChoice,
        all: bool,
    ) -> usize {
        let mut approvals = self.approvals.lock().expect("not poisoned");
        let Some(queue) = approvals.get_mut(session) else {
            return 0;
        };
        let taken: Vec<_> = if all {
            queue.drain(..).collect()
        } else {
            queue.pop_front().into_iter().collect()
        };
        if queue.is_empty() {
            approvals.remove(session);
        }
        let count = taken.len();
        for waiter in taken {
            let _ = waiter.send(choice);
        }
        count
    }

    /// Registers a question; returns its request id and where the answer arrives.
    pub fn question(&self, session: &LiveSessionId) -> (String, oneshot::Receiver<String>) {
        let request_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let (tx, rx) = oneshot::channel();
        self.questions
            .lock()
            .expect("not poisoned")
            .insert(request_id.clone(), (session.clone(), tx));
        (request_id, rx)
    }

    /// Answers a pending question; false when no such question waits.
    pub fn answer(&self, request_id: &str, answer: String) -> bool {
        let pending = self
            .questions
            .lock()
            .expect("not poisoned")
            .remove(request_id);
        match pending {
            Some((_, waiter)) => waiter.send(answer).is_ok(),
            None => false,
        }
    }

    /// Forgets a question that timed out.
    pub fn forget_question(&self, request_id: &str) {
        self.questions
            .lock()
            .expect("not poisoned")
            .remove(request_id);
    }

    /// Whether the session waits for the user's answer to a question (as Hermes counts it,
    /// an approval pending does not make a session `waiting`). A question whose asker gave
    /// up (timed out, interrupted) does not count.
    pub fn waits(&self, session: &LiveSessionId) -> bool {
        let questions = self.questions.lock().expect("not poisoned");
        questions
            .values()
            .any(|(owner, answer)| owner == session && !answer.is_closed())
    }

    /// Releases everything the session waits on: approvals are denied, questions answered
    /// empty (an interrupt must not leave a tool blocked).
    pub fn release(&self, session: &LiveSessionId) {
        self.resolve_approvals(session, ApprovalChoice::Deny, true);
        let mut questions = self.questions.lock().expect("not poisoned");
        questions.retain(|_, (owner, _)| owner != session);
    }

    pub fn is_allowed(&self, session: &LiveSessionId, home: &Path, pattern: &str) -> bool {
        let in_session = self
            .session_allowed
            .lock()
            .expect("not poisoned")
            .get(session)
            .is_some_and(|set| set.contains(pattern));
        in_session || self.always(home).contains(pattern)
    }

    pub fn allow_for_session(&self, session: &LiveSessionId, pattern: &str) {
        self.session_allowed
            .lock()
            .expect("not poisoned")
            .entry(session.clone())
            .or_default()
            .insert(pattern.to_owned());
    }

    /// Allows `pattern` in `home` from now on, across restarts.
    pub fn allow_always(&self, home: &Path, pattern: &str) -> std::io::Result<()> {
        let mut set = self.always(home);
        set.insert(pattern.to_owned());
        let mut sorted: Vec<_> = set.iter().cloned().collect();
        sorted.sort();
        let text = serde_json::to_string_pretty(&serde_json::json!({ "allowed_patterns": sorted }))
            .expect("JSON");
        std::fs::write(home.join("approvals.json"), text)?;
        self.always_allowed
            .lock()
            .expect("not poisoned")
            .insert(home.to_path_buf(), set);
        Ok(())
    }

    fn always(&self, home: &Path) -> HashSet<String> {
        let mut cache = self.always_allowed.lock().expect("not poisoned");
        cache
            .entry(home.to_path_buf())
            .or_insert_with(|| {
                std::fs::read_to_string(home.join("approvals.json"))
                    .ok()
                    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                    .and_then(|v| serde_json::from_value(v["allowed_patterns"].clone()).ok())
                    .unwrap_or_default()
            })
            .clone()
    }

    /// Forgets a closed session's approvals.
    pub fn forget_session(&self, session: &LiveSessionId) {
        self.release(session);
        self.session_allowed
            .lock()
            .expect("not poisoned")
            .remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn approvals_resolve_oldest_first() {
        let prompts = Prompts::default();
        let sid = LiveSessionId::new("abcd1234");
        let first = prompts.approval(&sid);
        let second = prompts.approval(&sid);
        assert_eq!(
            prompts.resolve_approvals(&sid, ApprovalChoice::Once, false),
            1
        );
        assert_eq!(first.await.unwrap(), ApprovalChoice::Once);
        assert_eq!(
            prompts.resolve_approvals(&sid, ApprovalChoice::Deny, true),
            1
        );
        assert_eq!(second.await.unwrap(), ApprovalChoice::Deny);
        assert_eq!(
            prompts.resolve_approvals(&sid, ApprovalChoice::Once, false),
            0
        );
    }

    #[test]
    fn always_survives_a_new_registry() {
        let home = tempfile::tempdir().unwrap();
        let sid = LiveSessionId::new("abcd1234");
        Prompts::default()
            .allow_always(home.path(), "recursive delete")
            .unwrap();
        assert!(Prompts::default().is_allowed(&sid, home.path(), "recursive delete"));
        assert!(!Prompts::default().is_allowed(&sid, home.path(), "other"));
    }
}
