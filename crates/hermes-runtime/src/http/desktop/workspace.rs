//! Paths the Desktop file routes are given, resolved as Hermes resolves them — relative to a
//! base directory, `~` as the user's home, `file:` URLs, symbolic links followed — and then
//! confined: unlike Hermes 0.19, which reads and writes anywhere the process may, a path that
//! ends up outside the runtime's workspace is refused.

use std::path::{Component, Path, PathBuf};

/// Why a path is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum PathRefusal {
    /// Empty (Hermes: 400 "Path is required").
    Required,
    /// A NUL byte, or a `file:` URL of another host (Hermes: 400 "Invalid path").
    Invalid,
    /// It resolves outside the workspace.
    Outside,
}

/// `raw` with a leading `~` (alone or before `/`) as the user's home, as Python's
/// `expanduser` reads it.
pub fn expand_home(raw: &str) -> PathBuf {
    match raw.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(raw),
    }
}

/// Resolves `raw` against `workspace` (canonical) and checks that it stays inside.
pub fn resolve(workspace: &Path, raw: &str) -> Result<PathBuf, PathRefusal> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(PathRefusal::Required);
    }
    if raw.contains('\0') {
        return Err(PathRefusal::Invalid);
    }
    let raw = match raw.get(..5) {
        Some(scheme) if scheme.eq_ignore_ascii_case("file:") => from_file_url(&raw[5..])?,
        _ => raw.to_owned(),
    };
    let path = expand_home(&raw);
    let absolute = if path.is_absolute() {
        path
    } else {
        workspace.join(path)
    };
    let real = follow(&absolute, MAX_LINKS).ok_or(PathRefusal::Invalid)?;
    if real.starts_with(workspace) {
        Ok(real)
    } else {
        Err(PathRefusal::Outside)
    }
}

/// The path of a `file:` URL (after the scheme); only this host's.
fn from_file_url(rest: &str) -> Result<String, PathRefusal> {
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let (host, path) = authority_and_path
                .find('/')
                .map(|i| authority_and_path.split_at(i))
                .unwrap_or((authority_and_path, "/"));
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(PathRefusal::Invalid);
            }
            path
        }
        None => rest,
    };
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| PathRefusal::Invalid)?;
    if decoded.contains('\0') {
        return Err(PathRefusal::Invalid);
    }
    Ok(decoded.into_owned())
}

/// How many symbolic links one path may pass through (the operating system's own limit).
const MAX_LINKS: u32 = 40;

/// The real location of `path`: walked from the root, each symbolic link replaced by where it
/// leads and `..` taken after that, as the operating system would. Parts that do not exist yet
/// are kept as written. `None` for a path that passes through more than `links` links (a loop).
fn follow(path: &Path, links: u32) -> Option<PathBuf> {
    let mut real = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => real = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                real.pop();
            }
            Component::Normal(name) => {
                let next = real.join(name);
                let is_link = std::fs::symlink_metadata(&next)
                    .is_ok_and(|meta| meta.file_type().is_symlink());
                real = if !is_link {
                    next
                } else if let Ok(target) = std::fs::canonicalize(&next) {
                    target
                } else {
                    // A link to nothing (yet), or a loop: where it points, so writing through
                    // it is judged by its target.
                    match std::fs::read_link(&next) {
                        Ok(target) => follow(&real.join(target), links.checked_sub(1)?)?,
                        Err(_) => next,
                    }
                };
            }
        }
    }
    Some(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_workspace_are_refused_however_they_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let workspace = root.join("work");
        let outside = root.join("outside");
        std::fs::create_dir_all(workspace.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, workspace.join("out-link")).unwrap();
        std::os::unix::fs::symlink(workspace.join("sub"), workspace.join("in-link")).unwrap();
        std::os::unix::fs::symlink(outside.join("new.txt"), workspace.join("dangling")).unwrap();
        std::os::unix::fs::symlink(workspace.join("loop-b"), workspace.join("loop-a")).unwrap();
        std::os::unix::fs::symlink(workspace.join("loop-a"), workspace.join("loop-b")).unwrap();

        let ok = |raw: &str| resolve(&workspace, raw);
        assert_eq!(ok("sub/a.txt"), Ok(workspace.join("sub/a.txt")));
        assert_eq!(ok("./sub/../b.txt"), Ok(workspace.join("b.txt")));
        assert_eq!(ok("in-link/c.txt"), Ok(workspace.join("sub/c.txt")));
        assert_eq!(ok(workspace.to_str().unwrap()), Ok(workspace.clone()));
        let url = format!("file://{}/sub/d%20e.txt", workspace.display());
        assert_eq!(ok(&url), Ok(workspace.join("sub/d e.txt")));
        assert_eq!(
            ok("new/deeper/f.txt"),
            Ok(workspace.join("new/deeper/f.txt"))
        );

        for escape in [
            "..",
            "../outside/x",
            "sub/../../outside",
            "/etc/hostname",
            "out-link",
            "out-link/x.txt",
            "in-link/../../outside",
            "dangling",
            "file:///etc/hostname",
        ] {
            assert_eq!(ok(escape), Err(PathRefusal::Outside), "{escape}");
        }
        assert_eq!(ok("  "), Err(PathRefusal::Required));
        assert_eq!(ok("a\0b"), Err(PathRefusal::Invalid));
        assert_eq!(ok("file://elsewhere/tmp"), Err(PathRefusal::Invalid));
        assert_eq!(
            ok("loop-a/x"),
            Err(PathRefusal::Invalid),
            "a loop is refused, not followed"
        );
    }
}
