//! Resource handles, as the seed names them: `hermes.instances(iid).profiles(pid)` builds a
//! handle without I/O; `await handle.get()` fetches. Each wraps the Rust SDK's handle.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyDictMethods};
use pyo3_async_runtimes::tokio::future_into_py;

use edith_types::{ApprovalChoice, CreateInstance, CreateSession, InstanceFilter, ModelSpec};
use hermes::PageRequest;

use crate::convert::{from_py, id, to_py};
use crate::desktop::HermesDesktop;
use crate::errors::to_py as error;
use crate::gateway::GatewayConnection;
use crate::native::{self, NativeRoute};
use crate::stream::EventStream;

fn page(cursor: Option<String>, limit: Option<usize>) -> PageRequest {
    PageRequest { cursor, limit }
}

/// Keyword arguments as one dict, with `extra` fields added (e.g. the positional `name`).
fn fields<'py>(
    py: Python<'py>,
    kwargs: Option<&Bound<'py, PyDict>>,
    extra: &[(&str, Option<&str>)],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = match kwargs {
        Some(kwargs) => kwargs.copy()?,
        None => PyDict::new(py),
    };
    for (key, value) in extra {
        if let Some(value) = value {
            dict.set_item(key, value)?;
        }
    }
    Ok(dict)
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Instances {
    hermes: hermes::Hermes,
}

impl Instances {
    pub(crate) fn new(hermes: hermes::Hermes) -> Self {
        Self { hermes }
    }
}

#[pymethods]
impl Instances {
    /// A handle on instance `instance_id`; no I/O.
    fn __call__(&self, instance_id: &str) -> PyResult<Instance> {
        Ok(Instance::new(self.hermes.instance(&id(instance_id)?)))
    }

    /// Creates an instance (`provider`, `runtime`, `url`, `token`, `labels`, … as the
    /// contract's `CreateInstance` says; `embedded` by default) and, unless `wait=False`,
    /// waits until its provisioning job made it ready (`NotReadyError` otherwise).
    #[pyo3(signature = (name, *, wait = true, **spec))]
    fn create<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        wait: bool,
        spec: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec: CreateInstance = from_py(fields(py, spec, &[("name", Some(name))])?.as_any())?;
        let instances = self.hermes.instances();
        future_into_py(py, async move {
            let creation = instances.create_with(&spec).await.map_err(error)?;
            let handle = if wait {
                creation.ready().await.map_err(error)?
            } else {
                creation.handle().clone()
            };
            Ok(Instance::new(handle))
        })
    }

    /// A page of instances (`{"items": [...], "next_cursor": ...}`), optionally only those
    /// in `state` or with `label` (`key=value`).
    #[pyo3(signature = (*, state = None, label = None, cursor = None, limit = None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        state: Option<&str>,
        label: Option<&str>,
        cursor: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let filter: InstanceFilter =
            from_py(fields(py, None, &[("state", state), ("label", label)])?.as_any())?;
        let instances = self.hermes.instances();
        let page = page(cursor, limit);
        future_into_py(py, async move {
            to_py(&instances.list_where(&filter, &page).await.map_err(error)?)
        })
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Instance {
    inner: hermes::InstanceHandle,
}

impl Instance {
    pub(crate) fn new(inner: hermes::InstanceHandle) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl Instance {
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// Fetches the instance.
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.get().await.map_err(error)?) },
        )
    }

    /// Which runtime it runs and which native methods that runtime implements.
    fn capabilities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            to_py(&handle.capabilities().await.map_err(error)?)
        })
    }

    /// Deletes the instance (its runtime stopped, its home removed), waiting for the job.
    fn delete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move { handle.delete().await.map_err(error) })
    }

    /// The profiles: `instance.profiles(profile_id)` is a handle (no I/O); `.create()`,
    /// `.list()` ask the control plane.
    #[getter]
    fn profiles(&self) -> Profiles {
        Profiles {
            instance: self.inner.clone(),
        }
    }

    /// The instance's runtime's Desktop routes through the control plane, with this client's
    /// key (the runtime's token never reaches this process): an `AsyncHermesDesktop`.
    fn desktop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let desktop = HermesDesktop::new(self.inner.desktop());
        py.import("edith_hermes._desktop")?
            .getattr("AsyncHermesDesktop")?
            .call1((desktop,))
    }

    /// Instance-wide native methods, in the pinned catalog's namespaces
    /// (`instance.native.config.get()`).
    #[getter]
    fn native<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        native::namespaces(py, NativeRoute::new(self.inner.native()))
    }

    fn __repr__(&self) -> String {
        format!("Instance(id={:?})", self.inner.id().to_string())
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Profiles {
    instance: hermes::InstanceHandle,
}

#[pymethods]
impl Profiles {
    /// A handle on profile `profile_id`; no I/O.
    fn __call__(&self, profile_id: &str) -> PyResult<Profile> {
        Ok(Profile {
            inner: self.instance.profile(&id(profile_id)?),
        })
    }

    /// Creates a profile (also its native profile's name) with registered tools (their ids)
    /// and a model (a dict as the contract's `ModelSpec`; the offline `scripted` model when
    /// absent).
    #[pyo3(signature = (name, *, tools = Vec::new(), model = None))]
    fn create<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        tools: Vec<String>,
        model: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut spec = hermes::ProfileSpec::new(name);
        for tool in &tools {
            spec = spec.tool_id(&id(tool)?);
        }
        if let Some(model) = model {
            spec = spec.model(from_py::<ModelSpec>(&model)?);
        }
        let profiles = self.instance.profiles();
        future_into_py(py, async move {
            let inner = profiles.create(spec).await.map_err(error)?;
            Ok(Profile { inner })
        })
    }

    /// A page of the instance's profiles.
    #[pyo3(signature = (*, cursor = None, limit = None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        cursor: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let profiles = self.instance.profiles();
        let page = page(cursor, limit);
        future_into_py(py, async move {
            to_py(&profiles.list(&page).await.map_err(error)?)
        })
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Profile {
    inner: hermes::ProfileHandle,
}

#[pymethods]
impl Profile {
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    #[getter]
    fn instance(&self) -> Instance {
        Instance::new(self.inner.instance().clone())
    }

    /// Fetches the profile.
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.get().await.map_err(error)?) },
        )
    }

    /// Attaches a registered callback tool (by id); attaching twice is a no-op.
    fn attach_tool<'py>(&self, py: Python<'py>, tool_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        let tool_id = id(tool_id)?;
        future_into_py(py, async move {
            to_py(&handle.attach_tool(&tool_id).await.map_err(error)?)
        })
    }

    /// Changes the profile's model (a dict as the contract's `ModelSpec`).
    fn set_model<'py>(
        &self,
        py: Python<'py>,
        model: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        let model: ModelSpec = from_py(&model)?;
        future_into_py(py, async move {
            to_py(&handle.set_model(model).await.map_err(error)?)
        })
    }

    /// Deletes the profile with its sessions and turns.
    fn delete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.delete().await.map_err(error)?) },
        )
    }

    /// A persistent connection to the profile's native gateway through the control plane's
    /// relay (the runtime's token never reaches this process); resumes by itself after a
    /// dropped socket. `async with await profile.connect() as connection: ...`
    fn connect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            let connection = handle.connect().await.map_err(error)?;
            Ok(GatewayConnection::new(connection))
        })
    }

    /// The control-plane sessions: `profile.sessions(session_id)` is a handle (no I/O);
    /// `.create()`, `.list()` ask the control plane.
    #[getter]
    fn sessions(&self) -> Sessions {
        Sessions {
            profile: self.inner.clone(),
        }
    }

    /// Native methods on behalf of this profile, in the pinned catalog's namespaces
    /// (`profile.native.session.list()`): profile-scoped methods act on its native profile;
    /// instance-wide ones (administration among them) stay instance-wide.
    #[getter]
    fn native<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        native::namespaces(py, NativeRoute::new(self.inner.native()))
    }

    fn __repr__(&self) -> String {
        format!(
            "Profile(instance={:?}, id={:?})",
            self.inner.instance().id().to_string(),
            self.inner.id().to_string()
        )
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Sessions {
    profile: hermes::ProfileHandle,
}

#[pymethods]
impl Sessions {
    /// A handle on session `session_id`; no I/O.
    fn __call__(&self, session_id: &str) -> PyResult<Session> {
        Ok(Session {
            inner: self.profile.session(&id(session_id)?),
        })
    }

    /// A new session, or one that continues the runtime's stored native session
    /// `resume_native_session_id` (a native id, never a control-plane session id: the
    /// control plane refuses one).
    #[pyo3(signature = (*, title = None, resume_native_session_id = None))]
    fn create<'py>(
        &self,
        py: Python<'py>,
        title: Option<&str>,
        resume_native_session_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body: CreateSession = from_py(
            fields(
                py,
                None,
                &[
                    ("title", title),
                    ("resume_native_session_id", resume_native_session_id),
                ],
            )?
            .as_any(),
        )?;
        let sessions = self.profile.sessions();
        future_into_py(py, async move {
            let inner = sessions.create_with(body).await.map_err(error)?;
            Ok(Session { inner })
        })
    }

    /// A page of the profile's sessions.
    #[pyo3(signature = (*, cursor = None, limit = None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        cursor: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sessions = self.profile.sessions();
        let page = page(cursor, limit);
        future_into_py(py, async move {
            to_py(&sessions.list(&page).await.map_err(error)?)
        })
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Session {
    inner: hermes::SessionHandle,
}

#[pymethods]
impl Session {
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// Fetches the session.
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.get().await.map_err(error)?) },
        )
    }

    /// Changes the session's title.
    fn set_title<'py>(&self, py: Python<'py>, title: String) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            to_py(&handle.set_title(&title).await.map_err(error)?)
        })
    }

    /// Deletes the session with its turns; the runtime's stored session stays.
    fn delete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.delete().await.map_err(error)?) },
        )
    }

    /// Starts a turn with `input`; follow it with `turn.events()` or `await turn.wait()`.
    fn send<'py>(&self, py: Python<'py>, input: String) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            let inner = handle.send(&input).await.map_err(error)?;
            Ok(Turn { inner })
        })
    }

    /// Starts a turn with `input` and awaits to its event stream, in one request; every event
    /// names its turn (`turn_id`), for `session.turn(turn_id)`.
    fn stream<'py>(&self, py: Python<'py>, input: String) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            let events = handle.stream(&input).await.map_err(error)?;
            Ok(EventStream::new(events))
        })
    }

    /// A handle on turn `turn_id`; no I/O.
    fn turn(&self, turn_id: &str) -> PyResult<Turn> {
        Ok(Turn {
            inner: self.inner.turn(&id(turn_id)?),
        })
    }
}

#[pyclass(module = "edith_hermes._core", frozen)]
pub(crate) struct Turn {
    inner: hermes::TurnHandle,
}

#[pymethods]
impl Turn {
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// Fetches the turn (state, output, usage).
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.get().await.map_err(error)?) },
        )
    }

    /// The turn's events after `after` (from the start by default), live until it finishes;
    /// resumes by itself when the connection drops.
    #[pyo3(signature = (after = 0))]
    fn events(&self, after: u64) -> EventStream {
        EventStream::new(self.inner.events_after(after))
    }

    /// Waits for the turn to finish and returns it.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.wait().await.map_err(error)?) },
        )
    }

    /// Answers a pending approval: `"once"`, `"session"`, `"always"` or `"deny"`.
    fn approve<'py>(
        &self,
        py: Python<'py>,
        choice: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let choice: ApprovalChoice = from_py(&choice)?;
        let handle = self.inner.clone();
        future_into_py(py, async move {
            to_py(&handle.approve(choice).await.map_err(error)?)
        })
    }

    /// Answers the question of a `clarify.requested` event.
    fn answer<'py>(
        &self,
        py: Python<'py>,
        request_id: String,
        answer: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(py, async move {
            to_py(&handle.answer(&request_id, &answer).await.map_err(error)?)
        })
    }

    /// Cancels the turn; it ends `cancelled` (a finished turn stays as it is).
    fn cancel<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.inner.clone();
        future_into_py(
            py,
            async move { to_py(&handle.cancel().await.map_err(error)?) },
        )
    }
}
