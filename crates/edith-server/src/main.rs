//! `edith serve --listen ADDR --data-dir DIR`: the control plane as a process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use edith_server::ServerConfig;

const USAGE: &str = "usage: edith serve [--listen ADDR] [--data-dir DIR]

Serves the EDITH control plane (REST + SSE under /v1).
  --listen ADDR     address to bind, e.g. 127.0.0.1:8080; port 0 lets the OS pick
                    (default 127.0.0.1:8080)
  --data-dir DIR    where edith.db and the embedded runtimes' homes live (default ./edith-data)
Prints `EDITH_READY url=http://<addr>` once it accepts requests.
Other commands:
  edith openapi     prints the control-plane contract (OpenAPI 3.1)";

enum Command {
    Serve(ServerConfig),
    OpenApi,
    Help,
}

fn parse_args(args: &[String]) -> Result<Command, String> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("serve") => {}
        Some("openapi") => return Ok(Command::OpenApi),
        Some("-h" | "--help") | None => return Ok(Command::Help),
        Some(other) => return Err(format!("unknown command `{other}`")),
    }
    let mut config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        data_dir: PathBuf::from("edith-data"),
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("`{flag}` needs a value"));
        match flag.as_str() {
            "--listen" => {
                let raw = value()?;
                config.listen = raw.parse().map_err(|_| {
                    format!("`--listen {raw}` is not an address like 127.0.0.1:8080")
                })?;
            }
            "--data-dir" => config.data_dir = PathBuf::from(value()?),
            "-h" | "--help" => return Ok(Command::Help),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(Command::Serve(config))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse_args(&args) {
        Ok(Command::Serve(config)) => config,
        Ok(Command::OpenApi) => {
            println!(
                "{}",
                serde_json::to_string_pretty(edith_server::openapi()).expect("JSON")
            );
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("edith: {problem}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listen = config.listen;
    let server = match edith_server::start(config).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("edith: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !listen.ip().is_loopback() {
        eprintln!(
            "edith: warning: listening on {listen}, beyond this machine, and this version has no \
             API keys yet: anyone who can reach it controls every instance"
        );
    }
    println!("EDITH_READY url={}", server.url());
    wait_for_signal().await;
    server.shutdown().await;
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
