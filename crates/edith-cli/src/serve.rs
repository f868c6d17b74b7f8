//! `edith serve`: the control plane as a process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use edith_server::{RuntimeCommand, ServerConfig};

#[derive(Args)]
pub struct Serve {
    /// Address to bind, e.g. 127.0.0.1:8080; port 0 lets the OS pick.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080", value_parser = listen_addr)]
    listen: SocketAddr,
    /// Where edith.db and the embedded runtimes' homes live.
    #[arg(long, value_name = "DIR", default_value = "edith-data")]
    data_dir: PathBuf,
    /// The database: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` for PostgreSQL (the
    /// database must exist; edith makes its tables). Without it, the SQLite file
    /// `<data-dir>/edith.db`. Several edith serve replicas may share one PostgreSQL database
    /// (and one data dir, each with its own `--replica`). Prefer the environment for a URL
    /// with a password.
    #[arg(
        long,
        value_name = "URL",
        env = edith_server::DATABASE_URL_VARIABLE,
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// What a commit to the SQLite database waits for before the request that made it is
    /// answered: `normal` loses nothing to a crash of edith, `full` nothing to a power cut or a
    /// crash of the machine either, at one sync of the disk per commit (commits made at once
    /// share it). Not for PostgreSQL, whose server decides (`synchronous_commit`).
    #[arg(
        long,
        value_name = "MODE",
        value_enum,
        default_value_t = SqliteSync::Normal,
        env = edith_server::SQLITE_SYNC_VARIABLE
    )]
    sqlite_sync: SqliteSync,
    /// This replica's name among those sharing a database (default: one made on first start
    /// and kept in `<data-dir>/replica.id`). Replicas that share a data dir need one each.
    #[arg(long, value_name = "NAME", env = "EDITH_REPLICA")]
    replica: Option<String>,
    /// How long a replica that stops answering keeps what it owns (instances, turns, jobs)
    /// before another takes it over.
    #[arg(long, value_name = "SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..=3600))]
    lease_seconds: u64,
    /// Where runtimes (for callback tools) and the other replicas reach this one, e.g.
    /// `https://replica-1.internal:8443` (default: `http://<listen address>`). Requests another
    /// replica forwards here carry the caller's API key: across machines, make it https.
    #[arg(long, value_name = "URL", env = "EDITH_ADVERTISE_URL")]
    advertise_url: Option<String>,
    /// Allow listening beyond loopback: say so only when TLS terminates in front of this
    /// server (API keys must not cross a network in clear).
    #[arg(long)]
    behind_tls_proxy: bool,
    /// A runtime `process` instances may run, as NAME=COMMAND (repeatable), e.g.
    /// `--runtime hermes="/opt/hermes/bin/hermes serve"`; the command is split on whitespace
    /// and launched with `--host 127.0.0.1 --port 0` (and `serve` before them, when it does
    /// not end in `serve`). Our own `hermes-runtime` is always there when its binary sits
    /// beside this one.
    #[arg(long = "runtime", value_name = "NAME=COMMAND", value_parser = runtime_arg)]
    runtimes: Vec<(String, RuntimeCommand)>,
    /// Offer the `sim` provider: our runtime with faults a caller asks for (slow starts,
    /// failing job steps, runtimes that exit). For testing the control plane, not for
    /// production.
    #[arg(long)]
    sim_provider: bool,
    /// A host where `external` runtimes may be attached, `HOST` (any port) or `HOST:PORT`
    /// (repeatable). Without it, an admin may attach a runtime anywhere.
    #[arg(long = "external-host", value_name = "HOST[:PORT]")]
    external_hosts: Vec<String>,
    /// Requests one API key may make per second, on average (default 50); more are answered
    /// 429 with `Retry-After`.
    #[arg(long, value_name = "N", value_parser = positive)]
    requests_per_second: Option<f64>,
    /// Requests one API key may make at once after a quiet spell (default 200).
    #[arg(long, value_name = "N", value_parser = positive)]
    burst: Option<f64>,
    /// Event streams one API key may hold open at once (default 64); more are answered 429.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    streams_per_key: Option<u32>,
    /// Connections served at once (default 4096); more wait to be accepted. Each takes a file
    /// descriptor: raise the process's limit (`ulimit -n`) to match.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Seconds a session's live session on its runtime stays open after its last turn
    /// (default 600); then it is closed, and the next turn resumes the stored session. The real
    /// Hermes holds a Python process of about 50 MB for each live session. Live sessions opened
    /// through native calls are closed that long after the last call that named them.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    live_session_idle: Option<u64>,
    /// How the log (on stderr) is written: lines for people, or one JSON object a line for a
    /// log collector. Either way each line names the ids of what it is about.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "EDITH_LOG_FORMAT")]
    log_format: LogFormat,
    /// Send spans (each request, the turn it starts, the calls on the runtime's gateway, the
    /// tool calls) to an OpenTelemetry collector, as OTLP/JSON over HTTP to
    /// `<URL>/v1/traces`, e.g. `http://127.0.0.1:4318`. A request's `traceparent` header
    /// continues the caller's trace. (Not read from `OTEL_EXPORTER_OTLP_ENDPOINT`, which a
    /// platform may set for other programs: traces are sent only when asked for here.)
    #[arg(long, value_name = "URL", env = "EDITH_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Serve {
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }

    /// The collector spans go to, if any.
    pub fn otlp_endpoint(&self) -> Option<&str> {
        self.otlp_endpoint.as_deref().filter(|url| !url.is_empty())
    }
}

fn positive(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(format!("`{raw}` is not a positive number")),
    }
}

fn runtime_arg(raw: &str) -> Result<(String, RuntimeCommand), String> {
    let (name, command) = raw
        .split_once('=')
        .ok_or_else(|| format!("`--runtime {raw}` is not NAME=COMMAND"))?;
    let mut words = command.split_whitespace();
    let program = words
        .next()
        .ok_or_else(|| format!("`--runtime {raw}` names no command"))?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(format!(
            "`--runtime {raw}`: NAME must be letters, digits, `-`, `_` or `.`"
        ));
    }
    let mut args: Vec<String> = words.map(str::to_owned).collect();
    // The provider adds `serve` itself: `hermes serve` and `hermes` name the same runtime.
    if args.last().is_some_and(|last| last == "serve") {
        args.pop();
    }
    let command = RuntimeCommand {
        program: PathBuf::from(program),
        args,
    };
    Ok((name.to_owned(), command))
}

/// `--sqlite-sync`'s modes.
#[derive(Clone, Copy, clap::ValueEnum)]
enum SqliteSync {
    Normal,
    Full,
}

impl From<SqliteSync> for edith_server::SqliteSynchronous {
    fn from(mode: SqliteSync) -> Self {
        match mode {
            SqliteSync::Normal => edith_server::SqliteSynchronous::Normal,
            SqliteSync::Full => edith_server::SqliteSynchronous::Full,
        }
    }
}

/// The default limits, with the operator's where given.
fn limits(serve: &Serve) -> edith_server::Limits {
    let defaults = edith_server::Limits::default();
    edith_server::Limits {
        requests_per_second: serve
            .requests_per_second
            .unwrap_or(defaults.requests_per_second),
        burst: serve.burst.unwrap_or(defaults.burst),
        streams_per_key: serve
            .streams_per_key
            .map_or(defaults.streams_per_key, |n| n as usize),
        max_connections: serve
            .max_connections
            .map_or(defaults.max_connections, |n| n as usize),
        live_session_idle: serve
            .live_session_idle
            .map_or(defaults.live_session_idle, std::time::Duration::from_secs),
        ..defaults
    }
}

fn listen_addr(raw: &str) -> Result<SocketAddr, String> {
    raw.parse()
        .map_err(|_| format!("`--listen {raw}` is not an address like 127.0.0.1:8080"))
}

/// Serves until SIGTERM or Ctrl-C. Prints `EDITH_READY url=http://<addr>` once it accepts
/// requests.
pub async fn run(serve: Serve) -> ExitCode {
    let limits = limits(&serve);
    let config = ServerConfig {
        listen: serve.listen,
        data_dir: serve.data_dir,
        database_url: serve.database_url.filter(|url| !url.is_empty()),
        sqlite_synchronous: serve.sqlite_sync.into(),
        replica: serve.replica.filter(|name| !name.is_empty()),
        lease: std::time::Duration::from_secs(serve.lease_seconds),
        advertise_url: serve.advertise_url.filter(|url| !url.is_empty()),
        // From the environment, never a flag: a flag shows in every process listing.
        admin_key: std::env::var(edith_server::ADMIN_KEY_VARIABLE)
            .ok()
            .filter(|k| !k.is_empty()),
        behind_tls_proxy: serve.behind_tls_proxy,
        runtimes: edith_server::builtin_runtimes()
            .into_iter()
            .chain(serve.runtimes)
            .collect(),
        limits,
        sim_provider: serve.sim_provider,
        external_hosts: (!serve.external_hosts.is_empty()).then_some(serve.external_hosts),
    };
    let server = match edith_server::start(config).await {
        Ok(server) => server,
        Err(e @ edith_server::StartError::Insecure(_)) => {
            eprintln!("edith: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("edith: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("EDITH_READY url={}", server.url());
    let displaced = tokio::select! {
        _ = wait_for_signal() => false,
        _ = server.displaced() => true,
    };
    server.shutdown().await;
    if displaced {
        tracing::error!(
            "another edith serve took this replica's name while this one could not renew it; \
             stopped"
        );
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> (String, PathBuf, Vec<String>) {
        let (name, command) = runtime_arg(raw).expect(raw);
        (name, command.program, command.args)
    }

    #[test]
    fn a_runtime_command_may_name_serve_or_leave_it_to_the_provider() {
        let hermes = ("hermes".to_owned(), PathBuf::from("/opt/hermes/bin/hermes"));
        for raw in [
            "hermes=/opt/hermes/bin/hermes serve",
            "hermes=/opt/hermes/bin/hermes",
            "hermes= /opt/hermes/bin/hermes  serve ",
        ] {
            let (name, program, args) = parsed(raw);
            assert_eq!((name, program), hermes, "{raw}");
            assert!(args.is_empty(), "{raw}: {args:?}");
        }
        // Words before `serve` stay, in order.
        let (_, program, args) = parsed("h=env HERMES_DISABLE_LAZY_INSTALLS=1 hermes serve");
        assert_eq!(program, PathBuf::from("env"));
        assert_eq!(args, ["HERMES_DISABLE_LAZY_INSTALLS=1", "hermes"]);
    }

    #[test]
    fn a_runtime_flag_without_a_name_or_a_command_is_refused() {
        for raw in [
            "hermes",
            "=hermes serve",
            "hermes=",
            "hermes=  ",
            "a b=hermes",
        ] {
            assert!(runtime_arg(raw).is_err(), "{raw}");
        }
    }
}
