//! Native gateway methods through the control plane (`profile.native`, `instance.native`).
//! The Python namespaces (`profile.native.session.list()`) are built from the pinned catalog
//! exported here as `NATIVE_METHODS`; every call goes through `call`.

use std::collections::BTreeMap;

use edith_types::ErrorCode;
use hermes::Error;
use hermes::native::NativeError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use serde_json::Value;

use crate::convert::{from_py, to_py};
use crate::errors::{native_to_py, to_py as error};

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct NativeRoute {
    route: hermes::NativeRoute,
}

impl NativeRoute {
    pub(crate) fn new(route: hermes::NativeRoute) -> Self {
        Self { route }
    }
}

#[pymethods]
impl NativeRoute {
    /// Calls native method `method` (a name of the pinned catalog) with `params` (a dict).
    #[pyo3(signature = (method, params = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: String,
        params: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        catalog_method(&method)?;
        let params = params_of(params)?;
        let route = self.route.clone();
        future_into_py(py, async move {
            let reply = route.call(&method, params).await.map_err(|e| match e {
                // The runtime refused: a native error with its JSON-RPC code.
                Error::Api {
                    code: ErrorCode::NativeError,
                    detail,
                    native_code,
                    ..
                } => native_to_py(NativeError::Rpc {
                    method: method.clone(),
                    code: native_code.unwrap_or_default(),
                    message: detail,
                }),
                Error::Unsupported { .. } => native_to_py(NativeError::Unsupported {
                    method: method.clone(),
                }),
                // Closed, refused keys, transport: the SDK's own errors.
                other => error(other),
            })?;
            to_py(&reply)
        })
    }
}

/// Refuses a name the pinned catalog lacks, before any request.
pub(crate) fn catalog_method(method: &str) -> PyResult<()> {
    let catalog = hermes::native::catalog::catalog();
    match catalog.method(method) {
        Some(_) => Ok(()),
        None => Err(PyValueError::new_err(format!(
            "`{method}` is not a method of the pinned Hermes {} catalog",
            catalog.hermes_agent_version
        ))),
    }
}

/// A call's params: a dict, or none.
pub(crate) fn params_of(params: Option<Bound<'_, PyAny>>) -> PyResult<Value> {
    match params {
        Some(params) => from_py(&params),
        None => Ok(Value::Object(Default::default())),
    }
}

/// `route` (anything with `call(method, params)`) wrapped in `edith_hermes._native.Native`, which names the catalog's methods.
pub(crate) fn namespaces<'py>(
    py: Python<'py>,
    route: impl IntoPyObject<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    py.import("edith_hermes._native")?
        .getattr("Native")?
        .call1((route,))
}

/// What Python needs to know of each catalog method.
#[derive(IntoPyObject)]
pub(crate) struct MethodFacts {
    params: Vec<String>,
    scope: &'static str,
    admin: bool,
}

/// The pinned catalog's methods by name.
pub(crate) fn catalog_methods() -> BTreeMap<String, MethodFacts> {
    use hermes::native::catalog::Scope;
    hermes::native::catalog::catalog()
        .methods
        .iter()
        .map(|m| {
            let scope = match m.scope {
                Scope::Session => "session",
                Scope::Profile => "profile",
                Scope::Instance => "instance",
            };
            let facts = MethodFacts {
                params: m.params.clone(),
                scope,
                admin: m.admin,
            };
            (m.name.clone(), facts)
        })
        .collect()
}
