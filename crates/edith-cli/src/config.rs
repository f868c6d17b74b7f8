//! `edith login`: where the client commands find the control plane and their key when neither
//! a flag nor the environment says — a file only its owner can read.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Saved {
    pub url: Option<String>,
    pub api_key: Option<String>,
}

/// `EDITH_CONFIG`, else `$XDG_CONFIG_HOME/edith/config.json`, else
/// `~/.config/edith/config.json`.
pub fn path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("EDITH_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("edith").join("config.json"))
}

/// What `edith login` saved, if anything.
pub fn load() -> Saved {
    path()
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Saves `saved`, readable by its owner only (0600, also when the file was there before).
pub fn save(saved: &Saved) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = path().ok_or_else(|| std::io::Error::other("no HOME to keep a config in"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    // A file that was there already keeps its mode on open: narrow it before writing.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(&serde_json::to_vec_pretty(saved).expect("JSON"))?;
    Ok(path)
}
