//! `edith`: `edith serve` runs the control plane; the other commands are its clients, for
//! people at a terminal and for scripts (`--output json`), through the SDK.

mod chat;
mod client;
mod config;
mod logs;
mod output;
mod serve;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The EDITH control plane for Hermes agent runtimes, and its command-line client.
#[derive(Parser)]
#[command(name = "edith", version, arg_required_else_help = true)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

/// Which control plane the client commands talk to, and how they answer.
#[derive(Args, Clone)]
pub struct Target {
    /// The control plane's base URL (else what `edith login` saved, else
    /// http://127.0.0.1:8080).
    #[arg(long, global = true, env = "EDITH_URL")]
    pub url: Option<String>,
    /// An API key (`Authorization: Bearer …`; else what `edith login` saved). `edith serve`
    /// writes its first admin key to `<data-dir>/admin.key`.
    #[arg(long, global = true, env = "EDITH_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Tables for people, JSON for scripts.
    #[arg(long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the control plane (REST + SSE under /v1). Prints `EDITH_READY url=http://<addr>`
    /// once it accepts requests; stops cleanly on SIGTERM or Ctrl-C. Its first admin API key is
    /// `EDITH_API_KEY`; without it, one is made and written to `<data-dir>/admin.key`.
    Serve(serve::Serve),
    /// Print the control-plane contract (OpenAPI 3.1).
    Openapi,
    /// Runtime instances: list, get, create (waits until ready), delete.
    #[command(subcommand)]
    Instances(client::Instances),
    /// Profiles of an instance: list, get, create, delete, attach and detach tools.
    #[command(subcommand)]
    Profiles(client::Profiles),
    /// Sessions of a profile: list, get, create, delete.
    #[command(subcommand)]
    Sessions(client::Sessions),
    /// Turns: list, get, send one and follow it to its end, events, cancel, approve, answer.
    #[command(subcommand)]
    Turns(client::Turns),
    /// Provisioning and deletion jobs: an instance's list, get one, or follow it.
    #[command(subcommand)]
    Jobs(client::Jobs),
    /// API keys (admin): list, get, create, revoke.
    #[command(subcommand)]
    Keys(client::Keys),
    /// Callback tools: list, get, create, delete.
    #[command(subcommand)]
    Tools(client::Tools),
    /// Tool hosts, which serve callback tools: register, get, update, delete.
    #[command(subcommand)]
    ToolHosts(client::ToolHosts),
    /// The runtimes `process` instances may run, with their versions (`list`, or nothing).
    Runtimes {
        #[command(subcommand)]
        command: Option<client::Runtimes>,
    },
    /// Talk with a profile: streamed answers, tool calls as they happen, approvals and
    /// questions asked inline; Ctrl-C cancels the running turn, a second one quits.
    Chat(chat::Chat),
    /// Check the control plane and key given (flags or environment) and save them for the next
    /// commands, in a file only you can read (`EDITH_CONFIG` names another).
    Login,
    /// Print a shell completion script, e.g. `edith completions bash > /etc/bash_completion.d/edith`.
    Completions {
        /// `bash`, `zsh`, `fish`, `elvish` or `powershell`.
        shell: clap_complete::Shell,
    },
}

/// jemalloc hands memory freed after a burst of turns back to the system within about a second
/// when built in this workspace (its decay settings are in `.cargo/config.toml`); glibc's
/// allocator kept it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let (log_format, otlp_endpoint) = match &cli.command {
        Command::Serve(serve) => (serve.log_format(), serve.otlp_endpoint()),
        _ => (serve::LogFormat::Text, None),
    };
    let exporter = match logs::install(log_format, otlp_endpoint) {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!("edith: {e}");
            return ExitCode::from(2);
        }
    };
    let saved = config::load();
    // The saved key goes only to the control plane it was saved for.
    let saved_key = match (&cli.target.url, &saved.url) {
        (Some(given), Some(saved_url)) if given != saved_url => None,
        _ => saved.api_key,
    };
    let url = cli
        .target
        .url
        .clone()
        .or(saved.url)
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
    let api_key = cli.target.api_key.clone().or(saved_key);
    let client = || hermes::Hermes::remote(&url, api_key.as_deref());
    let out = cli.target.output;
    let done = match cli.command {
        Command::Serve(serve) => {
            let code = serve::run(serve).await;
            if let Some(exporter) = exporter {
                exporter.stop().await;
            }
            return code;
        }
        Command::Openapi => {
            let contract = serde_json::to_string_pretty(edith_server::openapi());
            println!("{}", contract.expect("JSON"));
            return ExitCode::SUCCESS;
        }
        Command::Instances(command) => client::instances(&client(), command, out).await,
        Command::Profiles(command) => client::profiles(&client(), command, out).await,
        Command::Sessions(command) => client::sessions(&client(), command, out).await,
        Command::Turns(command) => client::turns(&client(), command, out).await,
        Command::Jobs(command) => client::jobs(&client(), command, out).await,
        Command::Keys(command) => client::keys(&client(), command, out).await,
        Command::Tools(command) => client::tools(&client(), command, out).await,
        Command::ToolHosts(command) => client::tool_hosts(&client(), command, out).await,
        // `list` is all there is to do with runtimes; `edith runtimes` alone does it too.
        Command::Runtimes { command: _ } => client::runtimes(&client(), out).await,
        Command::Chat(chat) => chat::run(&client(), chat).await,
        Command::Login => login(&client(), &url, api_key.as_deref()).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "edith", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edith: {}", output::explain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Saves `url` and `api_key` once the control plane has accepted them.
async fn login(hermes: &hermes::Hermes, url: &str, api_key: Option<&str>) -> output::Done {
    hermes
        .instances()
        .list(&hermes::PageRequest {
            cursor: None,
            limit: Some(1),
        })
        .await?;
    let saved = config::Saved {
        url: Some(url.to_owned()),
        api_key: api_key.map(str::to_owned),
    };
    match config::save(&saved) {
        Ok(path) => {
            println!("logged in to {url}; saved in {}", path.display());
            Ok(())
        }
        Err(e) => Err(output::Failure::Said(format!("cannot save the login: {e}"))),
    }
}
