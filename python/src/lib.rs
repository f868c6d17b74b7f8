//! `edith_hermes._core`: the Rust SDK (`hermes`) as a Python extension. Every awaitable runs on
//! one tokio runtime owned by the extension, so the Python event loop is never blocked.
//! The package `edith_hermes` (Python, next to this crate) puts the seed's names on top.

mod client;
mod convert;
mod desktop;
mod errors;
mod gateway;
mod handles;
mod native;
mod sdk;
mod stream;
mod tool_host;
mod tools;
mod transport;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<client::Hermes>()?;
    m.add_class::<handles::Instances>()?;
    m.add_class::<handles::Instance>()?;
    m.add_class::<handles::Profiles>()?;
    m.add_class::<handles::Profile>()?;
    m.add_class::<handles::Sessions>()?;
    m.add_class::<handles::Session>()?;
    m.add_class::<handles::Turn>()?;
    m.add_class::<native::NativeRoute>()?;
    m.add_class::<gateway::GatewayConnection>()?;
    m.add_class::<stream::EventStream>()?;
    m.add_class::<sdk::EdithHermes>()?;
    m.add_class::<desktop::HermesDesktop>()?;
    m.add_class::<tool_host::ToolHost>()?;
    m.add("NATIVE_METHODS", native::catalog_methods())?;
    m.add("OPERATIONS", hermes::OPERATIONS.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
