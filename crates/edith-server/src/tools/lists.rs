//! Who watches which profile's tool list, and whether each has listed it since it last changed.
//!
//! A runtime whose MCP client lists the tools again as soon as it is told they changed
//! (`edith_mcp::RELISTS_ON_CHANGE`) keeps them between turns, and holds an event stream open on
//! the profile's MCP endpoint to be told. When a profile's tools change (a tool attached,
//! detached or redefined), each such stream is woken to tell its runtime, and the turn driver
//! waits, before it sends that profile's next prompt, until each has listed again: so a turn
//! started after a change always sees it, as it did when runtimes listed at every turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edith_types::ProfileId;
use tokio::sync::{Notify, watch};

/// Whose tool lists a change touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    Profile(ProfileId),
    /// Every profile's (a tool's definition changed, or changes may have been missed).
    All,
}

#[derive(Default)]
pub struct ToolLists {
    registry: Mutex<Registry>,
    /// Moves on when a watcher lists or leaves: the drivers waiting look again.
    progress: watch::Sender<u64>,
}

#[derive(Default)]
struct Registry {
    /// How many changes there have been: each change's number.
    changes: u64,
    next_watcher: u64,
    watchers: HashMap<ProfileId, Vec<Watcher>>,
}

struct Watcher {
    id: u64,
    /// The MCP session its stream was opened in (its listings come in the same session).
    session: String,
    /// The last change that touched its profile while it watched.
    wanted: u64,
    /// The changes its last listing saw (those made before it began).
    listed: u64,
    /// Tells its stream to announce a change, or that the profile is gone.
    wake: Arc<Notify>,
    /// The profile was deleted: its stream ends.
    ended: Arc<AtomicBool>,
}

/// One event stream's watch of a profile's tools; it stops watching when dropped.
pub struct Watching {
    _place: WatcherGuard,
    wake: Arc<Notify>,
    ended: Arc<AtomicBool>,
}

impl Watching {
    /// Waits for the next change to announce; `false` once the profile is gone.
    pub async fn next_change(&self) -> bool {
        self.wake.notified().await;
        !self.ended.load(Ordering::SeqCst)
    }
}

/// Tells the watchers of a change when dropped: made before the change is stored and dropped
/// after, so a request cut off while the change was being stored still tells them (telling
/// them of a change that was not made only costs each a listing).
pub struct Changing {
    lists: Arc<ToolLists>,
    touched: Touched,
}

impl Drop for Changing {
    fn drop(&mut self) {
        self.lists.changed(&self.touched);
    }
}

impl ToolLists {
    /// Registers the event stream of `session` on `profile`'s endpoint.
    pub fn watch(self: &Arc<Self>, profile: &ProfileId, session: &str) -> Watching {
        let wake = Arc::new(Notify::new());
        let ended = Arc::new(AtomicBool::new(false));
        let mut registry = self.registry.lock().expect("not poisoned");
        let id = registry.next_watcher;
        registry.next_watcher += 1;
        // It lists after it opened its stream: nothing before is awaited of it.
        let seen = registry.changes;
        registry
            .watchers
            .entry(profile.clone())
            .or_default()
            .push(Watcher {
                id,
                session: session.to_owned(),
                wanted: seen,
                listed: seen,
                wake: wake.clone(),
                ended: ended.clone(),
            });
        let place = WatcherGuard {
            lists: self.clone(),
            profile: profile.clone(),
            id,
        };
        Watching {
            _place: place,
            wake,
            ended,
        }
    }

    /// A change to the tools of `touched` is being stored: their watchers are told once the
    /// returned guard is dropped.
    pub fn changing(self: &Arc<Self>, touched: Touched) -> Changing {
        Changing {
            lists: self.clone(),
            touched,
        }
    }

    /// The profile was deleted: the streams watching it end, and nobody waits for them.
    pub fn forget(&self, profile: &ProfileId) {
        let mut registry = self.registry.lock().expect("not poisoned");
        for watcher in registry.watchers.remove(profile).unwrap_or_default() {
            watcher.ended.store(true, Ordering::SeqCst);
            watcher.wake.notify_one();
        }
        drop(registry);
        self.progress.send_modify(|n| *n += 1);
    }

    /// The tools of `touched` changed (the change is stored): their watchers are told.
    pub fn changed(&self, touched: &Touched) {
        let mut registry = self.registry.lock().expect("not poisoned");
        registry.changes += 1;
        let change = registry.changes;
        let watchers = registry.watchers.iter_mut();
        for (profile, watchers) in watchers {
            if matches!(touched, Touched::Profile(p) if p != profile) {
                continue;
            }
            for watcher in watchers {
                watcher.wanted = change;
                watcher.wake.notify_one();
            }
        }
    }

    /// The number of the last change; read it before the store, for [`ToolLists::listed`].
    pub fn changes(&self) -> u64 {
        self.registry.lock().expect("not poisoned").changes
    }

    /// `session` listed `profile`'s tools, reading the store after change number `seen`.
    pub fn listed(&self, profile: &ProfileId, session: &str, seen: u64) {
        let mut registry = self.registry.lock().expect("not poisoned");
        let Some(watchers) = registry.watchers.get_mut(profile) else {
            return;
        };
        for watcher in watchers.iter_mut().filter(|w| w.session == session) {
            watcher.listed = watcher.listed.max(seen);
        }
        drop(registry);
        self.progress.send_modify(|n| *n += 1);
    }

    /// Waits until every watcher of `profile` has listed its tools since they last changed, at
    /// most `bound`; whether they all had.
    pub async fn settled(&self, profile: &ProfileId, bound: Duration) -> bool {
        let mut progress = self.progress.subscribe();
        let waited = tokio::time::timeout(bound, async {
            while !self.all_listed(profile) {
                if progress.changed().await.is_err() {
                    return;
                }
            }
        });
        waited.await.is_ok()
    }

    fn all_listed(&self, profile: &ProfileId) -> bool {
        let registry = self.registry.lock().expect("not poisoned");
        let watchers = registry.watchers.get(profile);
        watchers.is_none_or(|watchers| watchers.iter().all(|w| w.listed >= w.wanted))
    }

    /// How many streams watch tool lists now.
    #[cfg(test)]
    fn watchers(&self) -> usize {
        let registry = self.registry.lock().expect("not poisoned");
        registry.watchers.values().map(Vec::len).sum()
    }
}

/// A watcher's place; it leaves with the guard.
pub struct WatcherGuard {
    lists: Arc<ToolLists>,
    profile: ProfileId,
    id: u64,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        let mut registry = self.lists.registry.lock().expect("not poisoned");
        if let Some(watchers) = registry.watchers.get_mut(&self.profile) {
            watchers.retain(|w| w.id != self.id);
            if watchers.is_empty() {
                registry.watchers.remove(&self.profile);
            }
        }
        drop(registry);
        self.lists.progress.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn a_change_is_settled_once_each_watcher_listed_after_it() {
        let lists = Arc::new(ToolLists::default());
        let (p, q) = (ProfileId::generate(), ProfileId::generate());
        assert!(lists.settled(&p, SHORT).await, "nobody watches");
        let first = lists.watch(&p, "s1");
        let second = lists.watch(&p, "s2");
        let other = lists.watch(&q, "s3");
        assert!(lists.settled(&p, SHORT).await, "nothing changed");

        // A listing that read the store before the change does not count for it.
        let before = lists.changes();
        lists.changed(&Touched::Profile(p.clone()));
        lists.listed(&p, "s1", before);
        assert!(!lists.settled(&p, SHORT).await);
        assert!(lists.settled(&q, SHORT).await, "another profile's change");
        let told = tokio::time::timeout(SHORT, first.next_change()).await;
        assert!(told.expect("told"));
        let told = tokio::time::timeout(SHORT, second.next_change()).await;
        assert!(told.expect("told"));
        assert!(
            tokio::time::timeout(SHORT, other.next_change())
                .await
                .is_err(),
            "another profile's watcher is not told"
        );

        // Settled once both listed after it; a driver waiting meanwhile is let go then.
        let after = lists.changes();
        let waiting = tokio::spawn({
            let lists = lists.clone();
            let p = p.clone();
            async move { lists.settled(&p, Duration::from_secs(10)).await }
        });
        lists.listed(&p, "s1", after);
        lists.listed(&p, "s2", after);
        assert!(waiting.await.unwrap());

        // A watcher that leaves is not waited for.
        lists.changed(&Touched::All);
        lists.listed(&p, "s2", lists.changes());
        assert!(!lists.settled(&p, SHORT).await);
        drop(first);
        assert!(lists.settled(&p, SHORT).await);
        assert!(!lists.settled(&q, SHORT).await, "all were touched");
        assert_eq!(lists.watchers(), 2);

        // A change being stored is told when its guard goes, also when cut off.
        let (_, other_told) = tokio::join!(
            async {
                let changing = lists.changing(Touched::Profile(q.clone()));
                tokio::time::sleep(SHORT).await;
                drop(changing);
            },
            async {
                // Told of the `All` above first, then of this one.
                assert!(other.next_change().await);
                tokio::time::timeout(Duration::from_secs(10), other.next_change()).await
            }
        );
        assert!(other_told.expect("told when the guard went"));

        // A deleted profile's streams end, and are not waited for.
        lists.changed(&Touched::All);
        assert!(!lists.settled(&p, SHORT).await);
        lists.forget(&p);
        assert!(lists.settled(&p, SHORT).await);
        let ended = tokio::time::timeout(SHORT, second.next_change()).await;
        assert!(!ended.expect("woken"), "the stream ends");
        assert_eq!(lists.watchers(), 1);
    }
}
