//! `_core.EdithHermes`: the Rust SDK's low-level client, for the generated Python operations
//! (`edith_hermes._operations`), which build each operation's path and query from the contract
//! and call `call`, `events` or `socket` here.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use serde_json::Value;

use crate::convert::{from_py, header_secret, to_py};
use crate::errors::to_py as error;
use crate::gateway::GatewayConnection;
use crate::stream::EventStream;
use crate::transport::HttpxTransport;

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct EdithHermes {
    inner: hermes::EdithHermes,
}

impl EdithHermes {
    pub(crate) fn new(inner: hermes::EdithHermes) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl EdithHermes {
    /// A client for the control plane at `url`, with an HTTP client of its own (closed by
    /// `close()`); with `http_client` (an `httpx.AsyncClient`), every request goes through it
    /// and it stays the caller's: closing this client never closes it.
    #[staticmethod]
    #[pyo3(signature = (url, api_key = None, http_client = None))]
    fn remote(
        py: Python<'_>,
        url: &str,
        api_key: Option<&str>,
        http_client: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let api_key = header_secret("API key", api_key)?;
        Ok(Self::new(match http_client {
            Some(client) => {
                hermes::EdithHermes::with_transport(url, api_key, HttpxTransport::new(py, client)?)
            }
            None => hermes::EdithHermes::remote(url, api_key),
        }))
    }

    /// The control plane's URL.
    #[getter]
    fn base_url(&self) -> String {
        self.inner.base_url().to_owned()
    }

    /// Sends `method path?query` with a JSON `body`; awaits to the JSON reply.
    #[pyo3(signature = (method, path, query, body = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: String,
        path: String,
        query: Vec<(String, String)>,
        body: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body: Option<Value> = body.map(|body| from_py(&body)).transpose()?;
        let client = self.inner.clone();
        future_into_py(py, async move {
            let reply = client
                .call_path(&method, &path, query, body.as_ref())
                .await
                .map_err(error)?;
            to_py(&reply)
        })
    }

    /// The event log at `path` (of `TurnEvent`s or `JobEvent`s) after event `after`.
    fn events(&self, event: &str, path: &str, after: u64) -> PyResult<EventStream> {
        match event {
            "TurnEvent" => Ok(EventStream::new(
                self.inner.events_at::<edith_types::TurnEvent>(path, after),
            )),
            "JobEvent" => Ok(EventStream::new(
                self.inner.events_at::<edith_types::JobEvent>(path, after),
            )),
            other => Err(PyValueError::new_err(format!(
                "`{other}` is not an event log of the contract"
            ))),
        }
    }

    /// POSTs `body` to `path`; awaits to the event log (of `TurnEvent`s) the reply starts.
    fn start_events<'py>(
        &self,
        py: Python<'py>,
        event: &str,
        path: String,
        body: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if event != "TurnEvent" {
            return Err(PyValueError::new_err(format!(
                "`{event}` is not an event log a request of the contract starts"
            )));
        }
        let body: Value = from_py(&body)?;
        let client = self.inner.clone();
        future_into_py(py, async move {
            let events = client
                .start_events_at::<edith_types::TurnEvent>(&path, &body)
                .await
                .map_err(error)?;
            Ok(EventStream::new(events))
        })
    }

    /// Opens the gateway relay at `path`.
    fn socket<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        future_into_py(py, async move {
            let connection = client.socket_at(&path).await.map_err(error)?;
            Ok(GatewayConnection::new(connection))
        })
    }

    /// Closes this client (and every handle sharing it): later calls raise `ClosedError`.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.inner.close();
        future_into_py(py, async move { Ok(()) })
    }
}
