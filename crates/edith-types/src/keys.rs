//! API keys: who may call the control plane, and what they may do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ApiKeyId, InstanceId, Timestamp};

/// What a key may do. `admin` includes `write`, which includes `read`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Scope {
    /// Read resources and follow event streams.
    Read,
    /// Create, change and delete resources; run turns and answer them.
    Write,
    /// API keys, runtimes, and native methods that administer a runtime.
    Admin,
}

impl Scope {
    /// Its name on the wire (`read`, `write`, `admin`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether holding `self` grants `needed`.
    pub fn grants(self, needed: Scope) -> bool {
        self >= needed
    }
}

/// An API key as the API shows it: never its secret, which only its creation returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiKey {
    /// Its id (`key_…`), which names it in the key routes; never the secret.
    pub id: ApiKeyId,
    /// What it is for, as its creator said.
    pub name: String,
    /// The first characters of the secret, to recognise it (`edk_AbCd1234…`).
    pub prefix: String,
    /// What it may do.
    pub scope: Scope,
    /// When set, the key reaches only these instances (and no route about something else).
    pub instances: Option<Vec<InstanceId>>,
    /// When it was made.
    pub created_at: Timestamp,
    /// Updated at most once a minute.
    pub last_used_at: Option<Timestamp>,
    /// Once set, the key is refused.
    pub revoked_at: Option<Timestamp>,
}

/// Body of `key_create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    /// What the key is for (1 to 128 characters, not all blank).
    #[schemars(
        length(min = 1, max = crate::rules::NAME_MAX_CHARS),
        pattern(crate::rules::NOT_BLANK)
    )]
    pub name: String,
    /// What it may do.
    pub scope: Scope,
    /// Limit the key to these instances (at least one; leave it out for all).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub instances: Option<Vec<InstanceId>>,
}

/// Reply of `key_create`: the key and its secret, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreatedApiKey {
    /// The key as the API shows it from now on.
    pub key: ApiKey,
    /// Send as `Authorization: Bearer <secret>`. Only its hash is stored: it cannot be shown
    /// again.
    pub secret: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wider_scopes_grant_narrower_ones() {
        assert!(Scope::Admin.grants(Scope::Write) && Scope::Admin.grants(Scope::Read));
        assert!(Scope::Write.grants(Scope::Read) && !Scope::Write.grants(Scope::Admin));
        assert!(!Scope::Read.grants(Scope::Write));
    }
}
