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

/// Names Hermes refuses for a profile (they collide with itself or common commands).
pub const RESERVED_PROFILE_NAMES: &[&str] = &["hermes", "default", "test", "tmp", "root", "sudo"];

/// Why a name given for a profile is refused; `Display` says it as Hermes does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileNameError {
    /// No name at all.
    Empty,
    /// A name with characters Hermes does not allow (lowercase letters, digits, `_` and `-`,
    /// starting with a letter or a digit, at most 64).
    Invalid(String),
    /// A name Hermes keeps for itself (see [`RESERVED_PROFILE_NAMES`]).
    Reserved(String),
}

impl std::fmt::Display for ProfileNameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("profile name cannot be empty"),
            Self::Invalid(name) => write!(
                f,
                "Invalid profile name '{name}'. Must match [a-z0-9][a-z0-9_-]{{0,63}}"
            ),
            Self::Reserved(name) => write!(
                f,
                "Profile name '{name}' is reserved — it collides with either the Hermes \
                 installation itself or a common system binary.  Pick a different name."
            ),
        }
    }
}

/// A name as Hermes reads it where a profile is named: trimmed, `default` in any case is the
/// default profile, others lowercased; then checked against the rule and the reserved names.
pub fn normalize_profile_name(raw: &str) -> Result<String, ProfileNameError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(ProfileNameError::Empty);
    }
    if trimmed.eq_ignore_ascii_case(DEFAULT_PROFILE) {
        return Ok(DEFAULT_PROFILE.to_owned());
    }
    let name = trimmed.to_lowercase();
    if !valid_profile_name(&name) {
        return Err(ProfileNameError::Invalid(name));
    }
    if RESERVED_PROFILE_NAMES.contains(&name.as_str()) {
        return Err(ProfileNameError::Reserved(name));
    }
    Ok(name)
}

/// A name taken as it is given (no trimming or lowercasing), checked against the rule and the
/// reserved names; `default` is the default profile.
pub fn exact_profile_name(raw: &str) -> Result<String, ProfileNameError> {
    if raw == DEFAULT_PROFILE {
        return Ok(raw.to_owned());
    }
    if !valid_profile_name(raw) {
        return Err(ProfileNameError::Invalid(raw.to_owned()));
    }
    if RESERVED_PROFILE_NAMES.contains(&raw) {
        return Err(ProfileNameError::Reserved(raw.to_owned()));
    }
    Ok(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_and_refused_as_hermes_does() {
        assert_eq!(normalize_profile_name(" Work ").as_deref(), Ok("work"));
        assert_eq!(normalize_profile_name("DEFAULT").as_deref(), Ok("default"));
        assert_eq!(normalize_profile_name("  "), Err(ProfileNameError::Empty));
        assert_eq!(
            normalize_profile_name("Bad Name").unwrap_err().to_string(),
            "Invalid profile name 'bad name'. Must match [a-z0-9][a-z0-9_-]{0,63}"
        );
        assert!(matches!(
            normalize_profile_name("sudo"),
            Err(ProfileNameError::Reserved(_))
        ));
        assert_eq!(
            exact_profile_name("Work").unwrap_err().to_string(),
            "Invalid profile name 'Work'. Must match [a-z0-9][a-z0-9_-]{0,63}"
        );
        assert_eq!(exact_profile_name("work").as_deref(), Ok("work"));
    }

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
