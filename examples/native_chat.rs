//! Native sessions through the control plane, on the embedded default: a conversation, the
//! runtime's stored sessions listed natively, one of them resumed in a new control-plane
//! session, a turn streamed there, and an approval answered when the agent wants to run a
//! command.
//!
//! Run: `cargo run --example native_chat`

use futures_util::StreamExt;
use hermes::native::SessionListParams;
use hermes::types::{ApprovalChoice, NativeSessionId, TurnEventKind};
use hermes::{Hermes, ProfileSpec};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hermes = Hermes::local().await?;
    let outcome = run(&hermes).await;
    hermes.close().await?;
    outcome
}

async fn run(hermes: &Hermes) -> Result<(), Box<dyn std::error::Error>> {
    let instance = hermes
        .instances()
        .create("native-chat")
        .await?
        .ready()
        .await?;
    // The `default` profile: Hermes 0.19 lists the root profile's stored sessions natively.
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("default"))
        .await?;
    let first = profile.sessions().create().await?;
    let said = first
        .send("my favourite colour is teal")
        .await?
        .wait()
        .await?;
    println!("first session: {}", said.output.unwrap_or_default());

    // The runtime's own view: its stored sessions.
    let listed = profile
        .native()
        .api()
        .session()
        .list(&SessionListParams::default())
        .await?;
    for stored in &listed.sessions {
        println!(
            "stored native session {} ({} messages)",
            stored.id.as_str(),
            stored.message_count
        );
    }
    let stored = listed.sessions.first().ok_or("no stored session")?;

    // Resumed in a new control-plane session, which continues that conversation.
    let resumed = profile
        .sessions()
        .resume_native(&NativeSessionId::new(stored.id.as_str()))
        .await?;
    println!("resumed as session {}", resumed.id());
    let scratch = std::env::temp_dir().join(format!("native-chat-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let command = format!("rm -rf {}", scratch.display());
    let turn = resumed
        .send(&format!(
            "terminal {}",
            serde_json::json!({ "command": command })
        ))
        .await?;
    let mut events = turn.events();
    while let Some(event) = events.next().await {
        match event?.kind {
            TurnEventKind::ApprovalRequested { command, .. } => {
                println!("the agent asks to run `{command}`: approved once");
                turn.approve(ApprovalChoice::Once).await?;
            }
            TurnEventKind::ToolCompleted { name, result, .. } => {
                println!("  [tool] {name} -> {result}")
            }
            TurnEventKind::MessageDelta { text } => print!("{text}"),
            TurnEventKind::TurnFinished { state, .. } => println!("\nturn {}", state.as_str()),
            _ => {}
        }
    }
    if scratch.exists() {
        return Err("the approved command did not run".into());
    }
    Ok(())
}
