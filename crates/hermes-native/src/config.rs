//! `config.yaml` of a Hermes home: one type for both directions. The control plane writes it for
//! each native profile; the runtime (ours) reads it; the real Hermes reads the same file, so the
//! keys are Hermes's. Keys this type does not model are kept, so reading and writing a file
//! loses nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// The file's name inside a home.
pub const CONFIG_FILE: &str = "config.yaml";

/// `platform_toolsets:`: the toolsets enabled per platform (`cli`, `discord`, …).
const PLATFORM_TOOLSETS: &str = "platform_toolsets";
/// `skills:`, whose `disabled` lists the skills switched off.
const SKILLS: &str = "skills";

/// Model calls per turn when the config does not say (Hermes's default).
pub const DEFAULT_MAX_TURNS: u64 = 90;

/// Attempts at one model call when the config does not say (Hermes's `agent.api_max_retries`).
pub const DEFAULT_API_ATTEMPTS: u64 = 3;

/// The `model.provider` (and model name) of our runtime's offline, deterministic model.
pub const SCRIPTED: &str = "scripted";

/// The whole file.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HermesConfig {
    /// `model:`: the provider and model the agent uses.
    #[serde(default)]
    pub model: ModelSection,
    /// MCP servers whose tools the agent may call, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Every other key (`approvals`, `toolsets`, …), as it was.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

/// The `model:` section.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelSection {
    /// The model name (`default:` in Hermes's config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// `custom` (an OpenAI-compatible endpoint at `base_url`) or `scripted` (ours, offline).
    /// Absent (and no `base_url`) means `scripted`, so a bare home works offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// An OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// A credential: never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Every other key of the section (`context_length`, …), as it was.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

impl ModelSection {
    /// The provider this section names: when absent, an endpoint at `base_url` is `custom`,
    /// and no endpoint at all is our offline scripted model.
    pub fn provider_name(&self) -> String {
        match (&self.provider, &self.base_url) {
            (Some(provider), _) => provider.clone(),
            (None, Some(_)) => "custom".to_owned(),
            (None, None) => SCRIPTED.to_owned(),
        }
    }
}

/// One entry of `mcp_servers:`: a Streamable HTTP endpoint.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    /// The server's Streamable HTTP endpoint.
    pub url: String,
    /// Sent with every request; credentials, so never printed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long a tool call may take.
    #[serde(default = "Seconds::call_default")]
    pub timeout: Seconds,
    /// How long connecting and listing tools may take.
    #[serde(default = "Seconds::connect_default")]
    pub connect_timeout: Seconds,
    /// Every other key of the entry, as it was.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

impl McpServer {
    /// The server's tools the agent may not call (`tools.exclude`).
    pub fn excluded_tools(&self) -> Vec<String> {
        self.other
            .get("tools")
            .and_then(|tools| tools.get("exclude"))
            .and_then(|list| serde_yaml::from_value(list.clone()).ok())
            .unwrap_or_default()
    }

    /// Sets the tools the agent may not call, keeping the rest of `tools:`.
    pub fn set_excluded_tools(&mut self, names: Vec<String>) {
        let section = self
            .other
            .entry("tools".to_owned())
            .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()));
        if !section.is_mapping() {
            *section = serde_yaml::Value::Mapping(Default::default());
        }
        section["exclude"] = serde_yaml::to_value(names).expect("names serialize");
    }
}

/// The configs last parsed, by file, with the text they were parsed from.
mod parsed {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, OnceLock};

    use super::HermesConfig;

    /// Files kept at most; past that the cache starts again (a runtime has a home per profile).
    const MOST: usize = 256;

    /// Shared, so that a copy for a caller is made outside the lock.
    type Parsed = HashMap<PathBuf, Arc<(String, HermesConfig)>>;

    fn cache() -> &'static Mutex<Parsed> {
        static CACHE: OnceLock<Mutex<Parsed>> = OnceLock::new();
        CACHE.get_or_init(Default::default)
    }

    /// The config parsed from `text` at `path`, if that is the text last parsed there.
    pub(super) fn get(path: &Path, text: &str) -> Option<HermesConfig> {
        let entry = cache().lock().expect("not poisoned").get(path)?.clone();
        let (kept, config) = &*entry;
        (kept == text).then(|| config.clone())
    }

    /// Drops what was kept for the files under `dir` (or `dir` itself, a file).
    pub(super) fn forget_under(dir: &Path) {
        cache()
            .lock()
            .expect("not poisoned")
            .retain(|path, _| !path.starts_with(dir));
    }

    pub(super) fn keep(path: PathBuf, text: String, config: &HermesConfig) {
        let mut cache = cache().lock().expect("not poisoned");
        if cache.len() >= MOST && !cache.contains_key(&path) {
            cache.clear();
        }
        cache.insert(path, Arc::new((text, config.clone())));
    }
}

/// A timeout in seconds, as config files write them: positive and finite, at most a day. Anything
/// else is refused when the file is read, with the offending value named.
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Seconds(f64);

impl Seconds {
    /// The longest timeout a config may ask for.
    pub const MAX: f64 = 86_400.0;

    /// A timeout of `seconds`; refused unless above 0 and at most [`Seconds::MAX`].
    pub fn new(seconds: f64) -> Result<Self, String> {
        if seconds.is_finite() && seconds > 0.0 && seconds <= Self::MAX {
            Ok(Self(seconds))
        } else {
            Err(format!(
                "a timeout must be a number of seconds above 0 and at most {}, got {seconds}",
                Self::MAX
            ))
        }
    }

    /// The number of seconds.
    pub fn get(self) -> f64 {
        self.0
    }

    /// The timeout as a [`Duration`].
    pub fn duration(self) -> Duration {
        Duration::from_secs_f64(self.0)
    }

    /// A tool call's deadline when the config names none.
    pub const CALL_DEFAULT: Seconds = Seconds(120.0);
    /// Connecting's and listing's deadline when the config names none.
    pub const CONNECT_DEFAULT: Seconds = Seconds(30.0);

    fn call_default() -> Self {
        Self::CALL_DEFAULT
    }

    fn connect_default() -> Self {
        Self::CONNECT_DEFAULT
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Self::new(seconds).map_err(serde::de::Error::custom)
    }
}

impl fmt::Debug for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

/// Why a config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not a Hermes config.
    #[error("{path} is not a valid Hermes config: {source}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong in it.
        source: serde_yaml::Error,
    },
}

impl HermesConfig {
    /// Parses the text of a `config.yaml`; an empty file is an empty config. A mapping whose
    /// key is itself a list or a mapping (`? [a, b]: 1`) is refused, as Hermes's own reader
    /// refuses it (an unhashable key): it could not be written back.
    pub fn from_yaml(text: &str) -> Result<Self, serde_yaml::Error> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let config: Self = serde_yaml::from_str(text)?;
        let kept = config
            .other
            .values()
            .chain(config.model.other.values())
            .chain(config.mcp_servers.values().flat_map(|s| s.other.values()));
        for value in kept {
            if !has_plain_keys(value) {
                return Err(serde::de::Error::custom(
                    "a mapping key must be a plain value (text, a number or a boolean), \
                     not a list or a mapping",
                ));
            }
        }
        Ok(config)
    }

    /// The text of a `config.yaml`.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self)
            .expect("a config serializes: read ones have plain keys, built ones have string keys")
    }

    /// Forgets the configs parsed under `dir`, a home (or a `config.yaml`) being removed or
    /// moved: they hold credentials, which should not stay in memory after their file is gone.
    pub fn forget_under(dir: &Path) {
        parsed::forget_under(dir);
    }

    /// Reads `<home>/config.yaml`; a missing file is an empty config. The file is read every
    /// time; what it says is parsed again only when its text changed since it was last read
    /// (a runtime reads its config several times per turn). It is read on the caller's thread:
    /// a few kilobytes the system keeps in memory take microseconds, where `tokio::fs` would
    /// hand each read to a blocking thread and wake the caller back.
    pub async fn load(home: &Path) -> Result<Self, ConfigError> {
        let path = home.join(CONFIG_FILE);
        let shown = || path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: shown(),
                    source,
                });
            }
        };
        if let Some(parsed) = parsed::get(&path, &text) {
            return Ok(parsed);
        }
        let config = Self::from_yaml(&text).map_err(|source| ConfigError::Parse {
            path: shown(),
            source,
        })?;
        parsed::keep(path, text, &config);
        Ok(config)
    }

    /// Replaces `<home>/config.yaml` at once (a partial file renamed over it), readable by the
    /// owner only from its first byte: it holds credentials (a model key, MCP tokens).
    pub fn save(&self, home: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(home)?;
        write_atomically(&home.join(CONFIG_FILE), self.to_yaml().as_bytes(), 0o600)
    }

    /// The toolsets enabled on `platform` (`platform_toolsets.<platform>`), when the file says.
    pub fn platform_toolsets(&self, platform: &str) -> Option<Vec<String>> {
        let list = self.other.get(PLATFORM_TOOLSETS)?.get(platform)?;
        serde_yaml::from_value(list.clone()).ok()
    }

    /// Sets the toolsets enabled on `platform`, keeping the other platforms'.
    pub fn set_platform_toolsets(&mut self, platform: &str, names: Vec<String>) {
        let section = self
            .other
            .entry(PLATFORM_TOOLSETS.to_owned())
            .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()));
        if !section.is_mapping() {
            *section = serde_yaml::Value::Mapping(Default::default());
        }
        section[platform] = serde_yaml::to_value(names).expect("names serialize");
    }

    /// The skills switched off (`skills.disabled`).
    pub fn disabled_skills(&self) -> Vec<String> {
        self.other
            .get(SKILLS)
            .and_then(|skills| skills.get("disabled"))
            .and_then(|list| serde_yaml::from_value(list.clone()).ok())
            .unwrap_or_default()
    }

    /// Sets the skills switched off, keeping the rest of `skills:`.
    pub fn set_disabled_skills(&mut self, names: Vec<String>) {
        let section = self
            .other
            .entry(SKILLS.to_owned())
            .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()));
        if !section.is_mapping() {
            *section = serde_yaml::Value::Mapping(Default::default());
        }
        section["disabled"] = serde_yaml::to_value(names).expect("names serialize");
    }

    /// How many model calls one turn may make: `agent.max_turns`, else a top-level
    /// `max_turns`, else Hermes's 90.
    pub fn max_turns(&self) -> u64 {
        ["agent.max_turns", "max_turns"]
            .iter()
            .find_map(|key| self.value_at(key)?.as_u64().filter(|n| *n > 0))
            .unwrap_or(DEFAULT_MAX_TURNS)
    }

    /// How many times one model call is attempted before the turn fails:
    /// `agent.api_max_retries` (at least 1), else Hermes's 3.
    pub fn api_attempts(&self) -> u64 {
        self.value_at("agent.api_max_retries")
            .and_then(|v| v.as_u64())
            .map(|n| n.max(1))
            .unwrap_or(DEFAULT_API_ATTEMPTS)
    }

    /// `approvals.mode` as Hermes reads it: `manual`, `smart` or `off` (YAML's bare `off` is
    /// `false`, so `false` is `off` and `true` is `manual`); anything else is `manual`.
    pub fn approval_mode(&self) -> &'static str {
        match self.value_at("approvals.mode") {
            Some(serde_yaml::Value::Bool(false)) => "off",
            Some(serde_yaml::Value::String(mode)) => match mode.trim().to_lowercase().as_str() {
                "smart" => "smart",
                "off" => "off",
                _ => "manual",
            },
            _ => "manual",
        }
    }

    /// The value at a dotted path (`display.skin`, `approvals.mode`), when the file has one.
    pub fn value_at(&self, dotted: &str) -> Option<serde_yaml::Value> {
        let mut keys = dotted.split('.');
        let first = keys.next()?;
        // Keys this type does not model are read where they are kept; only the modelled
        // sections are written out as YAML to be walked (a turn reads several keys).
        let section = match first {
            "model" => serde_yaml::to_value(&self.model).ok()?,
            "mcp_servers" if !self.mcp_servers.is_empty() => {
                serde_yaml::to_value(&self.mcp_servers).ok()?
            }
            _ => self.other.get(first)?.clone(),
        };
        keys.try_fold(section, |value, key| value.get(key).cloned())
    }

    /// Sets (or, with `None`, removes) the value at a dotted path, making the sections on the
    /// way (a section that is not a mapping is replaced by one, as Hermes does). A change that
    /// would leave the file unreadable (`model: 3`) is refused.
    pub fn set_value_at(
        &mut self,
        dotted: &str,
        value: Option<serde_yaml::Value>,
    ) -> Result<(), serde_yaml::Error> {
        use serde_yaml::Value;
        let mut whole = serde_yaml::to_value(&*self)?;
        let mut keys: Vec<&str> = dotted.split('.').collect();
        let leaf = keys.pop().unwrap_or_default();
        let mut section = &mut whole;
        for key in keys {
            if !section.is_mapping() {
                *section = Value::Mapping(Default::default());
            }
            let map = section.as_mapping_mut().expect("a mapping");
            let entry = map
                .entry(Value::from(key))
                .or_insert_with(|| Value::Mapping(Default::default()));
            if !entry.is_mapping() {
                *entry = Value::Mapping(Default::default());
            }
            section = entry;
        }
        if !section.is_mapping() {
            *section = Value::Mapping(Default::default());
        }
        let map = section.as_mapping_mut().expect("a mapping");
        match value {
            Some(value) => {
                map.insert(Value::from(leaf), value);
            }
            None => {
                map.remove(leaf);
            }
        }
        *self = serde_yaml::from_value(whole)?;
        Ok(())
    }

    /// The model's context window in tokens (`model.context_length`), when the file says.
    pub fn context_length(&self) -> Option<u64> {
        self.model
            .other
            .get("context_length")
            .and_then(serde_yaml::Value::as_u64)
            .filter(|tokens| *tokens > 0)
    }

    /// The model name a runtime reports (`scripted` when none is set).
    pub fn model_name(&self) -> String {
        self.model
            .default
            .clone()
            .unwrap_or_else(|| SCRIPTED.to_owned())
    }
}

/// Whether every mapping key inside `value` is a scalar (possibly tagged): YAML's emitter
/// cannot write a list or a mapping as a key.
fn has_plain_keys(value: &serde_yaml::Value) -> bool {
    use serde_yaml::Value;
    let plain = |key: &Value| match key {
        Value::Sequence(_) | Value::Mapping(_) => false,
        Value::Tagged(tagged) => !matches!(tagged.value, Value::Sequence(_) | Value::Mapping(_)),
        _ => true,
    };
    match value {
        Value::Mapping(map) => map.iter().all(|(k, v)| plain(k) && has_plain_keys(v)),
        Value::Sequence(list) => list.iter().all(has_plain_keys),
        Value::Tagged(tagged) => has_plain_keys(&tagged.value),
        _ => true,
    }
}

/// Replaces the file at `path` at once: the bytes go to a temporary file of its own beside it
/// (created with `mode`, flushed to disk), which is then renamed over `path`. A reader sees
/// the old file or the new one, never half of one, however many write at once; a crash leaves
/// one of the two.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = path.with_file_name(format!(".{name}.{}.{unique}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Keys of sections that may hold credentials; their values are never printed.
fn keys<V>(map: &BTreeMap<String, V>) -> Vec<&str> {
    map.keys().map(String::as_str).collect()
}

impl fmt::Debug for HermesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HermesConfig")
            .field("model", &self.model)
            .field("mcp_servers", &self.mcp_servers)
            .field("other", &keys(&self.other))
            .finish()
    }
}

impl fmt::Debug for ModelSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelSection")
            .field("default", &self.default)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("other", &keys(&self.other))
            .finish()
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("url", &self.url)
            .field("headers", &keys(&self.headers))
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("other", &keys(&self.other))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config read again is parsed again only when its text changed, however soon and
    /// however alike (the same length, within the file system's timestamp granularity).
    #[tokio::test]
    async fn a_config_is_read_again_whenever_its_text_changed() {
        let home = tempfile::tempdir().unwrap();
        let write = |model: &str| {
            let text = format!("model:\n  default: {model}\napprovals:\n  mode: manual\n");
            std::fs::write(home.path().join(CONFIG_FILE), text).unwrap();
        };
        write("model-a");
        let first = HermesConfig::load(home.path()).await.unwrap();
        assert_eq!(first.model.default.as_deref(), Some("model-a"));
        let path = home.path().join(CONFIG_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            parsed::get(&path, &text),
            Some(first.clone()),
            "kept, not parsed again"
        );
        assert_eq!(HermesConfig::load(home.path()).await.unwrap(), first);
        write("model-b");
        let second = HermesConfig::load(home.path()).await.unwrap();
        assert_eq!(second.model.default.as_deref(), Some("model-b"));
        assert_eq!(second.value_at("model.default"), Some("model-b".into()));
        assert_eq!(second.value_at("approvals.mode"), Some("manual".into()));
        std::fs::write(home.path().join(CONFIG_FILE), "model: [").unwrap();
        assert!(
            HermesConfig::load(home.path()).await.is_err(),
            "not the last good one"
        );
        std::fs::remove_file(home.path().join(CONFIG_FILE)).unwrap();
        assert_eq!(
            HermesConfig::load(home.path()).await.unwrap(),
            HermesConfig::default()
        );
    }

    #[tokio::test]
    async fn the_configs_of_a_home_being_removed_are_forgotten_and_no_others() {
        let (gone, kept) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut texts = Vec::new();
        for home in [&gone, &kept] {
            let text = "model:\n  api_key: sk-secret\n";
            std::fs::write(home.path().join(CONFIG_FILE), text).unwrap();
            HermesConfig::load(home.path()).await.unwrap();
            texts.push((home.path().join(CONFIG_FILE), text));
        }
        HermesConfig::forget_under(gone.path());
        let [(gone_path, gone_text), (kept_path, kept_text)] = &texts[..] else {
            unreachable!("two homes");
        };
        assert_eq!(
            parsed::get(gone_path, gone_text),
            None,
            "its key is not kept"
        );
        assert!(parsed::get(kept_path, kept_text).is_some());
    }

    const HERMES_STYLE: &str = "\
model:
  default: fake-model
  provider: custom
  base_url: http://127.0.0.1:1/v1
  api_key: sk-secret
  context_length: 131072
approvals:
  mode: manual
mcp_servers:
  edith:
    url: http://127.0.0.1:1/mcp
    headers:
      Authorization: Bearer mcp-secret
    connect_timeout: 10
";

    #[test]
    fn values_are_set_and_removed_by_dotted_path_keeping_the_rest() {
        let mut config = HermesConfig::from_yaml(HERMES_STYLE).unwrap();
        config
            .set_value_at("display.sections.tools", Some("expanded".into()))
            .unwrap();
        config
            .set_value_at("approvals.mode", Some("off".into()))
            .unwrap();
        assert_eq!(
            config.value_at("display.sections.tools"),
            Some("expanded".into())
        );
        assert_eq!(config.value_at("approvals.mode"), Some("off".into()));
        assert_eq!(config.model_name(), "fake-model");
        config.set_value_at("approvals.mode", None).unwrap();
        assert_eq!(config.value_at("approvals.mode"), None);
        assert!(config.value_at("approvals").is_some(), "the section stays");
        // A text where a section was is replaced by a section.
        config.set_value_at("approvals", Some("x".into())).unwrap();
        config
            .set_value_at("approvals.mode", Some("smart".into()))
            .unwrap();
        assert_eq!(config.value_at("approvals.mode"), Some("smart".into()));
        assert!(config.set_value_at("model", Some(3.into())).is_err());
        assert_eq!(
            config.model_name(),
            "fake-model",
            "a refused change changes nothing"
        );
    }

    #[test]
    fn a_hermes_style_config_reads_and_writes_back_unchanged() {
        let config = HermesConfig::from_yaml(HERMES_STYLE).unwrap();
        assert_eq!(config.model_name(), "fake-model");
        let edith = &config.mcp_servers["edith"];
        assert_eq!(edith.headers["Authorization"], "Bearer mcp-secret");
        assert_eq!(edith.timeout.get(), 120.0);
        assert_eq!(edith.connect_timeout.get(), 10.0);
        assert!(config.other.contains_key("approvals"));
        assert!(config.model.other.contains_key("context_length"));

        let written = config.to_yaml();
        assert_eq!(
            HermesConfig::from_yaml(&written).unwrap(),
            config,
            "{written}"
        );
    }

    #[test]
    fn a_config_the_control_plane_builds_round_trips() {
        let mut config = HermesConfig::default();
        config.model.provider = Some("scripted".to_owned());
        config.model.default = Some("scripted".to_owned());
        config.mcp_servers.insert(
            "edith".to_owned(),
            McpServer {
                url: "http://127.0.0.1:2/v1/mcp".to_owned(),
                headers: BTreeMap::from([("Authorization".to_owned(), "Bearer t".to_owned())]),
                timeout: Seconds::new(120.0).unwrap(),
                connect_timeout: Seconds::new(30.0).unwrap(),
                other: BTreeMap::new(),
            },
        );
        assert_eq!(HermesConfig::from_yaml(&config.to_yaml()).unwrap(), config);
    }

    #[test]
    fn credentials_are_never_printed() {
        let printed = format!("{:?}", HermesConfig::from_yaml(HERMES_STYLE).unwrap());
        for secret in ["sk-secret", "mcp-secret"] {
            assert!(!printed.contains(secret), "{printed}");
        }
    }

    #[test]
    fn bad_timeouts_are_refused_with_the_value_named() {
        for bad in ["-1", "0", ".nan", ".inf", "100000", "\"soon\""] {
            let text = format!("mcp_servers:\n  s:\n    url: http://x/mcp\n    timeout: {bad}\n");
            let err = HermesConfig::from_yaml(&text).expect_err(bad).to_string();
            assert!(
                err.contains("timeout") || err.contains("invalid type"),
                "{bad}: {err}"
            );
        }
        let text = "mcp_servers:\n  s:\n    url: http://x/mcp\n    connect_timeout: -5\n";
        let err = HermesConfig::from_yaml(text).unwrap_err().to_string();
        assert!(err.contains("got -5"), "{err}");
    }

    /// Found by the `config_yaml` fuzz target: such a file read, then panicked when written.
    #[test]
    fn a_list_or_mapping_as_a_key_is_refused_on_read() {
        let nested = [
            "extra:\n  ? url: x\n  : 1\n",
            "extra:\n  ? [a, b]\n  : 1\n",
            "model:\n  other:\n    - ? {a: 1}\n      : 2\n",
            "mcp_servers:\n  s:\n    url: http://x/mcp\n    extra: {? [1]: 2}\n",
        ];
        for text in nested {
            let err = HermesConfig::from_yaml(text).expect_err(text).to_string();
            assert!(
                err.contains("mapping key must be a plain value"),
                "{text}: {err}"
            );
        }
        let plain = "extra:\n  1: one\n  true: yes\n  ~: nothing\n";
        let config = HermesConfig::from_yaml(plain).unwrap();
        assert_eq!(HermesConfig::from_yaml(&config.to_yaml()).unwrap(), config);
    }
}
