//! The web console, driven in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, which `scripts/test` installs): sign in, create an instance and see it
//! become ready, start a session, send a message and see the streamed answer, approve a
//! command. A screenshot of each step goes to `target/console-screenshots/`.

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
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
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

#[tokio::test]
async fn the_console_in_a_browser_signs_in_provisions_chats_and_approves() {
    let ctx = Ctx::start().await;
    let (driver, client) = browser().await;
    let console = ctx.url("/console");

    // Sign in with the keyboard only: the key field has the focus, Enter submits.
    client.goto(&console).await.unwrap();
    wait_for(&client, "#api-key").await;
    every_control_is_labelled(&client).await;
    screenshot(&client, "01-sign-in").await;
    let focused = client
        .execute("return document.activeElement.id;", vec![])
        .await
        .unwrap();
    assert_eq!(focused, "api-key");
    let key = client.find(Locator::Css("#api-key")).await.unwrap();
    key.send_keys(&format!("{ADMIN_KEY}\u{E007}"))
        .await
        .unwrap();
    wait_for(&client, "#field-name").await;
    every_control_is_labelled(&client).await;

    // Create an instance and follow its provisioning until it is ready.
    let name = client.find(Locator::Css("#field-name")).await.unwrap();
    name.send_keys("browser").await.unwrap();
    click_text(&client, "Create instance").await;
    wait_for(&client, "section .state-ready").await;
    screenshot(&client, "02-instance-ready").await;

    // A profile, then a session.
    click_text(&client, "browser").await;
    wait_for(&client, "#field-name").await;
    let profile = client.find(Locator::Css("#field-name")).await.unwrap();
    profile.send_keys("assistant").await.unwrap();
    click_text(&client, "Create profile").await;
    click_text(&client, "assistant").await;
    click_text(&client, "New session").await;
    wait_for(&client, "#message").await;
    every_control_is_labelled(&client).await;

    // A message, and its answer streamed in.
    let message = client.find(Locator::Css("#message")).await.unwrap();
    message.send_keys("hello console").await.unwrap();
    click_text(&client, "Send").await;
    wait_for(&client, ".turn-end .state-completed").await;
    let answer = client
        .find(Locator::Css(".message.assistant"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(answer.contains("hello console"), "the answer: {answer}");
    screenshot(&client, "03-streamed-answer").await;

    // A command that needs an approval: the question shows, the button answers it.
    let command = r#"terminal {"command": "rm -rf /tmp/edith-console-nothing"}"#;
    let message = client.find(Locator::Css("#message")).await.unwrap();
    message.send_keys(command).await.unwrap();
    click_text(&client, "Send").await;
    wait_for(&client, ".ask").await;
    screenshot(&client, "04-approval-asked").await;
    click_text(&client, "Approve (once)").await;
    let ends = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(
            "(//p[contains(@class,'turn-end')])[2]//span[contains(@class,'state-completed')]",
        ))
        .await;
    screenshot(&client, "05-approved").await;
    ends.expect("the approved turn completed");
    let raw = client
        .execute(
            "return document.getElementById('raw-events').textContent;",
            vec![],
        )
        .await
        .unwrap();
    assert!(raw.as_str().unwrap().contains("action.answered"), "{raw}");

    client.close().await.unwrap();
    driver.stop(Duration::from_secs(10)).await;
}
