//! Live fan-out of event-log entries to the streams that follow a turn or a job. The log in the
//! store is the truth; the hub only wakes followers early. Entries come from this replica's
//! drivers and runners, or, for a log another replica writes, from the store when that replica
//! announces it grew (`app::announcements`).
//!
//! A log's channel lives while someone follows it and the log is not finished: the last
//! follower to leave takes it along, and so does the log's end. (A channel kept for a finished
//! log nobody follows would hold its buffer for good: a stream opened on a turn that had
//! already finished used to leave one behind.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

/// How many events a slow follower may fall behind before it re-reads from the store. Each
/// followed log holds this many slots, so it is what a waiting turn's stream costs in memory.
const CAPACITY: usize = 64;

/// An entry as the hub hands it out: shared by the followers of its log. A slot of a channel
/// holds a pointer, not an entry, so a new channel is a small allocation and a follower's
/// copy is a count.
pub type Shared<E> = Arc<E>;

/// An entry of a durable, numbered event log.
pub trait LogEvent: serde::Serialize + Send + Sync + 'static {
    fn seq(&self) -> u64;
    fn is_final(&self) -> bool;
}

impl LogEvent for edith_types::TurnEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn is_final(&self) -> bool {
        self.kind.is_final()
    }
}

impl LogEvent for edith_types::JobEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn is_final(&self) -> bool {
        self.kind.is_final()
    }
}

/// A followed log's channel, and the last entry published on it.
struct Channel<E> {
    sender: broadcast::Sender<Shared<E>>,
    last: u64,
}

type Channels<E> = Arc<Mutex<HashMap<String, Channel<E>>>>;

pub struct Hub<E> {
    channels: Channels<E>,
}

impl<E: LogEvent> Default for Hub<E> {
    fn default() -> Self {
        Self {
            channels: Arc::default(),
        }
    }
}

impl<E: LogEvent> Hub<E> {
    /// Follows `key`'s log from now on. Read the store after subscribing, so nothing falls
    /// between the two.
    pub fn subscribe(&self, key: &str) -> Follower<E> {
        let receiver = self
            .channels
            .lock()
            .expect("not poisoned")
            .entry(key.to_owned())
            .or_insert_with(|| Channel {
                sender: broadcast::channel(CAPACITY).0,
                last: 0,
            })
            .sender
            .subscribe();
        Follower {
            receiver: Some(receiver),
            key: key.to_owned(),
            channels: self.channels.clone(),
        }
    }

    pub fn publish(&self, key: &str, event: E) {
        if let Some(channel) = self.channels.lock().expect("not poisoned").get_mut(key) {
            channel.last = channel.last.max(event.seq());
            let _ = channel.sender.send(Arc::new(event));
        }
    }

    /// The last entry published on `key`'s channel (0 before any), or `None` when nobody here
    /// follows it.
    pub fn last_published(&self, key: &str) -> Option<u64> {
        let channels = self.channels.lock().expect("not poisoned");
        channels.get(key).map(|channel| channel.last)
    }

    /// The logs followed here now.
    pub fn followed_logs(&self) -> Vec<String> {
        let channels = self.channels.lock().expect("not poisoned");
        channels.keys().cloned().collect()
    }

    /// The log is complete: followers see the channel close once they have drained it.
    pub fn finish(&self, key: &str) {
        self.channels.lock().expect("not poisoned").remove(key);
    }

    /// How many logs have a channel now (`edith_event_logs_followed`).
    pub fn followed(&self) -> usize {
        self.channels.lock().expect("not poisoned").len()
    }
}

/// One follower of a log: its live entries until it is dropped.
pub struct Follower<E> {
    /// Always `Some` until dropped.
    receiver: Option<broadcast::Receiver<Shared<E>>>,
    key: String,
    channels: Channels<E>,
}

impl<E: LogEvent> Follower<E> {
    /// The next live entry (as `broadcast::Receiver::recv`).
    pub async fn recv(&mut self) -> Result<Shared<E>, broadcast::error::RecvError> {
        self.receiver
            .as_mut()
            .expect("present until dropped")
            .recv()
            .await
    }
}

impl<E> Drop for Follower<E> {
    fn drop(&mut self) {
        drop(self.receiver.take());
        let mut channels = self.channels.lock().expect("not poisoned");
        if channels
            .get(&self.key)
            .is_some_and(|channel| channel.sender.receiver_count() == 0)
        {
            channels.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log entry that is only its number; 99 ends the log.
    impl LogEvent for u64 {
        fn seq(&self) -> u64 {
            *self
        }
        fn is_final(&self) -> bool {
            *self == 99
        }
    }

    #[tokio::test]
    async fn a_channel_lasts_while_followed_and_unfinished() {
        let hub: Hub<u64> = Hub::default();
        // Followed after its end (a stream on a finished turn): gone with its follower.
        let late = hub.subscribe("done");
        assert_eq!(hub.followed(), 1);
        drop(late);
        assert_eq!(hub.followed(), 0);

        let mut first = hub.subscribe("running");
        let second = hub.subscribe("running");
        assert_eq!(hub.last_published("running"), Some(0));
        hub.publish("running", 7);
        assert_eq!(*first.recv().await.unwrap(), 7);
        assert_eq!(hub.last_published("running"), Some(7));
        assert_eq!(hub.followed_logs(), ["running"]);
        drop(second);
        assert_eq!(hub.followed(), 1, "one follower is still there");
        hub.finish("running");
        assert_eq!(hub.followed(), 0);
        assert!(first.recv().await.is_err(), "closed once finished");
        drop(first);
        // Publishing with nobody following is a no-op, and makes no channel.
        hub.publish("nobody", 1);
        assert_eq!(hub.followed(), 0);
        assert_eq!(hub.last_published("nobody"), None);
    }
}
