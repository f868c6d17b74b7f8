//! Helpers the integration tests and benchmarks share.

mod cut_proxy;
mod fake_openai;
pub mod postgres;
mod process;

pub use cut_proxy::CutProxy;
pub use fake_openai::{FakeModel, FakeModelOptions};
pub use process::{ReadyProcess, kill_processes_with_env_under};
