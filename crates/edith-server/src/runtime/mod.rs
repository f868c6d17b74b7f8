//! The runtimes behind instances: the providers that make, start, stop and destroy them, and the
//! pool of native gateway connections the control plane talks to them through.

mod gateway_pool;
mod homes;
mod live_sessions;
mod live_turns;
mod process_group;
mod providers;
mod runtime_log;
mod slots;

pub use gateway_pool::{GatewayPool, Link};
pub use live_sessions::Live;
pub use live_turns::TurnOn;
#[cfg(feature = "embedded")]
pub use providers::SimProvider;
pub use providers::{
    ADMIN_KEY_VARIABLE, DATABASE_URL_VARIABLE, Exited, ProviderError, Providers, RUNTIME_STARTED,
    RunningNow, RuntimeCommand, RuntimeEndpoint, RuntimeProvider, gateway_url,
};
