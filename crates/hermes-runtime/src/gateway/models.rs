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

/// The models an OpenAI-compatible endpoint lists (`GET <base_url>/models`), in its order;
/// `None` when it does not answer with a list. Hermes sends the key when it checks a switch,
/// and none when it lists choices.
pub(super) async fn listed_models(
    runtime: &Runtime,
    base_url: &str,
    key: Option<&str>,
) -> Option<Vec<String>> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let mut request = runtime.http.get(url).timeout(LISTING_TIMEOUT);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.ok()?.error_for_status().ok()?;
    let body: Value = response.json().await.ok()?;
    let ids: Vec<String> = body["data"]
        .as_array()?
        .iter()
        .filter_map(|model| model["id"].as_str().map(str::to_owned))
        .collect();
    (!ids.is_empty()).then_some(ids)
}

/// How alike two names are, as Python's `difflib.SequenceMatcher.ratio` measures it: twice
/// the characters of the matching blocks (the longest common run, then the same on each
/// side of it) over both lengths.
fn similarity(a: &str, b: &str) -> f64 {
    fn matched(a: &[char], b: &[char]) -> usize {
        let (mut best, mut at_a, mut at_b) = (0, 0, 0);
        for i in 0..a.len() {
            for j in 0..b.len() {
                let run = a[i..]
                    .iter()
                    .zip(&b[j..])
                    .take_while(|(x, y)| x == y)
                    .count();
                if run > best {
                    (best, at_a, at_b) = (run, i, j);
                }
            }
        }
        if best == 0 {
            return 0;
        }
        best + matched(&a[..at_a], &b[..at_b]) + matched(&a[at_a + best..], &b[at_b + best..])
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    2.0 * matched(&a, &b) as f64 / (a.len() + b.len()) as f64
}

/// Up to `n` listed models at least `cutoff` alike to `name`, the most alike first (Python's
/// `difflib.get_close_matches`).
pub(super) fn close_matches<'m>(
    name: &str,
    listed: &'m [String],
    n: usize,
    cutoff: f64,
) -> Vec<&'m String> {
    let mut scored: Vec<(f64, &String)> = listed
        .iter()
        .map(|model| (similarity(name, model), model))
        .filter(|(score, _)| *score >= cutoff)
        .collect();
    // Highest score first; on a tie the later name first, as heapq.nlargest orders them.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(a.1)));
    scored.into_iter().take(n).map(|(_, model)| model).collect()
}

/// The listed model a name asked for was most likely meant to be, when it is close enough
/// (Hermes corrects a name at 0.9 or more of `similarity`).
pub(super) fn corrected<'m>(name: &str, listed: &'m [String]) -> Option<&'m String> {
    close_matches(name, listed, 1, 0.9).into_iter().next()
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
        .map_or_else(|| config.model_name(), |s| s.model());
    let provider = config.model.provider_name();
    let choice = match config.model.base_url.as_deref() {
        Some(base_url) => {
            let mut models = listed_models(runtime, base_url, None)
                .await
                .unwrap_or_default();
            // The current model comes first when the endpoint does not list it, as in Hermes.
            if !models.contains(&current) {
                models.insert(0, current.clone());
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_as_difflib_compares_them() {
        // difflib.SequenceMatcher(None, a, b).ratio() for each pair.
        assert_eq!(similarity("fake-model-2", "fake-model"), 20.0 / 22.0);
        assert_eq!(similarity("abcd", "bcde"), 0.75);
        assert_eq!(similarity("other-model", "fake-model"), 14.0 / 21.0);
        let listed = ["fake-model".to_owned(), "gpt-4o".to_owned()];
        assert_eq!(corrected("fake-model-2", &listed), Some(&listed[0]));
        assert_eq!(corrected("other-model", &listed), None);
    }
}
