//! Values between Python and the SDK's serde types (`pythonize`): replies become plain
//! Python dicts and lists; requests are checked by the same types the Rust SDK uses, so an
//! unknown field or a wrong kind of id fails here with the type's own message.

use std::str::FromStr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// `value` as Python objects (dicts, lists, str, int, float, bool, None).
pub(crate) fn to_py<T: Serialize>(value: &T) -> PyResult<Py<PyAny>> {
    Python::attach(|py| {
        pythonize::pythonize(py, value)
            .map(Bound::unbind)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// A Python value read as `T`; a mismatch is a `ValueError` saying what did not fit.
pub(crate) fn from_py<T: DeserializeOwned>(value: &Bound<'_, PyAny>) -> PyResult<T> {
    pythonize::depythonize(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// An id of the kind `T` (`ins_…`, `prf_…`); another kind is a `ValueError` naming both.
pub(crate) fn id<T>(value: &str) -> PyResult<T>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    T::from_str(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Refuses a key or token that cannot be a header value (a control character, such as the
/// newline a file read leaves at its end), without echoing it: the HTTP stack's own error
/// would print it.
pub(crate) fn header_secret<'a>(what: &str, value: Option<&'a str>) -> PyResult<Option<&'a str>> {
    match value {
        Some(secret) if secret.chars().any(char::is_control) => Err(PyValueError::new_err(
            format!("the {what} has a control character (a trailing newline?): strip it"),
        )),
        other => Ok(other),
    }
}
