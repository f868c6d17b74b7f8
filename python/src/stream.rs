//! `async for event in turn.events()`: a turn's or a job's resumable event stream, each event
//! a dict as the contract describes it.

use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::convert::to_py;
use crate::errors::to_py as error;

type Events = BoxStream<'static, hermes::Result<Value>>;

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct EventStream {
    events: Arc<Mutex<Events>>,
}

impl EventStream {
    pub(crate) fn new<E: hermes::LogEvent + Serialize>(events: hermes::EventStream<E>) -> Self {
        let events = events
            .map(|event| event.map(|event| serde_json::to_value(event).unwrap_or(Value::Null)));
        Self {
            events: Arc::new(Mutex::new(events.boxed())),
        }
    }
}

#[pymethods]
impl EventStream {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let events = self.events.clone();
        future_into_py(py, async move {
            match events.lock().await.next().await {
                Some(Ok(event)) => to_py(&event),
                Some(Err(e)) => Err(error(e)),
                None => Err(PyStopAsyncIteration::new_err(())),
            }
        })
    }
}
