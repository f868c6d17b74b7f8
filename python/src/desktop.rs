//! `_core.HermesDesktop`: the Rust SDK's client for a runtime's Desktop routes, for the
//! generated Python methods (`edith_hermes._desktop_routes`), which call `call` with the
//! route's operation name. A different endpoint with different operations from the control
//! plane's: a runtime's URL and session token, or an instance's routes through the control
//! plane (`instance.desktop()`).

use std::collections::BTreeMap;

use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use serde_json::{Value, json};

use crate::convert::{from_py, header_secret, to_py};
use crate::errors::to_py as error;
use crate::transport::HttpxTransport;

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct HermesDesktop {
    inner: hermes::HermesDesktop,
}

impl HermesDesktop {
    pub(crate) fn new(inner: hermes::HermesDesktop) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl HermesDesktop {
    /// A client for the runtime at `url` (e.g. `http://127.0.0.1:9119`), authenticated with
    /// its session token, with an HTTP client of its own; with `http_client` (an
    /// `httpx.AsyncClient`), every request goes through it and it stays the caller's: closing
    /// this client never closes it.
    #[staticmethod]
    #[pyo3(signature = (url, token = None, http_client = None))]
    fn remote(
        py: Python<'_>,
        url: &str,
        token: Option<&str>,
        http_client: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let token = header_secret("token", token)?;
        Ok(Self::new(match http_client {
            Some(client) => {
                hermes::HermesDesktop::with_transport(url, token, HttpxTransport::new(py, client)?)
            }
            None => hermes::HermesDesktop::remote(url, token),
        }))
    }

    /// A client acting on the runtime's profile `name`, sharing this one's connection: closing
    /// it leaves this one open; closing this one ends it too.
    fn for_profile(&self, name: &str) -> Self {
        Self::new(self.inner.for_profile(name))
    }

    /// The profile it acts on; `None`: the runtime's own.
    #[getter]
    fn profile(&self) -> Option<String> {
        self.inner.profile().map(str::to_owned)
    }

    #[getter]
    fn base_url(&self) -> String {
        self.inner.base_url().to_owned()
    }

    /// Calls the route named `operation` with its path `params`, `query` and `body`.
    #[pyo3(signature = (operation, params, query = None, body = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        operation: String,
        params: BTreeMap<String, String>,
        query: Option<Bound<'py, PyAny>>,
        body: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let query: Option<Value> = query.map(|q| from_py(&q)).transpose()?;
        let body: Option<Value> = body.map(|b| from_py(&b)).transpose()?;
        let desktop = self.inner.clone();
        future_into_py(py, async move {
            let params: Vec<(&str, &str)> = params
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            let reply = desktop
                .call_operation(&operation, &params, query.as_ref(), body.as_ref())
                .await
                .map_err(error)?;
            to_py(&reply)
        })
    }

    /// What the server offers: its version, which runtime it is, the route groups it serves
    /// the dashboard plugins with routes of their own, and the MCP servers its catalog offers.
    fn capabilities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let desktop = self.inner.clone();
        future_into_py(py, async move {
            let found = desktop.capabilities().await.map_err(error)?;
            let groups: Vec<&str> = found.groups.iter().map(|g| g.as_str()).collect();
            to_py(&json!({
                "version": found.version,
                "runtime": found.runtime,
                "groups": groups,
                "plugin_routes": found.plugin_routes,
                "mcp_catalog": found.mcp_catalog,
            }))
        })
    }

    /// `GET /api/plugins/<plugin>/<path>`, after checking the server offers the plugin
    /// (`UnsupportedError` otherwise, and always through a control plane).
    fn plugin_get<'py>(
        &self,
        py: Python<'py>,
        plugin: String,
        path: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let desktop = self.inner.clone();
        future_into_py(py, async move {
            to_py(&desktop.plugin_get(&plugin, &path).await.map_err(error)?)
        })
    }

    /// `POST /api/plugins/<plugin>/<path>` with a JSON body; see `plugin_get`.
    fn plugin_post<'py>(
        &self,
        py: Python<'py>,
        plugin: String,
        path: String,
        body: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body: Value = from_py(&body)?;
        let desktop = self.inner.clone();
        future_into_py(py, async move {
            to_py(
                &desktop
                    .plugin_post(&plugin, &path, &body)
                    .await
                    .map_err(error)?,
            )
        })
    }

    /// Closes this client and the ones `for_profile` made from it.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.inner.close();
        future_into_py(py, async move { Ok(()) })
    }
}
