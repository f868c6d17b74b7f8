//! Native profiles: each is a Hermes home of its own (`<HERMES_HOME>/profiles/<name>`), except
//! `default`, which is the root home.

/// The profile that is the root home itself.
pub const DEFAULT_PROFILE: &str = "default";

/// The rule, as Hermes states it, for error messages.
pub const PROFILE_NAME_RULE: &str = "^[a-z0-9][a-z0-9_-]{0,63}$";

/// Whether Hermes accepts `name` as a profile name ([`PROFILE_NAME_RULE`]).
pub fn valid_profile_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_follow_the_hermes_rule() {
        for good in ["a", "assistant", "0x", "a-b_c", &"a".repeat(64)] {
            assert!(valid_profile_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "A",
            "a b",
            "a/b",
            "..",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!valid_profile_name(bad), "{bad}");
        }
    }
}
