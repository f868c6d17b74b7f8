//! Commands that run `sudo`, handled as Hermes handles them: the password comes from
//! `SUDO_PASSWORD` (the home's `.env` or the environment), else from what the user gave earlier
//! in the session, else — when `sudo` does not run without one — from the user, asked with
//! `sudo.request` (120 s, then `sudo.expire`). Given a password, each `sudo` the shell runs
//! reads it from the command's input (`sudo -S`); without one the command runs as it is and
//! sudo says it needs a password.

use std::time::Duration;

use hermes_native::NativeEvent;
use hermes_native::events::PendingRequest;

use super::TurnContext;
use super::hardline;

/// How long the user has to give the password.
const ASK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `sudo -n true` may take to say whether a password is needed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const PASSWORD_VARIABLE: &str = "SUDO_PASSWORD";

/// What sudo prints when it refused the password it was given.
const WRONG_PASSWORD: &[&str] = &[
    "sudo: authentication failed",
    "sudo: incorrect password attempt",
    "sudo: maximum 3 incorrect authentication attempts",
    "sudo: 3 incorrect password attempts",
];

/// A command ready to run: with sudo reading its password from `stdin` when there is one.
pub struct Prepared {
    pub command: String,
    pub stdin: Option<String>,
    /// The password given to sudo, kept out of what the command prints.
    password: Option<String>,
}

/// Why a command is refused before it runs: it feeds sudo a password of its own (`sudo -S`)
/// while none is configured — guessing passwords, which Hermes never allows, in any mode.
pub fn guessing_password(ctx: &TurnContext<'_>, command: &str) -> Option<&'static str> {
    let feeds_sudo = hardline::commands(command).iter().any(|words| {
        let words = after_assignments(words);
        words.first().is_some_and(|w| w == "sudo")
            && words[1..]
                .iter()
                .take_while(|w| w.starts_with('-') && *w != "--")
                .any(|w| w == "--stdin" || (!w.starts_with("--") && w[1..].contains('S')))
    });
    (feeds_sudo && configured(ctx).is_none())
        .then_some("sudo password guessing via stdin (sudo -S)")
}

/// The command as it will run, asking the user for the password if it must.
pub async fn prepare(ctx: &TurnContext<'_>, command: &str) -> Prepared {
    let unchanged = || Prepared {
        command: command.to_owned(),
        stdin: None,
        password: None,
    };
    let count = invocations(command);
    if count == 0 {
        return unchanged();
    }
    let known = configured(ctx).or_else(|| {
        let state = ctx.session.state.lock().expect("not poisoned");
        state.sudo_password.clone()
    });
    let password = match known {
        Some(password) => password,
        None if runs_without_password().await => return unchanged(),
        None => match ask(ctx).await {
            Some(password) => {
                ctx.session
                    .state
                    .lock()
                    .expect("not poisoned")
                    .sudo_password = Some(password.clone());
                password
            }
            None => return unchanged(),
        },
    };
    // A function in front of the command: every `sudo` this shell runs reads one line of the
    // input for its password, and prints no prompt.
    Prepared {
        command: format!("sudo() {{ command sudo -S -p '' \"$@\"; }}\n{command}"),
        stdin: Some(format!("{password}\n").repeat(count)),
        password: Some(password),
    }
}

/// `SUDO_PASSWORD` as the session's home sees it (an empty one counts: sudo is tried with it).
fn configured(ctx: &TurnContext<'_>) -> Option<String> {
    ctx.runtime.env_var(&ctx.session.home, PASSWORD_VARIABLE)
}

/// After the command: the password is kept out of what it printed (a command can read its own
/// input back), and a password sudo refused is forgotten — one the config gives is the
/// operator's to mend — with the output saying so.
pub fn after_run(ctx: &TurnContext<'_>, prepared: &Prepared, output: &mut String) {
    let Some(password) = &prepared.password else {
        return;
    };
    if password.chars().count() >= 3 {
        *output = output.replace(password.as_str(), "[REDACTED]");
    }
    if configured(ctx).is_some() {
        return;
    }
    let lowered = output.to_lowercase();
    if !WRONG_PASSWORD.iter().any(|marker| lowered.contains(marker)) {
        return;
    }
    let forgotten = ctx
        .session
        .state
        .lock()
        .expect("not poisoned")
        .sudo_password
        .take()
        .is_some();
    if forgotten {
        output.push_str(
            "\n\n⚠️ Sudo authentication failed — cached password cleared. You will be prompted \
             again on the next sudo command.",
        );
    }
}

/// How many `sudo` the shell would run (not a `sudo` quoted or passed as an argument).
fn invocations(command: &str) -> usize {
    hardline::commands(command)
        .iter()
        .filter(|words| {
            after_assignments(words)
                .first()
                .is_some_and(|w| w == "sudo")
        })
        .count()
}

fn after_assignments(words: &[String]) -> &[String] {
    let assignments = words
        .iter()
        .take_while(|w| w.contains('=') && !w.starts_with('-'))
        .count();
    &words[assignments..]
}

/// Whether sudo runs here without a password (`sudo -n true`); a sudo that cannot be run at
/// all needs one as much.
async fn runs_without_password() -> bool {
    let probe = tokio::process::Command::new("sudo")
        .args(["-n", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Ok(status)) if status.success()
    )
}

/// Asks the session's client for the password; `None` when it gives none in time.
async fn ask(ctx: &TurnContext<'_>) -> Option<String> {
    let prompts = &ctx.runtime.prompts;
    let (request_id, answer) = prompts.question(&ctx.session.sid);
    ctx.session.emit(NativeEvent::SudoRequest(PendingRequest {
        request_id: request_id.clone(),
    }));
    match tokio::time::timeout(ASK_TIMEOUT, answer).await {
        Ok(Ok(password)) => Some(password).filter(|p| !p.is_empty()),
        // Released: the turn was interrupted.
        Ok(Err(_)) => None,
        Err(_) => {
            prompts.forget_question(&request_id);
            ctx.session
                .emit(NativeEvent::SudoExpire(PendingRequest { request_id }));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sudo_the_shell_runs_counts() {
        assert_eq!(invocations("sudo apt update && sudo apt upgrade"), 2);
        assert_eq!(invocations("LANG=C sudo ls"), 1);
        assert_eq!(invocations("echo 'sudo ls'; man sudo"), 0);
        assert_eq!(invocations("ls | sudo tee /etc/x"), 1);
    }
}
