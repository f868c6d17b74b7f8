//! How the client commands answer: aligned tables for people, JSON for scripts; and errors that
//! say what to do next.

use edith_types::{
    ApiKey, ErrorCode, Instance, Job, Profile, RuntimeInfo, Session, Tool, ToolHost, Turn,
    TurnEvent,
};
use hermes::Error;
use serde::Serialize;

use crate::Output;

/// A resource shown as one row of a table.
pub trait Row {
    const HEADERS: &'static [&'static str];
    fn cells(&self) -> Vec<String>;
}

fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

impl Row for Instance {
    const HEADERS: &'static [&'static str] = &["ID", "NAME", "PROVIDER", "STATE", "REASON"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.name.clone(),
            self.provider.as_str().to_owned(),
            self.state.as_str().to_owned(),
            or_dash(self.state_reason.as_ref()),
        ]
    }
}

impl Row for Profile {
    const HEADERS: &'static [&'static str] = &["ID", "NAME", "TOOLS", "CREATED"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.name.clone(),
            self.tools.len().to_string(),
            self.created_at.to_string(),
        ]
    }
}

impl Row for Session {
    const HEADERS: &'static [&'static str] = &["ID", "TITLE", "NATIVE SESSION", "CREATED"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            or_dash(self.title.as_ref()),
            or_dash(self.native_session_id.as_ref()),
            self.created_at.to_string(),
        ]
    }
}

impl Row for Turn {
    const HEADERS: &'static [&'static str] = &["ID", "STATE", "OUTPUT", "ERROR"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.state.as_str().to_owned(),
            or_dash(self.output.as_ref()),
            or_dash(self.error.as_ref()),
        ]
    }
}

impl Row for Job {
    const HEADERS: &'static [&'static str] = &["ID", "KIND", "STATE", "STEPS", "ERROR"];
    fn cells(&self) -> Vec<String> {
        let done = self
            .steps
            .iter()
            .filter(|s| s.state == edith_types::StepState::Done)
            .count();
        vec![
            self.id.to_string(),
            self.kind.as_str().to_owned(),
            self.state.as_str().to_owned(),
            format!("{done}/{}", self.steps.len()),
            or_dash(self.error.as_ref()),
        ]
    }
}

impl Row for ApiKey {
    const HEADERS: &'static [&'static str] =
        &["ID", "NAME", "PREFIX", "SCOPE", "LAST USED", "REVOKED"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.name.clone(),
            self.prefix.clone(),
            self.scope.as_str().to_owned(),
            or_dash(self.last_used_at.as_ref()),
            or_dash(self.revoked_at.as_ref()),
        ]
    }
}

impl Row for Tool {
    const HEADERS: &'static [&'static str] = &["ID", "NAME", "HOST", "DESCRIPTION"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.name.clone(),
            self.host_id.to_string(),
            self.description.clone(),
        ]
    }
}

impl Row for RuntimeInfo {
    const HEADERS: &'static [&'static str] = &["NAME", "VERSION", "PROGRAM"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            or_dash(self.version.as_ref()),
            self.program.clone(),
        ]
    }
}

impl Row for ToolHost {
    const HEADERS: &'static [&'static str] = &["ID", "URL", "CREATED"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.url.clone(),
            self.created_at.to_string(),
        ]
    }
}

/// A turn's event as a line for people: its number, its type, and what it carries.
pub fn event_line(event: &TurnEvent) -> String {
    let mut fields = match serde_json::to_value(&event.kind).expect("events serialise") {
        serde_json::Value::Object(fields) => fields,
        _ => unreachable!("an event is an object with its `type`"),
    };
    let kind = fields.remove("type").unwrap_or_default();
    let kind = kind.as_str().unwrap_or_default();
    let seq = event.seq;
    if fields.is_empty() {
        format!("{seq:>4}  {kind}")
    } else {
        format!("{seq:>4}  {kind}  {}", serde_json::Value::Object(fields))
    }
}

/// Prints `items` as a table, or as a JSON array.
pub fn list<T: Row + Serialize>(items: &[T], out: Output) {
    match out {
        Output::Json => json(&items),
        Output::Table => table(items),
    }
}

/// Prints one resource as a one-row table, or as JSON.
pub fn one<T: Row + Serialize>(item: &T, out: Output) {
    match out {
        Output::Json => json(item),
        Output::Table => table(std::slice::from_ref(item)),
    }
}

pub fn json<T: Serialize + ?Sized>(value: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("resources serialise")
    );
}

fn table<T: Row>(items: &[T]) {
    let rows: Vec<Vec<String>> = items.iter().map(Row::cells).collect();
    let mut widths: Vec<usize> = T::HEADERS.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(T::HEADERS.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Why a command failed.
pub enum Failure {
    /// The SDK could not do it.
    Sdk(Error),
    /// It was done, and did not go well (a turn that failed, a job that failed).
    Said(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Sdk(e)
    }
}

/// What a command ends with.
pub type Done = std::result::Result<(), Failure>;

/// A failure, with what to do about it.
pub fn explain(failure: &Failure) -> String {
    let error = match failure {
        Failure::Sdk(error) => error,
        Failure::Said(what) => return what.clone(),
    };
    match error {
        Error::Api {
            code: ErrorCode::Unauthorized,
            detail,
            ..
        } => format!(
            "{detail}. Give a key with --api-key or EDITH_API_KEY (`edith serve` writes its \
             first admin key to <data-dir>/admin.key)"
        ),
        Error::Api {
            code: ErrorCode::Forbidden,
            detail,
            ..
        } => format!("{detail}. Use a key with that scope (`edith keys create`, as admin)"),
        Error::Api {
            code: ErrorCode::NotFound,
            detail,
            ..
        } => format!("{detail}. The `list` commands show what there is (`edith instances list`)"),
        // The server's words for a session busy with a turn (`turns::start`).
        Error::Api {
            code: ErrorCode::Conflict,
            detail,
            ..
        } if detail.contains("in progress") => format!(
            "{detail}. Send once it has ended: follow it with `edith turns events`, or end it \
             with `edith turns cancel`"
        ),
        Error::Api {
            code: ErrorCode::InstanceNotReady,
            detail,
            ..
        } => format!("{detail}. `edith instances get <id>` shows its state and why"),
        Error::Transport(e) if e.connect => format!(
            "cannot reach the control plane ({e}). Is `edith serve` running? Point --url or \
             EDITH_URL at it"
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: ErrorCode, detail: &str) -> Failure {
        Failure::Sdk(Error::Api {
            status: code.status(),
            code,
            detail: detail.to_owned(),
            retryable: false,
            native_code: None,
        })
    }

    #[test]
    fn refusals_say_what_to_do_next() {
        let not_ready = refused(
            ErrorCode::InstanceNotReady,
            "instance `i` is provisioning, not ready",
        );
        assert!(explain(&not_ready).contains("`edith instances get <id>`"));
        let busy = refused(
            ErrorCode::Conflict,
            "session `s` already has turn `t` in progress",
        );
        assert!(explain(&busy).contains("`edith turns cancel`"));
        // Other conflicts (something in use) are said as the server says them.
        let in_use = refused(ErrorCode::Conflict, "tool `t` is used by profile `p`");
        assert_eq!(
            explain(&in_use),
            "409 conflict: tool `t` is used by profile `p`"
        );
        let missing = refused(ErrorCode::NotFound, "instance `i`");
        assert!(explain(&missing).contains("`edith instances list`"));
    }
}
