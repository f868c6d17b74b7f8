//! What the terminal tool never runs, whatever the approval mode or yolo: Hermes 0.19's
//! hardline floor (`tools/approval.py`, `HARDLINE_PATTERNS`) — a delete of the root, a system
//! directory or the home, a filesystem format, a raw write to a block device, a fork bomb,
//! killing every process, shutting down or restarting the machine.
//!
//! Commands are read as the shell reads them, so that quoting (`'r'm`), wrappers (`sudo -E`,
//! `env X=1`, `time`), separators (`;`, `&&`, `|`, `{ …; }`) and `sh -c '…'` scripts hide
//! nothing, while the same words inside quoted data (`echo "…; reboot"`) stay data.

/// Words that run the command after them (their own flags and assignments are skipped).
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nohup", "exec", "command", "time", "setsid", "nice", "builtin",
];
/// Shells whose `-c` script is read as commands too.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh"];
/// Directories whose deletion Hermes never runs.
const SYSTEM_DIRS: &[&str] = &[
    "/home", "/root", "/etc", "/usr", "/var", "/bin", "/sbin", "/boot", "/lib",
];
/// Block devices a raw write to which Hermes never runs (`/dev/sd*`, …).
const DEVICES: &[&str] = &["sd", "nvme", "hd", "mmcblk", "vd", "xvd"];
/// A redirection, kept as a word of its own so that its target can be told.
const REDIRECT: &str = ">";

/// The simple commands of a command line, each as its words with quoting removed: split at
/// `;`, `&`, `|`, newlines, `(`, `)`, backquotes and braces outside quotes; `>` kept as a word
/// of its own; and the script of `sh -c '…'` read as further commands.
pub fn commands(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect(
        &line.replace("${IFS}", " ").replace("$IFS", " "),
        &mut out,
        0,
    );
    out
}

fn collect(line: &str, out: &mut Vec<Vec<String>>, depth: usize) {
    let mut segment: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    let end_word = |segment: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            segment.push(std::mem::take(word));
            *in_word = false;
        }
    };
    let end_segment = |segment: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        if segment.is_empty() {
            return;
        }
        let words = std::mem::take(segment);
        let script = words
            .windows(3)
            .find_map(|w| (SHELLS.contains(&w[0].as_str()) && w[1] == "-c").then(|| w[2].clone()));
        if let Some(script) = script.filter(|_| depth < 4) {
            collect(&script, out, depth + 1);
        }
        out.push(words);
    };
    while let Some(c) = chars.next() {
        match quote {
            Some('\'') if c == '\'' => quote = None,
            Some('\'') => word.push(c),
            Some(_) if c == '"' => quote = None,
            Some(_) if c == '\\' => word.extend(chars.next()),
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    in_word = true;
                }
                '\\' => match chars.next() {
                    Some('\n') | None => {}
                    Some(next) => {
                        word.push(next);
                        in_word = true;
                    }
                },
                // `${NAME}` is one word, not a brace group.
                '$' if chars.peek() == Some(&'{') => {
                    word.push(c);
                    for inner in chars.by_ref() {
                        word.push(inner);
                        if inner == '}' {
                            break;
                        }
                    }
                    in_word = true;
                }
                ';' | '&' | '|' | '\n' | '(' | ')' | '`' | '{' | '}' => {
                    end_word(&mut segment, &mut word, &mut in_word);
                    end_segment(&mut segment, out);
                }
                '>' | '<' => {
                    end_word(&mut segment, &mut word, &mut in_word);
                    if c == '>' {
                        segment.push(REDIRECT.to_owned());
                    }
                }
                c if c.is_whitespace() => end_word(&mut segment, &mut word, &mut in_word),
                c => {
                    word.push(c);
                    in_word = true;
                }
            },
        }
    }
    end_word(&mut segment, &mut word, &mut in_word);
    end_segment(&mut segment, out);
}

/// A simple command from the program it runs on: leading assignments (`X=1`) and wrappers
/// (`sudo -E`, `env`, `time` …, with their flags) left out.
pub fn program(words: &[String]) -> &[String] {
    let mut after_wrapper = false;
    let skipped = words
        .iter()
        .take_while(|word| {
            if WRAPPERS.contains(&word.as_str()) {
                after_wrapper = true;
                true
            } else {
                let assignment = word.contains('=') && !word.starts_with('-');
                assignment || (after_wrapper && word.starts_with('-'))
            }
        })
        .count();
    &words[skipped..]
}

/// Whether `path` names the root directory however it is spelt (`/`, `//`, `/.`, `/..`, with a
/// trailing `*`).
fn is_root(path: &str) -> bool {
    let path = path.trim_end_matches('*');
    path.starts_with('/') && path.split('/').all(|part| matches!(part, "" | "." | ".."))
}

/// Whether `path` is `dir`, `dir/` or `dir/*`.
fn is_dir_itself(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| matches!(rest, "" | "/" | "/*"))
}

fn is_home(path: &str) -> bool {
    let home = std::env::var("HOME").unwrap_or_default();
    ["~", "$HOME", "${HOME}"]
        .into_iter()
        .chain((home.len() > 1).then_some(home.as_str()))
        .any(|home| is_dir_itself(path, home))
}

fn is_raw_device(path: &str) -> bool {
    path.strip_prefix("/dev/")
        .is_some_and(|name| DEVICES.iter().any(|d| name.starts_with(d)))
}

/// `mkfs` or `mkfs.<type>` as a word anywhere in the text (Hermes matches it anywhere).
fn mentions_mkfs(text: &str) -> bool {
    let text = text.to_lowercase();
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices("mkfs").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + 4..].chars().next();
        !before.is_some_and(word_char) && !after.is_some_and(word_char)
    })
}

/// What of the hardline floor `command` would do, if anything.
pub fn hardline(command: &str) -> Option<&'static str> {
    let unspaced: String = command.split_whitespace().collect();
    if unspaced.contains(":(){:|:&};:") {
        return Some("fork bomb");
    }
    if mentions_mkfs(command) {
        return Some("format filesystem (mkfs)");
    }
    commands(command)
        .iter()
        .find_map(|words| simple_hardline(words))
}

fn simple_hardline(words: &[String]) -> Option<&'static str> {
    let redirected = words
        .windows(2)
        .any(|w| w[0] == REDIRECT && is_raw_device(&w[1]));
    if redirected {
        return Some("redirect to raw block device");
    }
    let words = program(words);
    let (first, args) = words.split_first()?;
    let arg = |n: usize| args.get(n).map(String::as_str);
    match first.as_str() {
        "rm" => {
            let targets: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .filter(|w| !w.starts_with('-'))
                .collect();
            if targets.iter().any(|t| is_root(t)) {
                Some("recursive delete of root filesystem")
            } else if targets
                .iter()
                .any(|t| SYSTEM_DIRS.iter().any(|dir| is_dir_itself(t, dir)))
            {
                Some("recursive delete of system directory")
            } else if targets.iter().any(|t| is_home(t)) {
                Some("recursive delete of home directory")
            } else {
                None
            }
        }
        "dd" if args
            .iter()
            .any(|w| w.strip_prefix("of=").is_some_and(is_raw_device)) =>
        {
            Some("dd to raw block device")
        }
        "kill" if args.iter().any(|w| w == "-1") => Some("kill all processes"),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some("system shutdown/reboot"),
        "init" if matches!(arg(0), Some("0" | "6")) => Some("init 0/6 (shutdown/reboot)"),
        "telinit" if matches!(arg(0), Some("0" | "6")) => Some("telinit 0/6 (shutdown/reboot)"),
        "systemctl" if matches!(arg(0), Some("poweroff" | "reboot" | "halt" | "kexec")) => {
            Some("systemctl poweroff/reboot")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::hardline;

    #[test]
    fn catastrophic_commands_are_never_run_however_they_are_written() {
        for (command, why) in [
            ("rm -rf /", "recursive delete of root filesystem"),
            ("sudo rm -fr //.", "recursive delete of root filesystem"),
            ("rm -rf \"/\"", "recursive delete of root filesystem"),
            ("sudo -E rm -rf /", "recursive delete of root filesystem"),
            ("env FOO=1 rm -rf /", "recursive delete of root filesystem"),
            ("time rm -rf /", "recursive delete of root filesystem"),
            ("{ rm -rf /; }", "recursive delete of root filesystem"),
            ("'r'm -rf /", "recursive delete of root filesystem"),
            ("r\\m -rf /", "recursive delete of root filesystem"),
            ("rm${IFS}-rf${IFS}/", "recursive delete of root filesystem"),
            ("sh -c 'rm -rf /'", "recursive delete of root filesystem"),
            (
                "bash -c \"sh -c 'rm -rf /*'\"",
                "recursive delete of root filesystem",
            ),
            (
                "cd x && rm -r /etc/*",
                "recursive delete of system directory",
            ),
            ("rm /etc/*", "recursive delete of system directory"),
            ("rm -f /usr/*", "recursive delete of system directory"),
            ("rm -rf ~", "recursive delete of home directory"),
            ("rm -rf $HOME/", "recursive delete of home directory"),
            ("rm -rf ${HOME}/*", "recursive delete of home directory"),
            ("rm -rf \"${HOME}/\"", "recursive delete of home directory"),
            ("mkfs.ext4 /dev/sdb1", "format filesystem (mkfs)"),
            (
                "echo mkfs.ext4 /dev/sdb | sudo -n sh",
                "format filesystem (mkfs)",
            ),
            ("dd if=/dev/zero of=/dev/nvme0n1", "dd to raw block device"),
            ("echo x > /dev/sda", "redirect to raw block device"),
            (
                "echo x 2>/dev/null >/dev/sda",
                "redirect to raw block device",
            ),
            (":(){ :|:& };:", "fork bomb"),
            ("kill -9 -1", "kill all processes"),
            ("sleep 1; reboot", "system shutdown/reboot"),
            ("bash -c \"reboot\"", "system shutdown/reboot"),
            ("setsid reboot", "system shutdown/reboot"),
            ("systemctl poweroff", "systemctl poweroff/reboot"),
        ] {
            assert_eq!(hardline(command), Some(why), "{command}");
        }
    }

    #[test]
    fn ordinary_commands_and_quoted_data_are_not_caught() {
        for command in [
            "rm -rf /tmp/build",
            "rm -rf ./target",
            "rm /etc/hosts.bak",
            "rm -rf /home/me/tmp",
            "echo reboot",
            "grep shutdown logs",
            "grep -E 'warn|shutdown' /var/log/syslog",
            "echo \"Build done; reboot to apply\"",
            "git commit -m \"x; rm -rf / spelled\"",
            "./scripts/shutdown --dry-run",
            "cat /dev/sda1",
            "echo x 2>/dev/null",
            "mkfsx --help",
        ] {
            assert_eq!(hardline(command), None, "{command}");
        }
    }
}
