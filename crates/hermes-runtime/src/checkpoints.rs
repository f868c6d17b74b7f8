//! Checkpoints of the directories the agent changes, as Hermes keeps them: one shadow git store
//! in `$HERMES_HOME/checkpoints/store` (never the project's own repository), a chain of
//! snapshots per directory (`refs/hermes/<hash of its path>`, its own index), at most 20 kept.
//! A snapshot is taken before a command that looks like it changes files, at most once per
//! directory per model call, and read back by `rollback.list`, `rollback.diff` and
//! `rollback.restore`.
//!
//! Hermes's gateway keeps checkpoints only when started with them on (`HERMES_TUI_CHECKPOINTS`,
//! what `hermes --tui --checkpoints` sets); this runtime also takes `checkpoints.enabled: true`
//! from the config, which Hermes's other front ends read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// Snapshots kept per directory (Hermes's `checkpoints.max_snapshots`).
const MAX_SNAPSHOTS: usize = 20;
/// A directory with more files than this is not snapshot.
const MAX_FILES: usize = 50_000;
/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// What a snapshot leaves out: build output, caches, environments, other repositories,
/// binaries, media and archives, secrets, logs.
const EXCLUDES: &str = "node_modules/\ndist/\nbuild/\ntarget/\nout/\n.next/\n.nuxt/\n\
__pycache__/\n*.pyc\n*.pyo\n.cache/\n.pytest_cache/\n.mypy_cache/\n.ruff_cache/\ncoverage/\n\
.coverage\n.venv/\nvenv/\nenv/\n.git/\n.hg/\n.svn/\n.worktrees/\n*.so\n*.dylib\n*.dll\n*.o\n\
*.a\n*.jar\n*.class\n*.exe\n*.obj\n*.mp4\n*.mov\n*.mkv\n*.webm\n*.zip\n*.tar\n*.tar.gz\n\
*.tgz\n*.7z\n*.rar\n*.iso\n.env\n.env.*\n.env.local\n.env.*.local\n.DS_Store\nThumbs.db\n\
*.log\n";

/// Whether checkpoints are on: the runtime was started with `HERMES_TUI_CHECKPOINTS` set
/// truthy, or the config says `checkpoints.enabled: true`.
pub fn enabled(config: &hermes_native::config::HermesConfig) -> bool {
    let from_env = std::env::var("HERMES_TUI_CHECKPOINTS").is_ok_and(|v| {
        matches!(
            v.trim().to_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    });
    from_env
        || config
            .value_at("checkpoints.enabled")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
}

/// Whether a command looks like it changes or removes files (Hermes's heuristic): `rm`,
/// `rmdir`, `cp`, `install`, `mv`, `sed -i`, `truncate`, `dd`, `shred`, `git reset|clean|
/// checkout` at the start of a command, or a `>` that overwrites.
pub fn changes_files(command: &str) -> bool {
    const WORDS: &[&str] = &[
        "rm", "rmdir", "cp", "install", "mv", "truncate", "dd", "shred",
    ];
    let starts = command_starts(command);
    let destructive = starts.iter().any(|rest| {
        let mut words = rest.split_whitespace();
        let first = words.next().unwrap_or_default();
        let followed = rest
            .get(first.len()..)
            .is_some_and(|after| after.starts_with(char::is_whitespace));
        (WORDS.contains(&first) && followed)
            || (first == "sed" && words.next() == Some("-i"))
            || (first == "git"
                && words
                    .next()
                    .is_some_and(|w| matches!(w, "reset" | "clean" | "checkout"))
                && followed)
    });
    destructive || overwrites(command)
}

/// The text after each place a command can start: the beginning, whitespace, `&&`, `||`,
/// `;` and a backquote.
fn command_starts(command: &str) -> Vec<&str> {
    let mut starts = vec![command];
    for (at, c) in command.char_indices() {
        if c.is_whitespace() || c == ';' || c == '`' {
            starts.push(&command[at + c.len_utf8()..]);
        }
        if command[at..].starts_with("&&") || command[at..].starts_with("||") {
            starts.push(&command[at + 2..]);
        }
    }
    starts
}

/// A `>` that is not part of `>>`.
fn overwrites(command: &str) -> bool {
    let bytes = command.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        *b == b'>'
            && (i == 0 || bytes[i - 1] != b'>')
            && bytes.get(i + 1).is_some_and(|next| *next != b'>')
    })
}

/// One home's shadow store.
pub struct Checkpoints {
    store: PathBuf,
}

/// A snapshot, newest first in lists.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub hash: String,
    /// ISO 8601, as git writes an author date (`%aI`).
    pub timestamp: String,
    /// Why it was taken (`before terminal: rm notes.txt`).
    pub reason: String,
}

/// What a restore did.
pub enum Restored {
    Done { short: String, reason: String },
    Failed(String),
}

impl Checkpoints {
    pub fn of(home: &Path) -> Self {
        Self {
            store: home.join("checkpoints").join("store"),
        }
    }

    /// Snapshots `dir` (unless it is too broad, too large, or unchanged since the last one).
    pub async fn take(&self, dir: &Path, reason: &str) -> bool {
        let (store, dir, reason) = (self.store.clone(), dir.to_path_buf(), reason.to_owned());
        exclusively(async move { Self { store }.take_now(&dir, &reason).await })
            .await
            .unwrap_or(false)
    }

    /// What changed in `dir` since a snapshot: `(stat, diff)`, empty when it cannot be told.
    pub async fn diff(&self, dir: &Path, hash: &str) -> (String, String) {
        let (store, dir, hash) = (self.store.clone(), dir.to_path_buf(), hash.to_owned());
        exclusively(async move { Self { store }.diff_now(&dir, &hash).await })
            .await
            .unwrap_or_default()
    }

    /// Puts `dir` (or one file of it) back as a snapshot had it, after snapshotting it as it is
    /// now. Files made since are left.
    pub async fn restore(&self, dir: &Path, hash: &str, file: Option<&str>) -> Restored {
        let (store, dir, hash) = (self.store.clone(), dir.to_path_buf(), hash.to_owned());
        let file = file.map(str::to_owned);
        exclusively(async move {
            Self { store }
                .restore_now(&dir, &hash, file.as_deref())
                .await
        })
        .await
        .unwrap_or_else(|| Restored::Failed("Restore failed: the work was cut off".to_owned()))
    }

    async fn take_now(&self, dir: &Path, reason: &str) -> bool {
        let Some(dir) = normalized(dir) else {
            return false;
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if dir == Path::new("/") || Some(&dir) == home.as_ref() {
            return false;
        }
        let counted = dir.clone();
        let too_large = tokio::task::spawn_blocking(move || too_many_files(&counted))
            .await
            .unwrap_or(true);
        if too_large || self.init().await.is_err() {
            return false;
        }
        let project = Project::of(&self.store, &dir);
        project.clear_stale_locks(&self.store);
        if project.index.exists() {
            match self.commit_of(&project).await {
                Some(commit) => {
                    self.git(&project, &["read-tree", &commit]).await;
                }
                None => {
                    let _ = std::fs::remove_file(&project.index);
                }
            }
        }
        if self.git(&project, &["add", "-A"]).await.is_none() {
            return false;
        }
        let parent = self.commit_of(&project).await;
        match &parent {
            Some(commit) => {
                if self
                    .git(&project, &["diff-index", "--cached", "--quiet", commit])
                    .await
                    .is_some()
                {
                    return false;
                }
            }
            None => {
                let listed = self.git(&project, &["ls-files", "--cached"]).await;
                if listed.is_none_or(|files| files.trim().is_empty()) {
                    return false;
                }
            }
        }
        let Some(tree) = self.git(&project, &["write-tree"]).await else {
            return false;
        };
        let mut args = vec!["commit-tree", tree.trim(), "-m", reason];
        if let Some(parent) = &parent {
            args.extend(["-p", parent]);
        }
        let Some(commit) = self.git(&project, &args).await else {
            return false;
        };
        let updated = self
            .git(&project, &["update-ref", &project.reference, commit.trim()])
            .await
            .is_some();
        if updated {
            let _ = std::fs::write(
                self.store
                    .join("projects")
                    .join(format!("{}.json", project.key)),
                serde_json::json!({"workdir": dir, "last_touch": crate::store::unix_now()})
                    .to_string(),
            );
            self.prune(&project).await;
        }
        updated
    }

    /// The snapshots of `dir`, newest first.
    pub async fn list(&self, dir: &Path) -> Vec<Snapshot> {
        let Some(dir) = normalized(dir) else {
            return Vec::new();
        };
        if !self.store.join("HEAD").exists() {
            return Vec::new();
        }
        let project = Project::of(&self.store, &dir);
        let limit = MAX_SNAPSHOTS.to_string();
        let format = "--format=%H|%aI|%s";
        let log = self
            .git(&project, &["log", &project.reference, format, "-n", &limit])
            .await
            .unwrap_or_default();
        log.lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, '|');
                Some(Snapshot {
                    hash: parts.next()?.to_owned(),
                    timestamp: parts.next()?.to_owned(),
                    reason: parts.next()?.to_owned(),
                })
            })
            .collect()
    }

    async fn diff_now(&self, dir: &Path, hash: &str) -> (String, String) {
        let Some(dir) = normalized(dir) else {
            return Default::default();
        };
        if valid_hash(hash).is_err() || !self.store.join("HEAD").exists() {
            return Default::default();
        }
        let project = Project::of(&self.store, &dir);
        if self
            .git(&project, &["cat-file", "-t", hash])
            .await
            .is_none()
        {
            return Default::default();
        }
        self.git(&project, &["add", "-A"]).await;
        let stat = self
            .git(&project, &["diff", "--stat", hash, "--cached"])
            .await;
        let diff = self
            .git(&project, &["diff", hash, "--cached", "--no-color"])
            .await;
        // The index goes back to the last snapshot, so that it does not drift from it.
        if let Some(commit) = self.commit_of(&project).await {
            self.git(&project, &["read-tree", &commit]).await;
        }
        (
            stat.unwrap_or_default().trim_end().to_owned(),
            diff.unwrap_or_default().trim_end().to_owned(),
        )
    }

    async fn restore_now(&self, dir: &Path, hash: &str, file: Option<&str>) -> Restored {
        if let Err(problem) = valid_hash(hash) {
            return Restored::Failed(problem);
        }
        let Some(dir) = normalized(dir) else {
            return Restored::Failed("No checkpoints exist for this directory".to_owned());
        };
        if let Some(file) = file
            && let Err(problem) = valid_file(file)
        {
            return Restored::Failed(problem);
        }
        if !self.store.join("HEAD").exists() {
            return Restored::Failed("No checkpoints exist for this directory".to_owned());
        }
        let project = Project::of(&self.store, &dir);
        if self
            .git(&project, &["cat-file", "-t", hash])
            .await
            .is_none()
        {
            return Restored::Failed(format!("Checkpoint '{hash}' not found"));
        }
        let short: String = hash.chars().take(8).collect();
        self.take_now(
            &dir,
            &format!("pre-rollback snapshot (restoring to {short})"),
        )
        .await;
        let target = file.unwrap_or(".");
        if let Err(problem) = self
            .git_checked(&project, &["checkout", hash, "--", target])
            .await
        {
            return Restored::Failed(format!("Restore failed: {problem}"));
        }
        let reason = self
            .git(&project, &["log", "--format=%s", "-1", hash])
            .await
            .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
        Restored::Done { short, reason }
    }

    /// The directory a project's snapshots are of, as `restore` names it.
    pub fn directory(dir: &Path) -> String {
        normalized(dir)
            .unwrap_or_else(|| dir.to_path_buf())
            .display()
            .to_string()
    }

    /// Makes the store on first use: a bare repository with its own identity and excludes.
    async fn init(&self) -> Result<(), String> {
        if self.store.join("HEAD").exists() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.store).map_err(|e| e.to_string())?;
        self.run(None, &["init", "--bare", "--quiet"], None).await?;
        for (key, value) in [
            ("user.name", "Hermes Checkpoint"),
            ("user.email", "hermes@local"),
            ("commit.gpgsign", "false"),
            ("gc.auto", "0"),
        ] {
            self.run(None, &["config", key, value], None).await?;
        }
        let info = self.store.join("info");
        std::fs::create_dir_all(&info).map_err(|e| e.to_string())?;
        std::fs::write(info.join("exclude"), EXCLUDES).map_err(|e| e.to_string())
    }

    async fn commit_of(&self, project: &Project) -> Option<String> {
        let verify = format!("{}^{{commit}}", project.reference);
        self.git(project, &["rev-parse", "--verify", "--quiet", &verify])
            .await
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
    }

    /// Keeps the newest [`MAX_SNAPSHOTS`] of a project: older ones are dropped by rebuilding
    /// the chain from the oldest kept.
    async fn prune(&self, project: &Project) {
        let log = self
            .git(project, &["log", &project.reference, "--format=%H"])
            .await
            .unwrap_or_default();
        let commits: Vec<&str> = log.lines().collect();
        if commits.len() <= MAX_SNAPSHOTS {
            return;
        }
        let mut parent: Option<String> = None;
        for commit in commits[..MAX_SNAPSHOTS].iter().rev() {
            let tree = self
                .git(project, &["rev-parse", &format!("{commit}^{{tree}}")])
                .await;
            let message = self
                .git(project, &["log", "--format=%B", "-1", commit])
                .await;
            let date = self
                .git(project, &["log", "--format=%aI", "-1", commit])
                .await;
            let (Some(tree), Some(message), Some(date)) = (tree, message, date) else {
                return;
            };
            let mut args = vec!["commit-tree", tree.trim(), "-m", message.trim_end()];
            if let Some(parent) = &parent {
                args.extend(["-p", parent]);
            }
            let rebuilt = self.git_dated(project, &args, date.trim()).await;
            let Some(rebuilt) = rebuilt else {
                return;
            };
            parent = Some(rebuilt.trim().to_owned());
        }
        if let Some(newest) = parent {
            self.git(project, &["update-ref", &project.reference, &newest])
                .await;
        }
    }

    async fn git(&self, project: &Project, args: &[&str]) -> Option<String> {
        self.git_checked(project, args).await.ok()
    }

    async fn git_dated(&self, project: &Project, args: &[&str], date: &str) -> Option<String> {
        self.run(Some(project), args, Some(date)).await.ok()
    }

    async fn git_checked(&self, project: &Project, args: &[&str]) -> Result<String, String> {
        self.run(Some(project), args, None).await
    }

    /// Runs git on the store — for a project, with its directory as the work tree and its own
    /// index — and with no configuration but the store's.
    async fn run(
        &self,
        project: Option<&Project>,
        args: &[&str],
        date: Option<&str>,
    ) -> Result<String, String> {
        let mut command = tokio::process::Command::new("git");
        command
            .args(["-c", "core.fsmonitor=false"])
            .args(args)
            .env("GIT_DIR", &self.store)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(&self.store)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(project) = project {
            command
                .env("GIT_WORK_TREE", &project.dir)
                .env("GIT_INDEX_FILE", &project.index)
                .current_dir(&project.dir);
        }
        if let Some(date) = date {
            command
                .env("GIT_AUTHOR_DATE", date)
                .env("GIT_COMMITTER_DATE", date);
        }
        match tokio::time::timeout(GIT_TIMEOUT, command.output()).await {
            Ok(Ok(output)) if output.status.success() => {
                Ok(String::from_utf8_lossy(&output.stdout).into_owned())
            }
            Ok(Ok(output)) => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("git took longer than {}s", GIT_TIMEOUT.as_secs())),
        }
    }
}

/// A directory's place in the store.
struct Project {
    dir: PathBuf,
    key: String,
    reference: String,
    index: PathBuf,
}

impl Project {
    /// Lock files a git cut off mid-write left (nothing else writes the store while the
    /// process-wide lock is held): without this the directory would never be snapshot again.
    fn clear_stale_locks(&self, store: &Path) {
        let mut index_lock = self.index.clone().into_os_string();
        index_lock.push(".lock");
        let reference = store.join(format!("{}.lock", self.reference));
        for lock in [PathBuf::from(index_lock), reference] {
            let _ = std::fs::remove_file(lock);
        }
    }

    fn of(store: &Path, dir: &Path) -> Self {
        let digest = Sha256::digest(dir.display().to_string().as_bytes());
        let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let index = store.join("indexes").join(&key);
        if let Some(parent) = index.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::create_dir_all(store.join("projects"));
        Self {
            dir: dir.to_path_buf(),
            reference: format!("refs/hermes/{key}"),
            index,
            key,
        }
    }
}

/// Runs store work one piece at a time in this process, on a task of its own: a caller that
/// goes away (an interrupted turn, a closed connection) does not cut git off mid-write.
/// `None` when the task failed.
async fn exclusively<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    static STORE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    tokio::spawn(async move {
        let _one_at_a_time = STORE.lock().await;
        work.await
    })
    .await
    .ok()
}

/// The directory as an absolute path, links resolved.
fn normalized(dir: &Path) -> Option<PathBuf> {
    dir.canonicalize().ok().filter(|d| d.is_dir())
}

fn too_many_files(dir: &Path) -> bool {
    let mut count = 0usize;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            count += 1;
            if count > MAX_FILES {
                return true;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    false
}

/// A commit hash a client may name: 4 to 64 hex digits.
fn valid_hash(hash: &str) -> Result<(), String> {
    if hash.trim().is_empty() {
        return Err("Empty commit hash".to_owned());
    }
    if hash.starts_with('-') {
        return Err(format!(
            "Invalid commit hash (must not start with '-'): '{hash}'"
        ));
    }
    let hex = hash.chars().all(|c| c.is_ascii_hexdigit());
    if !hex || !(4..=64).contains(&hash.len()) {
        return Err(format!(
            "Invalid commit hash (expected 4-64 hex characters): '{hash}'"
        ));
    }
    Ok(())
}

/// A file a restore may name: relative, and not leaving the directory.
fn valid_file(file: &str) -> Result<(), String> {
    if file.trim().is_empty() {
        return Err("Empty file path".to_owned());
    }
    if Path::new(file).is_absolute() {
        return Err(format!(
            "File path must be relative, got absolute path: '{file}'"
        ));
    }
    let mut depth = 0i32;
    for part in Path::new(file).components() {
        match part {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Err(format!(
                "File path escapes the working directory via traversal: '{file}'"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_that_change_files_are_told_as_hermes_tells_them() {
        for command in [
            "rm notes.txt",
            "ls && mv a b",
            "echo hi > out.txt",
            "sed -i s/a/b/ f",
            "git checkout -- .",
            "x;cp a b",
        ] {
            assert!(changes_files(command), "{command}");
        }
        // A word anywhere after a space counts, as in Hermes (`grep rm x` does too).
        assert!(changes_files("grep rm x"));
        for command in ["ls -la", "echo hi >> log", "cat rmfile", "git status"] {
            assert!(!changes_files(command), "{command}");
        }
    }

    #[test]
    fn only_plain_hashes_and_files_inside_are_taken() {
        assert!(valid_hash("abc1").is_ok());
        assert!(valid_hash("--patch").is_err());
        assert!(valid_hash("xyz1").is_err());
        assert!(valid_file("a/../b").is_ok());
        assert!(valid_file("../etc").is_err());
        assert!(valid_file("/etc/passwd").is_err());
    }

    #[tokio::test]
    async fn a_snapshot_is_listed_compared_and_restored_and_the_chain_is_bounded() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        let store = Checkpoints::of(home.path());
        std::fs::write(dir.join("notes.txt"), "first\n").unwrap();
        assert!(store.take(dir, "before terminal: rm notes.txt").await);
        assert!(!store.take(dir, "again").await, "nothing changed");
        std::fs::remove_file(dir.join("notes.txt")).unwrap();
        let listed = store.list(dir).await;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].reason, "before terminal: rm notes.txt");
        let (stat, diff) = store.diff(dir, &listed[0].hash).await;
        assert!(stat.contains("notes.txt"), "{stat}");
        assert!(diff.contains("-first"), "{diff}");
        let Restored::Done { short, reason } = store.restore(dir, &listed[0].hash, None).await
        else {
            panic!("restored");
        };
        assert_eq!(
            (short.as_str(), reason.as_str()),
            (&listed[0].hash[..8], "before terminal: rm notes.txt")
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "first\n"
        );
        assert_eq!(store.list(dir).await.len(), 2, "the pre-rollback snapshot");
        for n in 0..25 {
            std::fs::write(dir.join("notes.txt"), format!("{n}\n")).unwrap();
            assert!(store.take(dir, &format!("step {n}")).await);
        }
        let listed = store.list(dir).await;
        assert_eq!(listed.len(), MAX_SNAPSHOTS);
        assert_eq!(listed[0].reason, "step 24");
        assert_eq!(listed[MAX_SNAPSHOTS - 1].reason, "step 5");
        assert!(matches!(
            store.restore(dir, "deadbeef", None).await,
            Restored::Failed(_)
        ));
    }
}
