//! One turn at a time on each live session of a gateway connection. A live session runs one
//! turn at a time, and its events do not say whose turn they are of; two control-plane sessions
//! that continue one stored session are given the same live session by the runtime. So the turn
//! that runs on a live session holds its slot, and a turn of the other session waits for it, in
//! the order they came (a session whose turns follow one another back to back cannot keep the
//! other waiting for ever).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hermes_native::LiveSessionId;
use tokio::sync::OwnedMutexGuard;

type Slot = Arc<tokio::sync::Mutex<()>>;

#[derive(Default)]
pub struct LiveTurns {
    slots: Mutex<HashMap<LiveSessionId, Slot>>,
}

/// A live session's slot, held by the turn that runs on it until dropped.
pub struct TurnOn<'a> {
    turns: &'a LiveTurns,
    pub sid: LiveSessionId,
    held: Option<OwnedMutexGuard<()>>,
}

impl Drop for TurnOn<'_> {
    fn drop(&mut self) {
        let mut slots = self.turns.slots.lock().expect("not poisoned");
        drop(self.held.take());
        // Slots are forgotten once nobody holds them or waits for them (a waiter holds the
        // slot's `Arc`). All of them: a look that found a slot held, or a wait given up, lets
        // go of its `Arc` outside this lock, and may leave one behind.
        slots.retain(|_, slot| Arc::strong_count(slot) > 1);
    }
}

impl LiveTurns {
    fn slot(&self, sid: &LiveSessionId) -> Slot {
        let mut slots = self.slots.lock().expect("not poisoned");
        slots.entry(sid.clone()).or_default().clone()
    }

    /// The live session's slot, if no turn holds it and none waits for it.
    pub fn try_take(&self, sid: &LiveSessionId) -> Option<TurnOn<'_>> {
        let held = self.slot(sid).try_lock_owned().ok()?;
        Some(TurnOn {
            turns: self,
            sid: sid.clone(),
            held: Some(held),
        })
    }

    /// The live session's slot, once the turns that hold it or waited for it first are done.
    /// Dropped before then, the wait leaves the queue.
    pub async fn take(&self, sid: &LiveSessionId) -> TurnOn<'_> {
        let slot = self.slot(sid);
        let held = slot.lock_owned().await;
        TurnOn {
            turns: self,
            sid: sid.clone(),
            held: Some(held),
        }
    }

    /// How many live sessions have a slot now (held or waited for).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.lock().expect("not poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn turns_on_a_live_session_take_it_one_at_a_time_in_the_order_they_came() {
        let turns = LiveTurns::default();
        let sid = LiveSessionId::new("shared");
        let first = turns.try_take(&sid).expect("free");
        assert!(turns.try_take(&sid).is_none(), "held");
        assert!(
            turns.try_take(&LiveSessionId::new("other")).is_some(),
            "another live session's is its own"
        );
        let limit = Duration::from_secs(10);
        let (order, mut arrived) = tokio::sync::mpsc::unbounded_channel();
        let waiter = |name: &'static str| {
            let (turns, sid, order) = (&turns, sid.clone(), order.clone());
            async move {
                let held = turns.take(&sid).await;
                order.send(name).unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(held);
            }
        };
        let queue = async {
            let second = waiter("second");
            let third = waiter("third");
            tokio::pin!(second, third);
            // The second starts waiting first, then the third.
            let _ = tokio::time::timeout(Duration::from_millis(30), &mut second).await;
            let _ = tokio::time::timeout(Duration::from_millis(30), &mut third).await;
            assert!(turns.try_take(&sid).is_none(), "waited for");
            drop(first);
            tokio::join!(second, third);
        };
        tokio::time::timeout(limit, queue).await.expect("in time");
        assert_eq!(arrived.recv().await, Some("second"));
        assert_eq!(arrived.recv().await, Some("third"));
        assert_eq!(turns.len(), 0, "forgotten once let go");

        // A wait given up leaves the queue.
        let held = turns.try_take(&sid).expect("free");
        let given_up = tokio::time::timeout(Duration::from_millis(20), turns.take(&sid)).await;
        assert!(given_up.is_err());
        drop(held);
        assert_eq!(turns.len(), 0);
        assert!(turns.try_take(&sid).is_some());
    }
}
