//! One tool-calling turn on the embedded default, timed from Rust: the Rust side of
//! `scripts/bench-python`, which times the same turn from Python. Prints one line:
//! `rust turns=<n> median_ms=<..> p90_ms=<..>`.
//!
//! Run: `cargo run --release --example bench_turn [TURNS]`

use std::time::Instant;

use futures_util::StreamExt;
use hermes::{Hermes, ProfileSpec, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    text: String,
}

const PROMPT: &str =
    r#"Please count the words with word_count {"text": "hello from the Hermes runtime"}"#;
const WARM_UP: usize = 5;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(50);
    let hermes = Hermes::local().await?;
    let outcome = bench(&hermes, turns).await;
    hermes.close().await?;
    let mut times = outcome?;
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "rust turns={turns} median_ms={:.3} p90_ms={:.3}",
        at(0.5),
        at(0.9)
    );
    Ok(())
}

/// Times `turns` turns after a warm-up, each on a new session: from sending the input to the
/// turn's last event.
async fn bench(hermes: &Hermes, turns: usize) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let word_count = Tool::new(
        "word_count",
        "Count words",
        |args: WordCountArgs| async move { Ok::<_, ToolError>(args.text.split_whitespace().count()) },
    );
    let tool = hermes.register_tool(word_count).await?;
    let instance = hermes.instances().create("bench").await?.ready().await?;
    let spec = ProfileSpec::new("assistant").tool(&tool);
    let profile = instance.profiles().create(spec).await?;
    let mut times = Vec::with_capacity(turns);
    for i in 0..WARM_UP + turns {
        let session = profile.sessions().create().await?;
        let started = Instant::now();
        let turn = session.send(PROMPT).await?;
        let mut events = turn.events();
        let mut last = None;
        while let Some(event) = events.next().await {
            last = Some(event?);
        }
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        if !last.is_some_and(|e| e.kind.is_final()) {
            return Err("a turn ended without its final event".into());
        }
        if i >= WARM_UP {
            times.push(elapsed);
        }
    }
    Ok(times)
}
