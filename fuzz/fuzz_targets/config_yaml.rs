//! A Hermes home's `config.yaml` (`HermesConfig::from_yaml`): written by the control plane, but
//! also by the real Hermes, by people, and by Desktop clients through a runtime.
//!
//! Asserts, besides no panic: a config that reads writes back (`to_yaml`) to text that reads as
//! an equal config, and writing that again gives the same text; its timeouts are in range and
//! convert to a `Duration`; its `Debug` output never depends on its credentials (the model's
//! `api_key`, the MCP servers' header values); setting the platform toolsets and disabled skills
//! reads back what was set, keeps the file readable, and leaves the other platforms alone.

#![no_main]

use hermes_native::config::{HermesConfig, Seconds};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A runtime reads the file as UTF-8 text; anything else is refused before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = HermesConfig::from_yaml(text) else {
        return;
    };

    let written = config.to_yaml();
    let again = HermesConfig::from_yaml(&written)
        .unwrap_or_else(|e| panic!("our own config is unreadable ({e}):\n{written}"));
    assert!(
        again == config,
        "the config changed on the way back:\n{written}"
    );
    assert_eq!(again.to_yaml(), written, "writing is not stable");

    for server in config.mcp_servers.values() {
        for timeout in [server.timeout, server.connect_timeout] {
            let seconds = timeout.get();
            assert!(seconds > 0.0 && seconds <= Seconds::MAX, "{timeout:?}");
            assert!(!timeout.duration().is_zero());
        }
    }

    let mut blank = config.clone();
    if let Some(key) = blank.model.api_key.as_mut() {
        *key = String::new();
    }
    for server in blank.mcp_servers.values_mut() {
        for value in server.headers.values_mut() {
            *value = String::new();
        }
    }
    assert_eq!(
        format!("{config:?}"),
        format!("{blank:?}"),
        "a credential shows in Debug"
    );

    let _ = config.model_name();
    let _ = config.disabled_skills();
    let discord = config.platform_toolsets("discord");
    let mut edited = config.clone();
    let toolsets = vec!["web".to_owned(), "terminal".to_owned()];
    edited.set_platform_toolsets("cli", toolsets.clone());
    edited.set_disabled_skills(vec!["one".to_owned()]);
    assert_eq!(edited.platform_toolsets("cli"), Some(toolsets));
    assert_eq!(edited.disabled_skills(), ["one"]);
    if config
        .other
        .get("platform_toolsets")
        .is_some_and(|s| s.is_mapping())
    {
        assert_eq!(edited.platform_toolsets("discord"), discord);
    }
    let written = edited.to_yaml();
    let again = HermesConfig::from_yaml(&written)
        .unwrap_or_else(|e| panic!("an edited config is unreadable ({e}):\n{written}"));
    assert!(
        again == edited,
        "an edited config changed on the way back:\n{written}"
    );
});
