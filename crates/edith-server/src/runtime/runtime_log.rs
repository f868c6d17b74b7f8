//! A `process` runtime's log: what it writes to stdout and stderr, a line at a time, in
//! `runtime.log` in the instance's directory. Past its size limit the file is rotated to
//! `runtime.log.1` (the one before is dropped), so a chatty runtime cannot fill the disk.

use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

pub struct RuntimeLog {
    inner: Mutex<Inner>,
}

struct Inner {
    file: tokio::fs::File,
    path: PathBuf,
    written: u64,
    limit: u64,
}

/// The rotated file beside `path`.
fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

impl RuntimeLog {
    /// Appends to `path`, keeping it under `limit` bytes.
    pub fn open(path: &Path, limit: u64) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            inner: Mutex::new(Inner {
                file: tokio::fs::File::from_std(file),
                path: path.to_owned(),
                written,
                limit,
            }),
        })
    }

    /// Writes one line (a newline is added), rotating first when it would pass the limit.
    pub async fn line(&self, text: &str) {
        let mut inner = self.inner.lock().await;
        let bytes = format!("{text}\n");
        if inner.written > 0 && inner.written + bytes.len() as u64 > inner.limit {
            inner.rotate().await;
        }
        if inner.file.write_all(bytes.as_bytes()).await.is_ok() {
            inner.written += bytes.len() as u64;
        }
    }
}

impl Inner {
    async fn rotate(&mut self) {
        let _ = self.file.flush().await;
        if tokio::fs::rename(&self.path, rotated(&self.path))
            .await
            .is_err()
        {
            return;
        }
        let reopened = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .await;
        if let Ok(file) = reopened {
            self.file = file;
            self.written = 0;
        }
    }
}

/// The last `lines` lines of the log at `path`, from the rotated file too when the current one
/// has fewer.
pub async fn tail(path: &Path, lines: usize) -> Vec<String> {
    let mut all = last_lines(&rotated(path)).await;
    all.extend(last_lines(path).await);
    let start = all.len().saturating_sub(lines);
    all.split_off(start)
}

async fn last_lines(path: &Path) -> Vec<String> {
    let bytes = tokio::fs::read(path).await.unwrap_or_default();
    // Only the end is needed: the last 4 MiB hold far more lines than a caller may ask for.
    let tail = &bytes[bytes.len().saturating_sub(4 * 1024 * 1024)..];
    String::from_utf8_lossy(tail)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_log_past_its_limit_is_rotated_and_its_tail_spans_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.log");
        let log = RuntimeLog::open(&path, 100).unwrap();
        for n in 0..30 {
            log.line(&format!("line {n:02}")).await;
        }
        let current = std::fs::metadata(&path).unwrap().len();
        let old = std::fs::metadata(rotated(&path)).unwrap().len();
        assert!(current <= 100 && old <= 100, "{current} {old}");
        let last = tail(&path, 12).await;
        assert_eq!(last.len(), 12);
        assert_eq!(last.last().unwrap(), "line 29");
        assert_eq!(last.first().unwrap(), "line 18");
    }
}
