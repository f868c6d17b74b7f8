//! Ids and names as they arrive in paths, queries and bodies: the control plane's typed ids
//! (`FromStr`, serde), native session ids, native profile names (`normalize_profile_name`,
//! `exact_profile_name`) and the wire names of the enums a query or a body may carry.
//!
//! Asserts, besides no panic: an id that parses prints back as exactly the text it came from
//! (`Display`, `as_str`, JSON); it parses exactly when the contract's pattern
//! (`^<prefix>_[A-Za-z0-9]{1,64}$`, from its JSON schema) matches; it is an id of one kind at
//! most, and `control_plane_kind` names that kind; serde agrees with `FromStr`; an id of another
//! kind is refused with an error that names both kinds, in words the server's body extractor
//! recognises as an id error. A profile name normalizes to a name that is exact and normalizes
//! to itself. An enum's wire name parses back to the variant that prints it.

#![no_main]

use std::fmt::Debug;
use std::str::FromStr;
use std::sync::Once;

use edith_types::{
    ApiKeyId, ApprovalChoice, ErrorCode, GatewayConnectionId, IdError, InstanceId, InstanceState,
    JobId, JobKind, JobState, NativeSessionId, ProfileId, ProviderKind, RestartPolicy, Scope,
    SessionId, ToolHostId, ToolId, TurnId, TurnState, control_plane_kind,
};
use hermes_native::profile::{
    DEFAULT_PROFILE, ProfileNameError, exact_profile_name, normalize_profile_name,
    valid_profile_name,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

static SCHEMAS: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    // Paths and queries are percent-decoded into UTF-8 strings (anything else is refused
    // before an id is parsed); JSON strings are UTF-8.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut kinds = Vec::new();
    macro_rules! ids {
        ($($id:ident $kind:literal),* $(,)?) => {
            SCHEMAS.call_once(|| {$(
                let schema = serde_json::to_value(schemars::schema_for!($id)).unwrap();
                assert_eq!(
                    schema["pattern"],
                    format!("^{}_[A-Za-z0-9]{{1,64}}$", $id::PREFIX),
                    "the contract's pattern of {} changed: update `matches_pattern`",
                    stringify!($id)
                );
            )*});
            $(
                if let Some(kind) = id::<$id>(text, $id::PREFIX, $kind, |id| id.as_str().to_owned()) {
                    kinds.push(kind);
                }
            )*
        };
    }
    ids!(
        InstanceId "an instance",
        ProfileId "a profile",
        SessionId "a session",
        TurnId "a turn",
        ToolId "a tool",
        ToolHostId "a tool host",
        JobId "a job",
        ApiKeyId "an API key",
        GatewayConnectionId "a gateway connection",
    );
    assert!(
        kinds.len() <= 1,
        "{text:?} is an id of several kinds: {kinds:?}"
    );
    assert_eq!(control_plane_kind(text), kinds.first().copied(), "{text:?}");

    let native = NativeSessionId::new(text);
    assert_eq!(native.as_str(), text);
    let json = serde_json::to_string(&native).unwrap();
    assert_eq!(
        serde_json::from_str::<NativeSessionId>(&json).unwrap(),
        native
    );

    profile_name(text);

    macro_rules! names {
        ($($name:ident),* $(,)?) => {$(
            wire_name::<$name>(text, |v| v.into());
        )*};
    }
    names!(
        ProviderKind,
        InstanceState,
        JobState,
        JobKind,
        TurnState,
        ApprovalChoice,
        Scope,
        RestartPolicy,
        ErrorCode,
    );
});

/// Checks `text` as an id of kind `T`; the kind's name when it is one.
fn id<T>(
    text: &str,
    prefix: &str,
    kind: &'static str,
    as_str: fn(&T) -> String,
) -> Option<&'static str>
where
    T: FromStr<Err = IdError>
        + std::fmt::Display
        + Serialize
        + DeserializeOwned
        + PartialEq
        + Debug,
{
    let parsed = text.parse::<T>();
    let from_json = serde_json::from_value::<T>(Value::String(text.to_owned()));
    assert_eq!(
        parsed.is_ok(),
        matches_pattern(text, prefix),
        "{kind}: FromStr and the contract's pattern disagree on {text:?}"
    );
    match parsed {
        Ok(id) => {
            assert_eq!(id.to_string(), text);
            assert_eq!(as_str(&id), text);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, serde_json::to_string(text).unwrap());
            assert_eq!(from_json.expect("serde refuses what FromStr takes"), id);
            Some(kind)
        }
        Err(e) => {
            assert_eq!(e.expected(), kind);
            let message = from_json
                .expect_err("serde takes what FromStr refuses")
                .to_string();
            assert!(message.contains(&e.to_string()), "{message}");
            if let IdError::WrongKind { found, .. } = &e {
                assert_ne!(*found, kind);
                // What `ApiJson`'s rejection looks for to answer `invalid_id`.
                assert!(message.contains(" id (`") && message.contains("expected "));
            }
            None
        }
    }
}

/// `^<prefix>_[A-Za-z0-9]{1,64}$`.
fn matches_pattern(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|body| {
            (1..=64).contains(&body.len()) && body.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

fn profile_name(text: &str) {
    match exact_profile_name(text) {
        Ok(name) => {
            assert_eq!(name, text);
            assert!(name == DEFAULT_PROFILE || valid_profile_name(&name));
            assert_eq!(normalize_profile_name(&name), Ok(name.clone()));
        }
        Err(ProfileNameError::Empty) => panic!("exact_profile_name never says empty"),
        Err(_) => {}
    }
    match normalize_profile_name(text) {
        Ok(name) => {
            assert_eq!(exact_profile_name(&name), Ok(name.clone()), "{text:?}");
            assert_eq!(normalize_profile_name(&name), Ok(name.clone()), "{text:?}");
        }
        Err(ProfileNameError::Empty) => assert!(text.trim().is_empty()),
        Err(_) => assert!(!text.trim().is_empty()),
    }
}

fn wire_name<T>(text: &str, name: fn(T) -> &'static str)
where
    T: FromStr + Copy + PartialEq + Debug + Serialize + DeserializeOwned,
{
    let parsed = text.parse::<T>().ok();
    let from_json = serde_json::from_value::<T>(Value::String(text.to_owned())).ok();
    assert_eq!(from_json, parsed, "serde and FromStr disagree on {text:?}");
    if let Some(value) = parsed {
        assert_eq!(name(value), text);
        assert_eq!(
            serde_json::to_value(value).unwrap(),
            Value::String(text.to_owned())
        );
    }
}
