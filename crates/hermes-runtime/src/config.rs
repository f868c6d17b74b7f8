//! `config.yaml` of a Hermes home, read the way Hermes reads it: the `model:` section picks the
//! model, `mcp_servers:` lists the MCP servers whose tools the agent may call.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct HomeConfig {
    #[serde(default)]
    pub model: ModelSection,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

#[derive(Clone, Default, Deserialize)]
pub struct ModelSection {
    /// The model name (`default:` in Hermes's config).
    #[serde(default)]
    pub default: Option<String>,
    /// `scripted` (ours, offline), or e.g. `custom` with a `base_url`. Absent (and no
    /// `base_url`) means `scripted`, so a bare home works offline.
    #[serde(default)]
    pub provider: Option<String>,
    /// An OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1`.
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
}

impl std::fmt::Debug for ModelSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSection")
            .field("default", &self.default)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

#[derive(Clone, Deserialize)]
pub struct McpServerConfig {
    /// Streamable HTTP endpoint.
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds a tool call may take.
    #[serde(default = "default_call_timeout")]
    pub timeout: f64,
    /// Seconds connecting and listing may take.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: f64,
}

/// Header values are credentials: never printed.
impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

fn default_call_timeout() -> f64 {
    120.0
}

fn default_connect_timeout() -> f64 {
    30.0
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a valid config: {source}")]
    Parse {
        path: String,
        source: serde_yaml::Error,
    },
}

impl HomeConfig {
    /// Reads `<home>/config.yaml`; a missing file is an empty config.
    pub async fn load(home: &Path) -> Result<Self, ConfigError> {
        let path = home.join("config.yaml");
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// The model name reported in session info.
    pub fn model_name(&self) -> String {
        self.model
            .default
            .clone()
            .unwrap_or_else(|| "scripted".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hermes_style_config_parses() {
        let config: HomeConfig = serde_yaml::from_str(
            "model:\n  default: fake-model\n  provider: scripted\nmcp_servers:\n  edith:\n    url: http://127.0.0.1:1/mcp\n    headers:\n      Authorization: Bearer x\n",
        )
        .unwrap();
        assert_eq!(config.model_name(), "fake-model");
        let edith = &config.mcp_servers["edith"];
        assert_eq!(edith.headers["Authorization"], "Bearer x");
        assert_eq!(edith.timeout, 120.0);
        let printed = format!("{config:?}");
        assert!(!printed.contains("Bearer x"), "{printed}");
    }
}
