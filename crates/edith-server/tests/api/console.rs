//! The web console, driven in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, which `scripts/test` installs): sign in, create an instance and see it
//! become ready, start a session, send a message and see the streamed answer (also while it
//! is still arriving), approve a command from the keyboard, read an earlier turn's events. A
//! screenshot of each step goes to `target/console-screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::{ADMIN_KEY, Ctx};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/lib/chromium/chromium";
/// How long the page may take to show what a step expects.
const WAIT: Duration = Duration::from_secs(30);

async fn browser() -> (testkit::ReadyProcess, Client) {
    assert!(
        std::path::Path::new(CHROMEDRIVER).exists(),
        "{CHROMEDRIVER} is missing: `apt-get install chromium chromium-driver` (scripts/test does)"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = tokio::process::Command::new(CHROMEDRIVER);
    command.arg(format!("--port={port}"));
    let driver = testkit::ReadyProcess::spawn(
        command,
        "ChromeDriver was started successfully",
        Duration::from_secs(30),
    )
    .await;
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"],
        }),
    );
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}")),
    )
    .await
    .expect("Chromium started within 60 s")
    .expect("a WebDriver session");
    (driver, client)
}

/// Saves what the page shows now as `target/console-screenshots/<name>.png`.
async fn screenshot(client: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    // The newest part of the page is at its bottom.
    client
        .execute("window.scrollTo(0, document.body.scrollHeight);", vec![])
        .await
        .unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// What the scripted model takes for a `terminal` call that removes `dir` (it needs an
/// approval).
fn removing(dir: &std::path::Path) -> String {
    format!(
        "terminal {}",
        json!({"command": format!("rm -rf {}", dir.display())})
    )
}

async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("`{css}` did not appear within {WAIT:?}: {e}"))
}

async fn click_text(client: &Client, text: &str) {
    let xpath = format!("//*[self::a or self::button][normalize-space()='{text}']");
    let found = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(&xpath))
        .await
        .unwrap_or_else(|e| panic!("no link or button `{text}`: {e}"));
    found.click().await.unwrap();
}

/// Every piece of text on the page is readable: a contrast of at least 4.5:1 (WCAG AA) with
/// the background it stands on (disabled controls aside, as WCAG has them).
async fn text_is_readable(client: &Client) {
    let poor = client
        .execute(
            r#"
            const rgb = (c) => c.match(/[\d.]+/g).map(Number);
            const lum = ([r, g, b]) => {
              const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
              return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
            };
            const background = (el) => {
              for (; el; el = el.parentElement) {
                const c = rgb(getComputedStyle(el).backgroundColor);
                if (c.length < 4 || c[3] > 0) return c;
              }
              return [255, 255, 255];
            };
            const poor = [];
            for (const el of document.querySelectorAll('body *')) {
              const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
              if (!own || el.disabled || el.closest('[hidden]')) continue;
              const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(background(el))];
              const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
              if (ratio < 4.5) poor.push(`${el.tagName} ${el.textContent.trim().slice(0, 30)}: ${ratio.toFixed(2)}`);
            }
            return poor;"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(poor, json!([]), "text below 4.5:1");
}

/// Every form control on the page has a label.
async fn every_control_is_labelled(client: &Client) {
    let unlabelled = client
        .execute(
            "return [...document.querySelectorAll('input, textarea, select')]\
               .filter(c => c.labels.length === 0).map(c => c.outerHTML);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(unlabelled, json!([]), "controls without a label");
}

/// Waits until the page says `condition` (a JavaScript expression) is true.
async fn wait_until(client: &Client, condition: &str) {
    let script = format!("return Boolean({condition});");
    for _ in 0..300 {
        if client.execute(&script, vec![]).await.unwrap() == json!(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("`{condition}` was not so within 30 s");
}

async fn send(client: &Client, text: &str) {
    let message = wait_for(client, "#message").await;
    message.send_keys(text).await.unwrap();
    click_text(client, "Send").await;
}

const TURNS_ENDED: &str = "document.querySelectorAll('.turn-end').length";

/// The id (or, without one, the text) of the element with the focus.
async fn focused(client: &Client) -> String {
    let found = client
        .execute(
            "const e = document.activeElement; return e.id || e.textContent;",
            vec![],
        )
        .await
        .unwrap();
    found.as_str().unwrap_or_default().to_owned()
}

/// Presses Tab on the element with the focus.
async fn tab(client: &Client) {
    client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E004}")
        .await
        .unwrap();
}

/// Presses Shift+Tab on the element with the focus.
async fn back_tab(client: &Client) {
    client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E008}\u{E004}")
        .await
        .unwrap();
}

/// Presses Enter on the element with the focus.
async fn enter(client: &Client) {
    client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
}

/// The events a turn's panel shows, one JSON object a line.
async fn panel_events(client: &Client, panel: usize) -> Vec<serde_json::Value> {
    let lines = client
        .execute(
            &format!(
                "return document.querySelectorAll('.conversation details')[{panel}]\
                   .querySelector('pre').textContent.split('\\n').filter(l => l);"
            ),
            vec![],
        )
        .await
        .unwrap();
    let lines: Vec<String> = serde_json::from_value(lines).unwrap();
    lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A `process` runtime named `slow`: our runtime, started after a pause (as the real Hermes
/// takes a second or more), so a provisioning step is seen while it runs. Its script lives in
/// `dir`.
fn slow_runtime(dir: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let runtime = crate::edith_binary().with_file_name("hermes-runtime");
    let script = dir.join("slow-runtime");
    let text = format!("#!/bin/sh\nsleep 3\nexec '{}' \"$@\"\n", runtime.display());
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("slow={}", script.display())
}

#[tokio::test]
async fn the_console_in_a_browser_signs_in_provisions_chats_and_approves() {
    let scripts = tempfile::tempdir().unwrap();
    let slow = slow_runtime(scripts.path());
    let ctx = Ctx::serve_with(tempfile::tempdir().unwrap(), &["--runtime", &slow]).await;
    let (driver, client) = browser().await;
    // The browser reaches the server through a proxy whose connections the test can cut.
    let server = ctx.url("").trim_start_matches("http://").parse().unwrap();
    let proxy = testkit::CutProxy::start(server).await;
    let console = format!("{}/console", proxy.url());

    // A wrong key is refused in place; the right one, typed and sent with Enter (the key
    // field has the focus), signs in.
    client.goto(&console).await.unwrap();
    let key = wait_for(&client, "#api-key").await;
    every_control_is_labelled(&client).await;
    assert_eq!(focused(&client).await, "api-key");
    // Tab goes from the key to its button, and back with Shift+Tab.
    tab(&client).await;
    assert_eq!(focused(&client).await, "Sign in");
    back_tab(&client).await;
    assert_eq!(focused(&client).await, "api-key");
    key.send_keys("edk_not_a_key\u{E007}").await.unwrap();
    let refused = wait_for(&client, "[role=alert]")
        .await
        .text()
        .await
        .unwrap();
    assert!(refused.contains("key"), "{refused}");
    screenshot(&client, "01-sign-in-refused").await;
    key.clear().await.unwrap();
    key.send_keys(&format!("{ADMIN_KEY}\u{E007}"))
        .await
        .unwrap();
    wait_for(&client, "#field-name").await;
    every_control_is_labelled(&client).await;
    // The key is kept for this tab only: in its session storage, not in local storage or a
    // cookie.
    let kept = client
        .execute(
            "return [sessionStorage.getItem('edith.apiKey'), localStorage.length, document.cookie];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(kept, json!([ADMIN_KEY, 0, ""]));

    // Create an instance from the keyboard (Enter in its name field) and follow its
    // provisioning step by step until it is ready.
    let name = client.find(Locator::Css("#field-name")).await.unwrap();
    name.send_keys("browser\u{E007}").await.unwrap();
    wait_for(&client, "section .state-ready").await;
    let steps = client
        .execute(
            "return [...document.querySelectorAll('ol.steps li')].map(li => li.textContent);",
            vec![],
        )
        .await
        .unwrap();
    let steps: Vec<String> = serde_json::from_value(steps).unwrap();
    assert!(steps.len() >= 2, "{steps:?}");
    assert!(steps.iter().all(|step| step.ends_with("done")), "{steps:?}");
    text_is_readable(&client).await;
    screenshot(&client, "02-instance-ready").await;

    // Another on the operator's `slow` runtime, chosen from the keyboard (Tab from the name to
    // the runtime, then to the button): its start is seen running, then done.
    let name = client.find(Locator::Css("#field-name")).await.unwrap();
    name.send_keys("slow-one").await.unwrap();
    tab(&client).await;
    assert_eq!(focused(&client).await, "field-runtime");
    let runtime = client.find(Locator::Css("#field-runtime")).await.unwrap();
    runtime.select_by_value("slow").await.unwrap();
    tab(&client).await;
    assert_eq!(focused(&client).await, "Create instance");
    enter(&client).await;
    wait_for(&client, "#step-start_runtime .state-running").await;
    screenshot(&client, "02b-instance-starting").await;
    wait_for(&client, "#step-start_runtime .state-done").await;
    wait_for(&client, "section .state-ready").await;
    // The list shows it on its provider (once it is read again after the job).
    wait_until(
        &client,
        "[...document.querySelectorAll('tbody tr')].some(tr => tr.textContent === 'slow-oneprocessready')",
    )
    .await;

    // One made elsewhere (through the API, as the CLI or an application would): its page
    // shows its provisioning steps live too, then its state once ready.
    let (status, made) = ctx
        .post(
            "/v1/instances",
            r#"{"name": "made-elsewhere", "provider": "process", "runtime": "slow"}"#,
        )
        .await;
    assert_eq!(status, 202, "{made}");
    let elsewhere = made["instance"]["id"].as_str().unwrap();
    client
        .execute(
            &format!("location.hash = '#/instances/{elsewhere}';"),
            vec![],
        )
        .await
        .unwrap();
    wait_for(&client, "#step-start_runtime .state-running").await;
    screenshot(&client, "02c-provisioning-seen-on-its-page").await;
    wait_for(&client, "#step-start_runtime .state-done").await;
    wait_until(
        &client,
        "document.body.textContent.includes('made-elsewhere is ready')",
    )
    .await;
    wait_for(&client, "p .state-ready").await;
    client
        .execute("location.hash = '#/instances';", vec![])
        .await
        .unwrap();
    wait_until(
        &client,
        "[...document.querySelectorAll('tbody tr')].some(tr => tr.textContent === 'made-elsewhereprocessready')",
    )
    .await;

    // A profile, then a session. The profile is given a callback tool through the API; its
    // page names it.
    let tool = ctx.echo_tool().await;
    click_text(&client, "browser").await;
    // The instance's page, not the list's field of the same id before it re-renders.
    wait_until(
        &client,
        "[...document.querySelectorAll('button')].some(b => b.textContent === 'Create profile')",
    )
    .await;
    let profile = client.find(Locator::Css("#field-name")).await.unwrap();
    profile.send_keys("assistant").await.unwrap();
    click_text(&client, "Create profile").await;
    click_text(&client, "assistant").await;
    wait_until(&client, "location.hash.includes('/profiles/')").await;
    let hash = client
        .execute("return location.hash;", vec![])
        .await
        .unwrap();
    let profile_path = hash.as_str().unwrap().trim_start_matches('#').to_owned();
    let path = format!("/v1{profile_path}/tools/{tool}");
    let (status, attached) = ctx.send(reqwest::Method::PUT, &path, None).await;
    assert_eq!(status, 200, "{attached}");
    client.refresh().await.unwrap();
    wait_until(
        &client,
        "document.body.textContent.includes('Tools: echo.')",
    )
    .await;
    click_text(&client, "New session").await;
    wait_for(&client, "#message").await;
    every_control_is_labelled(&client).await;
    screenshot(&client, "02d-session-started").await;
    // The profile's page lists the new session, and its link leads back to it.
    let session_hash = client
        .execute("return location.hash;", vec![])
        .await
        .unwrap();
    let session_hash = session_hash.as_str().unwrap().to_owned();
    let sid = session_hash.rsplit('/').next().unwrap().to_owned();
    client
        .execute(&format!("location.hash = '#{profile_path}';"), vec![])
        .await
        .unwrap();
    wait_until(
        &client,
        &format!("[...document.querySelectorAll('li a')].some(a => a.textContent === '{sid}')"),
    )
    .await;
    click_text(&client, &sid).await;
    wait_until(&client, &format!("location.hash === '{session_hash}'")).await;
    wait_for(&client, "#message").await;

    // A message, and its answer, made of the streamed pieces.
    send(&client, "hello console").await;
    wait_until(&client, &format!("{TURNS_ENDED} === 1")).await;
    wait_for(&client, ".turn-end .state-completed").await;
    let answer = client
        .find(Locator::Css(".message.assistant"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(answer, "You said: hello console");
    let deltas = client
        .execute(
            "return document.getElementById('raw-events').textContent\
               .split('\\n').filter(l => l.includes('message.delta')).length;",
            vec![],
        )
        .await
        .unwrap();
    assert!(deltas.as_u64().unwrap() > 1, "streamed in pieces: {deltas}");
    screenshot(&client, "03-streamed-answer").await;

    // The callback tool, called: the call and its result show in the conversation.
    send(&client, r#"echo {"text": "from the browser"}"#).await;
    wait_until(&client, &format!("{TURNS_ENDED} === 2")).await;
    let tool_lines = client
        .execute(
            "return [...document.querySelectorAll('.tool')].map(line => line.textContent);",
            vec![],
        )
        .await
        .unwrap();
    let tool_lines: Vec<String> = serde_json::from_value(tool_lines).unwrap();
    assert_eq!(tool_lines.len(), 2, "{tool_lines:?}");
    assert!(tool_lines[0].starts_with("calling echo"), "{tool_lines:?}");
    assert!(
        tool_lines[1].starts_with("echo returned") && tool_lines[1].contains("from the browser"),
        "{tool_lines:?}"
    );

    // A command that needs an approval: the question shows while the turn runs; after a
    // reload the page follows the turn again and still offers it; the button answers it, and
    // the command runs (it removes a directory that is there).
    let victim = tempfile::tempdir().unwrap();
    let remove = removing(victim.path());
    send(&client, &remove).await;
    wait_for(&client, ".ask").await;
    screenshot(&client, "04-approval-asked").await;
    client.refresh().await.unwrap();
    wait_for(&client, ".ask").await;
    every_control_is_labelled(&client).await;
    // Answered from the keyboard: the message field has the focus, Shift+Tab goes back
    // through the question's buttons to "Approve (once)", and Enter presses it.
    assert_eq!(focused(&client).await, "message");
    let mut path: Vec<String> = Vec::new();
    while path.last().map(String::as_str) != Some("Approve (once)") {
        assert!(path.len() < 6, "Shift+Tab never reached Approve: {path:?}");
        back_tab(&client).await;
        path.push(focused(&client).await);
    }
    assert!(
        path.iter()
            .all(|p| p.starts_with("Approve (") || p == "Deny"),
        "only the question's buttons on the way: {path:?}"
    );
    enter(&client).await;
    wait_until(&client, &format!("{TURNS_ENDED} === 3")).await;
    screenshot(&client, "05-approved").await;
    let raw = client
        .execute(
            "return document.getElementById('raw-events').textContent;",
            vec![],
        )
        .await
        .unwrap();
    assert!(raw.as_str().unwrap().contains("action.answered"), "{raw}");
    let last_end = "document.querySelectorAll('.turn-end')[2].textContent";
    wait_until(&client, &format!("{last_end}.includes('completed')")).await;
    assert!(!victim.path().exists(), "approved, so the command ran");

    // Earlier turns, shown again after a reload, each with its own panel of events, read
    // when it is opened: the first turn's streamed answer and the approval turn's answer,
    // each turn's events once, in order, up to its end.
    client.refresh().await.unwrap();
    wait_until(&client, &format!("{TURNS_ENDED} === 3")).await;
    let panels = client
        .find_all(Locator::Css(".conversation details summary"))
        .await
        .unwrap();
    assert_eq!(panels.len(), 3, "a panel for each earlier turn");
    for panel in [0, 2] {
        panels[panel].click().await.unwrap();
        wait_until(
            &client,
            &format!(
                "document.querySelectorAll('.conversation details')[{panel}]\
                   .querySelector('pre').textContent.includes('turn.finished')"
            ),
        )
        .await;
        let events = panel_events(&client, panel).await;
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "panel {panel}: each event once, in order");
        assert_eq!(events[0]["type"], "turn.started", "panel {panel}");
        assert_eq!(
            events.last().unwrap()["type"],
            "turn.finished",
            "panel {panel}"
        );
    }
    let first = panel_events(&client, 0).await;
    let streamed: String = first
        .iter()
        .filter(|e| e["type"] == "message.delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "You said: hello console");
    let approved = panel_events(&client, 2).await;
    assert!(
        approved.iter().any(|e| e["type"] == "action.answered"),
        "{approved:?}"
    );
    screenshot(&client, "05b-earlier-turns-events").await;

    // A question, answered with one of its choices.
    send(
        &client,
        r#"clarify {"question": "Which colour?", "choices": ["red", "blue"]}"#,
    )
    .await;
    wait_until(
        &client,
        "document.body.textContent.includes('Which colour?')",
    )
    .await;
    click_text(&client, "blue").await;
    wait_until(&client, &format!("{TURNS_ENDED} === 4")).await;
    let third_end = "document.querySelectorAll('.turn-end')[3].textContent";
    wait_until(&client, &format!("{third_end}.includes('completed')")).await;
    wait_until(&client, "document.body.textContent.includes('blue')").await;
    screenshot(&client, "06-question-answered").await;

    // A question without choices, answered in its field — after the connection dropped while
    // the turn waited: the page resumes the stream after the last event it saw, so the turn's
    // end arrives and no event shows twice.
    send(&client, r#"clarify {"question": "Your name?"}"#).await;
    // The question's own box (the message sent names the question too).
    let asked =
        "[...document.querySelectorAll('.ask')].some(a => a.textContent.includes('Your name?'))";
    wait_until(&client, asked).await;
    proxy.cut();
    let field = client
        .find(Locator::XPath(
            "//div[contains(@class, 'ask')][contains(., 'Your name?')]//input",
        ))
        .await
        .unwrap();
    field.send_keys("Ada\u{E007}").await.unwrap();
    wait_until(&client, &format!("{TURNS_ENDED} === 5")).await;
    let fifth_end = "document.querySelectorAll('.turn-end')[4].textContent";
    wait_until(&client, &format!("{fifth_end}.includes('completed')")).await;
    wait_until(&client, "document.body.textContent.includes('Ada')").await;
    let asked = client
        .execute(
            "return document.getElementById('raw-events').textContent\
               .split('\\n').filter(l => l.includes('clarify.requested') && l.includes('Your name?')).length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(asked, json!(1), "the question's event, once");
    // Every event of the turn, each once and in order.
    let seqs = client
        .execute(
            "return document.getElementById('raw-events').textContent\
               .split('\\n').filter(l => l).map(l => JSON.parse(l).seq);",
            vec![],
        )
        .await
        .unwrap();
    let seqs: Vec<u64> = serde_json::from_value(seqs).unwrap();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "each event once, in order");

    // A turn waiting for an approval, cancelled: its command never runs.
    let spared = tempfile::tempdir().unwrap();
    let remove = removing(spared.path());
    send(&client, &remove).await;
    wait_until(
        &client,
        "[...document.querySelectorAll('.ask')].at(-1).textContent.includes('Approve running')",
    )
    .await;
    click_text(&client, "Cancel turn").await;
    wait_until(&client, &format!("{TURNS_ENDED} === 6")).await;
    let sixth_end = "document.querySelectorAll('.turn-end')[5].textContent";
    wait_until(&client, &format!("{sixth_end}.includes('cancelled')")).await;
    assert!(
        spared.path().exists(),
        "cancelled, so the command never ran"
    );
    text_is_readable(&client).await;
    screenshot(&client, "07-cancelled").await;

    // A slow answer shows piece by piece while its turn runs: part of it on the page and no
    // end of the turn yet, seen in one look. Cancelled, it ends so.
    let model = testkit::FakeModel::start().await;
    let iid = profile_path.split('/').nth(2).unwrap();
    let body = json!({
        "name": "slow-talker",
        "model": {"provider": "openai_compatible", "base_url": model.base_url(), "model": "fake-model"},
    });
    let (status, talker) = ctx
        .post(&format!("/v1/instances/{iid}/profiles"), &body.to_string())
        .await;
    assert_eq!(status, 201, "{talker}");
    let talker = format!(
        "/instances/{iid}/profiles/{}",
        talker["id"].as_str().unwrap()
    );
    let (status, session) = ctx.post(&format!("/v1{talker}/sessions"), "{}").await;
    assert_eq!(status, 201, "{session}");
    let slow_session = format!("{talker}/sessions/{}", session["id"].as_str().unwrap());
    client
        .execute(&format!("location.hash = '#{slow_session}';"), vec![])
        .await
        .unwrap();
    // The new session's page: it names its profile.
    wait_until(
        &client,
        "document.querySelector('#message') \
           && [...document.querySelectorAll('a')].some(a => a.textContent === 'slow-talker')",
    )
    .await;
    send(&client, "SLOW please").await;
    wait_until(
        &client,
        "(() => { const a = document.querySelector('.message.assistant'); \
           return a && a.textContent.startsWith('tick tick') && a.textContent.length < 300 \
             && document.querySelectorAll('.turn-end').length === 0; })()",
    )
    .await;
    screenshot(&client, "08-streaming").await;
    click_text(&client, "Cancel turn").await;
    wait_until(&client, &format!("{TURNS_ENDED} === 1")).await;
    let end = "document.querySelector('.turn-end').textContent";
    wait_until(&client, &format!("{end}.includes('cancelled')")).await;

    // Signing out forgets the key and asks for one again.
    click_text(&client, "Sign out").await;
    wait_for(&client, "#api-key").await;
    let forgotten = client
        .execute("return sessionStorage.length;", vec![])
        .await
        .unwrap();
    assert_eq!(forgotten, json!(0));

    client.close().await.unwrap();
    driver.stop(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn the_console_is_served_with_a_policy_that_keeps_it_to_this_server() {
    let ctx = Ctx::start().await;
    for path in ["/console", "/console/console.js", "/console/console.css"] {
        // No key needed: the files hold no data.
        let response = reqwest::get(ctx.url(path)).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .unwrap();
        assert!(policy.contains("default-src 'none'"), "{policy}");
        assert!(policy.contains("connect-src 'self'"), "{policy}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        let body = response.text().await.unwrap();
        // Nothing is loaded from elsewhere.
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}"
        );
    }
}
