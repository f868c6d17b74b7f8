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

/// Replaces every credential in `config`, at any depth, with [`MASKED`]: text under a
/// credential's key, and every entry of `headers` and `env` (where MCP servers keep theirs).
pub fn mask_credentials(config: &mut Map<String, Value>) {
    for (key, value) in config.iter_mut() {
        let all_secret = matches!(key.as_str(), "headers" | "env");
        match value {
            Value::Object(inner) if all_secret => {
                inner.values_mut().for_each(|v| *v = json!(MASKED));
            }
            Value::Object(inner) => mask_credentials(inner),
            Value::String(_) if is_credential(key) => *value = json!(MASKED),
            _ => {}
        }
    }
}
