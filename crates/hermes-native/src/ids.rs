//! The two session ids of the native protocol. They are never interchangeable: a live id exists
//! only in one runtime process, a stored id names a `state.db` row for good.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! native_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id the runtime issued; it is never parsed, only passed back.
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            /// The id as the runtime sent it.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as the runtime sent it, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
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
    /// A gateway connection's in-memory session id (8 hex), valid only on that runtime process.
    LiveSessionId
);
native_id!(
    /// A runtime's stored session id (a `state.db` row), e.g. `20261129_075703_0525c1`.
    StoredSessionId
);
