//! The first admin key. `edith serve` takes it from `EDITH_API_KEY`; without it, it makes one,
//! writes it to `<data-dir>/admin.key` (mode 0600) and says where in its log, never the key.

use std::path::Path;

use edith_store::Store;
use edith_types::{ApiKey, ApiKeyId, Scope, Timestamp};

use super::{hash, new_secret, shown_prefix};
use crate::StartError;

/// The file an admin key is written to when none is configured.
pub const ADMIN_KEY_FILE: &str = "admin.key";

/// A configured key must be at least this long.
const MIN_SECRET: usize = 16;

/// Makes sure an admin key exists: the configured one, else the one in `admin.key`, else (on a
/// store with no key at all) a new one written there.
pub async fn bootstrap(
    store: &Store,
    data_dir: &Path,
    configured: Option<&str>,
) -> Result<(), StartError> {
    if let Some(secret) = configured {
        if secret.len() < MIN_SECRET {
            return Err(StartError::AdminKey(format!(
                "the configured admin key must be at least {MIN_SECRET} characters"
            )));
        }
        return ensure(store, secret, "bootstrap (configured)").await;
    }
    let path = data_dir.join(ADMIN_KEY_FILE);
    match tokio::fs::read_to_string(&path).await {
        Ok(secret) => return ensure(store, secret.trim(), "bootstrap (admin.key)").await,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(StartError::AdminKey(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    }
    let any = store
        .list_api_keys(None, 1)
        .await
        .map_err(|e| StartError::AdminKey(e.to_string()))?;
    if !any.items.is_empty() {
        return Ok(());
    }
    let secret = new_secret();
    write_private(&path, &secret)
        .await
        .map_err(|e| StartError::AdminKey(format!("cannot write {}: {e}", path.display())))?;
    ensure(store, &secret, "bootstrap (admin.key)").await?;
    tracing::info!(
        path = %path.display(),
        "made the first admin API key; it is in this file (readable by this user only)"
    );
    Ok(())
}

/// Stores an admin key for `secret` unless one exists.
async fn ensure(store: &Store, secret: &str, name: &str) -> Result<(), StartError> {
    let digest = hash(secret);
    let existing = store
        .api_key_by_hash(&digest)
        .await
        .map_err(|e| StartError::AdminKey(e.to_string()))?;
    if let Some(key) = existing {
        if key.revoked_at.is_some() {
            tracing::warn!(key = %key.id, "the configured admin key was revoked; it is refused");
        }
        return Ok(());
    }
    let key = ApiKey {
        id: ApiKeyId::generate(),
        name: name.to_owned(),
        prefix: shown_prefix(secret),
        scope: Scope::Admin,
        instances: None,
        created_at: Timestamp::now(),
        last_used_at: None,
        revoked_at: None,
    };
    store
        .insert_api_key(&key, &digest)
        .await
        .map_err(|e| StartError::AdminKey(e.to_string()))
}

/// Writes `text` to a new file only its owner can read, from the first byte.
async fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await?;
    file.write_all(text.as_bytes()).await?;
    file.write_all(b"\n").await?;
    file.sync_all().await
}
