//! `hermes-runtime serve --host H --port P`: launched like `hermes serve`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hermes_runtime::RuntimeConfig;

/// A Hermes-compatible agent runtime, launched like `hermes serve`.
#[derive(Parser)]
#[command(name = "hermes-runtime", version, arg_required_else_help = true)]
#[command(after_help = "Environment:
  HERMES_HOME                      the home directory (default ~/.hermes)
  HERMES_DASHBOARD_SESSION_TOKEN   the token clients must present (random when unset)
  HERMES_TUI_WS_ORPHAN_REAP_GRACE_S
                                   seconds a session of a dropped connection is kept for a
                                   client to resume it (20; 0: until the idle scan)
  HERMES_TUI_SESSION_TTL_S         seconds a session with no client stays idle before it is
                                   closed (21600)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Hermes 0.19 gateway (/api/ws) and REST routes (/api/*). Prints
    /// `HERMES_BACKEND_READY port=<n>` once it accepts connections.
    Serve {
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1", value_parser = host)]
        host: IpAddr,
        /// Port to bind; 0 lets the OS pick.
        #[arg(long, default_value_t = 9119)]
        port: u16,
        /// The directory the Desktop file and git routes may reach (default: the current one).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

/// An IP address, or `localhost`.
fn host(raw: &str) -> Result<IpAddr, String> {
    if raw == "localhost" {
        return Ok([127, 0, 0, 1].into());
    }
    raw.parse()
        .map_err(|_| format!("`--host {raw}` is not an IP address"))
}

fn home_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("HERMES_HOME") {
        return PathBuf::from(home);
    }
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    user_home.join(".hermes")
}

/// Seconds from the variable `name`, as Hermes reads them (`max(0.0, float(...))`): a number,
/// below zero (or NaN) zero, beyond what a duration holds for ever; unset, empty or not a
/// number, `default`.
fn seconds_from_env(name: &str, default: Duration) -> Duration {
    let Some(raw) = std::env::var(name).ok().filter(|raw| !raw.is_empty()) else {
        return default;
    };
    match raw.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_nan() => Duration::ZERO,
        Ok(seconds) => Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX),
        Err(_) => default,
    }
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// jemalloc hands memory freed after a burst of turns back to the system within about a second
/// when built in this workspace (its decay settings are in `.cargo/config.toml`); glibc's
/// allocator kept it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let Command::Serve {
        host,
        port,
        workspace,
    } = Cli::parse().command;
    let token = std::env::var("HERMES_DASHBOARD_SESSION_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(random_token);
    let mut config = RuntimeConfig::new(home_dir(), token, SocketAddr::new(host, port));
    if let Some(workspace) = workspace {
        config.workspace = workspace;
    }
    let reaping = &mut config.reaping;
    reaping.orphan_grace =
        seconds_from_env("HERMES_TUI_WS_ORPHAN_REAP_GRACE_S", reaping.orphan_grace);
    reaping.idle_ttl = seconds_from_env("HERMES_TUI_SESSION_TTL_S", reaping.idle_ttl);
    let running = match hermes_runtime::serve(config).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("hermes-runtime: cannot serve on {host}:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("HERMES_BACKEND_READY port={}", running.addr().port());
    wait_for_signal().await;
    running.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
