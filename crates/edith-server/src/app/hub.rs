//! Live fan-out of event-log entries to the streams that follow a turn or a job. The log in the
//! store is the truth; the hub only wakes followers early.
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

type Channels<E> = Arc<Mutex<HashMap<String, broadcast::Sender<E>>>>;

pub struct Hub<E> {
    channels: Channels<E>,
}

impl<E: Clone> Default for Hub<E> {
    fn default() -> Self {
        Self {
            channels: Arc::default(),
        }
    }
}

impl<E: Clone> Hub<E> {
    /// Follows `key`'s log from now on. Read the store after subscribing, so nothing falls
    /// between the two.
    pub fn subscribe(&self, key: &str) -> Follower<E> {
        let receiver = self
            .channels
            .lock()
            .expect("not poisoned")
            .entry(key.to_owned())
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe();
        Follower {
            receiver: Some(receiver),
            key: key.to_owned(),
            channels: self.channels.clone(),
        }
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

    /// How many logs have a channel now (`edith_event_logs_followed`).
    pub fn followed(&self) -> usize {
        self.channels.lock().expect("not poisoned").len()
    }
}

/// One follower of a log: its live entries until it is dropped.
pub struct Follower<E> {
    /// Always `Some` until dropped.
    receiver: Option<broadcast::Receiver<E>>,
    key: String,
    channels: Channels<E>,
}

impl<E: Clone> Follower<E> {
    /// The next live entry (as `broadcast::Receiver::recv`).
    pub async fn recv(&mut self) -> Result<E, broadcast::error::RecvError> {
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
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            channels.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        hub.publish("running", 7);
        assert_eq!(first.recv().await.unwrap(), 7);
        drop(second);
        assert_eq!(hub.followed(), 1, "one follower is still there");
        hub.finish("running");
        assert_eq!(hub.followed(), 0);
        assert!(first.recv().await.is_err(), "closed once finished");
        drop(first);
        // Publishing with nobody following is a no-op, and makes no channel.
        hub.publish("nobody", 1);
        assert_eq!(hub.followed(), 0);
    }
}
