//! Helpers the integration tests and benchmarks share.

mod fake_openai;
mod process;

pub use fake_openai::{FakeModel, FakeModelOptions};
pub use process::{ReadyProcess, kill_processes_with_env_under};
