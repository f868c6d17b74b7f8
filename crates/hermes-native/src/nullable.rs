//! Replies and events from runtimes write absent values as `null` (Python's `None`) as often as
//! they leave them out; typed fields read both as their default.

use serde::Deserialize;

/// A field that may be missing or `null`: its default then.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}
