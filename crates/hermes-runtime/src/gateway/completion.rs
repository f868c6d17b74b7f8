//! Completions a client offers while someone types: paths (and what `@` can attach) and slash
//! commands, with Hermes's items. Paths are listed only inside the runtime's workspace, as the
//! Desktop file routes are; Hermes lists the whole machine.

use std::path::{Component, Path, PathBuf};

use hermes_native::methods::{CompletePathParams, CompleteSlashParams, Completion, Completions};

use crate::runtime::Runtime;

/// At most this many items, as in Hermes.
const MOST: usize = 30;

/// What `@` alone offers to attach: (text, meta).
const ATTACHABLE: &[(&str, &str)] = &[
    ("@diff", "git diff"),
    ("@staged", "staged diff"),
    ("@file:", "attach file"),
    ("@folder:", "attach folder"),
    ("@url:", "fetch url"),
    ("@git:", "git log"),
];

/// Directories an `@` listing leaves out (build output, caches, version control).
const NOT_ATTACHED: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".next",
    ".cache",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    "dist",
    "build",
    "target",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
];

fn item(text: String, display: String, meta: &str) -> Completion {
    Completion {
        text,
        display,
        meta: meta.to_owned(),
    }
}

/// The items for `word`: `@` alone lists what can be attached; `@file:`/`@folder:` (or a
/// bare `@name`) and plain words list the entries of the directory the word points into
/// whose names start with its last part, in any case, directories ending in `/`.
pub async fn path(runtime: &Runtime, p: CompletePathParams) -> Completions {
    let word = p.word.unwrap_or_default();
    let listed = |items| Completions {
        items,
        replace_from: None,
    };
    if word.is_empty() {
        return listed(Vec::new());
    }
    let context = word.strip_prefix('@');
    if context == Some("") {
        let items = ATTACHABLE
            .iter()
            .map(|(text, meta)| item((*text).to_owned(), (*text).to_owned(), meta))
            .collect();
        return listed(items);
    }
    let (tag, typed) = match context {
        Some(kind @ ("file" | "folder")) => (Some(kind), ""),
        Some(query) => match query.split_once(':') {
            Some((kind @ ("file" | "folder"), tail)) => (Some(kind), tail),
            _ => (None, query),
        },
        None => (None, word.as_str()),
    };
    // Hermes searches the whole repository for a bare name after `@`; not done here.
    if context.is_some() && tag != Some("folder") && !typed.contains('/') && typed.trim().len() >= 2
    {
        return listed(Vec::new());
    }
    let root = match p.cwd.filter(|cwd| !cwd.is_empty()) {
        Some(cwd) => PathBuf::from(cwd),
        None => runtime.workspace.clone(),
    };
    let (dir, start) = match typed.rfind('/') {
        Some(slash) => (&typed[..=slash], &typed[slash + 1..]),
        None => ("", typed),
    };
    let Some(search) = inside(&runtime.workspace, &root, dir).await else {
        return listed(Vec::new());
    };
    let mut names = match std::fs::read_dir(&search) {
        Ok(entries) => entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect::<Vec<_>>(),
        Err(_) => return listed(Vec::new()),
    };
    names.sort();
    let start = start.to_lowercase();
    let mut items = Vec::new();
    for name in names {
        if !name.to_lowercase().starts_with(&start)
            || (context.is_some() && NOT_ATTACHED.contains(&name.as_str()))
            || (context.is_some() && tag.is_none() && name.starts_with('.'))
        {
            continue;
        }
        let is_dir = search.join(&name).is_dir();
        if tag.is_some_and(|tag| (tag == "folder") != is_dir) {
            continue;
        }
        let suffix = if is_dir { "/" } else { "" };
        let relative = format!("{}{name}{suffix}", dir.trim_start_matches("./"));
        let text = match (context, tag) {
            (Some(_), Some(tag)) => format!("@{tag}:{relative}"),
            (Some(_), None) => {
                let kind = if is_dir { "folder" } else { "file" };
                format!("@{kind}:{relative}")
            }
            (None, _) if word.starts_with("./") => format!("./{relative}"),
            (None, _) => relative,
        };
        items.push(item(
            text,
            format!("{name}{suffix}"),
            if is_dir { "dir" } else { "" },
        ));
        if items.len() >= MOST {
            break;
        }
    }
    listed(items)
}

/// The directory `dir` (as typed, relative to `root`) if it lies inside the workspace.
async fn inside(workspace: &Path, root: &Path, dir: &str) -> Option<PathBuf> {
    let typed = Path::new(dir);
    if typed.is_absolute() || typed.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let resolved = tokio::fs::canonicalize(root.join(typed)).await.ok()?;
    resolved.starts_with(workspace).then_some(resolved)
}

/// Slash commands: this gateway runs none (`commands.catalog` is empty), so there is nothing
/// to offer; the items replace the text from after the `/`, as in Hermes.
pub fn slash(p: CompleteSlashParams) -> Completions {
    let text = p.text.unwrap_or_default();
    if !text.starts_with('/') {
        return Completions::default();
    }
    // A character index, as Hermes counts (Python strings).
    let replace_from = text
        .rfind(' ')
        .map_or(1, |space| text[..space].chars().count() + 1);
    Completions {
        items: Vec::new(),
        replace_from: Some(replace_from as u64),
    }
}
