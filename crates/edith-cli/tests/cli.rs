//! The `edith` client commands against a real control plane on loopback: tables for people,
//! JSON for scripts, a streamed turn, keys and scopes, errors that say what to do, and `edith
//! chat` answering an approval inline.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

const KEY: &str = "edk_cli_test_admin_key_0123456789abcdef";

struct Plane {
    server: edith_server::RunningServer,
    _dir: tempfile::TempDir,
}

async fn plane() -> Plane {
    let dir = tempfile::tempdir().unwrap();
    let config = edith_server::ServerConfig {
        admin_key: Some(KEY.to_owned()),
        ..edith_server::ServerConfig::local(dir.path().to_path_buf())
    };
    let server = edith_server::start(config).await.expect("control plane");
    Plane { server, _dir: dir }
}

impl Plane {
    /// Runs `edith <args>` with `key`, feeding `stdin`; bounded at 60 s.
    async fn run_with(&self, key: &str, args: &[&str], stdin: &str) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
            .args(args)
            .env("EDITH_URL", self.server.url())
            .env("EDITH_API_KEY", key)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("edith runs");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).await.unwrap();
        drop(input);
        tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("edith ends within 60 s")
            .unwrap()
    }

    /// Runs `edith <args>` with no URL or key in its environment, only the config file `config`.
    async fn run_bare(&self, config: &std::path::Path, args: &[&str]) -> Output {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
            .args(args)
            .env_remove("EDITH_URL")
            .env_remove("EDITH_API_KEY")
            .env("EDITH_CONFIG", config)
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .expect("edith ends within 60 s")
            .unwrap()
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.run_with(KEY, args, "").await
    }

    /// The `id` of what `edith --output json <args>` made.
    async fn id(&self, args: &[&str]) -> String {
        let made = self.json(args).await;
        made["id"]
            .as_str()
            .unwrap_or_else(|| panic!("an id: {made}"))
            .to_owned()
    }

    /// `edith --output json <args>`, which must succeed; its JSON.
    async fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let output = self.run(&all).await;
        assert!(output.status.success(), "{}", text(&output));
        serde_json::from_slice(&output.stdout).expect("JSON on stdout")
    }
}

/// A ready instance with a profile named `name` whose model is the fake `model` (with `key`).
async fn profile_on_fake_model(
    hermes: &hermes::Hermes,
    model: &testkit::FakeModel,
    name: &str,
    key: Option<&str>,
) -> (hermes::InstanceHandle, hermes::ProfileHandle) {
    use hermes::types::ModelSpec;
    let instance = hermes
        .instances()
        .create(name)
        .await
        .unwrap()
        .ready()
        .await
        .unwrap();
    let spec = hermes::ProfileSpec::new(name).model(ModelSpec::OpenaiCompatible {
        base_url: model.base_url().to_owned(),
        model: "fake-model".to_owned(),
        api_key: key.map(str::to_owned),
    });
    let profile = instance.profiles().create(spec).await.unwrap();
    (instance, profile)
}

/// What the scripted model takes for a `terminal` call that removes `dir` (it needs an
/// approval).
fn removing(dir: &std::path::Path) -> String {
    format!(
        "terminal {}",
        serde_json::json!({"command": format!("rm -rf {}", dir.display())})
    )
}

fn text(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn resources_are_made_listed_and_deleted_from_the_terminal() {
    let plane = plane().await;
    let instance = plane
        .json(&["instances", "create", "demo", "--label", "team=ai"])
        .await;
    assert_eq!(instance["state"], "ready", "create waits until ready");
    let iid = instance["id"].as_str().unwrap();

    let labelled = plane
        .json(&[
            "instances",
            "list",
            "--label",
            "team=ai",
            "--state",
            "ready",
        ])
        .await;
    assert_eq!(labelled[0]["id"], iid, "{labelled}");
    let other = plane
        .json(&["instances", "list", "--label", "team=web"])
        .await;
    assert_eq!(other.as_array().unwrap().len(), 0);
    let table = plane.run(&["instances", "list"]).await;
    let shown = String::from_utf8_lossy(&table.stdout);
    assert!(shown.starts_with("ID"), "{shown}");
    assert!(shown.contains(iid) && shown.contains("ready"), "{shown}");

    let profile = plane
        .json(&["profiles", "create", "--instance", iid, "helper"])
        .await;
    let pid = profile["id"].as_str().unwrap();
    let session = plane
        .json(&["sessions", "create", "--instance", iid, "--profile", pid])
        .await;
    let sid = session["id"].as_str().unwrap();
    let turn = plane
        .run(&[
            "turns",
            "send",
            "--instance",
            iid,
            "--profile",
            pid,
            "--session",
            sid,
            "hello cli",
        ])
        .await;
    assert!(turn.status.success(), "{}", text(&turn));
    assert!(
        String::from_utf8_lossy(&turn.stdout).contains("You said: hello cli"),
        "{}",
        text(&turn)
    );
    let listed = plane
        .json(&["sessions", "list", "--instance", iid, "--profile", pid])
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let turns = plane
        .json(&[
            "turns",
            "list",
            "--instance",
            iid,
            "--profile",
            pid,
            "--session",
            sid,
        ])
        .await;
    assert_eq!(turns[0]["state"], "completed", "{turns}");

    let runtimes = plane.json(&["runtimes"]).await;
    assert!(
        runtimes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "hermes-runtime"),
        "{runtimes}"
    );
    let deleted = plane.run(&["instances", "delete", iid]).await;
    assert!(deleted.status.success(), "{}", text(&deleted));
    let gone = plane.run(&["instances", "get", iid]).await;
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("not found"),
        "{}",
        text(&gone)
    );
}

#[tokio::test]
async fn keys_have_scopes_and_errors_say_what_to_do() {
    let plane = plane().await;
    let created = plane
        .json(&["keys", "create", "reader", "--scope", "read"])
        .await;
    let reader = created["secret"].as_str().unwrap().to_owned();
    let refused = plane
        .run_with(&reader, &["instances", "create", "nope"], "")
        .await;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("write") && said.contains("keys create"),
        "{said}"
    );
    let unknown = plane
        .run_with("edk_wrong", &["instances", "list"], "")
        .await;
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("EDITH_API_KEY"), "{said}");
    let keys = plane.json(&["keys", "list"]).await;
    assert!(
        !keys.to_string().contains(&reader),
        "secrets are never listed"
    );
    let bad_scope = plane.run(&["keys", "create", "x", "--scope", "root"]).await;
    assert_eq!(bad_scope.status.code(), Some(2), "{}", text(&bad_scope));
}

#[tokio::test]
async fn chat_streams_answers_and_asks_for_approvals_inline() {
    let plane = plane().await;
    let instance = plane.json(&["instances", "create", "chat"]).await;
    let iid = instance["id"].as_str().unwrap();
    let profile = plane
        .json(&["profiles", "create", "--instance", iid, "talker"])
        .await;
    let pid = profile["id"].as_str().unwrap();
    let victim = tempfile::tempdir().unwrap();
    let command = format!("rm -rf {}", victim.path().display());
    let lines = format!(
        "hi there\nterminal {}\nonce\nclarify {}\nblue\n",
        serde_json::json!({ "command": command }),
        serde_json::json!({"question": "Which colour?", "choices": ["red", "blue"]}),
    );
    let chat = plane.run_with(KEY, &["chat", iid, pid], &lines).await;
    assert!(chat.status.success(), "{}", text(&chat));
    let shown = String::from_utf8_lossy(&chat.stdout);
    assert!(shown.contains("You said: hi there"), "{shown}");
    assert!(shown.contains(&format!("run `{command}`?")), "{shown}");
    assert!(!victim.path().exists(), "approved inline, so it ran");
    assert!(
        shown.contains("[tool terminal"),
        "tool calls are shown: {shown}"
    );
    assert!(shown.contains("Which colour? (red, blue): "), "{shown}");
    assert!(
        shown.contains("clarify returned") && shown.contains("blue"),
        "{shown}"
    );
    let said = String::from_utf8_lossy(&chat.stderr);
    let sid = said
        .split_whitespace()
        .find(|word| word.starts_with("sess_"))
        .unwrap_or_else(|| panic!("the session id is printed: {said}"))
        .to_owned();

    // Taken up again with --session: the same session gets the next turn.
    let again = plane
        .run_with(KEY, &["chat", iid, pid, "--session", &sid], "once more\n")
        .await;
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("You said: once more"));
    let turns = plane
        .json(&[
            "turns",
            "list",
            "--instance",
            iid,
            "--profile",
            pid,
            "--session",
            &sid,
        ])
        .await;
    assert_eq!(turns.as_array().unwrap().len(), 4, "{turns}");

    // The end of input at an approval denies it: nothing runs without a yes.
    let kept = tempfile::tempdir().unwrap();
    let risky = format!(
        "terminal {}\n",
        serde_json::json!({"command": format!("rm -rf {}", kept.path().display())})
    );
    let at = ["chat", iid, pid, "--session", &sid];
    let denied = plane.run_with(KEY, &at, &risky).await;
    assert!(denied.status.success(), "{}", text(&denied));
    assert!(kept.path().exists(), "denied at the end of input");

    // A turn that cannot be sent (another one waits) is said, and the chat goes on.
    let waiting = [
        "turns",
        "send",
        "--instance",
        iid,
        "--profile",
        pid,
        "--session",
        &sid,
        &risky,
    ];
    assert!(plane.run(&waiting).await.status.success());
    let refused = plane.run_with(KEY, &at, "hello\n").await;
    assert!(refused.status.success(), "{}", text(&refused));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("in progress"), "{said}");
}

#[tokio::test]
async fn login_saves_the_url_and_key_for_the_next_commands_in_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let plane = plane().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edith.json");
    // A file that was there, readable by all, is narrowed.
    std::fs::write(&config, "{}").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let without = plane.run_bare(&config, &["instances", "list"]).await;
    assert!(!without.status.success(), "no URL and no key yet");

    let wrong = plane
        .run_bare(
            &config,
            &[
                "login",
                "--url",
                plane.server.url(),
                "--api-key",
                "edk_wrong",
            ],
        )
        .await;
    assert!(
        !wrong.status.success(),
        "a key the server refuses is not saved"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "{}");
    let login = plane
        .run_bare(
            &config,
            &["login", "--url", plane.server.url(), "--api-key", KEY],
        )
        .await;
    assert!(login.status.success(), "{}", text(&login));
    let mode = std::fs::metadata(&config).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let listed = plane.run_bare(&config, &["instances", "list"]).await;
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).starts_with("ID"));
    // The saved key goes only to the control plane it was saved for.
    let elsewhere = self::plane().await;
    let other = plane
        .run_bare(
            &config,
            &["instances", "list", "--url", elsewhere.server.url()],
        )
        .await;
    assert!(!other.status.success());
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(said.contains("needs an API key"), "no key was sent: {said}");

    // Without `EDITH_CONFIG`, the file is `$XDG_CONFIG_HOME/edith/config.json`.
    let xdg = tempfile::tempdir().unwrap();
    let bare = |args: &[&str]| {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
            .args(args)
            .env_remove("EDITH_URL")
            .env_remove("EDITH_API_KEY")
            .env_remove("EDITH_CONFIG")
            .env("XDG_CONFIG_HOME", xdg.path())
            .kill_on_drop(true)
            .output();
        async move {
            tokio::time::timeout(Duration::from_secs(60), output)
                .await
                .expect("edith ends within 60 s")
                .unwrap()
        }
    };
    let url = plane.server.url();
    let login = bare(&["login", "--url", url, "--api-key", KEY]).await;
    assert!(login.status.success(), "{}", text(&login));
    let saved = xdg.path().join("edith/config.json");
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let listed = bare(&["instances", "list"]).await;
    assert!(listed.status.success(), "{}", text(&listed));
}

#[tokio::test]
async fn completions_are_printed_for_a_shell() {
    let plane = plane().await;
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let printed = plane.run(&["completions", shell]).await;
        assert!(printed.status.success(), "{}", text(&printed));
        let script = String::from_utf8_lossy(&printed.stdout);
        // Subcommands and their verbs complete, down to the newest.
        for word in ["instances", "approve", "wait", "output"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    // bash reads it without a syntax error.
    let bash = plane.run(&["completions", "bash"]).await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bash.stdout).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(file.path())
        .output()
        .unwrap();
    assert!(checked.status.success(), "{:?}", checked);
}

#[tokio::test]
async fn the_contract_is_printed() {
    let plane = plane().await;
    let printed = plane.run(&["openapi"]).await;
    assert!(printed.status.success(), "{}", text(&printed));
    let contract: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(&contract, edith_server::openapi());
}

/// Reads what the process writes, in the background, so the test can wait for text in it.
fn collect(
    mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> std::sync::Arc<std::sync::Mutex<String>> {
    use tokio::io::AsyncReadExt;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let into = seen.clone();
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = from.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    seen
}

/// Waits (bounded: 30 s) until `seen` holds `text` `times` times.
async fn until_seen(seen: &std::sync::Mutex<String>, text: &str, times: usize) {
    for _ in 0..600 {
        if seen.lock().unwrap().matches(text).count() >= times {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("`{text}` ×{times} never came:\n{}", seen.lock().unwrap());
}

/// `edith chat` at a real terminal: `script` gives it a pseudo-terminal whose line discipline
/// turns the Ctrl-C byte into SIGINT for it, as a person's terminal would.
#[tokio::test]
async fn at_a_terminal_ctrl_c_cancels_the_running_turn_and_a_second_quits() {
    use hermes::types::TurnState;
    use tokio::io::AsyncWriteExt;
    let plane = plane().await;
    let model = testkit::FakeModel::start().await;
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let (instance, profile) = profile_on_fake_model(&hermes, &model, "slow", Some("sk-fake")).await;
    // `exec`: `script` runs the command through a shell, and a shell left in between (dash, when
    // SHELL is unset) would itself die of the SIGINT the terminal sends its foreground group.
    let chat = format!(
        "exec {} chat {} {}",
        env!("CARGO_BIN_EXE_edith"),
        instance.id(),
        profile.id()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["--quiet", "--return", "--command", &chat, "/dev/null"])
        .env("SHELL", "/bin/sh")
        // A terminal that moves its cursor, as people's do (CI's environment names none).
        .env("TERM", "xterm")
        .env("EDITH_URL", plane.server.url())
        .env("EDITH_API_KEY", KEY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("script runs");
    let mut keys = child.stdin.take().unwrap();
    let seen = collect(child.stdout.take().unwrap());
    until_seen(&seen, "> ", 1).await;
    // The fake model answers SLOW with sixty pieces, 100 ms apart.
    keys.write_all(b"go SLOW please\n").await.unwrap();
    until_seen(&seen, "tick", 2).await;
    keys.write_all(b"\x03").await.unwrap();
    until_seen(&seen, "[cancelling", 1).await;
    until_seen(&seen, "> ", 2).await;
    let sessions = profile
        .sessions()
        .list(&hermes::PageRequest::default())
        .await
        .unwrap();
    let session = profile.session(&sessions.items[0].id);
    let in_state = |state| {
        let sdk = hermes.sdk().clone();
        let (iid, pid, sid) = (
            instance.id().clone(),
            profile.id().clone(),
            session.id().clone(),
        );
        async move {
            let filter = hermes::types::TurnFilter { state };
            sdk.turn_list(&iid, &pid, &sid, &filter, &Default::default())
                .await
                .unwrap()
                .items
        }
    };
    let all = in_state(None).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].state, TurnState::Cancelled);
    assert_eq!(in_state(Some(TurnState::Cancelled)).await.len(), 1);
    assert!(in_state(Some(TurnState::Completed)).await.is_empty());
    // At the prompt, Ctrl-C quits.
    keys.write_all(b"\x03").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("edith quits")
        .unwrap();
    assert!(status.success(), "{status}\n{}", seen.lock().unwrap());
    hermes.close().await.unwrap();
}

#[tokio::test]
async fn a_turn_that_fails_makes_the_command_fail() {
    let plane = plane().await;
    let model = testkit::FakeModel::start().await;
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let (instance, profile) = profile_on_fake_model(&hermes, &model, "failing", None).await;
    let session = profile.sessions().create().await.unwrap();
    let (iid, pid, sid) = (
        instance.id().to_string(),
        profile.id().to_string(),
        session.id().to_string(),
    );
    let args = [
        "turns",
        "send",
        "--instance",
        &iid,
        "--profile",
        &pid,
        "--session",
        &sid,
        "please FAIL",
    ];
    let failed = plane.run(&args).await;
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("the turn ended failed"),
        "{}",
        text(&failed)
    );
    hermes.close().await.unwrap();
}

#[tokio::test]
async fn every_client_command_answers() {
    let plane = plane().await;
    // No wait: the job is followed with `jobs get --follow`.
    let created = plane
        .json(&["instances", "create", "quick", "--no-wait"])
        .await;
    let iid = created["id"].as_str().unwrap().to_owned();
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    // Another provisioning job, followed to its end by `jobs get --follow`.
    let creation = hermes.instances().create("for-job").await.unwrap();
    let job = creation.job.id.to_string();
    let followed = plane.json(&["jobs", "get", &job, "--follow"]).await;
    assert_eq!(followed["state"], "succeeded", "{followed}");
    // An instance created without waiting says how to follow its job.
    let quick = plane
        .run(&["instances", "create", "quick", "--no-wait"])
        .await;
    assert!(quick.status.success(), "{}", text(&quick));
    let said = String::from_utf8_lossy(&quick.stderr);
    let quick_job = said
        .split(['`', ' '])
        .find(|word| word.starts_with("job_"))
        .unwrap_or_else(|| panic!("the job is named: {said}"));
    let followed = plane.json(&["jobs", "get", quick_job, "--follow"]).await;
    assert_eq!(followed["state"], "succeeded", "{followed}");
    // And shown as a table, for people.
    let shown = plane.run(&["jobs", "get", &job]).await;
    assert!(shown.status.success(), "{}", text(&shown));
    let table = String::from_utf8_lossy(&shown.stdout);
    assert!(
        table.starts_with("ID") && table.contains(&job) && table.contains("succeeded"),
        "{table}"
    );
    let got = plane.json(&["instances", "get", &iid]).await;
    assert_eq!(got["id"], iid.as_str());

    let profile = plane
        .json(&["profiles", "create", "--instance", &iid, "p"])
        .await;
    let pid = profile["id"].as_str().unwrap().to_owned();
    let got = plane
        .json(&["profiles", "get", "--instance", &iid, &pid])
        .await;
    assert_eq!(got["name"], "p");
    let listed = plane.json(&["profiles", "list", "--instance", &iid]).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let session = plane
        .json(&[
            "sessions",
            "create",
            "--instance",
            &iid,
            "--profile",
            &pid,
            "--title",
            "t",
        ])
        .await;
    let sid = session["id"].as_str().unwrap().to_owned();
    assert_eq!(session["title"], "t");
    let deleted = plane
        .json(&[
            "sessions",
            "delete",
            "--instance",
            &iid,
            "--profile",
            &pid,
            &sid,
        ])
        .await;
    assert_eq!(deleted["id"], sid.as_str());
    let deleted = plane
        .json(&["profiles", "delete", "--instance", &iid, &pid])
        .await;
    assert_eq!(deleted["id"], pid.as_str());

    // Tools: listed, shown and deleted (registered through the SDK: a host is needed).
    let tid = tool_on_an_unreachable_host(&hermes, "noop", "Does nothing").await;
    let tools = plane.json(&["tools", "list"]).await;
    assert_eq!(tools[0]["name"], "noop");
    assert_eq!(
        plane.json(&["tools", "get", &tid]).await["id"],
        tid.as_str()
    );
    assert_eq!(
        plane.json(&["tools", "delete", &tid]).await["id"],
        tid.as_str()
    );

    // Keys: revoked, and then refused.
    let created = plane
        .json(&["keys", "create", "short-lived", "--scope", "read"])
        .await;
    let kid = created["key"]["id"].as_str().unwrap().to_owned();
    let secret = created["secret"].as_str().unwrap().to_owned();
    let revoked = plane.json(&["keys", "revoke", &kid]).await;
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    let refused = plane.run_with(&secret, &["instances", "list"], "").await;
    assert!(!refused.status.success());
    hermes.close().await.unwrap();
}

#[tokio::test]
async fn the_rest_of_the_verbs_answer() {
    let plane = plane().await;
    let instance = plane
        .json(&["instances", "create", "verbs", "--wait"])
        .await;
    assert_eq!(instance["state"], "ready");
    let iid = instance["id"].as_str().unwrap().to_owned();
    let both = plane
        .run(&["instances", "create", "x", "--wait", "--no-wait"])
        .await;
    assert_eq!(both.status.code(), Some(2), "{}", text(&both));
    let pid = plane
        .json(&["profiles", "create", "--instance", &iid, "p"])
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sid = plane
        .json(&["sessions", "create", "--instance", &iid, "--profile", &pid])
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let at = ["--instance", &iid, "--profile", &pid, "--session", &sid];
    let got = plane
        .json(
            &[
                &["sessions", "get", "--instance", &iid, "--profile", &pid][..],
                &[&sid],
            ]
            .concat(),
        )
        .await;
    assert_eq!(got["id"], sid.as_str());

    // A turn left waiting for an approval: shown, then approved from the command line.
    let victim = tempfile::tempdir().unwrap();
    let waiting = removing(victim.path());
    let sent = plane
        .run(&[&["--output", "json", "turns", "send"][..], &at, &[&waiting]].concat())
        .await;
    assert!(sent.status.success(), "{}", text(&sent));
    let events: Vec<Value> = String::from_utf8_lossy(&sent.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let tid = events[0]["turn_id"].as_str().unwrap().to_owned();
    assert_eq!(events.last().unwrap()["type"], "approval.requested");
    let shown = plane
        .json(&[&["turns", "get"][..], &at, &[&tid]].concat())
        .await;
    assert_eq!(shown["state"], "requires_action", "{shown}");
    let approved = plane
        .json(&[&["turns", "approve"][..], &at, &[&tid, "--choice", "once"]].concat())
        .await;
    assert_eq!(approved["id"], tid.as_str());
    // A session runs one turn at a time: the next is sent once this one has ended.
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let session = hermes
        .instance(&iid.parse().unwrap())
        .profile(&pid.parse().unwrap())
        .session(&sid.parse().unwrap());
    until_turn_is(&session, &tid, "completed").await;
    assert!(
        !victim.path().exists(),
        "approved from the command line, so it ran"
    );
    let bad = plane
        .run(&[&["turns", "approve"][..], &at, &[&tid, "--choice", "maybe"]].concat())
        .await;
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));

    // A question, answered; another approval, cancelled.
    let question = r#"clarify {"question": "Which colour?", "choices": ["red", "blue"]}"#;
    let sent = plane
        .run(&[&["--output", "json", "turns", "send"][..], &at, &[question]].concat())
        .await;
    let asked: Value = serde_json::from_str(
        String::from_utf8_lossy(&sent.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(asked["type"], "clarify.requested", "{asked}");
    let (qid, request) = (
        asked["turn_id"].as_str().unwrap(),
        asked["request_id"].as_str().unwrap(),
    );
    plane
        .json(
            &[
                &["turns", "answer"][..],
                &at,
                &[qid, "--request", request, "blue"],
            ]
            .concat(),
        )
        .await;
    until_turn_is(&session, qid, "completed").await;
    let sent = plane
        .run(&[&["--output", "json", "turns", "send"][..], &at, &[&waiting]].concat())
        .await;
    let asked: Value = serde_json::from_str(
        String::from_utf8_lossy(&sent.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    let cid = asked["turn_id"].as_str().unwrap();
    plane
        .json(&[&["turns", "cancel"][..], &at, &[cid]].concat())
        .await;
    until_turn_is(&session, cid, "cancelled").await;

    // Keys and tools: get and create.
    let created = plane
        .json(&["keys", "create", "k", "--scope", "read"])
        .await;
    let kid = created["key"]["id"].as_str().unwrap();
    assert_eq!(plane.json(&["keys", "get", kid]).await["name"], "k");
    let host = hermes
        .sdk()
        .tool_host_register(&hermes::types::RegisterToolHost {
            url: "http://127.0.0.1:9/mcp".to_owned(),
            secret: "0123456789abcdef".to_owned(),
        })
        .await
        .unwrap();
    let host_id = host.id.to_string();
    let tool = plane
        .json(&[
            "tools",
            "create",
            "lookup",
            "--description",
            "Looks up",
            "--host",
            &host_id,
        ])
        .await;
    assert_eq!(tool["name"], "lookup");
    assert_eq!(tool["input_schema"], serde_json::json!({"type": "object"}));
    let not_json = plane
        .run(&[
            "tools",
            "create",
            "x",
            "--description",
            "d",
            "--host",
            &host_id,
            "--schema",
            "{",
        ])
        .await;
    assert_eq!(not_json.status.code(), Some(2), "{}", text(&not_json));
    let runtimes = plane.json(&["runtimes", "list"]).await;
    assert!(
        runtimes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "hermes-runtime")
    );
    hermes.close().await.unwrap();
}

/// A callback tool `name` registered through the SDK on a tool host nobody serves (enough for
/// commands that only list, show, attach or delete it); its id.
async fn tool_on_an_unreachable_host(
    hermes: &hermes::Hermes,
    name: &str,
    description: &str,
) -> String {
    let host = hermes
        .sdk()
        .tool_host_register(&hermes::types::RegisterToolHost {
            url: "http://127.0.0.1:9/mcp".to_owned(),
            secret: "0123456789abcdef".to_owned(),
        })
        .await
        .unwrap();
    let tool = hermes
        .sdk()
        .tool_register(&hermes::types::RegisterTool {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: serde_json::json!({"type": "object"}),
            host_id: host.id,
        })
        .await
        .unwrap();
    tool.id.to_string()
}

/// Waits (at most 10 s) until turn `id` of `session` is in `state`.
async fn until_turn_is(session: &hermes::SessionHandle, id: &str, state: &str) {
    let turn = session.turn(&id.parse().unwrap());
    let mut now = String::new();
    for _ in 0..200 {
        now = turn.get().await.unwrap().state.as_str().to_owned();
        if now == state {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("turn {id} is still {now}, not {state}");
}

/// `edith <args>` at a pseudo-terminal (`script`), with `EDITH_URL`/`EDITH_API_KEY` for `url`:
/// the keys it is sent, and all it has shown so far.
fn at_a_terminal(
    url: &str,
    args: &[&str],
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    // `exec`: a shell left in between would itself die of the SIGINT the terminal sends.
    let command = format!("exec {} {}", env!("CARGO_BIN_EXE_edith"), args.join(" "));
    let mut child = tokio::process::Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        // A terminal that moves its cursor, as people's do (CI's environment names none).
        .env("TERM", "xterm")
        .env("EDITH_URL", url)
        .env("EDITH_API_KEY", KEY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("script runs");
    let keys = child.stdin.take().unwrap();
    let seen = collect(child.stdout.take().unwrap());
    (child, keys, seen)
}

async fn exit_status(child: &mut tokio::process::Child) -> std::process::ExitStatus {
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("edith ends within 30 s")
        .unwrap()
}

#[tokio::test]
async fn at_a_terminal_provisioning_shows_each_step_and_a_failure_names_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = edith_server::ServerConfig {
        admin_key: Some(KEY.to_owned()),
        ..edith_server::ServerConfig::local(dir.path().to_path_buf())
    };
    // A runtime whose command exits at once: its start fails.
    config.runtimes.insert(
        "broken".to_owned(),
        edith_server::RuntimeCommand {
            program: "/bin/false".into(),
            args: Vec::new(),
        },
    );
    // Our runtime, started after a pause: its step is seen running.
    let runtime =
        std::path::Path::new(env!("CARGO_BIN_EXE_edith")).with_file_name("hermes-runtime");
    let slow = format!("sleep 1; exec '{}' \"$@\"", runtime.display());
    config.runtimes.insert(
        "slow".to_owned(),
        edith_server::RuntimeCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".to_owned(), slow, "slow".to_owned()],
        },
    );
    let server = edith_server::start(config).await.expect("control plane");
    let (mut child, _keys, seen) =
        at_a_terminal(server.url(), &["instances", "create", "good", "--wait"]);
    let status = exit_status(&mut child).await;
    let shown = seen.lock().unwrap().clone();
    assert!(status.success(), "{shown}");
    for step in [
        "✓ [1/3] prepare_home",
        "✓ [2/3] start_runtime",
        "✓ [3/3] connect_gateway",
    ] {
        assert!(shown.contains(step), "{step}: {shown}");
    }
    assert!(shown.contains("instance ready"), "{shown}");

    // While a step runs, its spinner turns (indicatif's frames) beside its name.
    let args = ["instances", "create", "slow", "--provider", "process"];
    let (mut child, _keys, seen) =
        at_a_terminal(server.url(), &[&args[..], &["--runtime", "slow"]].concat());
    let status = exit_status(&mut child).await;
    let shown = seen.lock().unwrap().clone();
    assert!(status.success(), "{shown}");
    let frames: Vec<char> = "⠁⠂⠄⡀⢀⠠⠐⠈".chars().collect();
    let spun: std::collections::BTreeSet<char> = shown
        .match_indices(" [2/3] start_runtime")
        .filter_map(|(at, _)| shown[..at].chars().last())
        .filter(|c| frames.contains(c))
        .collect();
    assert!(
        spun.len() >= 2,
        "the spinner turned while it ran: {spun:?} in {shown}"
    );
    assert!(shown.contains("✓ [2/3] start_runtime"), "{shown}");

    let args = [
        "instances",
        "create",
        "bad",
        "--provider",
        "process",
        "--runtime",
        "broken",
    ];
    let (mut child, _keys, seen) = at_a_terminal(server.url(), &args);
    let status = exit_status(&mut child).await;
    let shown = seen.lock().unwrap().clone();
    assert!(!status.success(), "{shown}");
    assert!(
        shown.contains("✗ start_runtime:"),
        "the failed step, marked: {shown}"
    );
    assert!(shown.contains("the job failed: start_runtime"), "{shown}");
    // The reason follows the step: the runtime's command exited.
    let reason = shown
        .split("✗ start_runtime:")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_default();
    assert!(reason.contains("exit"), "the reason: {reason:?} in {shown}");

    // Without a terminal, the same failure is a line that names the step and the reason.
    let piped = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
        .args(args)
        .env("EDITH_URL", server.url())
        .env("EDITH_API_KEY", KEY)
        .env_remove("EDITH_CONFIG")
        .output();
    let piped = tokio::time::timeout(Duration::from_secs(60), piped)
        .await
        .expect("edith ends within 60 s")
        .unwrap();
    assert!(!piped.status.success());
    let said = String::from_utf8_lossy(&piped.stderr);
    let failed = said
        .lines()
        .find(|line| line.contains("start_runtime") && line.contains("exit"));
    assert!(failed.is_some(), "{said}");
    server.shutdown().await;
}

#[tokio::test]
async fn at_a_terminal_chat_answers_an_approval_and_two_ctrl_c_mid_turn_quit() {
    use tokio::io::AsyncWriteExt;
    let plane = plane().await;
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let instance = hermes
        .instances()
        .create("tty")
        .await
        .unwrap()
        .ready()
        .await
        .unwrap();
    let profile = instance
        .profiles()
        .create(hermes::ProfileSpec::new("tty"))
        .await
        .unwrap();
    let (iid, pid) = (instance.id().to_string(), profile.id().to_string());
    let (mut child, mut keys, seen) = at_a_terminal(plane.server.url(), &["chat", &iid, &pid]);
    until_seen(&seen, "> ", 1).await;
    let victim = tempfile::tempdir().unwrap();
    let command = format!("rm -rf {}", victim.path().display());
    let line = format!("terminal {}\n", serde_json::json!({ "command": command }));
    keys.write_all(line.as_bytes()).await.unwrap();
    until_seen(&seen, &format!("run `{command}`?"), 1).await;
    keys.write_all(b"once\n").await.unwrap();
    until_seen(&seen, "terminal returned", 1).await;
    until_seen(&seen, "> ", 2).await;
    assert!(
        !victim.path().exists(),
        "approved at the terminal, so it ran"
    );

    // A question typed at: Ctrl-C while it waits cancels the turn, and the chat goes on.
    let question = serde_json::json!({"question": "Which colour?", "choices": ["red", "blue"]});
    keys.write_all(format!("clarify {question}\n").as_bytes())
        .await
        .unwrap();
    until_seen(&seen, "Which colour? (red, blue): ", 1).await;
    keys.write_all(b"\x03").await.unwrap();
    until_seen(&seen, "[cancelling", 1).await;
    until_seen(&seen, "> ", 3).await;

    // Asked again, then Ctrl-C at the approval cancels the turn, and a second quits.
    let other = tempfile::tempdir().unwrap();
    let line = format!(
        "terminal {}\n",
        serde_json::json!({ "command": format!("rm -rf {}", other.path().display()) })
    );
    keys.write_all(line.as_bytes()).await.unwrap();
    until_seen(&seen, "run `rm -rf", 2).await;
    keys.write_all(b"\x03").await.unwrap();
    until_seen(&seen, "[cancelling", 2).await;
    keys.write_all(b"\x03").await.unwrap();
    let status = exit_status(&mut child).await;
    assert!(status.success(), "{status}\n{}", seen.lock().unwrap());
    assert!(other.path().exists(), "cancelled, so it did not run");
    hermes.close().await.unwrap();
}

#[tokio::test]
async fn without_a_terminal_each_step_is_a_line_and_filters_tools_help_and_hints_work() {
    let plane = plane().await;

    // Table output, stderr not a terminal: one line per step, then the instance's state.
    let created = plane.run(&["instances", "create", "lines"]).await;
    assert!(created.status.success(), "{}", text(&created));
    let said = String::from_utf8_lossy(&created.stderr);
    let steps: Vec<&str> = said.lines().filter(|line| line.starts_with('[')).collect();
    assert!(steps.len() >= 2, "{said}");
    for (index, step) in steps.iter().enumerate() {
        let of = steps.len();
        assert!(
            step.starts_with(&format!("[{}/{of}] ", index + 1)) && step.ends_with(" …"),
            "{said}"
        );
    }
    assert_eq!(said.lines().last(), Some("instance ready"), "{said}");
    let iid = plane.json(&["instances", "list"]).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A profile made with a callback tool attached.
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let tid = tool_on_an_unreachable_host(&hermes, "lookup", "Looks up").await;
    let profile = plane
        .json(&[
            "profiles",
            "create",
            "--instance",
            &iid,
            "--tool",
            &tid,
            "p",
        ])
        .await;
    assert_eq!(profile["tools"], serde_json::json!([tid]), "{profile}");
    let pid = profile["id"].as_str().unwrap().to_owned();

    // Turns listed by state.
    let sid = plane
        .json(&["sessions", "create", "--instance", &iid, "--profile", &pid])
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let at = ["--instance", &iid, "--profile", &pid, "--session", &sid];
    let sent = plane
        .run(&[&["turns", "send"][..], &at, &["hi"]].concat())
        .await;
    assert!(sent.status.success(), "{}", text(&sent));
    for (state, count) in [("completed", 1), ("failed", 0)] {
        let args = [&["turns", "list"][..], &at, &["--state", state]].concat();
        let listed = plane.json(&args).await;
        assert_eq!(listed.as_array().unwrap().len(), count, "{state}: {listed}");
    }
    let bad = plane
        .run(&[&["turns", "list"][..], &at, &["--state", "finished"]].concat())
        .await;
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not a turn state"),
        "{}",
        text(&bad)
    );

    // Help says what a command does and what it takes.
    let help = plane.run(&["instances", "create", "--help"]).await;
    assert!(help.status.success(), "{}", text(&help));
    let shown = String::from_utf8_lossy(&help.stdout);
    assert!(
        shown.contains("--wait") && shown.contains("--label") && shown.contains("Usage:"),
        "{shown}"
    );
    let top = plane.run(&["--help"]).await;
    let shown = String::from_utf8_lossy(&top.stdout);
    for verb in ["instances", "profiles", "sessions", "turns", "chat", "keys"] {
        assert!(shown.contains(verb), "{verb}: {shown}");
    }

    // A control plane that cannot be reached: the error says what to check.
    let unreachable = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
        .args(["instances", "list"])
        .env("EDITH_URL", "http://127.0.0.1:9")
        .env("EDITH_API_KEY", KEY)
        .kill_on_drop(true)
        .output();
    let unreachable = tokio::time::timeout(Duration::from_secs(60), unreachable)
        .await
        .expect("edith ends within 60 s")
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(1), "{}", text(&unreachable));
    let said = String::from_utf8_lossy(&unreachable.stderr);
    assert!(
        said.contains("cannot reach the control plane") && said.contains("edith serve"),
        "{said}"
    );
    hermes.close().await.unwrap();
}

/// The names listed in the `Commands:` section of a help text (`help` aside).
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command and subcommand explains itself, and each of its arguments and options.
#[test]
fn every_command_and_argument_has_a_help_text() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_edith"))
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let mut commands: Vec<Vec<String>> = Vec::new();
    for top in commands_in(&help(&[])) {
        let verbs = commands_in(&help(&[top.as_str()]));
        commands.push(vec![top.clone()]);
        commands.extend(verbs.into_iter().map(|verb| vec![top.clone(), verb]));
    }
    assert!(commands.len() > 30, "{commands:?}");
    let mut unexplained = Vec::new();
    for command in &commands {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let text = help(&args);
        assert!(
            text.lines()
                .next()
                .is_some_and(|line| !line.trim().is_empty() && !line.starts_with("Usage")),
            "{args:?} has no description:\n{text}"
        );
        // Under `Arguments:` and `Options:`, a line that is only a name and a value lacks its
        // explanation.
        let mut listing = false;
        for line in text.lines() {
            if line.starts_with("Arguments:") || line.starts_with("Options:") {
                listing = true;
                continue;
            }
            if !line.starts_with(' ') {
                listing = false;
            }
            let item = line.trim();
            let named = item.starts_with('-') || item.starts_with('<') || item.starts_with('[');
            if listing
                && named
                && item
                    .split("  ")
                    .filter(|part| !part.trim().is_empty())
                    .count()
                    < 2
            {
                unexplained.push(format!("{}: {item}", args.join(" ")));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "without a help text:\n{}",
        unexplained.join("\n")
    );
}

/// The rows of a table `edith` printed, each cell read from under its header (counted in
/// characters, as a terminal shows them): the columns must line up, so a cell that does not
/// start where its header does is read wrongly and fails.
fn table_rows(shown: &str, headers: &[&str]) -> Vec<Vec<String>> {
    let mut lines = shown.lines();
    let header_line: Vec<char> = lines.next().unwrap_or_default().chars().collect();
    let header_text: String = header_line.iter().collect();
    assert_eq!(
        header_text.split("  ").filter(|h| !h.is_empty()).count(),
        headers.len(),
        "only these headers: {header_text:?}"
    );
    let mut starts = Vec::new();
    for header in headers {
        let wanted: Vec<char> = header.chars().collect();
        let from = starts.last().map_or(0, |&at: &usize| at + 1);
        let at = (from..header_line.len())
            .find(|&at| header_line[at..].starts_with(&wanted))
            .unwrap_or_else(|| panic!("no header {header} in {header_text:?}"));
        starts.push(at);
    }
    lines
        .map(|line| {
            let line: Vec<char> = line.chars().collect();
            let text: String = line.iter().collect();
            starts
                .iter()
                .enumerate()
                .map(|(i, &start)| {
                    let end = starts.get(i + 1).copied().unwrap_or(line.len());
                    let end = end.min(line.len());
                    assert!(
                        start == 0 || line.get(start - 1) == Some(&' '),
                        "column {} starts under its header: {text:?}",
                        headers[i]
                    );
                    let cell: String = line[start.min(end)..end].iter().collect();
                    cell.trim().to_owned()
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn every_resource_is_listed_as_an_aligned_table_for_people() {
    let plane = plane().await;
    let hermes = hermes::Hermes::remote(plane.server.url(), Some(KEY));
    let iid = plane.id(&["instances", "create", "tables"]).await;
    let pid = plane
        .id(&["profiles", "create", "--instance", &iid, "helper"])
        .await;
    let tid = tool_on_an_unreachable_host(&hermes, "noop", "Does nothing at all").await;
    hermes
        .instance(&iid.parse().unwrap())
        .profile(&pid.parse().unwrap())
        .attach_tool(&tid.parse().unwrap())
        .await
        .unwrap();
    let sid = plane
        .id(&[
            "sessions",
            "create",
            "--instance",
            &iid,
            "--profile",
            &pid,
            "--title",
            "Notes",
        ])
        .await;
    let key = plane
        .json(&["keys", "create", "reader", "--scope", "read"])
        .await;
    let kid = key["key"]["id"].as_str().unwrap().to_owned();
    let prefix = key["key"]["prefix"].as_str().unwrap().to_owned();

    let table = |args: &'static [&'static str], extra: Vec<String>| {
        let plane = &plane;
        async move {
            let mut all: Vec<&str> = args.to_vec();
            all.extend(extra.iter().map(String::as_str));
            let output = plane.run(&all).await;
            assert!(output.status.success(), "{}", text(&output));
            String::from_utf8(output.stdout).unwrap()
        }
    };
    let profiles = table(&["profiles", "list", "--instance"], vec![iid.clone()]).await;
    let rows = table_rows(&profiles, &["ID", "NAME", "TOOLS", "CREATED"]);
    assert_eq!(rows.len(), 1, "{profiles}");
    assert_eq!(rows[0][..3], [pid.as_str(), "helper", "1"], "{profiles}");
    assert!(rows[0][3].starts_with("20"), "a time: {profiles}");

    let sessions = table(
        &["sessions", "list", "--instance"],
        vec![iid.clone(), "--profile".into(), pid.clone()],
    )
    .await;
    let rows = table_rows(&sessions, &["ID", "TITLE", "NATIVE SESSION", "CREATED"]);
    assert_eq!(rows.len(), 1, "{sessions}");
    // No turn has run yet, so it has no native session: a dash says so.
    assert_eq!(rows[0][..3], [sid.as_str(), "Notes", "-"], "{sessions}");

    let instances = table(&["instances", "list"], vec![]).await;
    let rows = table_rows(&instances, &["ID", "NAME", "PROVIDER", "STATE", "REASON"]);
    assert_eq!(
        rows,
        [[iid.as_str(), "tables", "embedded", "ready", "-"]],
        "{instances}"
    );

    let at = vec![
        iid.clone(),
        "--profile".into(),
        pid.clone(),
        "--session".into(),
        sid.clone(),
    ];
    let sent = table(
        &["turns", "send", "--instance"],
        [&at[..], &["in a table".into()]].concat(),
    )
    .await;
    assert!(sent.contains("You said: in a table"), "{sent}");
    let turns = table(&["turns", "list", "--instance"], at).await;
    let rows = table_rows(&turns, &["ID", "STATE", "OUTPUT", "ERROR"]);
    assert_eq!(rows.len(), 1, "{turns}");
    assert!(rows[0][0].starts_with("turn_"), "{turns}");
    assert_eq!(
        rows[0][1..],
        ["completed", "You said: in a table", "-"],
        "{turns}"
    );

    let tools = table(&["tools", "list"], vec![]).await;
    let rows = table_rows(&tools, &["ID", "NAME", "HOST", "DESCRIPTION"]);
    assert_eq!(rows.len(), 1, "{tools}");
    assert_eq!(rows[0][..2], [tid.as_str(), "noop"], "{tools}");
    assert!(rows[0][2].starts_with("th_"), "{tools}");
    assert_eq!(rows[0][3], "Does nothing at all", "{tools}");

    let runtimes = table(&["runtimes"], vec![]).await;
    let rows = table_rows(&runtimes, &["NAME", "VERSION", "PROGRAM"]);
    let ours = rows
        .iter()
        .find(|row| row[0] == "hermes-runtime")
        .unwrap_or_else(|| panic!("{runtimes}"));
    // The version is what the program itself says (`--version`), spaces and all.
    assert!(ours[1].starts_with("hermes-runtime 0."), "{runtimes}");
    assert!(ours[2].ends_with("hermes-runtime"), "{runtimes}");

    plane.json(&["keys", "revoke", &kid]).await;
    let keys = table(&["keys", "list"], vec![]).await;
    let rows = table_rows(
        &keys,
        &["ID", "NAME", "PREFIX", "SCOPE", "LAST USED", "REVOKED"],
    );
    let reader = rows
        .iter()
        .find(|row| row[0] == kid)
        .unwrap_or_else(|| panic!("{keys}"));
    assert_eq!(
        reader[1..5],
        ["reader", prefix.as_str(), "read", "-"],
        "{keys}"
    );
    assert!(reader[5].starts_with("20"), "revoked at a time: {keys}");
    assert!(
        rows.iter()
            .any(|row| row[3] == "admin" && row[4].starts_with("20")),
        "the admin key, used: {keys}"
    );
    hermes.close().await.unwrap();
}

#[tokio::test]
async fn tool_hosts_attachments_jobs_and_a_turns_events_from_the_terminal() {
    let plane = plane().await;
    let json_lines = |output: &Output| -> Vec<Value> {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };

    // A tool host: its secret from standard input, never an argument, and never shown.
    let secret = "a-tool-host-secret-0123456789";
    let register = ["--output", "json", "tool-hosts", "register"];
    let url = "http://127.0.0.1:9/mcp";
    let output = plane
        .run_with(
            KEY,
            &[&register[..], &[url]].concat(),
            &format!("{secret}\n"),
        )
        .await;
    assert!(output.status.success(), "{}", text(&output));
    let host: Value = serde_json::from_slice(&output.stdout).unwrap();
    let hid = host["id"].as_str().unwrap().to_owned();
    assert!(hid.starts_with("th_") && host["url"] == url, "{host}");
    assert!(!text(&output).contains(secret), "the secret is not shown");
    let none = plane
        .run_with(KEY, &[&register[..], &[url]].concat(), "")
        .await;
    assert!(!none.status.success());
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("EDITH_TOOL_HOST_SECRET"),
        "{}",
        text(&none)
    );
    let short = plane
        .run_with(KEY, &[&register[..], &[url]].concat(), "short\n")
        .await;
    assert!(!short.status.success(), "{}", text(&short));
    let moved = plane
        .json(&[
            "tool-hosts",
            "update",
            &hid,
            "--endpoint",
            "http://127.0.0.1:10/mcp",
        ])
        .await;
    assert_eq!(moved["url"], "http://127.0.0.1:10/mcp");
    let shown = plane.run(&["tool-hosts", "get", &hid]).await;
    let shown = String::from_utf8_lossy(&shown.stdout);
    let rows = table_rows(&shown, &["ID", "URL", "CREATED"]);
    assert_eq!(
        rows[0][..2],
        [hid.as_str(), "http://127.0.0.1:10/mcp"],
        "{shown}"
    );
    let listed = plane.run(&["tool-hosts", "list"]).await;
    let listed = String::from_utf8_lossy(&listed.stdout);
    let rows = table_rows(&listed, &["ID", "URL", "CREATED"]);
    assert!(
        rows.iter().any(|row| row[0] == hid),
        "the host is listed: {listed}"
    );

    // A tool it serves, attached to a profile and detached again.
    let tool = plane
        .json(&[
            "tools",
            "create",
            "noop",
            "--description",
            "Nothing",
            "--host",
            &hid,
        ])
        .await;
    let tid = tool["id"].as_str().unwrap().to_owned();
    let iid = plane.id(&["instances", "create", "attach"]).await;
    let pid = plane
        .id(&["profiles", "create", "--instance", &iid, "helper"])
        .await;
    let attached = plane
        .json(&["profiles", "attach-tool", "--instance", &iid, &pid, &tid])
        .await;
    assert_eq!(attached["tools"], serde_json::json!([tid]), "{attached}");
    // In use: the host cannot go, and says what uses it.
    let in_use = plane.run(&["tool-hosts", "delete", &hid]).await;
    assert!(!in_use.status.success());
    assert!(
        String::from_utf8_lossy(&in_use.stderr).contains(&tid),
        "{}",
        text(&in_use)
    );
    let detached = plane
        .json(&["profiles", "detach-tool", "--instance", &iid, &pid, &tid])
        .await;
    assert_eq!(detached["tools"], serde_json::json!([]), "{detached}");
    plane.json(&["tools", "delete", &tid]).await;
    assert_eq!(
        plane.json(&["tool-hosts", "delete", &hid]).await["id"],
        hid.as_str()
    );

    // The instance's jobs: its provisioning, done.
    let jobs = plane.json(&["jobs", "list", "--instance", &iid]).await;
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs[0]["kind"], "instance.provision", "{jobs}");
    let table = plane.run(&["jobs", "list", "--instance", &iid]).await;
    let table = String::from_utf8_lossy(&table.stdout);
    let rows = table_rows(&table, &["ID", "KIND", "STATE", "STEPS", "ERROR"]);
    assert_eq!(
        rows[0][1..4],
        ["instance.provision", "succeeded", "3/3"],
        "{table}"
    );

    // A turn's events, printed after it ended: a line each for people, JSON for scripts.
    let sid = plane
        .id(&["sessions", "create", "--instance", &iid, "--profile", &pid])
        .await;
    let at = ["--instance", &iid, "--profile", &pid, "--session", &sid];
    let sent = plane
        .run(
            &[
                &["--output", "json", "turns", "send"][..],
                &at,
                &["hello events"],
            ]
            .concat(),
        )
        .await;
    let sent = json_lines(&sent);
    let turn = sent[0]["turn_id"].as_str().unwrap().to_owned();
    let logged = plane
        .run(&[&["--output", "json", "turns", "events"][..], &at, &[&turn]].concat())
        .await;
    assert!(logged.status.success(), "{}", text(&logged));
    assert_eq!(
        json_lines(&logged),
        sent,
        "the log is what the turn streamed"
    );
    let lines = plane
        .run(&[&["turns", "events"][..], &at, &[&turn]].concat())
        .await;
    let lines = String::from_utf8_lossy(&lines.stdout).into_owned();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), sent.len(), "{lines:?}");
    assert_eq!(lines[0], "   1  turn.started");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#"message.delta  {"text":"#)),
        "{lines:?}"
    );
    assert!(
        lines.last().unwrap().contains("turn.finished  {"),
        "{lines:?}"
    );

    // A session busy with a turn: the next one is refused, and the refusal says what to do.
    let victim = tempfile::tempdir().unwrap();
    let waiting = removing(victim.path());
    let left = plane
        .run(&[&["--output", "json", "turns", "send"][..], &at, &[&waiting]].concat())
        .await;
    let left = json_lines(&left)[0]["turn_id"].as_str().unwrap().to_owned();
    let busy = plane
        .run(&[&["turns", "send"][..], &at, &["and another"]].concat())
        .await;
    assert!(!busy.status.success());
    let said = String::from_utf8_lossy(&busy.stderr);
    assert!(
        said.contains("turns cancel") && said.contains(&left),
        "{said}"
    );
    // `turns events` on the waiting turn follows it until it ends, here by a cancel.
    let events = [&["turns", "events"][..], &at, &[&left]].concat();
    let cancel = [&["turns", "cancel"][..], &at, &[&left]].concat();
    let (followed, _) = tokio::join!(plane.run(&events), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        plane.json(&cancel).await
    });
    let followed = String::from_utf8_lossy(&followed.stdout).into_owned();
    assert!(followed.contains("approval.requested"), "{followed}");
    let last = followed.lines().last().unwrap_or_default();
    assert!(
        last.contains("turn.finished") && last.contains("cancelled"),
        "{followed}"
    );

    // Deleted, the instance is printed as such for scripts; asked for again, it is not found
    // and the error says where to look.
    let deleted = plane.json(&["instances", "delete", &iid]).await;
    assert_eq!(
        (deleted["id"].as_str(), deleted["state"].as_str()),
        (Some(iid.as_str()), Some("deleted"))
    );
    let gone = plane.run(&["jobs", "list", "--instance", &iid]).await;
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(
        said.contains("not found") && said.contains("edith instances list"),
        "{said}"
    );
    assert!(victim.path().exists(), "the cancelled command never ran");
}

#[tokio::test]
async fn at_a_terminal_a_tool_hosts_secret_is_typed_unseen_and_an_empty_one_is_refused() {
    use tokio::io::AsyncWriteExt;
    let plane = plane().await;
    let secret = "typed-at-the-terminal-0123456789";
    let args = [
        "--output",
        "json",
        "tool-hosts",
        "register",
        "http://127.0.0.1:9/mcp",
    ];
    let (mut child, mut keys, seen) = at_a_terminal(plane.server.url(), &args);
    until_seen(&seen, "Tool host secret (not shown):", 1).await;
    keys.write_all(format!("{secret}\r").as_bytes())
        .await
        .unwrap();
    let status = exit_status(&mut child).await;
    let shown = seen.lock().unwrap().clone();
    assert!(status.success(), "{shown}");
    assert!(shown.contains("\"th_"), "registered: {shown}");
    assert!(!shown.contains(secret), "the secret was echoed: {shown}");

    let empty = tokio::process::Command::new(env!("CARGO_BIN_EXE_edith"))
        .args(&args[2..])
        .env("EDITH_URL", plane.server.url())
        .env("EDITH_API_KEY", KEY)
        .env("EDITH_TOOL_HOST_SECRET", "")
        .stdin(std::process::Stdio::null())
        .output();
    let empty = tokio::time::timeout(Duration::from_secs(60), empty)
        .await
        .expect("edith ends within 60 s")
        .unwrap();
    assert!(!empty.status.success(), "{}", text(&empty));
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("no secret"),
        "{}",
        text(&empty)
    );
}
