//! The Desktop routes of an instance's runtime, through the control plane: the runtime's stored
//! sessions and messages, its profiles, and a file in its workspace — with the application's
//! key, never the runtime's token. (`HermesDesktop::remote(url, token)` does the same straight
//! against a runtime you run yourself, e.g. `hermes serve`.)
//!
//! Run: `cargo run --example desktop` (embedded control plane and runtime; no network, no key).

use hermes::native::desktop::{
    FsReadTextQuery, FsWriteTextBody, SessionListQuery, SessionMessagesQuery,
};
use hermes::{Hermes, ProfileSpec};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hermes = Hermes::local().await?;
    let outcome = tour(&hermes).await;
    hermes.close().await?;
    outcome
}

async fn tour(hermes: &Hermes) -> Result<(), Box<dyn std::error::Error>> {
    let instance = hermes
        .instances()
        .create("desktop-example")
        .await?
        .ready()
        .await?;
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant"))
        .await?;
    let session = profile.sessions().create().await?;
    session
        .send("hello from the desktop example")
        .await?
        .wait()
        .await?;

    let desktop = instance.desktop();
    for listed in desktop.profile_list().await?.profiles {
        println!("profile {} at {}", listed.name, listed.path);
    }
    let native = profile.get().await?.native_name;
    let mine = desktop.for_profile(&native);
    let page = mine.session_list(&SessionListQuery::default()).await?;
    println!("{} stored session(s) in profile {native}", page.total);
    for stored in &page.sessions {
        println!(
            "  {} ({} messages): {}",
            stored.columns.id, stored.columns.message_count, stored.preview
        );
        let read = mine
            .session_messages(&stored.columns.id, &SessionMessagesQuery::default())
            .await?;
        for message in read.messages {
            // Text, or structured content the runtime stored as JSON.
            match message.content.as_str() {
                Some(text) => println!("    {}: {text}", message.role),
                None => println!("    {}: {}", message.role, message.content),
            }
        }
    }

    let written = desktop
        .fs_write_text(&FsWriteTextBody {
            path: "notes.md".to_owned(),
            content: "# Notes\nwritten through the control plane\n".to_owned(),
        })
        .await?;
    println!("wrote {} bytes to {}", written.byte_size, written.path);
    let read = desktop
        .fs_read_text(&FsReadTextQuery {
            path: "notes.md".to_owned(),
        })
        .await?;
    println!("read back ({}): {}", read.language, read.text.trim_end());
    Ok(())
}
