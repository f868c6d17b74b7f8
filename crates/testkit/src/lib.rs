//! Helpers the integration tests and benchmarks share.

mod cut_proxy;
mod fake_openai;
mod limits;
mod metrics;
pub mod postgres;
mod process;
mod real_hermes;

pub use cut_proxy::CutProxy;
pub use fake_openai::{FakeModel, FakeModelOptions, hermes_model_config_at};
pub use limits::raise_open_files;
pub use metrics::metric_sample;
pub use process::{
    ReadyProcess, kill_processes_with_env_under, processes_with_env_under, stopping_on_signals,
};
pub use real_hermes::{real_hermes_bin, real_hermes_command};
