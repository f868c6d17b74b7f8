//! The shape rules of request fields, declared once: the contract states them (schemars
//! attributes name these constants) and the server's checks use them, so a request the
//! contract calls valid is one the server takes.

/// Display names (instances, API keys): 1 to this many characters, not all blank.
pub const NAME_MAX_CHARS: usize = 128;
/// …at least one character that is not whitespace.
pub const NOT_BLANK: &str = r"\S";
/// Label keys.
pub const LABEL_KEY: &str = r"^[a-z0-9][a-z0-9._/-]{0,62}$";
/// At most this many labels on an instance…
pub const LABELS_MAX: usize = 32;
/// …each value at most this many characters.
pub const LABEL_VALUE_MAX_CHARS: usize = 256;
/// The `label` filter of `instance_list`: `key=value`.
pub const LABEL_FILTER: &str = r"^[a-z0-9][a-z0-9._/-]{0,62}=";
/// Names of callback tools, as models see them.
pub const TOOL_NAME: &str = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$";
/// URLs the control plane calls (tool hosts, model endpoints): `http://` or `https://`, a
/// host (and port) without spaces, controls or brackets (no IPv6 literals), then a path,
/// query or fragment without spaces or controls.
pub const HTTP_URL: &str = r"^https?://[^\x00-\x20\x7f/?#\[\]]+([/?#][^\x00-\x20\x7f]*)?$";
/// The base URL of an `external` runtime: `http://HOST:PORT`, the host as in [`HTTP_URL`].
pub const EXTERNAL_URL: &str = r"^http://[^\x00-\x20\x7f/?#\[\]]+/*$";
/// A tool's `input_schema`: a JSON Schema describing an object.
pub const OBJECT_SCHEMA: &str = "object";
/// The longest start a `sim` runtime simulates, in milliseconds.
pub const SIM_START_DELAY_MAX_MS: u64 = 60_000;
/// The longest a `sim` runtime runs before it exits on its own, in milliseconds (a day).
pub const SIM_EXIT_AFTER_MAX_MS: u64 = 86_400_000;
/// The longest a `sim` runtime's gateway keeps a connection that carried a prompt, in
/// milliseconds (a day).
pub const SIM_DROP_CONNECTION_AFTER_MAX_MS: u64 = 86_400_000;
/// The shortest secret a tool host may have.
pub const TOOL_HOST_SECRET_MIN_CHARS: usize = 16;
/// The shortest token of an external runtime.
pub const EXTERNAL_TOKEN_MIN_CHARS: usize = 8;
/// An event sequence number a stream resumes after (`?after=`, `Last-Event-ID`): what the
/// store's signed 64-bit counter holds.
pub const SEQ_MAX: u64 = i64::MAX as u64;
/// `Last-Event-ID`: a sequence number of at most 18 digits (always below [`SEQ_MAX`]).
pub const LAST_EVENT_ID: &str = "^[0-9]{1,18}$";

/// Whether `value` is a `Last-Event-ID` ([`LAST_EVENT_ID`]).
pub fn is_last_event_id(value: &str) -> bool {
    (1..=18).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `url` is an `http://` or `https://` URL ([`HTTP_URL`]).
pub fn is_http_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    is_authority(authority) && !tail.chars().any(is_space_or_control)
}

/// The `HOST:PORT` of an `external` runtime's base URL ([`EXTERNAL_URL`]).
pub fn external_authority(url: &str) -> Option<&str> {
    let authority = url.strip_prefix("http://")?.trim_end_matches('/');
    is_authority(authority).then_some(authority)
}

/// A host (and port): not empty; no space, control, bracket, `/`, `?` or `#`.
fn is_authority(authority: &str) -> bool {
    !authority.is_empty()
        && !authority
            .chars()
            .any(|c| is_space_or_control(c) || "[]/?#".contains(c))
}

fn is_space_or_control(c: char) -> bool {
    c <= ' ' || c == '\x7f'
}

/// Whether `name` is a display name: 1 to [`NAME_MAX_CHARS`] characters, not all blank.
pub fn is_display_name(name: &str) -> bool {
    !name.trim().is_empty() && name.chars().count() <= NAME_MAX_CHARS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_as_the_patterns_say() {
        for good in [
            "http://127.0.0.1:9119",
            "https://tools.example.com/mcp?x=1#f",
            "http://h",
            "http://host:8000/v1/",
        ] {
            assert!(is_http_url(good), "{good}");
        }
        for bad in [
            "ftp://h",
            "http://",
            "http:///path",
            "http://[::1]:80",
            "http://a b",
            "http://a/b c",
            "http://a\u{7f}",
            "https://a]",
        ] {
            assert!(!is_http_url(bad), "{bad}");
        }
        assert_eq!(
            external_authority("http://10.0.0.5:9119/"),
            Some("10.0.0.5:9119")
        );
        assert_eq!(external_authority("http://10.0.0.5:9119/api"), None);
        assert_eq!(external_authority("https://10.0.0.5:9119"), None);
        assert_eq!(external_authority("http://[::1]:9119"), None);
    }
}
