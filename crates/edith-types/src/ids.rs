//! Typed identifiers.
//!
//! Every control-plane id is opaque, prefixed and its own type, so that passing a profile id where
//! a session id belongs does not compile — and, on the wire, is refused with an error that names
//! both kinds.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not an id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string is a well-formed id, but of another kind.
    #[error("expected {expected} id (`{prefix}_…`), got {found} id `{value}`")]
    WrongKind {
        /// The kind wanted, with its article ("a session").
        expected: &'static str,
        /// Its prefix (`sess`).
        prefix: &'static str,
        /// The kind given.
        found: &'static str,
        /// The string given.
        value: String,
    },
    /// The string is not an id this system issues.
    #[error("`{value}` is not {expected} id (`{prefix}_` followed by 1 to 64 letters or digits)")]
    Malformed {
        /// The kind wanted, with its article.
        expected: &'static str,
        /// Its prefix.
        prefix: &'static str,
        /// The string given.
        value: String,
    },
}

impl IdError {
    /// The kind of id the caller wanted ("an instance", "a session", …).
    pub fn expected(&self) -> &'static str {
        match self {
            IdError::WrongKind { expected, .. } | IdError::Malformed { expected, .. } => expected,
        }
    }
}

/// The prefixes of every prefixed id kind, with the article-qualified name used in messages.
const KINDS: &[(&str, &str)] = &[
    ("inst", "an instance"),
    ("prof", "a profile"),
    ("sess", "a session"),
    ("turn", "a turn"),
    ("tool", "a tool"),
    ("th", "a tool host"),
    ("job", "a job"),
    ("key", "an API key"),
    ("gwc", "a gateway connection"),
];

/// The kind of control-plane id `value` is (`"a session"`, …), when it is one: a runtime's own
/// ids never are, so an id passed where a native one belongs can be refused by name.
pub fn control_plane_kind(value: &str) -> Option<&'static str> {
    let (prefix, _) = value.split_once('_')?;
    KINDS
        .iter()
        .find(|(p, _)| *p == prefix)
        .and_then(|(p, name)| parse_prefixed(value, p, name).ok().map(|_| *name))
}

fn kind_of(value: &str) -> Option<&'static str> {
    let (prefix, _) = value.split_once('_')?;
    KINDS
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, name)| *name)
}

fn parse_prefixed(
    value: &str,
    prefix: &'static str,
    expected: &'static str,
) -> Result<String, IdError> {
    let body = value
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'));
    match body {
        Some(body)
            if !body.is_empty()
                && body.len() <= 64
                && body.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            Ok(value.to_owned())
        }
        _ => match kind_of(value) {
            Some(found) if found != expected => Err(IdError::WrongKind {
                expected,
                prefix,
                found,
                value: value.to_owned(),
            }),
            _ => Err(IdError::Malformed {
                expected,
                prefix,
                value: value.to_owned(),
            }),
        },
    }
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with (before the `_`).
            pub const PREFIX: &'static str = $prefix;

            /// A new id of this kind: a UUIDv7, so ids made later sort after those made before
            /// (the store's indexes then grow at one end instead of everywhere at once); the
            /// bits after the time are random, or a counter from a random start within one
            /// millisecond. Ids are not secrets: keys and tokens are made apart.
            pub fn generate() -> Self {
                Self(format!("{}_{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            /// The id as it is sent on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(value: &str) -> Result<Self, IdError> {
                parse_prefixed(value, $prefix, $kind).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                raw.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": concat!("^", $prefix, "_[A-Za-z0-9]{1,64}$"),
                    "description": concat!("Opaque id of ", $kind, ".")
                })
            }
        }
    };
}

prefixed_id!(
    /// An instance: one Hermes runtime managed by the control plane.
    InstanceId, "inst", "an instance"
);
prefixed_id!(
    /// A control-plane profile (maps to one native Hermes profile).
    ProfileId, "prof", "a profile"
);
prefixed_id!(
    /// A control-plane session (may refer to a native session).
    SessionId, "sess", "a session"
);
prefixed_id!(
    /// One turn of a session: input, streamed events, output.
    TurnId, "turn", "a turn"
);
prefixed_id!(
    /// A callback tool definition.
    ToolId, "tool", "a tool"
);
prefixed_id!(
    /// An API key (its id, never its secret).
    ApiKeyId, "key", "an API key"
);
prefixed_id!(
    /// A registered tool host: an MCP endpoint that serves callback tools.
    ToolHostId, "th", "a tool host"
);
prefixed_id!(
    /// A provisioning job.
    JobId, "job", "a job"
);
prefixed_id!(
    /// A relayed connection to a profile's native gateway, kept for a while after its client
    /// drops so that the client can resume it.
    GatewayConnectionId, "gwc", "a gateway connection"
);

macro_rules! native_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(#[schemars(pattern(crate::rules::NOT_BLANK))] String);

        impl $name {
            /// Wraps an id the runtime issued; it is never parsed, only passed back.
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            /// The id as the runtime sent it.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

native_id!(
    /// A runtime's stored session id (a `state.db` row), e.g. `20261129_075703_0525c1`.
    NativeSessionId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_round_trip() {
        let id = SessionId::generate();
        assert!(id.as_str().starts_with("sess_"));
        assert_eq!(id.as_str().parse::<SessionId>().unwrap(), id);
    }

    #[test]
    fn an_id_of_another_kind_is_named_in_the_error() {
        let profile = ProfileId::generate();
        let err = profile.as_str().parse::<SessionId>().unwrap_err();
        assert!(matches!(
            err,
            IdError::WrongKind {
                found: "a profile",
                ..
            }
        ));
        assert!(err.to_string().contains("expected a session id"), "{err}");
    }

    #[test]
    fn control_plane_ids_are_told_from_native_ones() {
        let session = SessionId::generate();
        assert_eq!(control_plane_kind(session.as_str()), Some("a session"));
        assert_eq!(control_plane_kind("20261129_075703_0525c1"), None);
        assert_eq!(control_plane_kind("sess_not-valid"), None);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in ["", "sess_", "sess", "sess_a-b", "SESS_abc", "sess_é"] {
            assert!(matches!(
                bad.parse::<SessionId>(),
                Err(IdError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn deserializing_checks_the_kind() {
        let err = serde_json::from_str::<InstanceId>("\"job_abc\"").unwrap_err();
        assert!(err.to_string().contains("got a job id"), "{err}");
    }
}
