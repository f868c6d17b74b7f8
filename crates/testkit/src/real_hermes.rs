//! Where the real Hermes Agent 0.19.0 is, for the tests that compare against it.

use std::path::{Path, PathBuf};

/// The real `hermes` executable: `HERMES_BIN`, else the virtualenv `scripts/test` installs
/// into `target/hermes-venv`. Panics with what to do when it is not there.
pub fn real_hermes_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("HERMES_BIN") {
        return PathBuf::from(bin);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = workspace.join("target/hermes-venv/bin/hermes");
    assert!(
        bin.is_file(),
        "the real Hermes is not installed at {}: run `scripts/test`, which installs \
         hermes-agent[mcp]==0.19.0 into target/hermes-venv (needs python3 >= 3.11 with venv \
         and pip), or set HERMES_BIN",
        bin.display()
    );
    bin
}

/// The real Hermes as a control plane's runtime command: a program and the arguments before
/// `serve`. It runs through `env` because Hermes pip-installs missing optional packages into
/// its own venv at run time, and the tests share one venv that none may change under another.
pub fn real_hermes_command() -> (PathBuf, Vec<String>) {
    let args = vec![
        "HERMES_DISABLE_LAZY_INSTALLS=1".to_owned(),
        real_hermes_bin().display().to_string(),
    ];
    (PathBuf::from("env"), args)
}
