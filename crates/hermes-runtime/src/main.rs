//! `hermes-runtime serve --host H --port P`: launched like `hermes serve`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use hermes_runtime::RuntimeConfig;

const USAGE: &str = "usage: hermes-runtime serve [--host HOST] [--port PORT]

Serves the Hermes 0.19 gateway (/api/ws) and REST routes (/api/*).
  --host HOST   address to bind (default 127.0.0.1)
  --port PORT   port to bind; 0 lets the OS pick (default 9119)
Environment:
  HERMES_HOME                      the home directory (default ~/.hermes)
  HERMES_DASHBOARD_SESSION_TOKEN   the token clients must present (random when unset)
Prints `HERMES_BACKEND_READY port=<n>` once it accepts connections.";

fn parse_args(args: &[String]) -> Result<(IpAddr, u16), String> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("serve") => {}
        Some("-h" | "--help") | None => return Err(String::new()),
        Some(other) => return Err(format!("unknown command `{other}`")),
    }
    let (mut host, mut port): (IpAddr, u16) = ([127, 0, 0, 1].into(), 9119);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("`{flag}` needs a value"));
        match flag.as_str() {
            "--host" => {
                let raw = value()?;
                host = if raw == "localhost" {
                    [127, 0, 0, 1].into()
                } else {
                    raw.parse()
                        .map_err(|_| format!("`--host {raw}` is not an IP address"))?
                };
            }
            "--port" => {
                let raw = value()?;
                port = raw
                    .parse()
                    .map_err(|_| format!("`--port {raw}` is not a port number"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok((host, port))
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

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (host, port) = match parse_args(&args) {
        Ok(parsed) => parsed,
        Err(problem) if problem.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("hermes-runtime: {problem}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let token = std::env::var("HERMES_DASHBOARD_SESSION_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(random_token);
    let config = RuntimeConfig::new(home_dir(), token, SocketAddr::new(host, port));
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
