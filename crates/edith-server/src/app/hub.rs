//! Live fan-out of event-log entries to the streams that follow a turn or a job. The log in the
//! store is the truth; the hub only wakes followers early.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::broadcast;

/// How many events a slow follower may fall behind before it re-reads from the store.
const CAPACITY: usize = 256;

pub struct Hub<E> {
    channels: Mutex<HashMap<String, broadcast::Sender<E>>>,
}

impl<E: Clone> Default for Hub<E> {
    fn default() -> Self {
        Self {
            channels: Mutex::new(HashMap::new()),
        }
    }
}

impl<E: Clone> Hub<E> {
    /// Follows `key`'s log from now on. Read the store after subscribing, so nothing falls
    /// between the two.
    pub fn subscribe(&self, key: &str) -> broadcast::Receiver<E> {
        let mut channels = self.channels.lock().expect("not poisoned");
        // A channel nobody follows can go: publishing to none is a no-op, the store has the
        // events, and the next follower makes a new one. This also drops the channels of logs
        // that ended before anyone followed them.
        channels.retain(|_, sender| sender.receiver_count() > 0);
        channels
            .entry(key.to_owned())
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe()
    }

    pub fn publish(&self, key: &str, event: E) {
        if let Some(sender) = self.channels.lock().expect("not poisoned").get(key) {
            let _ = sender.send(event);
        }
    }

    /// The log is complete: followers see the channel close once they have drained it.
    pub fn finish(&self, key: &str) {
        self.channels.lock().expect("not poisoned").remove(key);
    }
}
