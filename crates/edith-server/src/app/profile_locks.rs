//! One lock per instance's profiles, held while a request changes what a profile is made of in
//! two places: its row and its native home (`config.yaml`, with its model). Two such changes
//! interleaved could leave the row saying one model and the file another, write a deleted
//! profile's home again, or remove the home of a profile made meanwhile under the same name
//! (homes are named after profiles' names, which a deleted profile gives back).
//!
//! A turn starting on a runtime that restarts to take a change of its root profile (see
//! `profiles::runtime_restarts_for_root_changes`) shares the lock while it is stored: such a
//! change looks for running turns and restarts the runtime under the lock, so a turn is either
//! seen by that look (and the change refused) or stored after the restart, never cut short by
//! it. A turn start that waited reads its instance again (a deletion's destruction holds the
//! lock too). Requests that change an instance's profiles or start its turns are served by the replica
//! that owns it, so a lock in this process is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::InstanceId;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The locks of the instances whose profiles are being changed or whose turns are being
/// stored now; a lock goes with its last holder.
#[derive(Default)]
pub struct ProfileLocks {
    locks: Mutex<HashMap<InstanceId, Arc<RwLock<()>>>>,
}

/// An instance's profile lock, held until dropped (or waited for: a wait given up also lets
/// the lock go).
pub struct ProfileLock<'a> {
    guard: Option<Guard>,
    instance: InstanceId,
    locks: &'a ProfileLocks,
    /// Whether it had to wait for another holder.
    waited: bool,
}

/// Held alone by a change, or beside others by turns being stored.
enum Guard {
    Change(#[expect(dead_code, reason = "held for its drop")] OwnedRwLockWriteGuard<()>),
    TurnStart(#[expect(dead_code, reason = "held for its drop")] OwnedRwLockReadGuard<()>),
}

impl ProfileLocks {
    /// Waits for the lock of `instance`'s profiles, to change them.
    pub async fn lock(&self, instance: &InstanceId) -> ProfileLock<'_> {
        let (mut held, lock) = self.waiting(instance);
        held.guard = Some(Guard::Change(lock.write_owned().await));
        held
    }

    /// Waits for any change of `instance`'s profiles to finish, and keeps the next one from
    /// starting until dropped; shared with other turn starts.
    pub async fn share(&self, instance: &InstanceId) -> ProfileLock<'_> {
        let (mut held, lock) = self.waiting(instance);
        let guard = match Arc::clone(&lock).try_read_owned() {
            Ok(guard) => guard,
            Err(_) => {
                held.waited = true;
                lock.read_owned().await
            }
        };
        held.guard = Some(Guard::TurnStart(guard));
        held
    }

    /// The lock of `instance`, and what lets it go if the wait for it is given up.
    fn waiting(&self, instance: &InstanceId) -> (ProfileLock<'_>, Arc<RwLock<()>>) {
        let lock = {
            let mut locks = self.locks.lock().expect("not poisoned");
            locks.entry(instance.clone()).or_default().clone()
        };
        let held = ProfileLock {
            guard: None,
            instance: instance.clone(),
            locks: self,
            waited: false,
        };
        (held, lock)
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.locks.lock().expect("not poisoned").len()
    }
}

impl ProfileLock<'_> {
    /// Whether a change held the lock (or waited for it) when this was asked for: what was read
    /// before may have changed meanwhile (the instance deleted, say).
    pub fn waited(&self) -> bool {
        self.waited
    }
}

impl Drop for ProfileLock<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.locks.locks.lock().expect("not poisoned");
        // Nobody else holds or waits for it (a waiter took its clone under this map's lock;
        // a wait given up has dropped its clone before this).
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
        assert_eq!(locks.kept(), 0, "no lock is kept once nobody holds it");
    }

    #[tokio::test]
    async fn turn_starts_share_the_lock_and_a_change_waits_for_them_as_they_wait_for_it() {
        let locks = Arc::new(ProfileLocks::default());
        let one = InstanceId::generate();
        let change = locks.lock(&one).await;
        let turn_start = {
            let (locks, one) = (locks.clone(), one.clone());
            tokio::spawn(async move { locks.share(&one).await.waited() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!turn_start.is_finished(), "a turn start waits for a change");
        drop(change);
        let waited = tokio::time::timeout(Duration::from_secs(5), turn_start)
            .await
            .expect("the turn start goes on once the change is done")
            .unwrap();
        assert!(waited, "and knows it waited");

        let (first, second) = (locks.share(&one).await, locks.share(&one).await);
        assert!(
            !first.waited() && !second.waited(),
            "turn starts do not wait for each other"
        );
        let next_change = {
            let (locks, one) = (locks.clone(), one.clone());
            tokio::spawn(async move { drop(locks.lock(&one).await) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!next_change.is_finished(), "a change waits for turn starts");
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!next_change.is_finished(), "for every one of them");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), next_change)
            .await
            .expect("the change goes on once the turn starts are done")
            .unwrap();
        assert_eq!(locks.kept(), 0, "no lock is kept once nobody holds it");
    }

    #[tokio::test]
    async fn a_wait_given_up_keeps_no_lock() {
        let locks = Arc::new(ProfileLocks::default());
        let one = InstanceId::generate();
        let change = locks.lock(&one).await;
        let waits: Vec<_> = (0..2)
            .map(|n| {
                let (locks, one) = (locks.clone(), one.clone());
                tokio::spawn(async move {
                    match n {
                        0 => drop(locks.share(&one).await),
                        _ => drop(locks.lock(&one).await),
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Given up as the lock is let go, before they could take it: none of them holds it,
        // and the change that let it go saw them waiting.
        drop(change);
        waits.iter().for_each(tokio::task::JoinHandle::abort);
        for wait in waits {
            assert!(wait.await.unwrap_err().is_cancelled());
        }
        assert_eq!(locks.kept(), 0, "no lock is kept once nobody holds it");
    }
}
