//! The SDK's errors as Python exceptions, all under `EdithError`: a class for each kind a
//! caller handles differently (`ApiError`, `TransportError` — a lost connection, a stream that
//! could not be resumed —, `UnsupportedError`, `NotReadyError`, `NativeError`, `DesktopError`,
//! `ClosedError`); the rest (an unreadable reply, a local context that could not start) is a
//! plain `EdithError` with the SDK's message. The fields of a variant become attributes.

use hermes::Error;
use hermes::native::NativeError as RustNativeError;
use pyo3::IntoPyObjectExt;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    edith_hermes,
    EdithError,
    PyException,
    "Every error of the SDK."
);
create_exception!(
    edith_hermes,
    ApiError,
    EdithError,
    "The control plane answered with a problem: `status`, `code` (stable: match on it), \
     `detail`, `retryable`, `native_code`."
);
create_exception!(
    edith_hermes,
    TransportError,
    EdithError,
    "The request got no answer (refused, reset, timed out); `retryable` says whether to retry."
);
create_exception!(
    edith_hermes,
    UnsupportedError,
    EdithError,
    "The server does not implement the operation (`operation`)."
);
create_exception!(
    edith_hermes,
    NotReadyError,
    EdithError,
    "An instance ended its provisioning somewhere other than `ready` (`instance`, `reason`)."
);
create_exception!(
    edith_hermes,
    NativeError,
    EdithError,
    "A native gateway method failed: `method`, and `code` when the runtime refused it."
);
create_exception!(
    edith_hermes,
    DesktopError,
    EdithError,
    "A runtime's Desktop route refused the request: `route` (`METHOD /path`), `status`, \
     `detail` (the runtime's own words)."
);
create_exception!(
    edith_hermes,
    ClosedError,
    EdithError,
    "The client was closed."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Every exception says whether retrying may help; those raised here set it themselves.
    py.get_type::<EdithError>().setattr("retryable", false)?;
    m.add("EdithError", py.get_type::<EdithError>())?;
    m.add("ApiError", py.get_type::<ApiError>())?;
    m.add("TransportError", py.get_type::<TransportError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("NotReadyError", py.get_type::<NotReadyError>())?;
    m.add("NativeError", py.get_type::<NativeError>())?;
    m.add("DesktopError", py.get_type::<DesktopError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    Ok(())
}

/// An exception of the class for `err`'s variant, with its fields as attributes.
pub(crate) fn to_py(err: Error) -> PyErr {
    let message = err.to_string();
    let retryable = err.is_retryable();
    Python::attach(|py| {
        let (exception, fields): (PyErr, Vec<(&str, Py<PyAny>)>) = match err {
            Error::Api {
                status,
                code,
                detail,
                native_code,
                ..
            } => (
                ApiError::new_err(message),
                vec![
                    ("status", obj(py, status)),
                    ("code", obj(py, code.as_str())),
                    ("detail", obj(py, detail)),
                    ("native_code", obj(py, native_code)),
                ],
            ),
            Error::Transport(_) | Error::StreamEnded(_) | Error::Socket(_) => {
                (TransportError::new_err(message), vec![])
            }
            Error::Unsupported { operation } => (
                UnsupportedError::new_err(message),
                vec![("operation", obj(py, operation))],
            ),
            Error::NotReady { instance, reason } => (
                NotReadyError::new_err(message),
                vec![
                    ("instance", obj(py, instance.to_string())),
                    ("reason", obj(py, reason)),
                ],
            ),
            Error::Runtime {
                route,
                status,
                detail,
            } => (
                DesktopError::new_err(message),
                vec![
                    ("route", obj(py, route)),
                    ("status", obj(py, status)),
                    ("detail", obj(py, detail)),
                ],
            ),
            Error::Native(native) => return native_to_py(native),
            Error::Closed => (ClosedError::new_err(message), vec![]),
            _ => (EdithError::new_err(message), vec![]),
        };
        let value = exception.value(py);
        let _ = value.setattr("retryable", retryable);
        for (name, field) in fields {
            let _ = value.setattr(name, field);
        }
        exception
    })
}

/// A failed native call: `UnsupportedError` when the runtime lacks the method, else
/// `NativeError` with the method and the runtime's JSON-RPC code.
pub(crate) fn native_to_py(err: RustNativeError) -> PyErr {
    let message = err.to_string();
    Python::attach(|py| {
        let (exception, method, code) = match err {
            RustNativeError::Unsupported { method } => {
                let e = UnsupportedError::new_err(message);
                let _ = e.value(py).setattr("operation", &method);
                (e, method, None)
            }
            RustNativeError::Rpc { method, code, .. } => {
                (NativeError::new_err(message), method, Some(code))
            }
            RustNativeError::Transport { method, .. } | RustNativeError::Decode { method, .. } => {
                (NativeError::new_err(message), method, None)
            }
            _ => (NativeError::new_err(message), String::new(), None),
        };
        let value = exception.value(py);
        let _ = value.setattr("method", method);
        let _ = value.setattr("code", code);
        let _ = value.setattr("retryable", false);
        exception
    })
}

fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, value: T) -> Py<PyAny> {
    value.into_py_any(py).unwrap_or_else(|_| py.None())
}
