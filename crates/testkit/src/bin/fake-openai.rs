//! `fake-openai`: the fake OpenAI-compatible model server as a process, for trying runtimes by
//! hand. Prints `FAKE_MODEL_READY url=<base url>` and serves until interrupted.

#[tokio::main]
async fn main() {
    let model = testkit::FakeModel::start().await;
    println!("FAKE_MODEL_READY url={}", model.base_url());
    let _ = tokio::signal::ctrl_c().await;
}
