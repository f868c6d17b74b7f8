//! Python callback tools as SDK tools. The Python side (`edith_hermes.tool`) derives the
//! schema from the function's type hints, checks the arguments against it and runs the
//! function; here its runner is called on the event loop that registered it, from the tool
//! host's tokio task.

use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

use crate::convert::from_py;

/// How long one call may take, just under the control plane's own limit.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(115);

/// `tool` (an `edith_hermes.Tool`, or a function made into one) as an SDK tool whose calls
/// run its `_run_json(args_json) -> result_json` on the current event loop.
pub(crate) fn tool(py: Python<'_>, tool: &Bound<'_, PyAny>) -> PyResult<hermes::Tool> {
    let tool = py
        .import("edith_hermes._tools")?
        .getattr("as_tool")?
        .call1((tool,))?;
    let name: String = tool.getattr("name")?.extract()?;
    let description: String = tool.getattr("description")?.extract()?;
    let input_schema: Value = from_py(&tool.getattr("input_schema")?)?;
    let run = std::sync::Arc::new(tool.getattr("_run_json")?.unbind());
    let locals = pyo3_async_runtimes::tokio::get_current_locals(py).map_err(|_| {
        pyo3::exceptions::PyRuntimeError::new_err(
            "a tool runs on the event loop it is registered from: register it inside async code",
        )
    })?;
    Ok(hermes::Tool::from_json(
        &name,
        &description,
        input_schema,
        move |args: Value| {
            let run = run.clone();
            let locals = locals.clone();
            async move {
                call(&run, &locals, args)
                    .await
                    .map_err(hermes::ToolError::new)
            }
        },
    ))
}

/// One call: the runner's coroutine is scheduled on its loop and awaited from here. A Python
/// exception becomes the message the model is shown.
async fn call(run: &Py<PyAny>, locals: &TaskLocals, args: Value) -> Result<Value, String> {
    let pending = Python::attach(|py| {
        let coroutine = run.bind(py).call1((args.to_string(),))?;
        pyo3_async_runtimes::into_future_with_locals(locals, coroutine)
    })
    .map_err(describe)?;
    // The control plane gives up on a call after 120 s; a loop that no longer runs would
    // otherwise leave this waiting until then without saying why.
    let reply = tokio::time::timeout(CALL_TIMEOUT, pending)
        .await
        .map_err(|_| {
            format!(
                "no answer within {CALL_TIMEOUT:?} (hanging): is the event loop that \
                 registered the tool still running?"
            )
        })?
        .map_err(describe)?;
    let text: String = Python::attach(|py| reply.extract(py)).map_err(describe)?;
    serde_json::from_str(&text).map_err(|e| format!("the tool's result is not JSON: {e}"))
}

fn describe(err: PyErr) -> String {
    Python::attach(|py| {
        let kind = err
            .get_type(py)
            .name()
            .map(|name| name.to_string())
            .unwrap_or_else(|_| "Exception".to_owned());
        format!("{kind}: {}", err.value(py))
    })
}
