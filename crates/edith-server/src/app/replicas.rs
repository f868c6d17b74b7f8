//! This control plane among the replicas sharing its database (`docs/scaling.md`). Each replica
//! says it is alive, and owns instances under a lease: an instance's runtime, its gateway link,
//! its turns and its jobs live on its owner, and a request that touches them is forwarded there
//! (`http::forward`). What a replica that stopped renewing owned is taken over by another: its
//! instances (their runtimes started afresh on next use), its turns (ended as interrupted), its
//! jobs (run again). On SQLite there is one replica, and all of this is that one's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use edith_store::Claim;
use edith_types::{Instance, InstanceId};

use crate::error::AppResult;
use crate::state::AppState;

/// This replica: its name, its lease, and the instances it knows it owns.
pub struct Replica {
    name: String,
    lease: Duration,
    /// Instances owned here, each with the moment until which that is known without asking the
    /// database (half a lease after it was last renewed, so a replica that cannot renew stops
    /// acting as owner well before another may take over).
    owned: Mutex<HashMap<InstanceId, Owned>>,
    /// Flips to `true` when another process took this replica's name: this one must stop.
    displaced: tokio::sync::watch::Sender<bool>,
}

/// What this replica knows of an instance it owns.
#[derive(Clone, Copy)]
struct Owned {
    /// Until when it is trusted without asking the database.
    until: Instant,
    /// When this replica learnt it (its claim or its insert had committed).
    noted: Instant,
}

impl Replica {
    pub fn new(name: String, lease: Duration) -> Self {
        Self {
            name,
            lease,
            owned: Mutex::default(),
            displaced: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Returns once another process has taken this replica's name (it had stopped renewing,
    /// and the other found it gone): this one must stop, as both would act as owner.
    pub async fn displaced(&self) {
        let mut displaced = self.displaced.subscribe();
        let _ = displaced.wait_for(|displaced| *displaced).await;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long a lease lasts without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often leases are renewed: three times a lease, so one missed renewal loses nothing.
    pub fn renew_every(&self) -> Duration {
        self.lease / 3
    }

    /// Now, and when a lease taken now runs out, in unix milliseconds.
    pub fn lease_from_now(&self) -> (i64, i64) {
        let now = now_ms();
        (now, now.saturating_add(millis(self.lease)))
    }

    pub fn known_owned(&self, id: &InstanceId) -> bool {
        let owned = self.owned.lock().expect("not poisoned");
        owned
            .get(id)
            .is_some_and(|known| Instant::now() < known.until)
    }

    /// This replica owns `id` by a write asked for at `asked` (it took it, or made it), which
    /// has committed: known owned for half a lease from when it was asked.
    pub fn note_owned(&self, id: &InstanceId, asked: Instant) {
        let known = Owned {
            until: asked + self.lease / 2,
            noted: Instant::now(),
        };
        self.owned
            .lock()
            .expect("not poisoned")
            .insert(id.clone(), known);
    }

    /// The leases on `now_owned` were renewed by a write asked for at `asked`: those are known
    /// owned for half a lease from then. Returns the instances this replica learnt it owned
    /// before that write was asked and that it no longer names (another took them while this
    /// one could not renew). One learnt since is kept as it is: the write may have run before
    /// its claim or insert committed.
    fn renewed(&self, now_owned: Vec<InstanceId>, asked: Instant) -> Vec<InstanceId> {
        let until = asked + self.lease / 2;
        let now_owned: std::collections::HashSet<InstanceId> = now_owned.into_iter().collect();
        let mut owned = self.owned.lock().expect("not poisoned");
        let mut lost = Vec::new();
        owned.retain(|id, known| {
            if now_owned.contains(id) || known.noted > asked {
                return true;
            }
            lost.push(id.clone());
            false
        });
        for id in now_owned {
            let known = owned.entry(id).or_insert(Owned {
                until,
                noted: asked,
            });
            known.until = known.until.max(until);
        }
        lost
    }

    /// Whether this replica thought it owned `id` (and no longer does).
    fn not_owned(&self, id: &InstanceId) -> bool {
        self.owned
            .lock()
            .expect("not poisoned")
            .remove(id)
            .is_some()
    }
}

/// Whether `name` may name a replica (it goes into headers and logs as it is).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Where what touches an instance's runtime is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Here: this replica owns the instance now (or there is no such instance).
    Here,
    /// On another live replica, which answers at `url`.
    There {
        replica: String,
        url: Option<String>,
    },
}

/// Where the instance is owned, taking it for this replica when no live replica owns it.
pub async fn place(state: &AppState, id: &InstanceId) -> AppResult<Place> {
    if state.replica.known_owned(id) {
        return Ok(Place::Here);
    }
    let asked = Instant::now();
    let (now, until) = state.replica.lease_from_now();
    match state
        .store
        .claim_instance(id, state.replica.name(), now, until)
        .await?
    {
        Claim::Mine { from } => {
            state.replica.note_owned(id, asked);
            if let Some(from) = from {
                tracing::warn!(instance = %id, from, "taking over an instance whose replica stopped renewing");
                adopt(state, id).await;
            }
            Ok(Place::Here)
        }
        Claim::Theirs { replica, url } => {
            if state.replica.not_owned(id) {
                step_down(state, id).await;
            }
            Ok(Place::There { replica, url })
        }
        Claim::Missing => Ok(Place::Here),
    }
}

/// Says this replica is alive before it serves. The name is refused while another live
/// process answers by it (two replicas given the same `--replica`, or sharing a data dir
/// without one); an earlier run of this replica that died left only a stale registration,
/// which is taken over at once. `alone`: the database is this process's own (SQLite), so any
/// other registration is stale.
pub async fn announce(state: &AppState, alone: bool) -> Result<(), String> {
    let cannot = |e: edith_store::StoreError| format!("cannot register this replica: {e}");
    if alone {
        state
            .store
            .expire_other_replicas(state.replica.name())
            .await
            .map_err(cannot)?;
    }
    let register = |displace| async move {
        let (now, until) = state.replica.lease_from_now();
        state
            .store
            .replica_alive(
                state.replica.name(),
                &state.public_url,
                now,
                until,
                displace,
            )
            .await
            .map_err(cannot)
    };
    let Err(url) = register(alone).await? else {
        return Ok(());
    };
    if answers_as(state, &url, state.replica.name()).await {
        return Err(format!(
            "another live replica is named `{}` (at {url}); give each replica its own \
             --replica name",
            state.replica.name()
        ));
    }
    register(true).await.map(|_| ())
}

/// This replica stops: what it owns is left to the others at once (a clean stop, unlike a
/// death, need not wait out a lease). Not when another process took its name: what is
/// registered under it is that one's.
pub async fn leave(state: &AppState) {
    if *state.replica.displaced.borrow() {
        return;
    }
    if let Err(e) = state.store.replica_leaving(state.replica.name()).await {
        tracing::warn!(error = %e, "cannot hand this replica's instances over; they wait out its lease");
    }
}

/// How long a replica registered under this one's name has to say it is alive.
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// Whether a replica named `name` answers at `url` (every answer says which replica gave it).
async fn answers_as(state: &AppState, url: &str, name: &str) -> bool {
    let probe = state
        .http
        .get(format!("{url}/healthz"))
        .timeout(PROBE_LIMIT)
        .send()
        .await;
    probe.is_ok_and(|answer| {
        answer
            .headers()
            .get(crate::http::forward::REPLICA)
            .is_some_and(|value| value.as_bytes() == name.as_bytes())
    })
}

/// At start: takes every instance no live replica owns, and deals with what an earlier run of
/// this replica, or a dead one, left on them; ends the turns nobody drives.
pub async fn take_up(state: &AppState) -> AppResult<()> {
    let mut cursor = None;
    loop {
        let page = state
            .store
            .list_instances(cursor.as_ref(), 100, None, None)
            .await?;
        for instance in &page.items {
            let asked = Instant::now();
            let (now, until) = state.replica.lease_from_now();
            let claim = state
                .store
                .claim_instance(&instance.id, state.replica.name(), now, until)
                .await?;
            if let Claim::Mine { .. } = claim {
                state.replica.note_owned(&instance.id, asked);
                // Whatever runs for it was started by a process that is gone.
                adopt(state, &instance.id).await;
            }
        }
        match page.next_cursor.and_then(|c| c.parse().ok()) {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    super::turns::recover(state, Some(state.replica.name())).await
}

/// Makes an instance this replica just took its own: a runtime an earlier owner left running is
/// stopped (the next use starts a fresh one here), its tool relays point here, a restart its
/// policy still allows is resumed, and an `external` runtime is watched from now on.
async fn adopt(state: &AppState, id: &InstanceId) {
    state.gateways.forget(id);
    state.providers.process.stop_orphan(id).await;
    let Ok(Some(record)) = state.store.instance(id).await else {
        return;
    };
    let instance: Instance = record.instance;
    if let Err(e) = super::profiles::retarget_tool_relays(state, &instance).await {
        tracing::warn!(instance = %id, detail = %e.detail, "tool relays not retargeted");
    }
    super::reconciler::watch_external(state, &instance);
    super::reconciler::resume_restart(state, instance);
}

/// Keeps this replica alive among the others until the server stops: one task renews its
/// leases, another takes over what replicas that stopped renewing left (apart, so that a slow
/// take-over never delays a renewal).
pub fn spawn(state: AppState) -> [tokio::task::JoinHandle<()>; 2] {
    [
        every_renewal(state.clone(), |state| async move { renew(&state).await }),
        every_renewal(state, |state| async move { take_over(&state).await }),
    ]
}

/// Runs `work` every [`Replica::renew_every`] until the server stops.
fn every_renewal<F, Fut>(state: AppState, work: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(AppState) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut stopping = state.shutdown.clone();
        let mut tick = tokio::time::interval(state.replica.renew_every());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stopping.wait_for(|stop| *stop) => return,
                _ = tick.tick() => {}
            }
            work(state.clone()).await;
        }
    })
}

async fn renew(state: &AppState) {
    let asked = Instant::now();
    let (now, until) = state.replica.lease_from_now();
    let renewed = state
        .store
        .replica_alive(state.replica.name(), &state.public_url, now, until, false)
        .await;
    match renewed {
        Ok(Ok(owned)) => {
            for id in state.replica.renewed(owned, asked) {
                tracing::warn!(instance = %id, "another replica took this instance over");
                // In the background: a runtime's stop may take seconds, and the next renewal
                // must not wait for it.
                let state = state.clone();
                tokio::spawn(async move { step_down(&state, &id).await });
            }
        }
        Ok(Err(url)) => {
            tracing::error!(url, "another process took this replica's name; stopping");
            state.replica.displaced.send_replace(true);
        }
        Err(e) => tracing::warn!(error = %e, "cannot renew this replica's leases"),
    }
}

/// Lets go of an instance another replica took over while this one could not renew: its
/// runtime here stops, its link and relays end (the other starts its own).
async fn step_down(state: &AppState, id: &InstanceId) {
    state.gateways.forget(id);
    state.relays.end_for_instance(id);
    if let Ok(Some(record)) = state.store.instance(id).await
        && let Ok(provider) = state.provider(record.instance.provider)
        && let Err(e) = provider.stop(id).await
    {
        tracing::warn!(instance = %id, error = %e, "cannot stop a runtime this replica let go of");
    }
}

async fn take_over(state: &AppState) {
    let left = match state.store.instances_left_by_their_owner(now_ms()).await {
        Ok(left) => left,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look for instances left by their owner");
            return;
        }
    };
    for id in left {
        if let Err(e) = place(state, &id).await {
            tracing::warn!(instance = %id, detail = %e.detail, "cannot take an instance over");
        }
    }
    if let Err(e) = super::turns::recover(state, None).await {
        tracing::warn!(detail = %e.detail, "cannot end the turns left by their driver");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_drops_what_was_taken_and_keeps_what_came_after_it_was_asked() {
        let replica = Replica::new("r".to_owned(), Duration::from_secs(15));
        let (kept, taken, made_since) = (
            InstanceId::generate(),
            InstanceId::generate(),
            InstanceId::generate(),
        );
        let before = Instant::now();
        replica.note_owned(&kept, before);
        replica.note_owned(&taken, before);
        std::thread::sleep(Duration::from_millis(2));
        let asked = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        // Claimed before the renewal was asked, committed while it was under way: the
        // renewal's write may have run before it.
        replica.note_owned(&made_since, before);
        let lost = replica.renewed(vec![kept.clone()], asked);
        assert_eq!(lost, std::slice::from_ref(&taken));
        assert!(replica.known_owned(&kept));
        assert!(replica.known_owned(&made_since));
        assert!(!replica.known_owned(&taken));
        // The next renewal, asked after it was learnt, does not name it: then it is lost too.
        let lost = replica.renewed(vec![kept], Instant::now());
        assert_eq!(lost, [made_since]);
    }
}
