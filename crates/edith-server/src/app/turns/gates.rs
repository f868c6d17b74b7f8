//! A gate for each turn driven here, and its cancellation.
//!
//! Answers and the log: an answer to a waiting turn is logged before what the runtime does
//! after it. The answer is given to the runtime first (it may refuse it), and the runtime goes
//! on at once, so without a gate the driver could log the runtime's next events, or even the
//! turn's end, before the answer's entry.
//!
//! Answers, cancels and the session's next turn: the driver ends a turn holding its gate, so
//! whoever holds it and reads the turn still running knows that the session's live turn on the
//! runtime is this one (or none), never the session's next turn. An answer or an interrupt sent
//! from a stale read could otherwise reach the next turn, which goes to the same live session.
//! A turn of another session on the same live session (both continue one stored session) may
//! start as soon as the driver lets the live session go, so the driver marks the turn ending
//! under the gate before it does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use edith_types::TurnId;
use tokio::sync::OwnedMutexGuard;

/// One gate per turn driven here, from before the turn is stored until its driver is done.
#[derive(Default)]
pub struct TurnGates {
    gates: Mutex<HashMap<TurnId, Arc<Gate>>>,
}

#[derive(Default)]
struct Gate {
    order: Arc<tokio::sync::Mutex<()>>,
    /// A client asked to cancel the turn: its driver ends it `cancelled`.
    cancel_requested: AtomicBool,
    /// The runtime has the turn's prompt: an interrupt sent to its live session reaches this
    /// turn (or, while the prompt is queued, the turn ahead of it, and the runtime drops the
    /// prompt with it). Before, the live session may be running another's (a native call's, or
    /// a turn of another session continuing the same stored session), which a cancel of a turn
    /// that never reached the runtime must leave alone.
    on_runtime: AtomicBool,
    /// The driver is writing the turn's end: the runtime is done with it (or was given up on),
    /// so it takes no more answers.
    ending: AtomicBool,
}

/// A turn's gate, held until dropped.
pub struct Held {
    gate: Arc<Gate>,
    _order: OwnedMutexGuard<()>,
}

impl Held {
    /// Asks the turn's driver to end it `cancelled`.
    pub fn request_cancel(&self) {
        self.gate.cancel_requested.store(true, Ordering::Relaxed);
    }

    /// The runtime has the turn's prompt from now on.
    pub fn mark_on_runtime(&self) {
        self.gate.on_runtime.store(true, Ordering::Relaxed);
    }

    /// Whether the runtime has the turn's prompt (see [`Gate::on_runtime`]).
    pub fn on_runtime(&self) -> bool {
        self.gate.on_runtime.load(Ordering::Relaxed)
    }

    /// The driver is writing the turn's end from now on (it may take several tries).
    pub fn mark_ending(&self) {
        self.gate.ending.store(true, Ordering::Relaxed);
    }

    /// Whether the driver is writing the turn's end: what the turn was is decided, and the
    /// runtime's live session has nothing of it to answer or interrupt.
    pub fn ending(&self) -> bool {
        self.gate.ending.load(Ordering::Relaxed)
    }
}

/// A gate opened for a turn about to be stored: closed again when dropped (the turn was not
/// stored, or the request storing it went away), unless its driver took it over.
pub struct Opened<'a> {
    gates: &'a TurnGates,
    turn: TurnId,
    handed_over: bool,
}

impl Opened<'_> {
    /// The turn's driver closes the gate when it is done.
    pub fn hand_over(mut self) {
        self.handed_over = true;
    }
}

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        if !self.handed_over {
            self.gates.close(&self.turn);
        }
    }
}

impl TurnGates {
    /// The turn is driven here from now on.
    pub fn open(&self, turn: &TurnId) -> Opened<'_> {
        let mut gates = self.gates.lock().expect("not poisoned");
        gates.insert(turn.clone(), Arc::default());
        Opened {
            gates: self,
            turn: turn.clone(),
            handed_over: false,
        }
    }

    /// The turn is no longer driven here.
    pub fn close(&self, turn: &TurnId) {
        self.gates.lock().expect("not poisoned").remove(turn);
    }

    fn gate(&self, turn: &TurnId) -> Option<Arc<Gate>> {
        self.gates.lock().expect("not poisoned").get(turn).cloned()
    }

    /// Holds the turn's gate (none for a turn not driven here) until the guard is dropped.
    pub async fn hold(&self, turn: &TurnId) -> Option<Held> {
        let gate = self.gate(turn)?;
        let order = Arc::clone(&gate.order).lock_owned().await;
        Some(Held {
            gate,
            _order: order,
        })
    }

    /// Whether the turn is driven here.
    pub fn driven_here(&self, turn: &TurnId) -> bool {
        self.gate(turn).is_some()
    }

    /// Whether a client asked to cancel the turn.
    pub fn cancel_requested(&self, turn: &TurnId) -> bool {
        self.gate(turn)
            .is_some_and(|gate| gate.cancel_requested.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_is_kept_while_its_turn_is_driven_and_gone_with_it() {
        let gates = TurnGates::default();
        let turn = TurnId::generate();
        assert!(gates.hold(&turn).await.is_none(), "not driven yet");
        drop(gates.open(&turn));
        assert!(
            gates.hold(&turn).await.is_none(),
            "not handed over to a driver"
        );
        gates.open(&turn).hand_over();
        assert!(!gates.cancel_requested(&turn));
        gates.hold(&turn).await.expect("driven").request_cancel();
        assert!(gates.cancel_requested(&turn));
        gates.close(&turn);
        assert!(!gates.cancel_requested(&turn));
        assert!(gates.hold(&turn).await.is_none(), "no longer driven");
    }

    #[tokio::test]
    async fn a_gate_is_held_by_one_at_a_time() {
        let gates = TurnGates::default();
        let turn = TurnId::generate();
        gates.open(&turn).hand_over();
        let first = gates.hold(&turn).await.expect("driven");
        let second = gates.hold(&turn);
        tokio::pin!(second);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), &mut second);
        assert!(waited.await.is_err(), "the second waits for the first");
        drop(first);
        let taken = tokio::time::timeout(std::time::Duration::from_secs(5), second);
        assert!(taken.await.expect("taken once let go").is_some());
    }
}
