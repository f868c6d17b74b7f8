//! `rollback.list`, `rollback.diff` and `rollback.restore`: a live session's directory as the
//! checkpoints the agent's changes left (`crate::checkpoints`).

use hermes_native::codes;
use hermes_native::config::HermesConfig;
use hermes_native::methods::{
    Checkpoint, CheckpointDiff, Checkpoints, LiveSessionParams, RollbackParams,
};
use serde_json::{Value, json};

use super::methods::{Result, RpcError, live_session};
use super::session_work::{idle, take_back_last_exchange};
use crate::checkpoints::{self, Restored};
use crate::runtime::Runtime;

/// How much of a diff a reply carries.
const DIFF_CHARS: usize = 4000;

pub async fn list(runtime: &Runtime, p: LiveSessionParams) -> Result<Checkpoints> {
    let session = live_session(runtime, &p.session_id)?;
    let config = HermesConfig::load(&session.home)
        .await
        .map_err(|e| RpcError::new(codes::ROLLBACK_LIST_FAILED, e.to_string()))?;
    if !checkpoints::enabled(&config) {
        return Ok(Checkpoints::default());
    }
    let listed = checkpoints::Checkpoints::of(&session.home)
        .list(&session.settings().cwd)
        .await;
    Ok(Checkpoints {
        enabled: true,
        checkpoints: listed
            .into_iter()
            .map(|snapshot| Checkpoint {
                hash: snapshot.hash,
                timestamp: snapshot.timestamp,
                message: snapshot.reason,
            })
            .collect(),
    })
}

pub async fn diff(runtime: &Runtime, p: RollbackParams) -> Result<CheckpointDiff> {
    let session = live_session(runtime, &p.session_id)?;
    let target = required_hash(p.hash)?;
    let store = checkpoints::Checkpoints::of(&session.home);
    let dir = session.settings().cwd;
    let hash = resolve(&store, &dir, &target, codes::ROLLBACK_DIFF_FAILED).await?;
    let (stat, diff) = store.diff(&dir, &hash).await;
    Ok(CheckpointDiff {
        stat,
        diff: diff.chars().take(DIFF_CHARS).collect(),
        other: Default::default(),
    })
}

pub async fn restore(runtime: &Runtime, p: RollbackParams) -> Result<Value> {
    let session = live_session(runtime, &p.session_id)?;
    let target = required_hash(p.hash)?;
    let file = p.file_path.filter(|f| !f.is_empty());
    if file.is_none() {
        // A whole restore takes the last exchange back too: not while a turn adds to it.
        idle(
            &session.state.lock().expect("not poisoned"),
            "full rollback.restore",
        )?;
    }
    let store = checkpoints::Checkpoints::of(&session.home);
    let dir = session.settings().cwd;
    let hash = resolve(&store, &dir, &target, codes::ROLLBACK_RESTORE_FAILED).await?;
    Ok(match store.restore(&dir, &hash, file.as_deref()).await {
        Restored::Failed(error) => json!({"success": false, "error": error}),
        Restored::Done { short, reason } => {
            let mut done = json!({
                "success": true,
                "restored_to": short,
                "reason": reason,
                "directory": checkpoints::Checkpoints::directory(&dir),
            });
            match file {
                Some(file) => done["file"] = json!(file),
                None => {
                    // A turn that started while git worked keeps its conversation.
                    let mut state = session.state.lock().expect("not poisoned");
                    let removed = match state.running {
                        Some(_) => 0,
                        None => take_back_last_exchange(&mut state.messages),
                    };
                    done["history_removed"] = json!(removed);
                }
            }
            done
        }
    })
}

fn required_hash(hash: Option<String>) -> Result<String> {
    hash.filter(|h| !h.is_empty())
        .ok_or_else(|| RpcError::new(codes::HASH_REQUIRED, "hash required"))
}

/// A checkpoint named by its number in the list (from 1) or by its hash. As in Hermes, a name
/// of digits only is a number.
async fn resolve(
    store: &checkpoints::Checkpoints,
    dir: &std::path::Path,
    target: &str,
    failing: i64,
) -> Result<String> {
    // Python's int() reads " 2" and "-1" too.
    let Ok(number) = target.trim().parse::<i64>() else {
        return Ok(target.to_owned());
    };
    let listed = store.list(dir).await;
    number
        .checked_sub(1)
        .and_then(|index| usize::try_from(index).ok())
        .and_then(|index| listed.get(index))
        .map(|snapshot| snapshot.hash.clone())
        .ok_or_else(|| {
            RpcError::new(
                failing,
                format!("Invalid checkpoint number. Use 1-{}.", listed.len()),
            )
        })
}
