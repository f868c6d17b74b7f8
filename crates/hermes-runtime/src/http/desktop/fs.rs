//! `/api/fs/{list,read-text,write-text}`: the workspace's files, as Hermes's file routes answer,
//! confined to the workspace (see [`super::workspace`]).

use std::io::{ErrorKind, Read};
use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_native::desktop::replies::{DirEntry, DirListing, FileWritten, TextFile};
use hermes_native::desktop::{FsListQuery, FsReadTextQuery, FsWriteTextBody};

use super::workspace::{PathRefusal, resolve};
use crate::http::extract::{Body, Params};
use crate::http::reply::{Refusal, refuse};
use crate::runtime::Runtime;

/// Names a listing leaves out (tool caches and dependencies), as Hermes does.
const HIDDEN: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".cache",
    ".next",
    ".turbo",
    ".venv",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "target",
    "venv",
];
/// How much of a file `read-text` returns.
const PREVIEW_BYTES: u64 = 512 * 1024;
/// Files larger than this are not read at all.
const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;
/// The most `write-text` writes.
const MAX_WRITE_BYTES: usize = 8 * 1024 * 1024;

const LANGUAGES: &[(&str, &str)] = &[
    ("c", "c"),
    ("conf", "ini"),
    ("cpp", "cpp"),
    ("css", "css"),
    ("csv", "csv"),
    ("go", "go"),
    ("graphql", "graphql"),
    ("h", "c"),
    ("hpp", "cpp"),
    ("html", "html"),
    ("java", "java"),
    ("js", "javascript"),
    ("json", "json"),
    ("jsx", "jsx"),
    ("kt", "kotlin"),
    ("lua", "lua"),
    ("md", "markdown"),
    ("mjs", "javascript"),
    ("py", "python"),
    ("rb", "ruby"),
    ("rs", "rust"),
    ("sh", "shell"),
    ("sql", "sql"),
    ("svg", "xml"),
    ("toml", "toml"),
    ("ts", "typescript"),
    ("tsx", "tsx"),
    ("txt", "text"),
    ("xml", "xml"),
    ("yaml", "yaml"),
    ("yml", "yaml"),
    ("zsh", "shell"),
];

/// Hermes's fixed table, then the common text types.
const MIME_TYPES: &[(&str, &str)] = &[
    ("avi", "video/x-msvideo"),
    ("bmp", "image/bmp"),
    ("flac", "audio/flac"),
    ("gif", "image/gif"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("m4a", "audio/mp4"),
    ("mkv", "video/x-matroska"),
    ("mov", "video/quicktime"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("ogg", "audio/ogg"),
    ("opus", "audio/ogg; codecs=opus"),
    ("png", "image/png"),
    ("svg", "image/svg+xml"),
    ("wav", "audio/wav"),
    ("webm", "video/webm"),
    ("webp", "image/webp"),
    ("txt", "text/plain"),
    ("md", "text/markdown"),
    ("json", "application/json"),
    ("html", "text/html"),
    ("css", "text/css"),
    ("csv", "text/csv"),
    ("js", "text/javascript"),
    ("py", "text/x-python"),
    ("xml", "application/xml"),
];

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

fn lookup(table: &[(&str, &'static str)], key: &str, otherwise: &'static str) -> String {
    table
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(otherwise, |(_, v)| v)
        .to_owned()
}

/// The reply for a path that is not served.
pub(super) fn refused(refusal: PathRefusal) -> Response {
    match refusal {
        PathRefusal::Required => refuse(StatusCode::BAD_REQUEST, "Path is required"),
        PathRefusal::Invalid => refuse(StatusCode::BAD_REQUEST, "Invalid path"),
        PathRefusal::Outside => refuse(StatusCode::FORBIDDEN, "Path is outside the workspace"),
    }
}

fn listing_error(error: &std::io::Error) -> String {
    match error.kind() {
        ErrorKind::NotFound => "ENOENT".to_owned(),
        ErrorKind::NotADirectory => "ENOTDIR".to_owned(),
        ErrorKind::PermissionDenied => "EACCES".to_owned(),
        _ => "read-error".to_owned(),
    }
}

fn failed_listing(error: String) -> Response {
    Json(DirListing {
        entries: Vec::new(),
        error: Some(error),
    })
    .into_response()
}

pub async fn list(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<FsListQuery>,
) -> Response {
    let dir = match resolve(&runtime.workspace, &query.path) {
        Ok(dir) => dir,
        // A listing never fails with a status: a path outside is one the runtime may not read.
        Err(PathRefusal::Outside) => return failed_listing("EACCES".to_owned()),
        Err(refusal) => return refused(refusal),
    };
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if HIDDEN.contains(&name.as_str()) {
                continue;
            }
            entries.push(DirEntry {
                path: dir.join(&name).to_string_lossy().into_owned(),
                is_directory: entry.file_type().is_ok_and(|t| t.is_dir()),
                name,
            });
        }
        entries.sort_by(|a, b| {
            b.is_directory
                .cmp(&a.is_directory)
                .then_with(|| a.name.to_lowercase().cmp(&b.name.to_lowercase()))
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(entries)
    })
    .await;
    match read {
        Ok(Ok(entries)) => Json(DirListing {
            entries,
            error: None,
        })
        .into_response(),
        Ok(Err(e)) => failed_listing(listing_error(&e)),
        Err(_) => failed_listing("read-error".to_owned()),
    }
}

pub async fn read_text(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<FsReadTextQuery>,
) -> Response {
    let path = match resolve(&runtime.workspace, &query.path) {
        Ok(path) => path,
        Err(refusal) => return refused(refusal),
    };
    let read = tokio::task::spawn_blocking(move || read_preview(&path)).await;
    match read {
        Ok(Ok(file)) => Json(file).into_response(),
        Ok(Err(refusal)) => refusal.into_response(),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "File read failed"),
    }
}

fn read_preview(path: &Path) -> Result<TextFile, Refusal> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => {
            Refusal::new(StatusCode::NOT_FOUND, "File not found")
        }
        ErrorKind::PermissionDenied => Refusal::new(StatusCode::FORBIDDEN, "File is not readable"),
        _ => Refusal::new(StatusCode::BAD_REQUEST, e.to_string()),
    })?;
    if meta.is_dir() {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "Path points to a directory",
        ));
    }
    if !meta.is_file() {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "Only regular files can be read",
        ));
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "File too large",
        ));
    }
    let mut data = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(PREVIEW_BYTES).read_to_end(&mut data))
        .map_err(|e| match e.kind() {
            ErrorKind::PermissionDenied => {
                Refusal::new(StatusCode::FORBIDDEN, "File is not readable")
            }
            _ => Refusal::new(StatusCode::BAD_REQUEST, "File read failed"),
        })?;
    let ext = extension(path);
    Ok(TextFile {
        binary: looks_binary(&data[..data.len().min(4096)]),
        byte_size: meta.len() as i64,
        language: lookup(LANGUAGES, &ext, "text"),
        mime_type: lookup(MIME_TYPES, &ext, "application/octet-stream"),
        path: path.to_string_lossy().into_owned(),
        text: String::from_utf8_lossy(&data).into_owned(),
        truncated: meta.len() > PREVIEW_BYTES,
    })
}

/// A NUL byte, or more than 12% control characters other than tab and line ends.
fn looks_binary(sample: &[u8]) -> bool {
    if sample.is_empty() {
        return false;
    }
    if sample.contains(&0) {
        return true;
    }
    let control = sample
        .iter()
        .filter(|b| **b < 32 && !matches!(b, 9 | 10 | 13))
        .count();
    control as f64 / sample.len() as f64 > 0.12
}

pub async fn write_text(
    State(runtime): State<Arc<Runtime>>,
    Body(body): Body<FsWriteTextBody>,
) -> Response {
    let path = match resolve(&runtime.workspace, &body.path) {
        Ok(path) => path,
        Err(refusal) => return refused(refusal),
    };
    if body.content.len() > MAX_WRITE_BYTES {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "Content too large");
    }
    let written = tokio::task::spawn_blocking(move || write_whole(&path, &body.content)).await;
    match written {
        Ok(Ok(file)) => Json(file).into_response(),
        Ok(Err(refusal)) => refusal.into_response(),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "Could not write file"),
    }
}

/// Replaces the file at once: a reader never sees half of it.
fn write_whole(path: &Path, content: &str) -> Result<FileWritten, Refusal> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "Path points to a directory",
            ));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "Only regular files can be written",
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Err(Refusal::new(StatusCode::FORBIDDEN, "File is not writable"));
        }
        Err(e) => return Err(Refusal::new(StatusCode::BAD_REQUEST, e.to_string())),
    }
    if !path.parent().is_some_and(Path::is_dir) {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "Parent directory does not exist",
        ));
    }
    // Replaced, not rewritten in place, as Hermes does (the mode becomes the default one).
    if let Err(e) = hermes_native::config::write_atomically(path, content.as_bytes(), 0o644) {
        return Err(match e.kind() {
            ErrorKind::PermissionDenied => {
                Refusal::new(StatusCode::FORBIDDEN, "File is not writable")
            }
            _ => Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Could not write file: {e}"),
            ),
        });
    }
    Ok(FileWritten {
        ok: true,
        path: path.to_string_lossy().into_owned(),
        byte_size: content.len() as i64,
    })
}
