//! `profile.connect()`: a persistent connection to a profile's native gateway, relayed by the
//! control plane and resumed by itself after a dropped socket (the Rust SDK's
//! `GatewayConnection`). Native events arrive in order, as dicts (`async for event in
//! connection`); requests go through `connection.native.<namespace>.<method>()` or `call()`.

use std::sync::Arc;

use hermes::GatewayEvent;
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use serde_json::{Value, json};

use crate::convert::to_py;
use crate::errors::native_to_py;
use crate::native::{self, catalog_method, params_of};

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct GatewayConnection {
    inner: Arc<hermes::GatewayConnection>,
}

impl GatewayConnection {
    pub(crate) fn new(inner: hermes::GatewayConnection) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }
}

/// An event as a dict: a native event as the gateway sent it (`type`, `session_id`, payload),
/// or `{"type": "gateway.missed", "first", "last"}` for frames lost in a gap too long to keep.
fn event_value(event: GatewayEvent) -> Value {
    match event {
        GatewayEvent::Native(frame) => serde_json::to_value(frame).unwrap_or(Value::Null),
        GatewayEvent::Missed { first, last } => {
            json!({"type": "gateway.missed", "first": first, "last": last})
        }
        other => json!({"type": "gateway.unknown", "debug": format!("{other:?}")}),
    }
}

#[pymethods]
impl GatewayConnection {
    /// The connection's id on the control plane, once the relay has said it.
    #[getter]
    fn id(&self) -> Option<String> {
        self.inner.id().map(|id| id.to_string())
    }

    /// How many times it has reconnected.
    #[getter]
    fn reconnects(&self) -> u64 {
        self.inner.reconnects()
    }

    /// Why it ended, once it has.
    #[getter]
    fn ended(&self) -> Option<String> {
        self.inner.ended()
    }

    /// Calls native `method` (a name of the pinned catalog) on this connection.
    #[pyo3(signature = (method, params = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: String,
        params: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        catalog_method(&method)?;
        let params = params_of(params)?;
        let connection = self.inner.clone();
        future_into_py(py, async move {
            let reply = connection
                .call(&method, params)
                .await
                .map_err(native_to_py)?;
            to_py(&reply)
        })
    }

    /// The catalog's namespaces on this connection (`connection.native.session.create()`).
    #[getter]
    fn native<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        native::namespaces(slf.py(), slf.into_any())
    }

    /// The next event, or `None` once the connection has ended.
    fn next_event<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let connection = self.inner.clone();
        future_into_py(py, async move {
            match connection.next_event().await {
                Some(event) => to_py(&event_value(event)),
                None => Ok(Python::attach(|py| py.None())),
            }
        })
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let connection = self.inner.clone();
        future_into_py(py, async move {
            match connection.next_event().await {
                Some(event) => to_py(&event_value(event)),
                None => Err(PyStopAsyncIteration::new_err(())),
            }
        })
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.clone().unbind();
        future_into_py(slf.py(), async move { Ok(this) })
    }

    #[pyo3(signature = (*_exc_info))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_info: Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.close(py)
    }

    /// Ends the connection; closing twice is a no-op.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let connection = self.inner.clone();
        future_into_py(py, async move {
            connection.close().await;
            Ok(())
        })
    }
}
