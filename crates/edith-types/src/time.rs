//! Timestamps on the wire: RFC 3339 in UTC with milliseconds, which also sort as text.

use std::fmt;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An instant, as `2026-11-29T08:35:32.123Z`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(extend("format" = "date-time"))]
pub struct Timestamp(String);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Self(humantime::format_rfc3339_millis(SystemTime::now()).to_string())
    }

    /// Wraps a value read back from storage, where only `now()` values are written.
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }

    /// As written: RFC 3339 in UTC.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_rfc3339_utc_with_millis() {
        let ts = Timestamp::now();
        let s = ts.as_str();
        assert_eq!(s.len(), "2026-11-29T08:35:32.123Z".len(), "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T', "{s}");
    }
}
