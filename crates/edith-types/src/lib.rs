//! Wire types shared by the EDITH control plane, its store and the SDK.
//!
//! Everything here is plain data: serde for the wire, schemars for the contract. No tokio, no
//! database, no HTTP client.
#![deny(missing_docs)]

mod events;
mod ids;
mod keys;
mod problem;
pub mod relay;
mod resources;
pub mod rules;
mod time;

pub use events::{JobEvent, JobEventKind, TurnEvent, TurnEventKind, Usage};
pub use ids::{
    ApiKeyId, GatewayConnectionId, IdError, InstanceId, JobId, NativeSessionId, ProfileId,
    SessionId, ToolHostId, ToolId, TurnId, control_plane_kind,
};
pub use keys::{ApiKey, CreateApiKey, CreatedApiKey, Scope};
pub use problem::{ErrorCode, Problem};
pub use relay::RelayMessage;
pub use resources::*;
pub use time::Timestamp;

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    /// Each enum's wire name is declared once (serde's rename rule); its `as_str` and `parse`
    /// come from the same rule (strum's). This checks the two rules agree for every variant.
    fn agrees<T>()
    where
        T: VariantArray + Copy + serde::Serialize + Into<&'static str> + std::str::FromStr,
        T: PartialEq + std::fmt::Debug,
    {
        for &variant in T::VARIANTS {
            let wire = serde_json::to_value(variant).unwrap();
            let name: &'static str = variant.into();
            assert_eq!(wire, serde_json::Value::String(name.to_owned()));
            assert_eq!(name.parse::<T>().ok(), Some(variant));
        }
    }

    #[test]
    fn enum_names_are_the_wire_names() {
        agrees::<ProviderKind>();
        agrees::<InstanceState>();
        agrees::<JobState>();
        agrees::<JobKind>();
        agrees::<TurnState>();
        agrees::<ApprovalChoice>();
        agrees::<ErrorCode>();
        agrees::<Scope>();
        agrees::<RestartPolicy>();
    }
}
