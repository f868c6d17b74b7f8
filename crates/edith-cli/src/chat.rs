//! `edith chat`: a conversation with a profile at the terminal. Each line is a turn; answers
//! stream as they come, tool calls show as they happen, approvals and questions are asked
//! inline. Ctrl-C cancels the running turn; a second Ctrl-C (or end of input) quits. The
//! session id is printed so the conversation can be taken up again with `--session`.

use std::io::Write;

use clap::Args;
use edith_types::{ApprovalChoice, InstanceId, ProfileId, SessionId, TurnEventKind};
use futures_util::StreamExt;
use hermes::{Hermes, Result, SessionHandle, TurnHandle};

use crate::output::Done;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;

#[derive(Args)]
pub struct Chat {
    /// The instance (its id, `inst_…`).
    instance: InstanceId,
    /// The profile to talk to (its id, `prof_…`).
    profile: ProfileId,
    /// Go on with this session instead of starting one.
    #[arg(long)]
    session: Option<SessionId>,
}

/// The lines typed, read by a thread of their own: a read blocked on the terminal must not keep
/// the program from quitting (a blocked runtime read would).
type Input = mpsc::Receiver<String>;

fn typed_lines() -> Input {
    let (lines, input) = mpsc::channel(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if lines.blocking_send(line).is_err() {
                break;
            }
        }
    });
    input
}

pub async fn run(hermes: &Hermes, chat: Chat) -> Done {
    let profile = hermes.instance(&chat.instance).profile(&chat.profile);
    let session = match &chat.session {
        Some(id) => {
            let session = profile.session(id);
            session.get().await?;
            session
        }
        None => profile.sessions().create().await?,
    };
    eprintln!(
        "session {} (take it up again with --session {}); Ctrl-C cancels a turn, twice quits",
        session.id(),
        session.id()
    );
    let mut input = typed_lines();
    // One listener for the whole conversation: a Ctrl-C pressed while a request is on its way is
    // kept for the next wait rather than lost.
    let mut interrupts = signal(SignalKind::interrupt())
        .map_err(|e| crate::output::Failure::Said(format!("cannot listen for Ctrl-C: {e}")))?;
    loop {
        prompt("> ");
        let line = tokio::select! {
            line = input.recv() => line,
            _ = interrupts.recv() => return Ok(()),
        };
        let Some(line) = line else {
            return Ok(());
        };
        if line.trim().is_empty() {
            continue;
        }
        match converse(&session, &line, &mut input, &mut interrupts).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            // The conversation goes on: a turn refused (one still running, say) or a dropped
            // connection is said, and the next line is another try.
            Err(e) => eprintln!("\n[{}]", crate::output::explain(&e.into())),
        }
    }
}

/// What became of a question put to the user.
enum Asked {
    Answered,
    /// Ctrl-C: the turn is being cancelled.
    Cancelled,
    /// Ctrl-C once more, after a cancel: quit.
    Quit,
}

/// Ctrl-C while a question waits: the first cancels the turn, the next quits.
async fn interrupted(turn: &TurnHandle, cancelled: bool) -> Result<Asked> {
    if cancelled {
        return Ok(Asked::Quit);
    }
    eprintln!("\n[cancelling; Ctrl-C again quits]");
    turn.cancel().await?;
    Ok(Asked::Cancelled)
}

fn prompt(text: &str) {
    print!("{text}");
    let _ = std::io::stdout().flush();
}

/// Runs one turn to its end; false when the user asked to quit.
async fn converse(
    session: &SessionHandle,
    line: &str,
    input: &mut Input,
    interrupts: &mut Signal,
) -> Result<bool> {
    let turn = session.send(line).await?;
    let mut events = turn.events();
    let mut cancelled = false;
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = interrupts.recv() => {
                if cancelled {
                    return Ok(false);
                }
                cancelled = true;
                eprintln!("\n[cancelling; Ctrl-C again quits]");
                turn.cancel().await?;
                continue;
            }
        };
        let Some(event) = event else {
            return Ok(true);
        };
        match event?.kind {
            TurnEventKind::MessageDelta { text } => prompt(&text),
            TurnEventKind::ToolStarted { name, .. } => println!("\n[tool {name} …]"),
            TurnEventKind::ToolCompleted { name, result, .. } => {
                println!("[tool {name} -> {result}]")
            }
            TurnEventKind::ApprovalRequested {
                command, choices, ..
            } => match approve(&turn, &command, &choices, input, interrupts, cancelled).await? {
                Asked::Answered => {}
                Asked::Cancelled => cancelled = true,
                Asked::Quit => return Ok(false),
            },
            TurnEventKind::ClarifyRequested {
                request_id,
                question,
                choices,
                ..
            } => {
                let choices = if choices.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", choices.join(", "))
                };
                prompt(&format!("\n{question}{choices}: "));
                let answer = tokio::select! {
                    answer = input.recv() => answer.unwrap_or_default(),
                    _ = interrupts.recv() => match interrupted(&turn, cancelled).await? {
                        Asked::Quit => return Ok(false),
                        _ => {
                            cancelled = true;
                            continue;
                        }
                    },
                };
                turn.answer(&request_id, answer.trim()).await?;
            }
            TurnEventKind::TurnFinished { state, error, .. } => {
                println!();
                if let Some(error) = error {
                    eprintln!("[turn {}: {error}]", state.as_str());
                }
                return Ok(true);
            }
            _ => {}
        }
    }
}

/// Asks whether the command may run, until the answer is one of `choices`; Ctrl-C cancels
/// the turn instead (or quits, when it was cancelled already).
async fn approve(
    turn: &TurnHandle,
    command: &str,
    choices: &[String],
    input: &mut Input,
    interrupts: &mut Signal,
    cancelled: bool,
) -> Result<Asked> {
    loop {
        prompt(&format!("\nrun `{command}`? [{}]: ", choices.join("/")));
        let answer = tokio::select! {
            answer = input.recv() => answer.unwrap_or_default(),
            _ = interrupts.recv() => return interrupted(turn, cancelled).await,
        };
        let answer = answer.trim();
        // End of input answers `deny`: nothing runs without a yes.
        let answer = if answer.is_empty() { "deny" } else { answer };
        if let Ok(choice) = answer.parse::<ApprovalChoice>() {
            turn.approve(choice).await?;
            return Ok(Asked::Answered);
        }
        eprintln!("answer one of: {}", choices.join(", "));
    }
}
