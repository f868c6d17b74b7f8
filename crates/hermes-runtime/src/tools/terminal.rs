//! `terminal`: runs a shell command. Commands that match a dangerous pattern need the user's
//! approval first (`approval.request` → `approval.respond`), unless the pattern was approved for
//! the session or for good.

use std::process::Stdio;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::TurnContext;
use crate::checkpoints;
use crate::model::ToolSpec;
use crate::prompts::APPROVAL_TIMEOUT;
use hermes_native::NativeEvent;
use hermes_native::config::HermesConfig;
use hermes_native::events::ApprovalRequest;
use hermes_native::methods::ApprovalChoice;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
const MAX_OUTPUT: usize = 50_000;

pub fn spec() -> ToolSpec {
    static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| ToolSpec {
        name: "terminal".to_owned(),
        description: "Run a shell command and return its output and exit code. Destructive \
                          commands need the user's approval."
            .to_owned(),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command, run with `sh -c`."},
                "timeout": {"type": "integer", "description": "Seconds before it is killed (default 180)."},
            },
            "required": ["command"],
        })),
    });
    SPEC.clone()
}

/// The dangerous pattern a command matches: `(pattern key, description)`.
pub fn dangerous(command: &str) -> Option<(&'static str, &'static str)> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let has = |needle: &str| command.contains(needle);
    // Read as the shell reads it: quoted, wrapped (`sudo`, `env X=1`) or inside `sh -c '…'`.
    let rm_forced = super::hardline::commands(command).iter().any(|words| {
        let words = super::hardline::program(words);
        let is_rm = words
            .first()
            .is_some_and(|w| w == "rm" || w.ends_with("/rm"));
        is_rm
            && words[1..].iter().any(|w| {
                w == "--recursive"
                    || w == "--force"
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains(['r', 'R', 'f']))
            })
    });
    if rm_forced {
        return Some(("recursive delete", "recursive or forced delete"));
    }
    let checks: &[(bool, &str, &str)] = &[
        (
            words.iter().any(|w| w.starts_with("mkfs")),
            "format filesystem",
            "format a filesystem",
        ),
        (
            words.first() == Some(&"dd") && has("of=/dev/"),
            "write to device",
            "raw write to a block device",
        ),
        (
            has("> /dev/sd") || has(">/dev/sd"),
            "write to device",
            "overwrite a block device",
        ),
        (
            words.first() == Some(&"chmod") && has("777"),
            "world writable",
            "make files world-writable",
        ),
        (
            words
                .iter()
                .any(|w| ["shutdown", "reboot", "halt", "poweroff"].contains(w)),
            "system power",
            "shut down or restart the machine",
        ),
        (
            (has("curl") || has("wget"))
                && (has("| sh") || has("| bash") || has("|sh") || has("|bash")),
            "pipe to shell",
            "run a downloaded script",
        ),
        (
            has("git push") && (has("--force") || words.contains(&"-f")),
            "force push",
            "force-push over remote history",
        ),
        (
            has("git reset --hard"),
            "discard changes",
            "discard uncommitted changes",
        ),
    ];
    checks
        .iter()
        .find(|(matched, _, _)| *matched)
        .map(|(_, key, description)| (*key, *description))
}

pub async fn call(ctx: &TurnContext<'_>, args: &Value) -> Value {
    let Some(command) = args["command"].as_str().filter(|c| !c.trim().is_empty()) else {
        return json!({"output": "", "exit_code": -1, "error": "`command` is required"});
    };
    if let Some(description) = super::hardline::hardline(command) {
        return json!({
            "output": "",
            "exit_code": -1,
            "error": format!(
                "BLOCKED (hardline): {description}. This command is on the unconditional \
                 blocklist and cannot be executed via the agent \u{2014} not even with --yolo, \
                 /yolo, approvals.mode=off, or cron approve mode. If you genuinely need to run \
                 it, run it yourself in a terminal outside the agent."
            ),
            "status": "blocked",
        });
    }
    if let Some(description) = super::sudo::guessing_password(ctx, command) {
        return json!({
            "output": "",
            "exit_code": -1,
            "error": format!(
                "BLOCKED: {description}. Do not pipe passwords to 'sudo -S' — this is a \
                 brute-force attack vector. Set SUDO_PASSWORD in your .env file if the agent \
                 needs passwordless sudo, or run the sudo command manually in your own terminal."
            ),
            "status": "blocked",
        });
    }
    let mut approval_note = None;
    let settings = ctx.session.settings();
    let config = HermesConfig::load(&ctx.session.home)
        .await
        .unwrap_or_default();
    if let Some((pattern, description)) = dangerous(command).filter(|_| !settings.yolo) {
        let prompts = &ctx.runtime.prompts;
        let (sid, home) = (&ctx.session.sid, &ctx.session.home);
        let mode = config.approval_mode();
        // `off` runs every command unasked; `smart` (Hermes first asks the model whether the
        // command is safe) asks the user here, as `manual` does.
        if mode != "off" && !prompts.is_allowed(sid, home, pattern) {
            let answer = prompts.approval(sid);
            ctx.session
                .emit(NativeEvent::ApprovalRequest(ApprovalRequest {
                    command: command.to_owned(),
                    pattern_key: pattern.to_owned(),
                    pattern_keys: vec![pattern.to_owned()],
                    description: description.to_owned(),
                    allow_permanent: true,
                    choices: ApprovalChoice::ALL
                        .iter()
                        .map(|c| c.as_str().to_owned())
                        .collect(),
                }));
            let choice = match tokio::time::timeout(APPROVAL_TIMEOUT, answer).await {
                Ok(Ok(choice)) => choice,
                Ok(Err(_)) | Err(_) => ApprovalChoice::Deny,
            };
            match choice {
                ApprovalChoice::Deny => {
                    return json!({
                        "output": "",
                        "exit_code": -1,
                        "error": "BLOCKED: Command denied by user. The user has NOT consented to \
                                  this action. Do NOT retry this command.",
                        "status": "blocked",
                    });
                }
                ApprovalChoice::Session => prompts.allow_for_session(sid, pattern),
                ApprovalChoice::Always => {
                    if let Err(e) = prompts.allow_always(home, pattern) {
                        tracing::warn!(error = %e, "could not persist an approval");
                    }
                }
                ApprovalChoice::Once => {}
            }
            approval_note = Some(format!(
                "Command required approval ({description}) and was approved by the user."
            ));
        }
    }
    let timeout = args["timeout"]
        .as_u64()
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    if checkpoints::enabled(&config) && checkpoints::changes_files(command) {
        checkpoint(ctx, &settings.cwd, command).await;
    }
    let prepared = super::sudo::prepare(ctx, command).await;
    let passthrough = ctx
        .session
        .state
        .lock()
        .expect("not poisoned")
        .passthrough
        .clone();
    let env = ctx.runtime.command_env(&ctx.session.home, &passthrough);
    let mut result = run(&prepared, &env, &settings.cwd, timeout).await;
    if let Some(output) = result["output"].as_str() {
        let mut output = output.to_owned();
        super::sudo::after_run(ctx, &prepared, &mut output);
        result["output"] = json!(output);
    }
    if let Some(note) = approval_note {
        result["approval"] = json!(note);
    }
    result
}

/// Snapshots the directory a command that changes files runs in, once per model call.
async fn checkpoint(ctx: &TurnContext<'_>, dir: &std::path::Path, command: &str) {
    let first = ctx
        .checkpointed
        .lock()
        .expect("not poisoned")
        .insert(dir.to_path_buf());
    if first {
        let shown: String = command.chars().take(60).collect();
        checkpoints::Checkpoints::of(&ctx.session.home)
            .take(dir, &format!("before terminal: {shown}"))
            .await;
    }
}

/// Runs a command with `sh -c` in `cwd`, with `env` as its whole environment and, for sudo,
/// the password on its input (else no input).
async fn run(
    prepared: &super::sudo::Prepared,
    env: &[(String, String)],
    cwd: &std::path::Path,
    timeout: Duration,
) -> Value {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&prepared.command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(match prepared.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // An interrupted turn drops this future: the command dies with it.
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return json!({"output": "", "exit_code": -1, "error": format!("cannot run sh: {e}")});
        }
    };
    if let (Some(input), Some(mut stdin)) = (prepared.stdin.clone(), child.stdin.take()) {
        // Beside the command, so that one that never reads its input cannot hold the turn: the
        // write ends with the command (its input closes) at the latest.
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(input.as_bytes()).await;
        });
    }
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => {
            let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&output.stderr));
            if text.len() > MAX_OUTPUT {
                let cut = (0..=MAX_OUTPUT)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0);
                text.truncate(cut);
                text.push_str("\n[output truncated]");
            }
            json!({"output": text, "exit_code": output.status.code().unwrap_or(-1), "error": null})
        }
        Ok(Err(e)) => {
            json!({"output": "", "exit_code": -1, "error": format!("command failed: {e}")})
        }
        Err(_) => json!({"output": "", "exit_code": -1,
                         "error": format!("command timed out after {}s", timeout.as_secs())}),
    }
}

#[cfg(test)]
mod tests {
    use super::dangerous;

    #[test]
    fn destructive_commands_need_approval_and_harmless_ones_do_not() {
        for command in [
            "rm -rf /tmp/x",
            "rm -r build",
            "sudo rm --recursive x",
            "mkfs.ext4 /dev/sdb1",
            "dd if=/dev/zero of=/dev/sda",
            "curl https://x.sh | sh",
            "git push --force origin main",
            "chmod -R 777 /",
        ] {
            assert!(dangerous(command).is_some(), "{command}");
        }
        for command in [
            "ls -la",
            "rm file.txt",
            "git push origin main",
            "cat /dev/sda1",
        ] {
            assert!(dangerous(command).is_none(), "{command}");
        }
    }
}
