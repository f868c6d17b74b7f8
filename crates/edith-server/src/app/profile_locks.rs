//! One lock per instance's profiles, held while a request changes what a profile is made of in
//! two places: its row and its native home (`config.yaml`, with its model). Two such changes
//! interleaved could leave the row saying one model and the file another, write a deleted
//! profile's home again, or remove the home of a profile made meanwhile under the same name
//! (homes are named after profiles' names, which a deleted profile gives back). Requests that
//! change an instance's profiles are served by the replica that owns it, so a lock in this
//! process is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::InstanceId;
use tokio::sync::OwnedMutexGuard;

/// The locks of the instances whose profiles are being changed now; a lock goes with its last
/// holder.
#[derive(Default)]
pub struct ProfileLocks {
    locks: Mutex<HashMap<InstanceId, Arc<tokio::sync::Mutex<()>>>>,
}

/// An instance's profile lock, held until dropped.
pub struct ProfileLock<'a> {
    guard: Option<OwnedMutexGuard<()>>,
    instance: InstanceId,
    locks: &'a ProfileLocks,
}

impl ProfileLocks {
    /// Waits for the lock of `instance`'s profiles.
    pub async fn lock(&self, instance: &InstanceId) -> ProfileLock<'_> {
        let lock = {
            let mut locks = self.locks.lock().expect("not poisoned");
            locks.entry(instance.clone()).or_default().clone()
        };
        ProfileLock {
            guard: Some(lock.lock_owned().await),
            instance: instance.clone(),
            locks: self,
        }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.locks.lock().expect("not poisoned").len()
    }
}

impl Drop for ProfileLock<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.locks.locks.lock().expect("not poisoned");
        // Nobody else holds or waits for it (a waiter took its clone under this map's lock).
        if locks
            .get(&self.instance)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            locks.remove(&self.instance);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn profile_changes_on_an_instance_wait_for_each_other_and_its_lock_goes_with_the_last() {
        let locks = Arc::new(ProfileLocks::default());
        let (one, other) = (InstanceId::generate(), InstanceId::generate());
        let first = locks.lock(&one).await;
        // Another instance's lock is free.
        drop(locks.lock(&other).await);
        let waiting = {
            let locks = locks.clone();
            let one = one.clone();
            tokio::spawn(async move {
                let _second = locks.lock(&one).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the second change waits");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the second change goes on once the first is done")
            .unwrap();
        assert_eq!(locks.held(), 0, "no lock is kept once nobody holds it");
    }
}
