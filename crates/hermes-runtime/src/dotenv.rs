//! `$HERMES_HOME/.env`: secrets and settings kept beside the config (`SUDO_PASSWORD`, keys a
//! skill needs). Hermes loads the file into its process environment when it starts and again
//! on `reload.env`; a Rust process cannot change its own environment safely while threads run,
//! so this runtime keeps the file's values beside it and gives them to what it starts (the
//! agent's commands) and to what reads them (`SUDO_PASSWORD`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file's name inside a home.
const FILE: &str = ".env";

pub struct DotEnv {
    path: PathBuf,
    /// The values the file held when last read (or written here).
    values: Mutex<BTreeMap<String, String>>,
}

impl DotEnv {
    /// The file of `home`, read now (a missing or unreadable file holds nothing).
    pub fn load(home: &Path) -> Self {
        let path = home.join(FILE);
        let values = std::fs::read_to_string(&path)
            .map(|text| parse(&text))
            .unwrap_or_default();
        Self {
            path,
            values: Mutex::new(values),
        }
    }

    /// The file's value of a variable.
    pub fn value(&self, key: &str) -> Option<String> {
        self.values.lock().expect("not poisoned").get(key).cloned()
    }

    /// The file's values, for a command's environment.
    pub fn vars(&self) -> Vec<(String, String)> {
        let values = self.values.lock().expect("not poisoned");
        values.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Reads the file again (`reload.env`): how many variables changed — set to a value they
    /// did not have, or gone from the file.
    pub fn reload(&self) -> std::io::Result<usize> {
        let fresh = match std::fs::read_to_string(&self.path) {
            Ok(text) => parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        let mut values = self.values.lock().expect("not poisoned");
        let changed = fresh
            .iter()
            .filter(|(key, value)| {
                let now = values
                    .get(*key)
                    .cloned()
                    .or_else(|| std::env::var(key).ok());
                now.as_ref() != Some(*value)
            })
            .count();
        let gone = values
            .keys()
            .filter(|key| !fresh.contains_key(*key))
            .count();
        *values = fresh;
        Ok(changed + gone)
    }

    /// Sets `key` in the file (replacing its line, or adding one) and for what starts from now
    /// on. The file is written whole, privately (0600 unless it had a mode), then renamed over.
    pub fn save(&self, key: &str, value: &str) -> std::io::Result<()> {
        let mut values = self.values.lock().expect("not poisoned");
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let line = format!("{key}={}", quoted(value));
        let mut replaced = false;
        let mut lines: Vec<String> = text
            .lines()
            .map(|existing| match parse_line(existing) {
                Some((k, _)) if k == key && !replaced => {
                    replaced = true;
                    line.clone()
                }
                _ => existing.to_owned(),
            })
            .collect();
        if !replaced {
            lines.push(line);
        }
        let mode = std::fs::metadata(&self.path).map_or(0o600, |m| {
            std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777
        });
        let text = lines.join("\n") + "\n";
        hermes_native::config::write_atomically(&self.path, text.as_bytes(), mode)?;
        values.insert(key.to_owned(), value.to_owned());
        Ok(())
    }
}

/// Whether a variable's name says it holds a credential (`OPENAI_API_KEY`, `GH_TOKEN`,
/// `SUDO_PASSWORD`, `AWS_SECRET_ACCESS_KEY`, `GOOGLE_APPLICATION_CREDENTIALS`): the agent's
/// commands are not given those.
pub fn is_credential(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
    ];
    name.to_ascii_uppercase()
        .split(['_', '-'])
        .any(|word| WORDS.contains(&word))
}

/// `KEY=value` lines as python-dotenv reads them: blank lines and `#` comments skipped, an
/// `export ` prefix dropped, quotes around a value removed, an unquoted value's ` #` comment
/// cut off.
fn parse(text: &str) -> BTreeMap<String, String> {
    text.trim_start_matches('\u{feff}')
        .lines()
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (key, value) = line.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let value = value.trim();
    let value = match value.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let inner = &value[1..];
            let end = inner.rfind(quote).unwrap_or(inner.len());
            let inner = &inner[..end];
            if quote == '"' {
                unescape(inner)
            } else {
                inner.to_owned()
            }
        }
        _ => match value.find(" #") {
            Some(comment) => value[..comment].trim_end().to_owned(),
            None => value.to_owned(),
        },
    };
    Some((key.to_owned(), value))
}

/// `\n`, `\t`, `\"`, `\'` and `\\` in a double-quoted value; another backslash stays.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(quote @ ('"' | '\'' | '\\')) => out.push(quote),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// A value as written to the file: double-quoted, escaped, when it holds what would change how
/// it reads back.
fn quoted(value: &str) -> String {
    if value
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '#' | '"' | '\'' | '\\'))
    {
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .replace('\t', "\\t");
        format!("\"{escaped}\"")
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_told_by_their_names() {
        for name in [
            "OPENAI_API_KEY",
            "GH_TOKEN",
            "SUDO_PASSWORD",
            "aws_secret_access_key",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "HERMES_DASHBOARD_SESSION_TOKEN",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "MONKEY_BUSINESS",
            "KEYBOARD",
            "PLAIN_SETTING",
            "PASSAGE",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }

    #[test]
    fn lines_read_as_python_dotenv_reads_them() {
        let values = parse(
            "\u{feff}# settings\nA=1\nexport B = two words \n C='quoted # not a comment'\n\
             D=\"line\\nbreak\"\nE=plain # a comment\nnot a line\n=no key\n",
        );
        assert_eq!(
            values,
            BTreeMap::from([
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "quoted # not a comment".into()),
                ("D".into(), "line\nbreak".into()),
                ("E".into(), "plain".into()),
            ])
        );
    }

    #[test]
    fn a_reload_counts_what_changed_and_a_save_keeps_the_rest_of_the_file() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(FILE);
        std::fs::write(&path, "# mine\nKEEP=1\nCHANGE=old\nGONE=x\n").unwrap();
        let env = DotEnv::load(home.path());
        assert_eq!(env.value("CHANGE").as_deref(), Some("old"));
        std::fs::write(&path, "# mine\nKEEP=1\nCHANGE=new\nADDED=y\n").unwrap();
        assert_eq!(env.reload().unwrap(), 3);
        assert_eq!(env.value("GONE"), None);
        assert_eq!(env.reload().unwrap(), 0);

        let mode = |path: &Path| {
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions())
                & 0o777
        };
        let before = mode(&path);
        let secret = "it's a \"secret\" \\ with\ttabs\nand lines";
        env.save("CHANGE", secret).unwrap();
        env.save("FRESH", "z").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# mine\nKEEP=1\nCHANGE=\""), "{text}");
        assert!(text.ends_with("\nADDED=y\nFRESH=z\n"), "{text}");
        assert_eq!(parse(&text)["CHANGE"], secret, "read back as it was");
        assert_eq!(mode(&path), before, "the file keeps its mode");
        let fresh = tempfile::tempdir().unwrap();
        DotEnv::load(fresh.path()).save("K", "v").unwrap();
        assert_eq!(
            mode(&fresh.path().join(FILE)),
            0o600,
            "a new file is private"
        );
        assert_eq!(env.value("FRESH").as_deref(), Some("z"));
    }
}
