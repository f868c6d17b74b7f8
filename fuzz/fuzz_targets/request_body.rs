//! The JSON body of every control-plane operation that takes one (`ApiJson<T>`: axum's `Json`,
//! which is `serde_json` over the whole body), each input tried as every body type.
//!
//! Asserts, besides no panic: a body that reads writes back to JSON that reads as an equal
//! value, and writing that again gives the same bytes; the `Debug` output of a body never
//! depends on the secrets in it (a tool host's `secret`, a model's `api_key`), since bodies may
//! be logged.

#![no_main]

use std::fmt::Debug;

use edith_types::{
    CreateApiKey, CreateInstance, CreateProfile, CreateSession, CreateTurn, ModelSpec, NativeCall,
    RegisterTool, RegisterToolHost, TurnAction, UpdateProfile, UpdateSession, UpdateTool,
    UpdateToolHost,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fuzz_target!(|data: &[u8]| {
    body::<CreateInstance>(data);
    body::<CreateApiKey>(data);
    body::<NativeCall>(data);
    body::<CreateTurn>(data);
    body::<TurnAction>(data);
    body::<CreateSession>(data);
    body::<UpdateSession>(data);
    body::<RegisterTool>(data);
    body::<UpdateTool>(data);

    if let Some(profile) = body::<CreateProfile>(data) {
        let mut blank = profile.clone();
        blank_key(&mut blank.model);
        assert_eq!(
            format!("{profile:?}"),
            format!("{blank:?}"),
            "an API key shows"
        );
    }
    if let Some(update) = body::<UpdateProfile>(data) {
        let mut blank = update.clone();
        blank_key(&mut blank.model);
        assert_eq!(
            format!("{update:?}"),
            format!("{blank:?}"),
            "an API key shows"
        );
    }
    if let Some(host) = body::<RegisterToolHost>(data) {
        let mut blank = host.clone();
        blank.secret.clear();
        assert_eq!(format!("{host:?}"), format!("{blank:?}"), "a secret shows");
    }
    if let Some(update) = body::<UpdateToolHost>(data) {
        let mut blank = update.clone();
        if let Some(secret) = blank.secret.as_mut() {
            secret.clear();
        }
        assert_eq!(
            format!("{update:?}"),
            format!("{blank:?}"),
            "a secret shows"
        );
    }
});

/// Reads `data` as a `T`; when it reads, checks the round trip.
fn body<T>(data: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let value = serde_json::from_slice::<T>(data).ok()?;
    let name = std::any::type_name::<T>();
    let written = serde_json::to_vec(&value).expect("a body serializes");
    let again: T = serde_json::from_slice(&written).unwrap_or_else(|e| {
        panic!(
            "{name}: our own output is unreadable ({e}): {}",
            String::from_utf8_lossy(&written)
        )
    });
    assert!(again == value, "{name} changed on the way back");
    let rewritten = serde_json::to_vec(&again).expect("a body serializes");
    assert!(rewritten == written, "{name}: writing is not stable");
    Some(value)
}

fn blank_key(model: &mut Option<ModelSpec>) {
    if let Some(ModelSpec::OpenaiCompatible {
        api_key: Some(key), ..
    }) = model
    {
        key.clear();
    }
}
