//! `Hermes`: the seed's entry point. `Hermes.local()` is started by `async with` (or
//! `await hermes.start()`); `Hermes.remote()` is usable at once. Closing follows the Rust SDK's
//! ownership rules: a local context deletes the instances it created unless `cleanup=False`;
//! a remote one never deletes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;

use crate::convert::{header_secret, id, to_py};
use crate::errors::{ClosedError, EdithError, to_py as error};
use crate::handles::{Instance, Instances};
use crate::sdk::EdithHermes;
use crate::tool_host::ToolHost;
use crate::tools;
use crate::transport::HttpxTransport;

enum State {
    /// `Hermes.local()` before `start()`.
    Pending(hermes::LocalBuilder),
    /// `close()` may be asked for meanwhile: the start then closes what it started.
    Starting {
        close_requested: bool,
    },
    Open(hermes::Hermes),
}

/// Puts a start that was abandoned half-way (its awaitable cancelled) back to `Pending`, so the
/// context can be started again or closed.
struct RestoreOnDrop {
    state: Arc<Mutex<State>>,
    builder: Option<hermes::LocalBuilder>,
}

impl RestoreOnDrop {
    /// The start finished (either way): nothing to restore.
    fn disarm(&mut self) {
        self.builder = None;
    }
}

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        if let Some(builder) = self.builder.take() {
            let mut state = self.state.lock().expect("not poisoned");
            if matches!(*state, State::Starting { .. }) {
                *state = State::Pending(builder);
            }
        }
    }
}

/// Closes `hermes` on a task of its own: an awaitable cancelled half-way (Ctrl-C in
/// `__aexit__`) must not leave the deletions half done, since a second close does nothing.
async fn close_to_the_end(hermes: hermes::Hermes) -> PyResult<()> {
    let closing = tokio::spawn(async move { hermes.close().await });
    closing
        .await
        .map_err(|e| EdithError::new_err(format!("closing failed: {e}")))?
        .map_err(error)
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Hermes {
    state: Arc<Mutex<State>>,
}

impl Hermes {
    /// The SDK client, once started.
    pub(crate) fn open(&self) -> PyResult<hermes::Hermes> {
        match &*self.state.lock().expect("not poisoned") {
            State::Open(hermes) => Ok(hermes.clone()),
            State::Pending(_) | State::Starting { .. } => Err(EdithError::new_err(
                "this local context has not started: use `async with Hermes.local() as hermes` \
                 (or `await hermes.start()`)",
            )),
        }
    }
}

#[pymethods]
impl Hermes {
    /// An embedded control plane and tool host, started by `async with` or `start()`.
    /// `cleanup=False` keeps the instances it creates; `data_dir` keeps its database there.
    #[staticmethod]
    #[pyo3(signature = (*, cleanup = true, data_dir = None))]
    fn local(cleanup: bool, data_dir: Option<PathBuf>) -> Self {
        let mut builder = hermes::Hermes::local_builder().cleanup(cleanup);
        if let Some(dir) = data_dir {
            builder = builder.data_dir(dir);
        }
        Self {
            state: Arc::new(Mutex::new(State::Pending(builder))),
        }
    }

    /// A control plane at `url`. Closing it never deletes anything. With `http_client` (an
    /// `httpx.AsyncClient`), every request goes through it and it stays the caller's.
    #[staticmethod]
    #[pyo3(signature = (url, api_key = None, http_client = None))]
    fn remote(
        py: Python<'_>,
        url: &str,
        api_key: Option<&str>,
        http_client: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let api_key = header_secret("API key", api_key)?;
        let hermes = match http_client {
            Some(client) => hermes::Hermes::remote_with_transport(
                url,
                api_key,
                HttpxTransport::new(py, client)?,
            ),
            None => hermes::Hermes::remote(url, api_key),
        };
        Ok(Self {
            state: Arc::new(Mutex::new(State::Open(hermes))),
        })
    }

    /// Starts a local context (a no-op for a started or remote one); awaits to `self`.
    fn start<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let state = slf.get().state.clone();
        let this: Py<Self> = slf.unbind();
        let builder = {
            let mut guard = state.lock().expect("not poisoned");
            let starting = State::Starting {
                close_requested: false,
            };
            match std::mem::replace(&mut *guard, starting) {
                State::Pending(builder) => Some(builder),
                starting @ State::Starting { .. } => {
                    *guard = starting;
                    return Err(EdithError::new_err(
                        "this local context is already starting",
                    ));
                }
                open @ State::Open(_) => {
                    *guard = open;
                    None
                }
            }
        };
        // Armed before the awaitable exists: one cancelled before it ever ran restores too.
        let mut restore = RestoreOnDrop {
            state: state.clone(),
            builder: builder.clone(),
        };
        future_into_py(py, async move {
            let Some(builder) = builder else {
                return Ok(this);
            };
            let started = builder.clone().start().await;
            restore.disarm();
            let hermes = match started {
                Ok(hermes) => hermes,
                Err(e) => {
                    // Not started: the same context may be started again.
                    *state.lock().expect("not poisoned") = State::Pending(builder);
                    return Err(error(e));
                }
            };
            let close_requested = {
                let mut guard = state.lock().expect("not poisoned");
                let requested = matches!(
                    *guard,
                    State::Starting {
                        close_requested: true
                    }
                );
                *guard = State::Open(hermes.clone());
                requested
            };
            if close_requested {
                close_to_the_end(hermes).await?;
                return Err(ClosedError::new_err(
                    "the context was closed while it was starting",
                ));
            }
            Ok(this)
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

    /// Closes the context: a local one deletes the instances it created (unless
    /// `cleanup=False`) and stops its control plane, runtimes and tool host; a remote one
    /// closes its connections and deletes nothing. Later calls raise `ClosedError`. Closing
    /// twice, or a context never started, is a no-op.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let hermes = match &mut *self.state.lock().expect("not poisoned") {
            State::Open(hermes) => Some(hermes.clone()),
            State::Starting { close_requested } => {
                *close_requested = true;
                None
            }
            State::Pending(_) => None,
        };
        future_into_py(py, async move {
            if let Some(hermes) = hermes {
                close_to_the_end(hermes).await?;
            }
            Ok(())
        })
    }

    /// What the control plane offers: providers, runtimes, the pinned native catalog.
    fn capabilities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let hermes = self.open()?;
        future_into_py(py, async move {
            to_py(&hermes.capabilities().await.map_err(error)?)
        })
    }

    /// The low-level client (`AsyncEdithHermes`): one method per contract operation, sharing
    /// this context's connection. Closing it ends only that view; closing this context closes
    /// it too.
    #[getter]
    fn sdk<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = EdithHermes::new(self.open()?.sdk().clone());
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("owned", false)?;
        py.import("edith_hermes._client")?
            .getattr("AsyncEdithHermes")?
            .call((client,), Some(&kwargs))
    }

    /// The instances: `hermes.instances(instance_id)` is a handle (no I/O);
    /// `await hermes.instances.create(name)` and `.list()` ask the control plane.
    #[getter]
    fn instances(&self) -> PyResult<Instances> {
        Ok(Instances::new(self.open()?))
    }

    /// Attaches to an existing instance, checking that it exists, without owning it: closing
    /// this context never deletes it.
    fn open_instance<'py>(
        &self,
        py: Python<'py>,
        instance_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hermes = self.open()?;
        let instance_id = id(instance_id)?;
        future_into_py(py, async move {
            let handle = hermes.open_instance(&instance_id).await.map_err(error)?;
            Ok(Instance::new(handle))
        })
    }

    /// The data dir of a local context's control plane (`None` for a remote one).
    #[getter]
    fn data_dir(&self) -> PyResult<Option<PathBuf>> {
        Ok(self.open()?.data_dir().map(PathBuf::from))
    }

    /// The control plane's URL.
    #[getter]
    fn url(&self) -> PyResult<String> {
        Ok(self.open()?.sdk().base_url().to_owned())
    }

    /// Serves a tool from this local context's tool host and registers it with the control
    /// plane; awaits to the registered tool (a dict with its `id`, to give to a profile).
    /// `tool` is an `edith_hermes.Tool` (see `edith_hermes.tool`) or a plain function, made
    /// into one.
    fn register_tool<'py>(
        &self,
        py: Python<'py>,
        tool: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hermes = self.open()?;
        let tool = tools::tool(py, &tool)?;
        future_into_py(py, async move {
            to_py(&hermes.register_tool(tool).await.map_err(error)?)
        })
    }

    /// Registers `host` (a `ToolHost` served where the control plane can reach it) with its
    /// secret and every tool it serves now, in one call; awaits to the registered tools (dicts
    /// with their `id`s, to give to profiles). For a remote control plane, the way to give it
    /// Python tools.
    fn register_tool_host<'py>(
        &self,
        py: Python<'py>,
        host: PyRef<'py, ToolHost>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hermes = self.open()?;
        let host = host.serving()?;
        future_into_py(py, async move {
            to_py(&hermes.register_tool_host(&host).await.map_err(error)?)
        })
    }
}
