//! Helpers the integration tests share.

mod process;

pub use process::ReadyProcess;
