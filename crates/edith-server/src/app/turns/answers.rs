//! Answers and the log: an answer to a waiting turn is logged before what the runtime does
//! after it. The answer is given to the runtime first (it may refuse it), and the runtime goes
//! on at once, so without a gate the driver could log the runtime's next events, or even the
//! turn's end, before the answer's entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::TurnId;
use tokio::sync::OwnedMutexGuard;

/// One gate per turn driven here.
#[derive(Default)]
pub struct AnswerGates {
    gates: Mutex<HashMap<TurnId, Arc<tokio::sync::Mutex<()>>>>,
}

impl AnswerGates {
    /// The turn is driven here from now on.
    pub fn open(&self, turn: &TurnId) {
        let mut gates = self.gates.lock().expect("not poisoned");
        gates.insert(turn.clone(), Arc::default());
    }

    /// The turn is no longer driven here.
    pub fn close(&self, turn: &TurnId) {
        self.gates.lock().expect("not poisoned").remove(turn);
    }

    /// Holds the turn's gate (none for a turn not driven here) until the guard is dropped.
    pub async fn hold(&self, turn: &TurnId) -> Option<OwnedMutexGuard<()>> {
        let gate = self
            .gates
            .lock()
            .expect("not poisoned")
            .get(turn)
            .cloned()?;
        Some(gate.lock_owned().await)
    }
}
