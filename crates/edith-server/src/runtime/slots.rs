//! One slot per instance, each behind a lock of its own: the runtimes a provider runs in or from
//! this process, and the control plane's gateway connections to them. Starting or stopping one
//! runtime (seconds for the real Hermes), or connecting to one, never holds up another; a start
//! waits for a stop of the same instance, so there are never two runtimes for one; and a
//! destruction holds the slot from the stop until the home is gone, so a start that was waiting
//! finds no home rather than launching a runtime nobody will stop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::InstanceId;

/// An instance's slot: its running runtime (or its connection), if any.
pub type Slot<T> = Arc<tokio::sync::Mutex<Option<T>>>;

pub struct Slots<T> {
    slots: Mutex<HashMap<InstanceId, Slot<T>>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Slots<T> {
    /// The instance's slot, made when it has none.
    pub fn slot(&self, instance: &InstanceId) -> Slot<T> {
        let mut slots = self.slots.lock().expect("not poisoned");
        slots.entry(instance.clone()).or_default().clone()
    }

    /// The instance's slot, if it has one (none is made).
    pub fn existing(&self, instance: &InstanceId) -> Option<Slot<T>> {
        self.slots
            .lock()
            .expect("not poisoned")
            .get(instance)
            .cloned()
    }

    /// Every slot, as it is now.
    pub fn all(&self) -> Vec<(InstanceId, Slot<T>)> {
        let slots = self.slots.lock().expect("not poisoned");
        slots
            .iter()
            .map(|(id, slot)| (id.clone(), slot.clone()))
            .collect()
    }

    /// Forgets a destroyed instance's slot (whoever still holds it finds it empty); the slot
    /// it was.
    pub fn forget(&self, instance: &InstanceId) -> Option<Slot<T>> {
        self.slots.lock().expect("not poisoned").remove(instance)
    }

    /// Forgets every slot; the slots they were.
    pub fn forget_all(&self) -> Vec<Slot<T>> {
        let mut slots = self.slots.lock().expect("not poisoned");
        slots.drain().map(|(_, slot)| slot).collect()
    }

    /// How many slots hold a runtime.
    pub async fn running_count(&self) -> usize {
        let mut count = 0;
        for (_, slot) in self.all() {
            count += usize::from(slot.lock().await.is_some());
        }
        count
    }
}
