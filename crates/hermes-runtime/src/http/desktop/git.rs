//! `/api/git/{status,branches}` of a directory in the workspace, read with the git CLI. A
//! directory outside any repository answers `null` / no branches, as Hermes does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use hermes_native::desktop::replies::{Branch, BranchList, ChangedFile, RepoStatus};
use hermes_native::desktop::{GitBranchesQuery, GitStatusQuery};

use super::workspace::resolve;
use crate::http::extract::Params;
use crate::runtime::Runtime;
use crate::store::GitPlace;

/// How long one git command may take before it counts as failed.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many changed files a status lists.
const MAX_FILES: usize = 200;
/// How many untracked files have their lines counted, and up to what size.
const MAX_COUNTED_UNTRACKED: usize = 500;
const MAX_COUNTED_BYTES: u64 = 1024 * 1024;

/// Runs `git args` in `dir`; its output when it succeeds in time. A repository's own
/// configuration may not make git run commands (`core.fsmonitor`), and git does not look for a
/// repository above `ceiling` (the workspace's parent).
async fn git(dir: &Path, ceiling: &Path, args: &[&str]) -> Option<String> {
    let run = tokio::process::Command::new("git")
        .args(["-c", "core.fsmonitor=false"])
        .args(args)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(GIT_TIMEOUT, run).await {
        Ok(Ok(output)) if output.status.success() => {
            Some(String::from_utf8_lossy(&output.stdout).into_owned())
        }
        _ => None,
    }
}

/// Whether git would find no repository from `dir`: no `.git` (directory or file) in it or
/// above it (as git walks up: from the directory's real path), none of them a bare repository,
/// and no `GIT_DIR` set. Asked before the per-session probes, which would otherwise start git
/// processes (two for the branch) for every session opened in a directory outside any
/// repository — the usual case on a server. Anything it cannot tell is left to git.
async fn outside_any_repository(dir: &Path) -> bool {
    if std::env::var_os("GIT_DIR").is_some() {
        return false;
    }
    let dir = dir.to_owned();
    // Off the async threads: the directory may be on a slow (network) disk.
    let looked = tokio::task::spawn_blocking(move || {
        let Ok(real) = std::fs::canonicalize(&dir) else {
            return false;
        };
        !real.ancestors().any(|place| {
            place.join(".git").symlink_metadata().is_ok()
                || (place.join("HEAD").is_file() && place.join("objects").is_dir())
        })
    });
    looked.await.unwrap_or(false)
}

/// How long a directory's branch, once read, is shown without asking git again.
const BRANCH_KEPT: Duration = Duration::from_secs(1);

/// Branches read lately, by directory; sessions opened together in one directory (a burst of
/// them, each announcing its info) share one probe, the look for a repository included.
type BranchReads = HashMap<PathBuf, (Instant, Arc<tokio::sync::OnceCell<String>>)>;
static BRANCHES: LazyLock<Mutex<BranchReads>> = LazyLock::new(Default::default);

/// The branch checked out in `dir` (else the short commit, for a detached head), as Hermes
/// shows a session's; `""` outside a repository. A read at most [`BRANCH_KEPT`] old may answer.
pub async fn branch_of(dir: &Path) -> String {
    let read = {
        let mut reads = BRANCHES.lock().expect("not poisoned");
        let now = Instant::now();
        reads.retain(|_, (since, _)| now.duration_since(*since) < BRANCH_KEPT);
        let (_, read) = reads
            .entry(dir.to_owned())
            .or_insert_with(|| (now, Default::default()));
        read.clone()
    };
    read.get_or_init(|| async {
        if outside_any_repository(dir).await {
            String::new()
        } else {
            read_branch(dir).await
        }
    })
    .await
    .clone()
}

async fn read_branch(dir: &Path) -> String {
    let unbounded = Path::new("");
    let branch = match git(dir, unbounded, &["branch", "--show-current"]).await {
        Some(branch) if !branch.trim().is_empty() => branch,
        _ => git(dir, unbounded, &["rev-parse", "--short", "HEAD"])
            .await
            .unwrap_or_default(),
    };
    branch.trim().to_owned()
}

/// Where `dir` sits in git, as Hermes stores it with a session: its branch, and the root of
/// its repository (for a linked worktree, the main checkout's). Unknown parts are `None`.
pub async fn place_of(dir: &Path) -> GitPlace {
    if outside_any_repository(dir).await {
        return GitPlace::default();
    }
    let unbounded = Path::new("");
    let common = git(
        dir,
        unbounded,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await
    .and_then(|gitdir| std::fs::canonicalize(gitdir.trim()).ok())
    .filter(|gitdir| gitdir.file_name().is_some_and(|name| name == ".git"))
    .and_then(|gitdir| gitdir.parent().map(|root| root.display().to_string()));
    let repo_root = match common {
        Some(root) => Some(root),
        None => git(dir, unbounded, &["rev-parse", "--show-toplevel"])
            .await
            .map(|root| root.trim().to_owned()),
    };
    let known = |text: String| (!text.is_empty()).then_some(text);
    GitPlace {
        branch: known(branch_of(dir).await),
        repo_root: repo_root.and_then(known),
    }
}

/// Where git stops looking for a repository: the workspace's parent.
fn ceiling(runtime: &Runtime) -> &Path {
    runtime.workspace.parent().unwrap_or(&runtime.workspace)
}

async fn directory(runtime: &Runtime, raw: &str) -> Result<Option<PathBuf>, Response> {
    let path = resolve(&runtime.workspace, raw).map_err(super::fs::refused)?;
    Ok(path.is_dir().then_some(path))
}

pub async fn status(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<GitStatusQuery>,
) -> Response {
    match directory(&runtime, &query.path).await {
        Ok(Some(dir)) => Json(repo_status(&dir, ceiling(&runtime)).await).into_response(),
        Ok(None) => Json(None::<RepoStatus>).into_response(),
        Err(refused) => refused,
    }
}

pub async fn branches(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<GitBranchesQuery>,
) -> Response {
    let branches = match directory(&runtime, &query.path).await {
        Ok(Some(dir)) => branch_list(&dir, ceiling(&runtime)).await,
        Ok(None) => Vec::new(),
        Err(refused) => return refused,
    };
    Json(BranchList { branches }).into_response()
}

async fn repo_status(dir: &Path, ceiling: &Path) -> Option<RepoStatus> {
    let porcelain = git(
        dir,
        ceiling,
        &["status", "--porcelain=v2", "--branch", "-z"],
    )
    .await?;
    let root = PathBuf::from(
        git(dir, ceiling, &["rev-parse", "--show-toplevel"])
            .await?
            .trim(),
    );
    let mut status = RepoStatus {
        branch: None,
        default_branch: default_branch_of_status(dir, ceiling).await,
        detached: false,
        ahead: 0,
        behind: 0,
        staged: 0,
        unstaged: 0,
        untracked: 0,
        conflicted: 0,
        changed: 0,
        added: 0,
        removed: 0,
        files: Vec::new(),
    };
    let mut files = Vec::new();
    let mut records = porcelain.split('\0').filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        if let Some(header) = record.strip_prefix("# ") {
            read_header(header, &mut status);
            continue;
        }
        let (kind, rest) = record.split_at(1);
        let file = match kind {
            "?" => untracked(rest.trim_start()),
            "1" => tracked(rest, 6),
            "2" => {
                records.next(); // the path it was renamed from
                tracked(rest, 7)
            }
            "u" => rest.splitn(11, ' ').nth(10).map(|path| ChangedFile {
                path: path.to_owned(),
                staged: false,
                unstaged: false,
                untracked: false,
                conflicted: true,
            }),
            _ => None,
        };
        files.extend(file);
    }
    for file in &files {
        status.staged += i64::from(file.staged);
        status.unstaged += i64::from(file.unstaged);
        status.untracked += i64::from(file.untracked);
        status.conflicted += i64::from(file.conflicted);
    }
    status.changed = files.len() as i64;
    let (added, removed) = line_changes(dir, ceiling, &root, &files).await;
    status.added = added;
    status.removed = removed;
    files.truncate(MAX_FILES);
    status.files = files;
    Some(status)
}

fn read_header(header: &str, status: &mut RepoStatus) {
    if let Some(head) = header.strip_prefix("branch.head ") {
        status.detached = head == "(detached)";
        status.branch = (!status.detached).then(|| head.to_owned());
    } else if let Some(counts) = header.strip_prefix("branch.ab ") {
        let mut parts = counts.split(' ');
        status.ahead = parts
            .next()
            .and_then(|a| a.trim_start_matches('+').parse().ok())
            .unwrap_or(0);
        status.behind = parts
            .next()
            .and_then(|b| b.trim_start_matches('-').parse().ok())
            .unwrap_or(0);
    }
}

fn untracked(path: &str) -> Option<ChangedFile> {
    Some(ChangedFile {
        path: path.to_owned(),
        staged: false,
        unstaged: true,
        untracked: true,
        conflicted: false,
    })
}

/// An ordinary or renamed entry: `<XY> <fields…> <path>`, the path after `fields` fields.
fn tracked(rest: &str, fields: usize) -> Option<ChangedFile> {
    let mut parts = rest.trim_start().splitn(fields + 2, ' ');
    let xy = parts.next()?;
    let path = parts.nth(fields)?;
    let mut codes = xy.chars();
    let (x, y) = (codes.next()?, codes.next()?);
    Some(ChangedFile {
        path: path.to_owned(),
        staged: !matches!(x, '.' | '?'),
        unstaged: !matches!(y, '.' | '?'),
        untracked: false,
        conflicted: false,
    })
}

/// Lines added and removed against HEAD, with the lines of untracked files as added.
async fn line_changes(
    dir: &Path,
    ceiling: &Path,
    root: &Path,
    files: &[ChangedFile],
) -> (i64, i64) {
    let (mut added, mut removed) = (0, 0);
    if let Some(numstat) = git(dir, ceiling, &["diff", "--numstat", "HEAD"]).await {
        for line in numstat.lines() {
            let mut parts = line.split('\t');
            added += parts
                .next()
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(0);
            removed += parts
                .next()
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(0);
        }
    }
    let untracked: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.untracked)
        .take(MAX_COUNTED_UNTRACKED)
        .map(|f| root.join(&f.path))
        .collect();
    let counted = tokio::task::spawn_blocking(move || {
        untracked.iter().map(|path| line_count(path)).sum::<i64>()
    })
    .await
    .unwrap_or(0);
    (added + counted, removed)
}

/// Lines of a small text file (a last line without a newline counts); 0 for anything else.
fn line_count(path: &Path) -> i64 {
    let small_file =
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX_COUNTED_BYTES);
    let Some(data) = small_file.then(|| std::fs::read(path).ok()).flatten() else {
        return 0;
    };
    if data.contains(&0) {
        return 0;
    }
    let newlines = data.iter().filter(|b| **b == b'\n').count() as i64;
    newlines + i64::from(data.last().is_some_and(|b| *b != b'\n'))
}

/// The branch `origin/HEAD` names, else the first of main and master (local, then remote).
async fn default_branch_of_status(dir: &Path, ceiling: &Path) -> Option<String> {
    if let Some(head) = git(
        dir,
        ceiling,
        &["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"],
    )
    .await
    {
        let head = head.trim();
        if let Some(name) = head.strip_prefix("refs/remotes/origin/") {
            return Some(name.to_owned());
        }
    }
    for candidate in [
        "refs/heads/main",
        "refs/heads/master",
        "refs/remotes/origin/main",
        "refs/remotes/origin/master",
    ] {
        if git(
            dir,
            ceiling,
            &["show-ref", "--verify", "--quiet", candidate],
        )
        .await
        .is_some()
        {
            return candidate.rsplit('/').next().map(str::to_owned);
        }
    }
    None
}

/// The default branch as `git/branches` judges it: `origin/HEAD`, then `init.defaultBranch`,
/// then main or master if either exists.
async fn default_branch_of_list(dir: &Path, ceiling: &Path, names: &[String]) -> Option<String> {
    if let Some(head) = git(
        dir,
        ceiling,
        &[
            "symbolic-ref",
            "--quiet",
            "--short",
            "refs/remotes/origin/HEAD",
        ],
    )
    .await
    {
        let head = head.trim();
        return Some(head.strip_prefix("origin/").unwrap_or(head).to_owned());
    }
    if let Some(configured) = git(dir, ceiling, &["config", "--get", "init.defaultBranch"]).await {
        let configured = configured.trim();
        if !configured.is_empty() {
            return Some(configured.to_owned());
        }
    }
    ["main", "master"]
        .into_iter()
        .find(|candidate| names.iter().any(|n| n == candidate))
        .map(str::to_owned)
}

async fn branch_list(dir: &Path, ceiling: &Path) -> Vec<Branch> {
    let Some(refs) = git(
        dir,
        ceiling,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "--sort=-committerdate",
            "refs/heads",
        ],
    )
    .await
    else {
        return Vec::new();
    };
    let names: Vec<String> = refs
        .lines()
        .map(str::to_owned)
        .filter(|n| !n.is_empty())
        .collect();
    let worktrees = worktrees(dir, ceiling).await;
    let default = default_branch_of_list(dir, ceiling, &names).await;
    names
        .into_iter()
        .map(|name| {
            let worktree_path = worktrees
                .iter()
                .find(|(_, branch)| *branch == name)
                .map(|(path, _)| path.clone());
            Branch {
                checked_out: worktree_path.is_some(),
                is_default: default.as_deref() == Some(name.as_str()),
                worktree_path,
                name,
            }
        })
        .collect()
}

/// `(worktree path, branch checked out there)` for each worktree on a branch.
async fn worktrees(dir: &Path, ceiling: &Path) -> Vec<(String, String)> {
    let Some(list) = git(dir, ceiling, &["worktree", "list", "--porcelain"]).await else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(p.to_owned());
        } else if let Some(branch) = line.strip_prefix("branch refs/heads/")
            && let Some(path) = path.take()
        {
            found.push((path, branch.to_owned()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    #[tokio::test]
    async fn a_branch_is_known_without_git_outside_a_repository_and_at_most_a_second_old_inside() {
        let outside = tempfile::tempdir().unwrap();
        let nested = outside.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        assert!(outside_any_repository(&nested).await);
        assert_eq!(branch_of(&nested).await, "");

        git_in(outside.path(), &["init", "-q", "-b", "trunk"]);
        assert!(!outside_any_repository(&nested).await, "below a checkout");
        // A read is kept for a second at most, that there is no repository too: a repository
        // made meanwhile, and a switch, show after it.
        tokio::time::sleep(BRANCH_KEPT + Duration::from_millis(100)).await;
        assert_eq!(branch_of(&nested).await, "trunk");
        git_in(outside.path(), &["checkout", "-q", "-b", "other"]);
        tokio::time::sleep(BRANCH_KEPT + Duration::from_millis(100)).await;
        assert_eq!(branch_of(&nested).await, "other");

        // Reached through a link from outside, the directory is still in the checkout.
        let elsewhere = tempfile::tempdir().unwrap();
        let link = elsewhere.path().join("link");
        std::os::unix::fs::symlink(&nested, &link).unwrap();
        assert!(
            !outside_any_repository(&link).await,
            "a link into a checkout"
        );

        let bare = tempfile::tempdir().unwrap();
        git_in(bare.path(), &["init", "-q", "--bare"]);
        assert!(
            !outside_any_repository(bare.path()).await,
            "a bare repository"
        );
    }
}
