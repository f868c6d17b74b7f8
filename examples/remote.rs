//! A client of a control plane that runs elsewhere — here, a separately started `edith serve`:
//! what it offers, an instance, a profile, a session and a streamed turn; then the instance is
//! deleted (a remote client never deletes anything by itself).
//!
//! Run: `EDITH_URL=http://127.0.0.1:8080 EDITH_API_KEY=… cargo run --example remote`

use futures_util::StreamExt;
use hermes::types::TurnEventKind;
use hermes::{Hermes, ProfileSpec};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url =
        std::env::var("EDITH_URL").map_err(|_| "set EDITH_URL (e.g. http://127.0.0.1:8080)")?;
    let key = std::env::var("EDITH_API_KEY").map_err(|_| "set EDITH_API_KEY")?;
    let hermes = Hermes::remote(&url, Some(&key));

    let offered = hermes.capabilities().await?;
    println!(
        "control plane {} offers {:?}",
        offered.version, offered.providers
    );
    let instance = hermes
        .instances()
        .create("remote-example")
        .await?
        .ready()
        .await?;
    println!("instance {} ready", instance.id());
    let outcome = converse(&instance).await;
    // Ours to delete: nothing else would.
    instance.delete().await?;
    println!("instance {} deleted", instance.id());
    hermes.close().await?;
    outcome
}

async fn converse(instance: &hermes::InstanceHandle) -> Result<(), Box<dyn std::error::Error>> {
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant"))
        .await?;
    let session = profile.sessions().create().await?;
    let turn = session.send("hello from afar").await?;
    let mut events = turn.events();
    while let Some(event) = events.next().await {
        match event?.kind {
            TurnEventKind::MessageDelta { text } => print!("{text}"),
            TurnEventKind::TurnFinished { state, .. } => println!("\nturn {}", state.as_str()),
            _ => {}
        }
    }
    Ok(())
}
