//! `/api/config…`: a profile's `config.yaml` as Hermes's config routes show and change it —
//! `model` as its name, `model_context_length` beside it, `_`-keys hidden; a change is merged
//! into the file. Credentials (keys, tokens, secrets, MCP headers and environments) are shown
//! masked, and a masked value sent back leaves the credential as it was. The schema lists what this runtime reads.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_native::config::HermesConfig;
use hermes_native::desktop::replies::{SettingField, Settings, SettingsSaved, SettingsSchema};
use hermes_native::desktop::{
    ConfigGetQuery, ConfigSchemaQuery, ConfigUpdateBody, ConfigUpdateQuery,
};
use serde_json::{Map, Value, json};

use super::profiles::home_of_exact;
use crate::config_view::{MASKED, mask_credentials, raw, unmask};
use crate::http::extract::{Body, Params};
use crate::http::reply::{internal, refuse};
use crate::runtime::Runtime;

pub async fn get(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<ConfigGetQuery>,
) -> Response {
    let profile = query.profile;
    let (home, _) = match home_of_exact(&runtime, profile.as_deref()) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let mut config = match raw(&home).await {
        Ok(config) => config,
        Err(e) => return internal("reading config.yaml", e),
    };
    config.retain(|key, _| !key.starts_with('_'));
    let model = config.remove("model");
    let (name, context) = match &model {
        Some(Value::Object(model)) => (
            model
                .get("default")
                .or_else(|| model.get("name"))
                .cloned()
                .unwrap_or(json!("")),
            model
                .get("context_length")
                .filter(|v| v.is_i64())
                .cloned()
                .unwrap_or(json!(0)),
        ),
        Some(Value::String(name)) => (json!(name), json!(0)),
        _ => (json!(""), json!(0)),
    };
    mask_credentials(&mut config);
    let mut shown = Settings::new();
    shown.insert("model".to_owned(), name);
    shown.extend(config);
    shown.insert("model_context_length".to_owned(), context);
    Json(shown).into_response()
}

/// `into` with `change` merged in: objects recursively; `null` removes a value but never a
/// section; a masked credential keeps the one there.
fn merge(into: &mut Map<String, Value>, change: Map<String, Value>) {
    for (key, value) in change {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(inner)) => merge(existing, inner),
            (Some(Value::Object(_)), Value::Null) => {}
            (_, Value::Null) => {
                into.remove(&key);
            }
            (_, Value::String(text)) if text == MASKED => {}
            (Some(was), mut value) => {
                unmask(&mut value, was);
                into.insert(key, value);
            }
            (None, value) => {
                into.insert(key, value);
            }
        }
    }
}

pub async fn update(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<ConfigUpdateQuery>,
    Body(body): Body<ConfigUpdateBody>,
) -> Response {
    let Value::Object(mut change) = body.config else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(
                json!({"detail": [{"type": "dict_type", "loc": ["body", "config"],
                "msg": "Input should be a valid dictionary", "input": body.config}]}),
            ),
        )
            .into_response();
    };
    let profile = body.profile.as_deref().or(query.profile.as_deref());
    let (home, _) = match home_of_exact(&runtime, profile) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let _writing = runtime.config_lock.lock().await;
    let mut config = match raw(&home).await {
        Ok(config) => config,
        Err(e) => return internal("reading config.yaml", e),
    };
    change.remove("_model_meta");
    let context = change
        .remove("model_context_length")
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    // This runtime keeps `model:` as a section: a name sent alone becomes its `default`.
    // An empty name changes nothing; a section is merged as it is.
    if let Some(Value::String(name)) = change.get("model").cloned() {
        change.remove("model");
        if !name.is_empty() {
            let mut model = Map::new();
            model.insert("default".to_owned(), json!(name));
            // 0 is "automatic": an override on file goes (a null is deleted by the merge).
            let context = if context > 0 {
                json!(context)
            } else {
                Value::Null
            };
            model.insert("context_length".to_owned(), context);
            change.insert("model".to_owned(), Value::Object(model));
        }
    }
    merge(&mut config, change);
    let merged: HermesConfig = match serde_json::from_value(Value::Object(config)) {
        Ok(merged) => merged,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("invalid configuration: {e}"),
            );
        }
    };
    match save(home, merged).await {
        Ok(()) => Json(SettingsSaved { ok: true }).into_response(),
        Err(failed) => failed,
    }
}

/// Reads the home's `config.yaml`, applies `change` and writes it back, with no other change
/// in between.
pub async fn change(
    runtime: &Runtime,
    home: std::path::PathBuf,
    change: impl FnOnce(&mut HermesConfig),
) -> Result<(), Response> {
    let _writing = runtime.config_lock.lock().await;
    let mut config = HermesConfig::load(&home)
        .await
        .map_err(|e| internal("reading config.yaml", e))?;
    change(&mut config);
    save(home, config).await
}

/// Writes `config` as the home's `config.yaml` (off the async threads).
pub async fn save(home: std::path::PathBuf, config: HermesConfig) -> Result<(), Response> {
    match tokio::task::spawn_blocking(move || config.save(&home)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(internal("writing config.yaml", e)),
        Err(e) => Err(internal("writing config.yaml", e)),
    }
}

/// The settings this runtime reads, as Hermes's schema describes settings.
pub async fn schema(
    State(runtime): State<Arc<Runtime>>,
    Params(query): Params<ConfigSchemaQuery>,
) -> Response {
    let profile = query.profile;
    if let Err(refused) = home_of_exact(&runtime, profile.as_deref()) {
        return refused.into_response();
    }
    let field = |kind: &str, description: &str| SettingField {
        kind: kind.to_owned(),
        description: description.to_owned(),
        category: "general".to_owned(),
        options: None,
    };
    Json(SettingsSchema {
        fields: [
            ("model".to_owned(), field("string", "Default model")),
            (
                "model_context_length".to_owned(),
                field(
                    "number",
                    "Context window override (0 = auto-detect from model metadata)",
                ),
            ),
        ]
        .into(),
        category_order: vec!["general".to_owned()],
    })
    .into_response()
}
