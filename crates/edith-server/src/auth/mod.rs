//! API keys: nobody reaches the control plane without one. Only a SHA-256 hash of each secret
//! is stored, and a key is found by the hash of what the caller sent (so timing says nothing
//! about the secret); every route but `/healthz` needs a key with the scope
//! the contract names for it; a key limited to some instances reaches only routes about them.

mod bootstrap;
mod middleware;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use edith_types::{ApiKey, ApiKeyId, Scope};
use sha2::{Digest, Sha256};

pub use bootstrap::{ADMIN_KEY_FILE, bootstrap};
pub use middleware::authenticate;

use crate::error::{AppError, AppResult};
use edith_types::ErrorCode;

/// Secrets start with this, so they are recognisable (in a leak scan, say).
pub const SECRET_PREFIX: &str = "edk_";

/// How often a key's `last_used_at` is written at most.
const LAST_USED_EVERY: Duration = Duration::from_secs(60);

/// The caller of a request, as its key says: put in the request's extensions.
#[derive(Debug, Clone)]
pub struct Principal(pub ApiKey);

impl Principal {
    /// Refuses (403, naming the scope) unless the key holds `scope` or a wider one.
    pub fn require(&self, scope: Scope, what: &str) -> AppResult<()> {
        if self.0.scope.grants(scope) {
            return Ok(());
        }
        Err(AppError::new(
            ErrorCode::Forbidden,
            format!(
                "{what} needs the `{}` scope; this key has `{}`",
                scope.as_str(),
                self.0.scope.as_str()
            ),
        ))
    }

    /// Whether the key may act on `instance`.
    pub fn reaches(&self, instance: &str) -> bool {
        match &self.0.instances {
            None => true,
            Some(allowed) => allowed.iter().any(|i| i.as_str() == instance),
        }
    }

    /// Refuses (403) unless the key may act on `instance`: for resources whose path does not
    /// name their instance (jobs).
    pub fn require_reach(&self, instance: &edith_types::InstanceId) -> AppResult<()> {
        if self.reaches(instance.as_str()) {
            return Ok(());
        }
        Err(AppError::new(
            ErrorCode::Forbidden,
            format!("this key does not reach instance `{instance}`"),
        ))
    }

    /// Whether the key is limited to some instances.
    pub fn is_limited(&self) -> bool {
        self.0.instances.is_some()
    }
}

/// A new secret: the prefix and 256 random bits.
pub fn new_secret() -> String {
    format!(
        "{SECRET_PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What is stored of a secret.
pub fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// What the API shows of a secret to recognise it by.
pub fn shown_prefix(secret: &str) -> String {
    let visible: String = secret.chars().take(SECRET_PREFIX.len() + 8).collect();
    format!("{visible}…")
}

/// How long a key found by its secret is trusted without reading it again.
const KEY_KEPT_FOR: Duration = Duration::from_secs(10);

/// Keys found by the hash of their secret, so that a request need not read its key from the
/// database each time. Only known, unrevoked keys are kept: an unknown secret never is, so
/// guesses cannot fill it. A revocation drops the key at once: here, or on another replica,
/// which announces it (`app::announcements`); any entry is read again after [`KEY_KEPT_FOR`],
/// the bound should an announcement be lost.
#[derive(Default)]
pub struct KnownKeys(Mutex<Known>);

#[derive(Default)]
struct Known {
    by_hash: HashMap<Vec<u8>, (ApiKey, Instant)>,
    /// Counts revocations, so that a read that raced one is not kept.
    revocations: u64,
}

impl KnownKeys {
    /// The key kept for `hash`, or (when none is) the revocation count to hand to
    /// [`KnownKeys::keep`] after reading the database.
    fn get(&self, hash: &[u8]) -> Result<ApiKey, u64> {
        let known = self.0.lock().expect("not poisoned");
        match known.by_hash.get(hash) {
            Some((key, at)) if at.elapsed() < KEY_KEPT_FOR => Ok(key.clone()),
            _ => Err(known.revocations),
        }
    }

    /// Keeps `key`, read from the database when the revocation count was `seen`, unless a key
    /// was revoked since (the read may predate it).
    fn keep(&self, hash: Vec<u8>, key: &ApiKey, seen: u64) {
        let mut known = self.0.lock().expect("not poisoned");
        if known.revocations == seen && key.revoked_at.is_none() {
            known.by_hash.insert(hash, (key.clone(), Instant::now()));
        }
    }

    /// Drops every key kept (a revocation may have been missed); reads under way are not kept
    /// either.
    pub fn forget_all(&self) {
        let mut known = self.0.lock().expect("not poisoned");
        known.revocations += 1;
        known.by_hash.clear();
    }

    /// Drops a revoked key; reads under way when it was revoked are not kept either.
    pub fn forget(&self, id: &ApiKeyId) {
        let mut known = self.0.lock().expect("not poisoned");
        known.revocations += 1;
        known.by_hash.retain(|_, (key, _)| key.id != *id);
    }
}

/// When each key's `last_used_at` was last written by this process.
#[derive(Default)]
pub struct LastUse(Mutex<HashMap<ApiKeyId, Instant>>);

impl LastUse {
    /// Forgets a key (it was revoked).
    pub fn forget(&self, key: &ApiKeyId) {
        self.0.lock().expect("not poisoned").remove(key);
    }

    /// Whether `key`'s last use is due to be written now (and notes that it is).
    fn due(&self, key: &ApiKeyId) -> bool {
        let mut written = self.0.lock().expect("not poisoned");
        let now = Instant::now();
        match written.get(key) {
            Some(at) if now.duration_since(*at) < LAST_USED_EVERY => false,
            _ => {
                written.insert(key.clone(), now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edith_types::Timestamp;

    fn key() -> ApiKey {
        ApiKey {
            id: ApiKeyId::generate(),
            name: "k".to_owned(),
            prefix: "edk_…".to_owned(),
            scope: Scope::Read,
            instances: None,
            created_at: Timestamp::now(),
            last_used_at: None,
            revoked_at: None,
        }
    }

    #[test]
    fn a_kept_key_is_dropped_on_revocation_and_a_read_racing_one_is_not_kept() {
        let known = KnownKeys::default();
        let (a, b) = (key(), key());
        let seen = known.get(b"a").unwrap_err();
        known.keep(b"a".to_vec(), &a, seen);
        assert_eq!(known.get(b"a").unwrap().id, a.id, "kept");

        // `b` was read from the database before `a` was revoked, and kept after: not kept,
        // since the read may predate a revocation of `b` itself.
        let seen = known.get(b"b").unwrap_err();
        known.forget(&a.id);
        known.keep(b"b".to_vec(), &b, seen);
        assert!(known.get(b"a").is_err(), "a revoked key is read again");
        assert!(known.get(b"b").is_err(), "a read that raced a revocation");

        // A key the database says is revoked is never kept.
        let mut revoked = key();
        revoked.revoked_at = Some(Timestamp::now());
        let seen = known.get(b"c").unwrap_err();
        known.keep(b"c".to_vec(), &revoked, seen);
        assert!(known.get(b"c").is_err());
    }
}
