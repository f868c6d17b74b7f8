//! One lock per profile, held while a request changes what the profile is made of in two
//! places: its row and its native `config.yaml` (model), or its home (deletion). Two such
//! changes interleaved could leave the row saying one model and the file another, or a
//! deleted profile's home written again. Requests that change a profile are served by the
//! replica that owns its instance, so a lock in this process is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::ProfileId;
use tokio::sync::OwnedMutexGuard;

/// The locks of the profiles being changed now; a lock goes with its last holder.
#[derive(Default)]
pub struct ProfileLocks {
    locks: Mutex<HashMap<ProfileId, Arc<tokio::sync::Mutex<()>>>>,
}

/// The profile's lock, held until dropped.
pub struct ProfileLock<'a> {
    guard: Option<OwnedMutexGuard<()>>,
    profile: ProfileId,
    locks: &'a ProfileLocks,
}

impl ProfileLocks {
    /// Waits for the profile's lock.
    pub async fn lock(&self, profile: &ProfileId) -> ProfileLock<'_> {
        let lock = {
            let mut locks = self.locks.lock().expect("not poisoned");
            locks.entry(profile.clone()).or_default().clone()
        };
        ProfileLock {
            guard: Some(lock.lock_owned().await),
            profile: profile.clone(),
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
            .get(&self.profile)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            locks.remove(&self.profile);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_profiles_changes_wait_for_each_other_and_its_lock_goes_with_the_last() {
        let locks = Arc::new(ProfileLocks::default());
        let (one, other) = (ProfileId::generate(), ProfileId::generate());
        let first = locks.lock(&one).await;
        // Another profile's lock is free.
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
