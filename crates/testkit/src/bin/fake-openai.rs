//! `fake-openai`: the fake OpenAI-compatible model server as a process, for trying runtimes by
//! hand and for benchmarks. Prints `FAKE_MODEL_READY url=<base url>` and serves until
//! interrupted.
//!
//! Usage: fake-openai [--piece-delay-ms N] (a pause before each streamed piece of a reply, for
//! a model as slow as a real one)

use std::time::Duration;

use testkit::{FakeModel, FakeModelOptions};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let piece_delay = match args.as_slice() {
        [] => Duration::ZERO,
        [flag, ms] if flag == "--piece-delay-ms" => match ms.parse() {
            Ok(ms) => Duration::from_millis(ms),
            Err(_) => usage(),
        },
        _ => usage(),
    };
    let model = FakeModel::start_with(FakeModelOptions {
        piece_delay,
        ..Default::default()
    })
    .await;
    println!("FAKE_MODEL_READY url={}", model.base_url());
    let _ = tokio::signal::ctrl_c().await;
}

fn usage() -> ! {
    eprintln!("usage: fake-openai [--piece-delay-ms N]");
    std::process::exit(2);
}
