//! The client commands: each resource's list, get, create and delete, through the SDK.

use clap::Subcommand;
use edith_types::{
    ApiKeyId, ApprovalChoice, CreateApiKey, CreateInstance, CreateSession, InstanceFilter,
    InstanceId, InstanceState, JobEventKind, JobId, ProfileId, ProviderKind, RegisterTool,
    RegisterToolHost, Scope, SessionId, ToolHostId, ToolId, TurnAction, TurnEventKind, TurnFilter,
    TurnId, TurnState, UpdateToolHost,
};
use futures_util::StreamExt;
use hermes::{Hermes, PageRequest, ProfileSpec, Result};

use crate::Output;
use crate::output::{self, Done, Failure};

/// Every item of a paginated list, page after page.
async fn all<T, F, Fut>(mut fetch: F) -> Result<Vec<T>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = Result<edith_types::Page<T>>>,
{
    let mut items = Vec::new();
    let mut page = PageRequest {
        cursor: None,
        limit: Some(200),
    };
    loop {
        let fetched = fetch(page.clone()).await?;
        items.extend(fetched.items);
        match fetched.next_cursor {
            Some(cursor) => page.cursor = Some(cursor),
            None => return Ok(items),
        }
    }
}

fn provider_arg(raw: &str) -> std::result::Result<ProviderKind, String> {
    raw.parse()
        .map_err(|_| format!("`{raw}` is not a provider: embedded, process, external or sim"))
}

fn state_arg(raw: &str) -> std::result::Result<InstanceState, String> {
    InstanceState::parse(raw).ok_or_else(|| format!("`{raw}` is not an instance state"))
}

fn turn_state_arg(raw: &str) -> std::result::Result<TurnState, String> {
    TurnState::parse(raw).ok_or_else(|| format!("`{raw}` is not a turn state"))
}

fn label_arg(raw: &str) -> std::result::Result<(String, String), String> {
    raw.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("`{raw}` is not key=value"))
}

fn schema_arg(raw: &str) -> std::result::Result<serde_json::Value, String> {
    serde_json::from_str(raw).map_err(|e| format!("`--schema` is not JSON: {e}"))
}

fn scope_arg(raw: &str) -> std::result::Result<Scope, String> {
    raw.parse()
        .map_err(|_| format!("`{raw}` is not a scope: read, write or admin"))
}

#[derive(Subcommand)]
pub enum Instances {
    /// List instances, optionally only those in a state or with a label.
    List {
        /// e.g. `ready`, `lost`.
        #[arg(long, value_parser = state_arg)]
        state: Option<InstanceState>,
        /// `key=value`.
        #[arg(long)]
        label: Option<String>,
    },
    /// Show one instance.
    Get {
        /// The instance's id (`inst_…`).
        id: InstanceId,
    },
    /// Create an instance and wait until it is ready, showing its provisioning steps.
    Create {
        /// A name for it (what lists show).
        name: String,
        /// `embedded` (default) or `process`.
        #[arg(long, default_value = "embedded", value_parser = provider_arg)]
        provider: ProviderKind,
        /// For `process`: which runtime (see `edith runtimes`).
        #[arg(long)]
        runtime: Option<String>,
        /// A label to find it by, `key=value` (repeatable).
        #[arg(long = "label", value_parser = label_arg)]
        labels: Vec<(String, String)>,
        /// Follow the provisioning job to its end, a line (at a terminal, a progress bar) per
        /// step, then show the instance (the default).
        #[arg(long, conflicts_with = "no_wait")]
        wait: bool,
        /// Return at once instead of following the provisioning job.
        #[arg(long)]
        no_wait: bool,
    },
    /// Delete an instance and wait until its runtime is gone.
    Delete {
        /// The instance's id (`inst_…`).
        id: InstanceId,
    },
}

pub async fn instances(hermes: &Hermes, command: Instances, out: Output) -> Done {
    match command {
        Instances::List { state, label } => {
            let filter = InstanceFilter { state, label };
            let filter = &filter;
            let items =
                all(|page| async move { hermes.instances().list_where(filter, &page).await })
                    .await?;
            output::list(&items, out);
        }
        Instances::Get { id } => output::one(&hermes.instance(&id).get().await?, out),
        Instances::Create {
            name,
            provider,
            runtime,
            labels,
            no_wait,
            wait: _,
        } => {
            let spec = CreateInstance {
                provider,
                runtime,
                labels: labels.into_iter().collect(),
                ..CreateInstance::named(&name)
            };
            let creation = hermes.instances().create_with(&spec).await?;
            if no_wait {
                let job = &creation.job.id;
                eprintln!("provisioning: `edith jobs get {job} --follow` follows it");
            } else {
                follow_job(hermes, &creation.job.id, out).await?;
            }
            output::one(&creation.handle().get().await?, out);
        }
        Instances::Delete { id } => {
            let handle = hermes.instance(&id);
            let mut instance = handle.get().await?;
            handle.delete().await?;
            instance.state = InstanceState::Deleted;
            match out {
                Output::Table => println!("deleted {id}"),
                Output::Json => output::json(&instance),
            }
        }
    }
    Ok(())
}

/// Follows a job's steps to its end, on stderr (the answer on stdout stays clean): at a
/// terminal a progress bar per step (a spinner while it runs, ✓ or ✗ when it ends), otherwise
/// a line per step; a failure shows the step and the reason.
async fn follow_job(hermes: &Hermes, job: &JobId, out: Output) -> Done {
    use std::io::IsTerminal;
    let people = out == Output::Table;
    // Bars need a terminal that can move its cursor; a dumb one (or none named) gets lines.
    let capable = std::env::var("TERM").is_ok_and(|term| !term.is_empty() && term != "dumb");
    let bars =
        (people && capable && std::io::stderr().is_terminal()).then(indicatif::MultiProgress::new);
    let mut running: Option<(String, indicatif::ProgressBar)> = None;
    let mut events = hermes.sdk().job_events(job, 0);
    while let Some(event) = events.next().await {
        match event?.kind {
            JobEventKind::StepStarted { step, index, of } => {
                let label = format!("[{index}/{of}] {step}");
                match &bars {
                    Some(bars) => {
                        let bar = bars.add(indicatif::ProgressBar::new_spinner());
                        bar.set_style(
                            indicatif::ProgressStyle::with_template("{spinner} {msg}")
                                .expect("a valid template"),
                        );
                        bar.set_message(label);
                        bar.enable_steady_tick(std::time::Duration::from_millis(100));
                        running = Some((step, bar));
                    }
                    None if people => eprintln!("{label} …"),
                    None => {}
                }
            }
            // A finished step is printed as a line above the bars, not left to the bar: bars
            // are redrawn at most some times a second, so a quick step's last state might never
            // be drawn.
            JobEventKind::StepCompleted { step, index, of } => {
                if let (Some((_, bar)), Some(bars)) = (running.take(), &bars) {
                    bar.finish_and_clear();
                    let _ = bars.println(format!("✓ [{index}/{of}] {step}"));
                }
            }
            JobEventKind::JobFinished {
                instance_state,
                error,
                ..
            } => {
                if let (Some((step, bar)), Some(bars)) = (running.take(), &bars) {
                    let reason = error.as_deref().unwrap_or("stopped");
                    bar.finish_and_clear();
                    let _ = bars.println(format!("✗ {step}: {reason}"));
                }
                match error {
                    Some(error) => return Err(Failure::Said(format!("the job failed: {error}"))),
                    None if people => eprintln!("instance {}", instance_state.as_str()),
                    None => {}
                }
            }
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Profiles {
    /// List an instance's profiles.
    List {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
    },
    /// Show one profile.
    Get {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile's id (`prof_…`).
        id: ProfileId,
    },
    /// Create a profile (the scripted offline model; attach tools with `--tool`).
    Create {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// A name for it; the runtime's native profile is named after it.
        name: String,
        /// A callback tool to attach (repeatable).
        #[arg(long = "tool")]
        tools: Vec<ToolId>,
    },
    /// Delete a profile with its sessions and turns.
    Delete {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile's id (`prof_…`).
        id: ProfileId,
    },
    /// Give a profile a callback tool (its next sessions are offered it).
    AttachTool {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile's id (`prof_…`).
        id: ProfileId,
        /// The tool's id (`tool_…`).
        tool: ToolId,
    },
    /// Take a callback tool from a profile.
    DetachTool {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile's id (`prof_…`).
        id: ProfileId,
        /// The tool's id (`tool_…`).
        tool: ToolId,
    },
}

pub async fn profiles(hermes: &Hermes, command: Profiles, out: Output) -> Done {
    match command {
        Profiles::List { instance } => {
            let profiles = hermes.instance(&instance).profiles();
            let items = all(|page| {
                let profiles = &profiles;
                async move { profiles.list(&page).await }
            })
            .await?;
            output::list(&items, out);
        }
        Profiles::Get { instance, id } => {
            output::one(&hermes.instance(&instance).profile(&id).get().await?, out)
        }
        Profiles::Create {
            instance,
            name,
            tools,
        } => {
            let mut spec = ProfileSpec::new(&name);
            for tool in &tools {
                spec = spec.tool(&hermes.sdk().tool_get(tool).await?);
            }
            let profile = hermes.instance(&instance).profiles().create(spec).await?;
            output::one(&profile.get().await?, out);
        }
        Profiles::Delete { instance, id } => {
            let deleted = hermes.instance(&instance).profile(&id).delete().await?;
            output::one(&deleted, out);
        }
        Profiles::AttachTool { instance, id, tool } => {
            let profile = hermes.instance(&instance).profile(&id);
            output::one(&profile.attach_tool(&tool).await?, out);
        }
        Profiles::DetachTool { instance, id, tool } => {
            let profile = hermes.instance(&instance).profile(&id);
            output::one(&profile.detach_tool(&tool).await?, out);
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Sessions {
    /// List a profile's sessions.
    List {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
    },
    /// Show one session.
    Get {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
        /// The session's id (`sess_…`).
        id: SessionId,
    },
    /// Create a session.
    Create {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
        /// A title for the session.
        #[arg(long)]
        title: Option<String>,
    },
    /// Delete a session with its turns.
    Delete {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
        /// The session's id (`sess_…`).
        id: SessionId,
    },
}

pub async fn sessions(hermes: &Hermes, command: Sessions, out: Output) -> Done {
    match command {
        Sessions::List { instance, profile } => {
            let sessions = hermes.instance(&instance).profile(&profile).sessions();
            let items = all(|page| {
                let sessions = &sessions;
                async move { sessions.list(&page).await }
            })
            .await?;
            output::list(&items, out);
        }
        Sessions::Get {
            instance,
            profile,
            id,
        } => {
            let session = hermes.instance(&instance).profile(&profile).session(&id);
            output::one(&session.get().await?, out);
        }
        Sessions::Create {
            instance,
            profile,
            title,
        } => {
            let body = CreateSession {
                title,
                resume_native_session_id: None,
            };
            let profile = hermes.instance(&instance).profile(&profile);
            let session = profile.sessions().create_with(body).await?;
            output::one(&session.get().await?, out);
        }
        Sessions::Delete {
            instance,
            profile,
            id,
        } => {
            let session = hermes.instance(&instance).profile(&profile).session(&id);
            output::one(&session.delete().await?, out);
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Turns {
    /// List a session's turns, oldest first, optionally only those in a state.
    List {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
        /// The session (its id, `sess_…`).
        #[arg(long)]
        session: SessionId,
        /// e.g. `requires_action`, `completed`.
        #[arg(long, value_parser = turn_state_arg)]
        state: Option<TurnState>,
    },
    /// Send `input` on a session and stream the answer until the turn ends (a turn that waits
    /// for an approval or a question is left waiting: answer it in `edith chat`).
    Send {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
        /// The profile (its id, `prof_…`).
        #[arg(long)]
        profile: ProfileId,
        /// The session (its id, `sess_…`).
        #[arg(long)]
        session: SessionId,
        /// What the user says.
        input: String,
    },
    /// Show one turn.
    Get {
        #[command(flatten)]
        turn: TurnRef,
    },
    /// Print a turn's event log, a line per event (JSON with `--output json`); a turn still
    /// running is followed to its end (Ctrl-C stops).
    Events {
        #[command(flatten)]
        turn: TurnRef,
    },
    /// Cancel a running turn (it ends `cancelled`).
    Cancel {
        #[command(flatten)]
        turn: TurnRef,
    },
    /// Answer the approval a `requires_action` turn waits for: `once`, `session`, `always` or
    /// `deny`.
    Approve {
        #[command(flatten)]
        turn: TurnRef,
        /// `once`, `session`, `always` or `deny`.
        #[arg(long, value_parser = choice_arg)]
        choice: ApprovalChoice,
    },
    /// Answer the question `--request` (from its `clarify.requested` event) a turn waits for.
    Answer {
        #[command(flatten)]
        turn: TurnRef,
        #[arg(long)]
        /// The question's `request_id` (from its `clarify.requested` event).
        request: String,
        /// The answer: one of the question's choices, or any text.
        answer: String,
    },
}

/// Which turn: its id and where it lives.
#[derive(clap::Args)]
pub struct TurnRef {
    /// The instance (its id, `inst_…`).
    #[arg(long)]
    instance: InstanceId,
    /// The profile (its id, `prof_…`).
    #[arg(long)]
    profile: ProfileId,
    /// The session (its id, `sess_…`).
    #[arg(long)]
    session: SessionId,
    /// The turn's id (`turn_…`).
    id: TurnId,
}

fn choice_arg(raw: &str) -> std::result::Result<ApprovalChoice, String> {
    raw.parse()
        .map_err(|_| format!("`{raw}` is not a choice: once, session, always or deny"))
}

/// Shows, cancels or answers one turn.
async fn turn_command(hermes: &Hermes, command: Turns, out: Output) -> Done {
    let sdk = hermes.sdk();
    let at = |t: &TurnRef| {
        (
            t.instance.clone(),
            t.profile.clone(),
            t.session.clone(),
            t.id.clone(),
        )
    };
    let turn = match command {
        Turns::Get { turn } => {
            let (i, p, s, t) = at(&turn);
            sdk.turn_get(&i, &p, &s, &t).await?
        }
        Turns::Cancel { turn } => {
            let (i, p, s, t) = at(&turn);
            sdk.turn_cancel(&i, &p, &s, &t).await?
        }
        Turns::Approve { turn, choice } => {
            let (i, p, s, t) = at(&turn);
            let action = TurnAction::Approval { choice, all: false };
            sdk.turn_action(&i, &p, &s, &t, &action).await?
        }
        Turns::Answer {
            turn,
            request,
            answer,
        } => {
            let (i, p, s, t) = at(&turn);
            let action = TurnAction::Clarify {
                request_id: request,
                answer,
            };
            sdk.turn_action(&i, &p, &s, &t, &action).await?
        }
        Turns::Events { turn } => {
            let (i, p, s, t) = at(&turn);
            return turn_events(sdk, (&i, &p, &s, &t), out).await;
        }
        Turns::List { .. } | Turns::Send { .. } => unreachable!("handled by `turns`"),
    };
    output::one(&turn, out);
    Ok(())
}

/// Prints a turn's events from the first: a line each for people, JSON for scripts. A turn
/// still running is followed to its end, like `jobs get --follow`.
async fn turn_events(
    sdk: &hermes::EdithHermes,
    (instance, profile, session, turn): (&InstanceId, &ProfileId, &SessionId, &TurnId),
    out: Output,
) -> Done {
    let mut events = sdk.turn_events(instance, profile, session, turn, 0);
    while let Some(event) = events.next().await {
        let event = event?;
        match out {
            Output::Json => println!("{}", serde_json::to_string(&event).expect("JSON")),
            Output::Table => println!("{}", output::event_line(&event)),
        }
    }
    Ok(())
}

pub async fn turns(hermes: &Hermes, command: Turns, out: Output) -> Done {
    let (instance, profile, session, input) = match command {
        Turns::List {
            instance,
            profile,
            session,
            state,
        } => {
            let sdk = hermes.sdk();
            let (i, p, s) = (&instance, &profile, &session);
            let filter = &TurnFilter { state };
            let items =
                all(|page| async move { sdk.turn_list(i, p, s, filter, &page).await }).await?;
            output::list(&items, out);
            return Ok(());
        }
        Turns::Send {
            instance,
            profile,
            session,
            input,
        } => (instance, profile, session, input),
        other => return turn_command(hermes, other, out).await,
    };
    let session = hermes
        .instance(&instance)
        .profile(&profile)
        .session(&session);
    // The turn's events in the reply to the request that starts it.
    let mut events = session.stream(&input).await?;
    let people = out == Output::Table;
    while let Some(event) = events.next().await {
        let event = event?;
        if !people {
            println!("{}", serde_json::to_string(&event).expect("JSON"));
        }
        match event.kind {
            TurnEventKind::MessageDelta { text } if people => print!("{text}"),
            TurnEventKind::ToolCompleted { name, result, .. } if people => {
                println!("[tool {name} -> {result}]")
            }
            TurnEventKind::ApprovalRequested { command, .. } => {
                if people {
                    println!("\n[waiting for an approval of `{command}`: answer in `edith chat`]");
                }
                return Ok(());
            }
            TurnEventKind::ClarifyRequested { question, .. } => {
                if people {
                    println!("\n[waiting for an answer to `{question}`: answer in `edith chat`]");
                }
                return Ok(());
            }
            TurnEventKind::TurnFinished { state, error, .. } => {
                if people {
                    println!();
                }
                if state != TurnState::Completed {
                    let why = error.unwrap_or_default();
                    return Err(Failure::Said(format!(
                        "the turn ended {}: {why}",
                        state.as_str()
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Jobs {
    /// List an instance's jobs (its provisioning, its deletion), oldest first.
    List {
        /// The instance (its id, `inst_…`).
        #[arg(long)]
        instance: InstanceId,
    },
    /// Show a job; with `--follow`, follow its steps to its end first.
    Get {
        /// The job's id (`job_…`).
        id: JobId,
        /// Follow its steps to its end first.
        #[arg(long)]
        follow: bool,
    },
}

pub async fn jobs(hermes: &Hermes, command: Jobs, out: Output) -> Done {
    match command {
        Jobs::List { instance } => output::list(&hermes.instance(&instance).jobs().await?, out),
        Jobs::Get { id, follow } => {
            if follow {
                follow_job(hermes, &id, out).await?;
            }
            output::one(&hermes.sdk().job_get(&id).await?, out);
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Keys {
    /// List API keys (never their secrets).
    List,
    /// Show one key (never its secret).
    Get {
        /// The key's id (`key_…`).
        id: ApiKeyId,
    },
    /// Create a key; its secret is shown this once.
    Create {
        /// A name to know it by.
        name: String,
        /// `read`, `write` or `admin`.
        #[arg(long, value_parser = scope_arg)]
        scope: Scope,
    },
    /// Revoke a key.
    Revoke {
        /// The key's id (`key_…`).
        id: ApiKeyId,
    },
}

pub async fn keys(hermes: &Hermes, command: Keys, out: Output) -> Done {
    let sdk = hermes.sdk();
    match command {
        Keys::List => {
            let items = all(|page| async move { sdk.key_list(&page).await }).await?;
            output::list(&items, out);
        }
        Keys::Create { name, scope } => {
            let body = CreateApiKey {
                name,
                scope,
                instances: None,
            };
            let created = sdk.key_create(&body).await?;
            match out {
                Output::Json => output::json(&created),
                Output::Table => {
                    output::one(&created.key, out);
                    println!("secret (shown once): {}", created.secret);
                }
            }
        }
        Keys::Get { id } => output::one(&sdk.key_get(&id).await?, out),
        Keys::Revoke { id } => output::one(&sdk.key_revoke(&id).await?, out),
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum Tools {
    /// List callback tools.
    List,
    /// Show one tool.
    Get {
        /// The tool's id (`tool_…`).
        id: ToolId,
    },
    /// Register a callback tool served by a tool host (see `ToolHost` in the SDK).
    Create {
        /// What models call it: a letter, then letters, digits, `_` or `-`.
        name: String,
        /// What it does, for the model.
        #[arg(long)]
        description: String,
        /// The tool host that serves it.
        #[arg(long)]
        host: ToolHostId,
        /// JSON Schema of its arguments (an object).
        #[arg(long, default_value = r#"{"type": "object"}"#, value_parser = schema_arg)]
        schema: serde_json::Value,
    },
    /// Delete a tool no profile uses.
    Delete {
        /// The tool's id (`tool_…`).
        id: ToolId,
    },
}

pub async fn tools(hermes: &Hermes, command: Tools, out: Output) -> Done {
    let sdk = hermes.sdk();
    match command {
        Tools::List => {
            let items = all(|page| async move { sdk.tool_list(&page).await }).await?;
            output::list(&items, out);
        }
        Tools::Get { id } => output::one(&sdk.tool_get(&id).await?, out),
        Tools::Create {
            name,
            description,
            host,
            schema,
        } => {
            let body = RegisterTool {
                name,
                description,
                input_schema: schema,
                host_id: host,
            };
            output::one(&sdk.tool_register(&body).await?, out);
        }
        Tools::Delete { id } => output::one(&sdk.tool_delete(&id).await?, out),
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum ToolHosts {
    /// Register the MCP endpoint of a tool host (an SDK `ToolHost` served on its own). Its
    /// secret, which the control plane sends it on every call, comes from
    /// `EDITH_TOOL_HOST_SECRET` or, without it, from the first line of standard input; never
    /// from an argument, which other users of the machine can see.
    Register {
        /// Its `http://` MCP endpoint, reachable from the control plane.
        endpoint: String,
    },
    /// List the tool hosts (never their secrets).
    List,
    /// Show one tool host (never its secret).
    Get {
        /// The tool host's id (`th_…`).
        id: ToolHostId,
    },
    /// Change a tool host's endpoint, or its secret (`--new-secret`: read as `register` reads
    /// it).
    Update {
        /// The tool host's id (`th_…`).
        id: ToolHostId,
        /// Its new `http://` MCP endpoint (`--url` is the control plane's).
        #[arg(long)]
        endpoint: Option<String>,
        /// Give it a new secret.
        #[arg(long)]
        new_secret: bool,
    },
    /// Delete a tool host no tool uses.
    Delete {
        /// The tool host's id (`th_…`).
        id: ToolHostId,
    },
}

/// The variable a tool host's secret is read from.
const TOOL_HOST_SECRET: &str = "EDITH_TOOL_HOST_SECRET";

/// A tool host's secret: from `EDITH_TOOL_HOST_SECRET`, else the first line of standard input
/// (typed at a terminal, it is not echoed).
fn tool_host_secret() -> std::result::Result<String, Failure> {
    use std::io::IsTerminal;
    let secret = match std::env::var(TOOL_HOST_SECRET) {
        Ok(secret) => secret,
        Err(_) if std::io::stdin().is_terminal() => {
            let term = console::Term::stderr();
            let _ = term.write_str("Tool host secret (not shown): ");
            term.read_secure_line().map_err(|e| {
                Failure::Said(format!("could not read the secret at the terminal: {e}"))
            })?
        }
        Err(_) => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map_err(|e| {
                Failure::Said(format!(
                    "could not read the secret from standard input: {e}"
                ))
            })?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    if secret.is_empty() {
        return Err(Failure::Said(format!(
            "no secret: set {TOOL_HOST_SECRET} or give it on standard input"
        )));
    }
    Ok(secret)
}

pub async fn tool_hosts(hermes: &Hermes, command: ToolHosts, out: Output) -> Done {
    let sdk = hermes.sdk();
    let host = match command {
        ToolHosts::List => {
            let items = all(|page| async move { sdk.tool_host_list(&page).await }).await?;
            output::list(&items, out);
            return Ok(());
        }
        ToolHosts::Register { endpoint } => {
            let body = RegisterToolHost {
                url: endpoint,
                secret: tool_host_secret()?,
            };
            sdk.tool_host_register(&body).await?
        }
        ToolHosts::Get { id } => sdk.tool_host_get(&id).await?,
        ToolHosts::Update {
            id,
            endpoint,
            new_secret,
        } => {
            let secret = new_secret.then(tool_host_secret).transpose()?;
            let body = UpdateToolHost {
                url: endpoint,
                secret,
            };
            sdk.tool_host_update(&id, &body).await?
        }
        ToolHosts::Delete { id } => sdk.tool_host_delete(&id).await?,
    };
    output::one(&host, out);
    Ok(())
}

#[derive(Subcommand)]
pub enum Runtimes {
    /// List the runtimes `process` instances may run, with the version each reports (what
    /// `edith runtimes` alone shows too).
    List,
}

pub async fn runtimes(hermes: &Hermes, out: Output) -> Done {
    let items = hermes.sdk().runtime_list().await?;
    output::list(&items, out);
    Ok(())
}
