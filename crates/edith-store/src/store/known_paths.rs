//! Whole session paths read lately, so that a turn's request need not read its instance,
//! profile and session again each time. Kept on SQLite only: one process holds the file, and
//! every write that can change a path (an instance's state or body, a profile's body or tools,
//! a session's body or existence) goes through this store, which forgets what it wrote: the
//! instance, the profile or the session, and with it every path through it. On PostgreSQL other
//! replicas write too, so paths are read every time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use edith_types::{InstanceId, Profile, ProfileId, Session, SessionId};

use crate::records::{InstanceRecord, SessionPath};

/// At most this many sessions, profiles and instances are kept; past it all are forgotten and
/// read again.
const MOST_KEPT: usize = 16_384;

#[derive(Default)]
pub(crate) struct KnownPaths(Mutex<Known>);

impl std::fmt::Debug for KnownPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownPaths").finish_non_exhaustive()
    }
}

/// Instances and profiles are kept once, however many of their sessions are.
#[derive(Default)]
struct Known {
    instances: HashMap<InstanceId, Arc<InstanceRecord>>,
    profiles: HashMap<ProfileId, Arc<Profile>>,
    sessions: HashMap<SessionId, Arc<Session>>,
    /// Counts the writes that forgot something, so that a read that raced one is not kept.
    forgotten: u64,
}

impl KnownPaths {
    /// The whole path to `session` when it is kept (and is under `instance` and `profile`);
    /// otherwise the count to hand to [`KnownPaths::keep`] after reading the database.
    pub(crate) fn get(
        &self,
        instance: &InstanceId,
        profile: &ProfileId,
        session: &SessionId,
    ) -> Result<SessionPath, u64> {
        let known = self.0.lock().expect("not poisoned");
        let found = known.sessions.get(session).and_then(|kept| {
            let profile = known.profiles.get(profile)?;
            let record = known.instances.get(instance)?;
            let on_path = kept.profile_id == profile.id && profile.instance_id == *instance;
            on_path.then(|| SessionPath {
                instance: InstanceRecord::clone(record),
                profile: Some(Profile::clone(profile)),
                session: Some(Session::clone(kept)),
            })
        });
        found.ok_or(known.forgotten)
    }

    /// Keeps `path`, read when the count was `seen`, if it is whole and no write forgot the
    /// paths since (the read may predate it).
    pub(crate) fn keep(&self, path: &SessionPath, seen: u64) {
        let (Some(profile), Some(session)) = (&path.profile, &path.session) else {
            return;
        };
        let mut known = self.0.lock().expect("not poisoned");
        if known.forgotten != seen {
            return;
        }
        if known.sessions.len() + known.profiles.len() + known.instances.len() >= MOST_KEPT {
            known.clear();
        }
        let instance = &path.instance.instance.id;
        if !known.instances.contains_key(instance) {
            let record = Arc::new(path.instance.clone());
            known.instances.insert(instance.clone(), record);
        }
        if !known.profiles.contains_key(&profile.id) {
            let kept = Arc::new(profile.clone());
            known.profiles.insert(profile.id.clone(), kept);
        }
        known
            .sessions
            .insert(session.id.clone(), Arc::new(session.clone()));
    }

    /// Forgets what `changed` names, and every path through it; the reads under way are not
    /// kept either (they may have read it before the write).
    pub(crate) fn forget(&self, changed: &Changed) {
        let mut known = self.0.lock().expect("not poisoned");
        known.forgotten += 1;
        // A path is found only with its instance, its profile and its session all kept.
        match changed {
            Changed::Instance(id) => {
                known.instances.remove(id);
                // Its profiles go too, or those of a deleted instance would stay for good.
                known
                    .profiles
                    .retain(|_, profile| profile.instance_id != *id);
            }
            Changed::Profile(id) => drop(known.profiles.remove(id)),
            Changed::Session(id) => drop(known.sessions.remove(id)),
        }
    }
}

/// What a write changed.
#[derive(Debug, Clone)]
pub(crate) enum Changed {
    Instance(InstanceId),
    Profile(ProfileId),
    Session(SessionId),
}

impl Known {
    fn clear(&mut self) {
        self.instances.clear();
        self.profiles.clear();
        self.sessions.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use edith_types::{
        Instance, InstanceState, ModelConfig, ProviderKind, RestartPolicy, Timestamp,
    };

    use super::*;

    fn path() -> SessionPath {
        let instance = Instance {
            id: InstanceId::generate(),
            name: "i".to_owned(),
            provider: ProviderKind::Embedded,
            runtime: None,
            url: None,
            state: InstanceState::Ready,
            state_reason: None,
            restart_policy: RestartPolicy::Never,
            max_restarts: None,
            sim: None,
            labels: BTreeMap::new(),
            restarts: 0,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        };
        let profile = Profile {
            id: ProfileId::generate(),
            instance_id: instance.id.clone(),
            name: "p".to_owned(),
            native_name: "p".to_owned(),
            model: ModelConfig::Runtime,
            tools: Vec::new(),
            created_at: Timestamp::now(),
        };
        let session = Session {
            id: SessionId::generate(),
            profile_id: profile.id.clone(),
            instance_id: instance.id.clone(),
            native_session_id: None,
            title: None,
            created_at: Timestamp::now(),
        };
        SessionPath {
            instance: InstanceRecord {
                instance,
                runtime_token: "r".to_owned(),
                mcp_token: "m".to_owned(),
            },
            profile: Some(profile),
            session: Some(session),
        }
    }

    fn ids(path: &SessionPath) -> (InstanceId, ProfileId, SessionId) {
        (
            path.instance.instance.id.clone(),
            path.profile.as_ref().unwrap().id.clone(),
            path.session.as_ref().unwrap().id.clone(),
        )
    }

    #[test]
    fn a_kept_path_is_found_only_on_its_own_path_and_until_a_write_through_it() {
        let known = KnownPaths::default();
        let path = path();
        let (i, p, s) = ids(&path);
        let keep = || {
            let seen = known.get(&i, &p, &s).unwrap_err();
            known.keep(&path, seen);
        };
        keep();
        let kept = known.get(&i, &p, &s).unwrap();
        assert_eq!(kept.session, path.session);
        assert!(known.get(&InstanceId::generate(), &p, &s).is_err());
        assert!(known.get(&i, &ProfileId::generate(), &s).is_err());
        known.forget(&Changed::Session(SessionId::generate()));
        assert!(known.get(&i, &p, &s).is_ok(), "another session's write");
        for changed in [
            Changed::Instance(i.clone()),
            Changed::Profile(p.clone()),
            Changed::Session(s.clone()),
        ] {
            known.forget(&changed);
            assert!(
                known.get(&i, &p, &s).is_err(),
                "forgotten at a write of {changed:?}"
            );
            keep();
            assert!(known.get(&i, &p, &s).is_ok(), "kept again");
        }
    }

    #[test]
    fn forgetting_an_instance_forgets_its_profiles() {
        let known = KnownPaths::default();
        let path = path();
        let (i, p, s) = ids(&path);
        let seen = known.get(&i, &p, &s).unwrap_err();
        known.keep(&path, seen);
        known.forget(&Changed::Instance(i));
        let kept = known.0.lock().unwrap();
        assert!(kept.instances.is_empty() && kept.profiles.is_empty());
    }

    #[test]
    fn a_read_that_raced_a_write_is_not_kept_and_neither_is_part_of_a_path() {
        let known = KnownPaths::default();
        let path = path();
        let (i, p, s) = ids(&path);
        // Read before a write, kept after it: it may hold what the write changed.
        let seen = known.get(&i, &p, &s).unwrap_err();
        known.forget(&Changed::Session(SessionId::generate()));
        known.keep(&path, seen);
        assert!(known.get(&i, &p, &s).is_err());
        // A path without its session is never kept.
        let partial = SessionPath {
            session: None,
            ..path.clone()
        };
        let seen = known.get(&i, &p, &s).unwrap_err();
        known.keep(&partial, seen);
        assert!(known.0.lock().unwrap().sessions.is_empty());
    }
}
