//! `ToolHost`: callback tools served on their own (MCP over HTTP, with a bearer secret), for a
//! control plane this process does not embed — `Hermes.remote()` has no tool host of its own.
//! `async with ToolHost() as host` serves; leaving the block stops serving (calls in flight
//! finish first), and the control plane can no longer reach its tools.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;

use crate::errors::{ClosedError, EdithError, to_py as error};
use crate::tools;

enum State {
    Pending(SocketAddr),
    Starting,
    Serving(Arc<hermes::ToolHost>),
    Closed,
}

/// Puts a start that was abandoned half-way (its awaitable cancelled) back to `Pending`.
struct RestoreOnDrop {
    state: Arc<Mutex<State>>,
    listen: Option<SocketAddr>,
}

impl RestoreOnDrop {
    /// The start finished (either way): nothing to restore.
    fn disarm(&mut self) {
        self.listen = None;
    }
}

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        if let Some(listen) = self.listen.take() {
            let mut state = self.state.lock().expect("not poisoned");
            if matches!(*state, State::Starting) {
                *state = State::Pending(listen);
            }
        }
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct ToolHost {
    state: Arc<Mutex<State>>,
}

impl ToolHost {
    pub(crate) fn serving(&self) -> PyResult<Arc<hermes::ToolHost>> {
        match &*self.state.lock().expect("not poisoned") {
            State::Serving(host) => Ok(host.clone()),
            State::Closed => Err(ClosedError::new_err("the tool host was closed")),
            State::Pending(_) | State::Starting => Err(EdithError::new_err(
                "this tool host is not serving yet: use `async with ToolHost() as host` \
                 (or `await host.start()`)",
            )),
        }
    }
}

#[pymethods]
impl ToolHost {
    /// A tool host that will listen on `host`:`port` (port 0: the system picks one). Listen
    /// where the control plane can reach it.
    #[new]
    #[pyo3(signature = (host = "127.0.0.1", port = 0))]
    fn new(host: &str, port: u16) -> PyResult<Self> {
        let ip: IpAddr = host
            .parse()
            .map_err(|e| PyValueError::new_err(format!("`{host}` is not an IP address: {e}")))?;
        Ok(Self {
            state: Arc::new(Mutex::new(State::Pending(SocketAddr::new(ip, port)))),
        })
    }

    /// Starts serving (a no-op when serving); awaits to `self`.
    fn start<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let state = slf.get().state.clone();
        let this: Py<Self> = slf.unbind();
        let listen = {
            let mut guard = state.lock().expect("not poisoned");
            match std::mem::replace(&mut *guard, State::Starting) {
                State::Pending(listen) => Some(listen),
                State::Starting => {
                    return Err(EdithError::new_err("this tool host is already starting"));
                }
                State::Closed => {
                    *guard = State::Closed;
                    return Err(ClosedError::new_err("the tool host was closed"));
                }
                serving @ State::Serving(_) => {
                    *guard = serving;
                    None
                }
            }
        };
        // Armed before the awaitable exists: one cancelled before it ever ran restores too.
        let mut restore = RestoreOnDrop {
            state: state.clone(),
            listen,
        };
        future_into_py(py, async move {
            let Some(listen) = listen else {
                return Ok(this);
            };
            let served = hermes::ToolHost::serve(listen).await;
            restore.disarm();
            let host = match served {
                Ok(host) => host,
                Err(e) => {
                    *state.lock().expect("not poisoned") = State::Pending(listen);
                    return Err(error(e));
                }
            };
            {
                let mut guard = state.lock().expect("not poisoned");
                if matches!(*guard, State::Starting) {
                    *guard = State::Serving(Arc::new(host));
                    return Ok(this);
                }
            }
            // Closed while it was starting: it does not serve.
            host.shutdown().await;
            Err(ClosedError::new_err(
                "the tool host was closed while it was starting",
            ))
        })
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::start(slf)
    }

    #[pyo3(signature = (*_exc_info))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_info: Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.close(py)
    }

    /// Stops serving; calls in flight finish first. Closing twice is a no-op.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let previous = std::mem::replace(
            &mut *self.state.lock().expect("not poisoned"),
            State::Closed,
        );
        future_into_py(py, async move {
            if let State::Serving(host) = previous {
                // The last reference but for a `register_tool_host` in flight, which ends soon.
                match Arc::try_unwrap(host) {
                    Ok(host) => host.shutdown().await,
                    Err(shared) => drop(shared),
                }
            }
            Ok(())
        })
    }

    /// Serves `tool` (an `edith_hermes.Tool` or a function), replacing one of the same name.
    /// Its calls run on the event loop this is called from.
    fn add(&self, py: Python<'_>, tool: Bound<'_, PyAny>) -> PyResult<()> {
        let host = self.serving()?;
        // Tools run on the loop they were added from.
        host.add(tools::tool(py, &tool)?);
        Ok(())
    }

    /// The MCP endpoint the control plane calls.
    #[getter]
    fn url(&self) -> PyResult<String> {
        Ok(self.serving()?.url().to_owned())
    }

    /// What the control plane must present (`Authorization: Bearer …`); give it only to the
    /// control plane (`register_tool_host` does).
    #[getter]
    fn secret(&self) -> PyResult<String> {
        Ok(self.serving()?.secret().to_owned())
    }
}
