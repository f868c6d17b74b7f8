//! The main job, end to end, on the embedded default — no Python, no network, no model key:
//! an embedded control plane, a callback tool, an instance provisioned by a job, a profile, a
//! session and a streamed turn in which the runtime calls the tool; then cleanup.
//!
//! Run: `cargo run --release --example quickstart`

use futures_util::StreamExt;
use hermes::types::{JobEventKind, TurnEventKind};
use hermes::{Hermes, ProfileSpec, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of the callback tool; their JSON Schema is derived from this type.
#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    /// The text whose words to count.
    text: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. An embedded control plane (SQLite in a temp dir) and a tool host, on loopback.
    let hermes = Hermes::local().await?;
    let outcome = run(&hermes).await;
    // 6. Close: deletes the instance created here, stops the runtime, removes the temp dir.
    hermes.close().await?;
    outcome
}

async fn run(hermes: &Hermes) -> Result<(), Box<dyn std::error::Error>> {
    // 2. A callback tool with typed arguments, served from this process.
    let word_count = Tool::new(
        "word_count",
        "Count the words in a text",
        |args: WordCountArgs| async move {
            println!("  [tool] word_count({:?})", args.text);
            Ok::<_, ToolError>(args.text.split_whitespace().count())
        },
    );
    let tool = hermes.register_tool(word_count).await?;

    // 3. An instance on the embedded provider; its provisioning job reports progress.
    let creation = hermes.instances().create("quickstart").await?;
    println!(
        "instance {} provisioning (job {})",
        creation.instance.id, creation.job.id
    );
    let mut progress = creation.progress();
    while let Some(event) = progress.next().await {
        match event?.kind {
            JobEventKind::StepStarted { step, index, of } => {
                println!("  step {index}/{of}: {step}")
            }
            JobEventKind::JobFinished { instance_state, .. } => {
                println!("  job finished: instance {}", instance_state.as_str())
            }
            JobEventKind::StepCompleted { .. } => {}
        }
    }
    let instance = creation.ready().await?;

    // 4. A profile with the tool, a session, and a turn streamed over SSE.
    let profile = instance
        .profiles()
        .create(ProfileSpec::new("assistant").tool(&tool))
        .await?;
    let session = profile.sessions().create().await?;
    let turn = session
        .send(r#"Please count the words with word_count {"text": "hello from the Hermes runtime"}"#)
        .await?;
    let mut events = turn.events();
    let mut answering = false;
    while let Some(event) = events.next().await {
        // 5. The scripted model calls the tool through the control plane's MCP endpoint.
        match event?.kind {
            TurnEventKind::ToolStarted { name, .. } => println!("  [event] tool.started {name}"),
            TurnEventKind::ToolCompleted {
                name, args, result, ..
            } => {
                println!("  [event] tool.completed {name}({args}) -> {result}")
            }
            TurnEventKind::MessageDelta { text } => {
                if !std::mem::replace(&mut answering, true) {
                    print!("assistant: ");
                }
                print!("{text}")
            }
            TurnEventKind::TurnFinished { state, .. } => println!("\nturn {}", state.as_str()),
            _ => {}
        }
    }
    let finished = turn.get().await?;
    println!("answer: {}", finished.output.unwrap_or_default());
    Ok(())
}
