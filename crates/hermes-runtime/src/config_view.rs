//! A profile's `config.yaml` as clients are shown it: the file as it is (no defaults) as JSON,
//! with every credential masked. The Desktop config routes and the gateway's `config.get` both
//! show it this way.

use hermes_native::config::CONFIG_FILE;
use serde_json::{Map, Value, json};

/// What a credential is shown as.
pub const MASKED: &str = "***";

/// The file as it is (no defaults), as JSON; `{}` when there is none.
pub async fn raw(home: &std::path::Path) -> Result<Map<String, Value>, String> {
    let text = match tokio::fs::read_to_string(home.join(CONFIG_FILE)).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(e.to_string()),
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
    match serde_json::to_value(yaml).map_err(|e| e.to_string())? {
        Value::Object(map) => Ok(map),
        _ => Err(format!("{CONFIG_FILE} is not a mapping")),
    }
}

/// Whether a key names a credential (`api_key`, `access_token`, `client_secret`,
/// `password`, `authorization` …).
fn is_credential(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == "authorization"
        || ["key", "token", "secret", "password"]
            .iter()
            .any(|word| key.ends_with(word))
}

/// Replaces every credential in `config`, at any depth (lists too: `custom_providers` is a
/// list of entries with keys), with [`MASKED`]: text under a credential's key, and every entry
/// of `headers` and `env` (where MCP servers keep theirs).
pub fn mask_credentials(config: &mut Map<String, Value>) {
    for (key, value) in config.iter_mut() {
        let all_secret = matches!(key.as_str(), "headers" | "env");
        match value {
            Value::Object(inner) if all_secret => {
                inner.values_mut().for_each(|v| *v = json!(MASKED));
            }
            Value::String(_) if is_credential(key) => *value = json!(MASKED),
            other => mask_within(other),
        }
    }
}

/// Masks the credentials of the mappings inside `value`, however deep in lists.
fn mask_within(value: &mut Value) {
    match value {
        Value::Object(inner) => mask_credentials(inner),
        Value::Array(items) => items.iter_mut().for_each(mask_within),
        _ => {}
    }
}

/// `changed` with each [`MASKED`] value put back to what `was` holds in the same place, so that
/// a config shown masked and sent back keeps its credentials (lists are matched by position).
pub fn unmask(changed: &mut Value, was: &Value) {
    match (changed, was) {
        (text @ Value::String(_), was) if *text == json!(MASKED) => *text = was.clone(),
        (Value::Object(changed), Value::Object(was)) => {
            for (key, value) in changed.iter_mut() {
                if let Some(old) = was.get(key) {
                    unmask(value, old);
                }
            }
        }
        (Value::Array(changed), Value::Array(was)) => {
            for (value, old) in changed.iter_mut().zip(was) {
                unmask(value, old);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_lists_are_masked_and_kept_when_sent_back() {
        let stored = json!({"custom_providers": [
            {"name": "local", "api_key": "sk-one", "base_url": "http://x"},
            {"name": "other", "api_key": "sk-two"},
        ]});
        let mut shown = stored.as_object().unwrap().clone();
        mask_credentials(&mut shown);
        let shown = Value::Object(shown);
        assert_eq!(shown["custom_providers"][0]["api_key"], MASKED);
        assert_eq!(shown["custom_providers"][1]["api_key"], MASKED);
        assert_eq!(shown["custom_providers"][0]["base_url"], "http://x");
        let mut sent_back = shown.clone();
        sent_back["custom_providers"][1]["name"] = json!("renamed");
        unmask(&mut sent_back, &stored);
        assert_eq!(sent_back["custom_providers"][0]["api_key"], "sk-one");
        assert_eq!(sent_back["custom_providers"][1]["api_key"], "sk-two");
        assert_eq!(sent_back["custom_providers"][1]["name"], "renamed");
    }
}
