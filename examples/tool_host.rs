//! Callback tools served on their own: a `ToolHost` in this process, registered with a
//! separately running control plane (a separately started `edith serve`) with its secret in
//! one call; the runtime calls the tool through the control plane's MCP relay. Then what was
//! made is deleted and the host stops.
//!
//! Run: `EDITH_URL=http://127.0.0.1:8080 EDITH_API_KEY=… cargo run --example tool_host`

use futures_util::StreamExt;
use hermes::types::TurnEventKind;
use hermes::{Hermes, ProfileSpec, Tool, ToolError, ToolHost};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct ShoutArgs {
    /// What to shout.
    text: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url =
        std::env::var("EDITH_URL").map_err(|_| "set EDITH_URL (e.g. http://127.0.0.1:8080)")?;
    let key = std::env::var("EDITH_API_KEY").map_err(|_| "set EDITH_API_KEY")?;
    let hermes = Hermes::remote(&url, Some(&key));

    // Listening where the control plane can reach it (loopback: the same machine here).
    let host = ToolHost::serve(([127, 0, 0, 1], 0).into()).await?;
    host.add(Tool::new(
        "shout",
        "Say a text loudly",
        |args: ShoutArgs| async move {
            println!("  [tool host] shout({:?})", args.text);
            Ok::<_, ToolError>(args.text.to_uppercase())
        },
    ));
    let tools = hermes.register_tool_host(&host).await?;
    println!("tool host {} serves {} tool(s)", host.url(), tools.len());

    let instance = hermes
        .instances()
        .create("tool-host-example")
        .await?
        .ready()
        .await?;
    let outcome = async {
        let mut spec = ProfileSpec::new("assistant");
        for tool in &tools {
            spec = spec.tool(tool);
        }
        let profile = instance.profiles().create(spec).await?;
        let session = profile.sessions().create().await?;
        let turn = session
            .send(r#"shout {"text": "hello from the tool host"}"#)
            .await?;
        let mut events = turn.events();
        let mut called = false;
        while let Some(event) = events.next().await {
            match event?.kind {
                TurnEventKind::ToolCompleted { name, result, .. } => {
                    called = true;
                    println!("  [turn] {name} returned {result}");
                }
                TurnEventKind::TurnFinished { state, output, .. } => {
                    println!("turn {}: {}", state.as_str(), output.unwrap_or_default());
                }
                _ => {}
            }
        }
        if !called {
            return Err("the runtime did not call the tool".into());
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    instance.delete().await?;
    for tool in &tools {
        hermes.sdk().tool_delete(&tool.id).await?;
    }
    if let Some(tool) = tools.first() {
        hermes.sdk().tool_host_delete(&tool.host_id).await?;
    }
    host.shutdown().await;
    hermes.close().await?;
    outcome
}
