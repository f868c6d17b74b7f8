//! `model.options`: which providers and models a client may pick (`/model`), as Hermes lists
//! them. This runtime has one provider, the config's `model:` section: an OpenAI-compatible
//! endpoint (`custom`, its models as the endpoint lists them) or the offline scripted model.

use std::time::Duration;

use hermes_native::config::{HermesConfig, SCRIPTED};
use hermes_native::methods::{Extra, ModelChoices, ModelOptionsParams, ProviderChoice};
use serde_json::{Value, json};

use super::methods::{Result, handler_error};
use crate::runtime::Runtime;

/// How long the endpoint may take to list its models.
const LISTING_TIMEOUT: Duration = Duration::from_secs(5);

/// The models an OpenAI-compatible endpoint lists (`GET <base_url>/models`, sent without the
/// key, as Hermes sends it), in its order; `None` when it does not answer with a list.
async fn listed_models(runtime: &Runtime, base_url: &str) -> Option<Vec<String>> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let response = runtime
        .http
        .get(url)
        .timeout(LISTING_TIMEOUT)
        .send()
        .await
        .ok()?
        .error_for_status()
        .ok()?;
    let body: Value = response.json().await.ok()?;
    let ids: Vec<String> = body["data"]
        .as_array()?
        .iter()
        .filter_map(|model| model["id"].as_str().map(str::to_owned))
        .collect();
    (!ids.is_empty()).then_some(ids)
}

fn extra(value: Value) -> Extra {
    match value {
        Value::Object(map) => map,
        _ => Extra::new(),
    }
}

pub async fn options(runtime: &Runtime, p: ModelOptionsParams) -> Result<ModelChoices> {
    let session = p
        .session_id
        .as_ref()
        .and_then(|sid| runtime.session(sid.as_str()));
    let home = session
        .as_ref()
        .map_or_else(|| runtime.root.clone(), |s| s.home.clone());
    let config = HermesConfig::load(&home).await.map_err(handler_error)?;
    let current = session
        .as_ref()
        .map_or_else(|| config.model_name(), |s| s.model_name.clone());
    let provider = config.model.provider_name();
    let choice = match config.model.base_url.as_deref() {
        Some(base_url) => {
            let models = listed_models(runtime, base_url)
                .await
                .unwrap_or_else(|| vec![current.clone()]);
            let capabilities: serde_json::Map<String, Value> = models
                .iter()
                .map(|m| (m.clone(), json!({"fast": false, "reasoning": true})))
                .collect();
            ProviderChoice {
                slug: provider.clone(),
                name: "Custom endpoint".to_owned(),
                is_current: true,
                is_user_defined: true,
                total_models: models.len() as u64,
                models,
                source: "model-config".to_owned(),
                other: extra(json!({
                    "api_url": base_url.trim_end_matches('/'),
                    "authenticated": true,
                    "capabilities": capabilities,
                })),
            }
        }
        None => ProviderChoice {
            slug: SCRIPTED.to_owned(),
            name: "Scripted (offline, this runtime's own)".to_owned(),
            is_current: true,
            is_user_defined: false,
            models: vec![SCRIPTED.to_owned()],
            total_models: 1,
            source: "model-config".to_owned(),
            other: extra(json!({
                "authenticated": true,
                "capabilities": {SCRIPTED: {"fast": false, "reasoning": false}},
            })),
        },
    };
    Ok(ModelChoices {
        providers: vec![choice],
        model: current,
        provider,
    })
}
