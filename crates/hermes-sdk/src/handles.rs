//! Resource handles. A handle is ids plus the root client: building one does no I/O; `get()`
//! fetches the resource.

use std::time::Duration;

use edith_types::{
    ApprovalChoice, CreateInstance, CreateProfile, CreateSession, CreateTurn, Instance,
    InstanceFilter, InstanceId, InstanceState, Job, JobEvent, JobEventKind, ModelSpec,
    NativeSessionId, Page, Profile, ProfileId, Session, SessionId, ToolId, Turn, TurnAction,
    TurnEvent, TurnId, UpdateProfile, UpdateSession,
};
use futures_util::StreamExt;

use crate::client::PageRequest;
use crate::error::{Error, Result};
use crate::events::EventStream;
use crate::hermes::Hermes;

/// The instances of a control plane.
#[derive(Debug, Clone)]
pub struct Instances {
    hermes: Hermes,
}

impl Instances {
    pub(crate) fn new(hermes: Hermes) -> Self {
        Self { hermes }
    }

    /// Creates an instance on the embedded provider and starts its provisioning job.
    /// Created through `Hermes::local()`, it is deleted when that context closes (unless
    /// `cleanup(false)`).
    pub async fn create(&self, name: &str) -> Result<InstanceCreation> {
        self.create_with(&CreateInstance::named(name)).await
    }

    /// Creates an instance as `spec` says (e.g. a `process` instance running one of the
    /// control plane's runtimes, listed by `hermes.sdk().runtime_list()`).
    pub async fn create_with(&self, spec: &CreateInstance) -> Result<InstanceCreation> {
        let created = self.hermes.sdk().instance_create(spec).await?;
        self.hermes.own(&created.instance.id);
        Ok(InstanceCreation {
            handle: self.hermes.instance(&created.instance.id),
            instance: created.instance,
            job: created.job,
        })
    }

    /// A page of instances.
    pub async fn list(&self, page: &PageRequest) -> Result<Page<Instance>> {
        self.list_where(&InstanceFilter::default(), page).await
    }

    /// A page of the instances that match `filter` (a state, a label).
    pub async fn list_where(
        &self,
        filter: &InstanceFilter,
        page: &PageRequest,
    ) -> Result<Page<Instance>> {
        self.hermes.sdk().instance_list(filter, page).await
    }
}

/// A new instance and the job provisioning it.
#[derive(Debug)]
pub struct InstanceCreation {
    /// The instance, `provisioning`.
    pub instance: Instance,
    /// The job provisioning it.
    pub job: Job,
    handle: InstanceHandle,
}

impl InstanceCreation {
    /// A handle on the new instance.
    pub fn handle(&self) -> &InstanceHandle {
        &self.handle
    }

    /// The provisioning job's events (steps and the final outcome), from the start.
    pub fn progress(&self) -> EventStream<JobEvent> {
        self.handle.hermes.sdk().job_events(&self.job.id, 0)
    }

    /// Waits for the job to finish; the handle if the instance is `ready`.
    pub async fn ready(self) -> Result<InstanceHandle> {
        let mut events = self.progress();
        while let Some(event) = events.next().await {
            if let JobEventKind::JobFinished {
                instance_state,
                error,
                ..
            } = event?.kind
            {
                if instance_state == InstanceState::Ready {
                    return Ok(self.handle);
                }
                return Err(Error::NotReady {
                    instance: self.instance.id,
                    reason: error.unwrap_or_else(|| instance_state.as_str().to_owned()),
                });
            }
        }
        Err(Error::StreamEnded(
            "the job stream ended without an outcome".to_owned(),
        ))
    }
}

/// One instance.
#[derive(Debug, Clone)]
pub struct InstanceHandle {
    pub(crate) hermes: Hermes,
    id: InstanceId,
}

impl InstanceHandle {
    pub(crate) fn new(hermes: Hermes, id: InstanceId) -> Self {
        Self { hermes, id }
    }

    /// Its id.
    pub fn id(&self) -> &InstanceId {
        &self.id
    }

    /// Fetches the instance.
    pub async fn get(&self) -> Result<Instance> {
        self.hermes.sdk().instance_get(&self.id).await
    }

    /// What its runtime offers: which runtime it is and the native methods it implements (any
    /// other answers `Unsupported`).
    pub async fn capabilities(&self) -> Result<edith_types::InstanceCapabilities> {
        self.hermes.sdk().instance_capabilities(&self.id).await
    }

    /// Its jobs (its provisioning, its deletion), oldest first; follow an unfinished one's
    /// steps with [`EdithHermes::job_events`](crate::EdithHermes::job_events).
    pub async fn jobs(&self) -> Result<Vec<edith_types::Job>> {
        self.hermes.sdk().instance_jobs(&self.id).await
    }

    /// The instance's profiles: create and list.
    pub fn profiles(&self) -> Profiles {
        Profiles {
            instance: self.clone(),
        }
    }

    /// A handle on one profile; no I/O.
    pub fn profile(&self, id: &ProfileId) -> ProfileHandle {
        ProfileHandle {
            instance: self.clone(),
            id: id.clone(),
        }
    }

    /// The Desktop routes of this instance's runtime, through the control plane (the runtime's
    /// token never reaches the application): `instance.desktop().session_list(..)`. Makes no
    /// request; ends when the SDK client closes.
    pub fn desktop(&self) -> crate::HermesDesktop {
        self.hermes.sdk().desktop(&self.id)
    }

    /// Native gateway methods on this instance's runtime (instance-wide).
    pub fn native(&self) -> crate::NativeRoute {
        crate::NativeRoute::new(self.hermes.clone(), self.id.clone(), None)
    }

    /// Deletes the instance and waits until its runtime is destroyed. An instance still
    /// provisioning is waited for first.
    pub async fn delete(&self) -> Result<()> {
        let mut delay = Duration::from_millis(20);
        while self.get().await?.state == InstanceState::Provisioning {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
        let deleting = self.hermes.sdk().instance_delete(&self.id).await?;
        let mut events = self.hermes.sdk().job_events(&deleting.job.id, 0);
        while let Some(event) = events.next().await {
            if let JobEventKind::JobFinished { error, .. } = event?.kind {
                return match error {
                    None => Ok(()),
                    Some(reason) => Err(Error::NotReady {
                        instance: self.id.clone(),
                        reason: format!("deletion failed: {reason}"),
                    }),
                };
            }
        }
        Err(Error::StreamEnded(
            "the deletion job stream ended early".to_owned(),
        ))
    }
}

/// What a new profile looks like.
#[derive(Debug, Clone)]
pub struct ProfileSpec {
    body: CreateProfile,
}

impl ProfileSpec {
    /// A profile named `name` (also its native Hermes profile name), on the scripted model.
    pub fn new(name: &str) -> Self {
        Self {
            body: CreateProfile {
                name: name.to_owned(),
                model: None,
                tools: Vec::new(),
            },
        }
    }

    /// Attaches a registered callback tool.
    pub fn tool(self, tool: &edith_types::Tool) -> Self {
        self.tool_id(&tool.id)
    }

    /// Attaches a registered callback tool, by id.
    pub fn tool_id(mut self, tool: &ToolId) -> Self {
        self.body.tools.push(tool.clone());
        self
    }

    /// The model (default: `scripted`, offline).
    pub fn model(mut self, model: ModelSpec) -> Self {
        self.body.model = Some(model);
        self
    }
}

/// The profiles of an instance.
#[derive(Debug, Clone)]
pub struct Profiles {
    instance: InstanceHandle,
}

impl Profiles {
    /// Creates a profile (a native profile of the instance).
    pub async fn create(&self, spec: ProfileSpec) -> Result<ProfileHandle> {
        let profile = self
            .instance
            .hermes
            .sdk()
            .profile_create(&self.instance.id, &spec.body)
            .await?;
        Ok(self.instance.profile(&profile.id))
    }

    /// A page of the instance's profiles.
    pub async fn list(&self, page: &PageRequest) -> Result<Page<Profile>> {
        self.instance
            .hermes
            .sdk()
            .profile_list(&self.instance.id, page)
            .await
    }
}

/// One profile.
#[derive(Debug, Clone)]
pub struct ProfileHandle {
    instance: InstanceHandle,
    id: ProfileId,
}

impl ProfileHandle {
    /// Its id.
    pub fn id(&self) -> &ProfileId {
        &self.id
    }

    /// The instance it belongs to.
    pub fn instance(&self) -> &InstanceHandle {
        &self.instance
    }

    /// Fetches the profile.
    pub async fn get(&self) -> Result<Profile> {
        self.instance
            .hermes
            .sdk()
            .profile_get(&self.instance.id, &self.id)
            .await
    }

    /// Attaches a callback tool; attaching twice is a no-op.
    pub async fn attach_tool(&self, tool: &ToolId) -> Result<Profile> {
        self.instance
            .hermes
            .sdk()
            .profile_tool_attach(&self.instance.id, &self.id, tool)
            .await
    }

    /// Detaches a callback tool: the profile's next sessions are no longer offered it.
    pub async fn detach_tool(&self, tool: &ToolId) -> Result<Profile> {
        self.instance
            .hermes
            .sdk()
            .profile_tool_detach(&self.instance.id, &self.id, tool)
            .await
    }

    /// Native gateway methods on behalf of this profile: profile-scoped methods act on its
    /// native profile, and `session.list` lists this profile's stored sessions (Hermes's own
    /// lists only the root profile's). Every other instance-wide method stays instance-wide,
    /// and one marked `admin` administers the whole runtime: it needs an admin key through a
    /// profile handle too.
    pub fn native(&self) -> crate::NativeRoute {
        crate::NativeRoute::new(
            self.instance.hermes.clone(),
            self.instance.id.clone(),
            Some(self.id.clone()),
        )
    }

    /// Changes the profile's model.
    pub async fn set_model(&self, model: ModelSpec) -> Result<Profile> {
        let body = UpdateProfile { model: Some(model) };
        let sdk = self.instance.hermes.sdk();
        sdk.profile_update(&self.instance.id, &self.id, &body).await
    }

    /// Deletes the profile with its sessions and turns, and its native profile's home (409
    /// while one of its turns has not finished).
    pub async fn delete(&self) -> Result<Profile> {
        let sdk = self.instance.hermes.sdk();
        sdk.profile_delete(&self.instance.id, &self.id).await
    }

    /// A persistent connection to the profile's native gateway, relayed by the control plane
    /// (the runtime's token never reaches this process): typed native requests, native
    /// events in order, and answers to approvals and questions (`approval.respond`,
    /// `clarify.respond`). It resumes by itself after a dropped socket; see
    /// [`crate::GatewayConnection`].
    pub async fn connect(&self) -> Result<crate::GatewayConnection> {
        self.instance
            .hermes
            .sdk()
            .profile_gateway(&self.instance.id, &self.id)
            .await
    }

    /// The profile's control-plane sessions: create and list.
    pub fn sessions(&self) -> Sessions {
        Sessions {
            profile: self.clone(),
        }
    }

    /// A handle on one session; no I/O.
    pub fn session(&self, id: &SessionId) -> SessionHandle {
        SessionHandle {
            profile: self.clone(),
            id: id.clone(),
        }
    }
}

/// The sessions of a profile.
#[derive(Debug, Clone)]
pub struct Sessions {
    profile: ProfileHandle,
}

impl Sessions {
    /// A new session (its native session is made at its first turn).
    pub async fn create(&self) -> Result<SessionHandle> {
        self.create_with(CreateSession::default()).await
    }

    /// A session that continues the runtime's stored session `native` (not a control-plane id).
    /// The runtime resumes it at once: an id it does not know is a 404 here, and a
    /// control-plane id is a 400.
    ///
    /// A native id, as the native session list gives it:
    ///
    /// ```no_run
    /// # async fn demo(profile: hermes::ProfileHandle) -> Result<(), Box<dyn std::error::Error>> {
    /// use hermes::native::SessionListParams;
    /// use hermes::types::NativeSessionId;
    /// let listed = profile.native().api().session().list(&SessionListParams::default()).await?;
    /// let stored = NativeSessionId::new(listed.sessions[0].id.as_str());
    /// let session = profile.sessions().resume_native(&stored).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A control-plane session id in its place does not compile:
    ///
    /// ```compile_fail,E0308
    /// # async fn demo(profile: hermes::ProfileHandle) -> Result<(), Box<dyn std::error::Error>> {
    /// let other = profile.sessions().create().await?;
    /// let session = profile.sessions().resume_native(other.id()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume_native(&self, native: &NativeSessionId) -> Result<SessionHandle> {
        self.create_with(CreateSession {
            title: None,
            resume_native_session_id: Some(native.clone()),
        })
        .await
    }

    /// Creates a session as `body` says.
    pub async fn create_with(&self, body: CreateSession) -> Result<SessionHandle> {
        let p = &self.profile;
        let session = p
            .instance
            .hermes
            .sdk()
            .session_create(&p.instance.id, &p.id, &body)
            .await?;
        Ok(p.session(&session.id))
    }

    /// A page of the profile's sessions.
    pub async fn list(&self, page: &PageRequest) -> Result<Page<Session>> {
        let p = &self.profile;
        p.instance
            .hermes
            .sdk()
            .session_list(&p.instance.id, &p.id, page)
            .await
    }
}

/// One session.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    profile: ProfileHandle,
    id: SessionId,
}

impl SessionHandle {
    /// Its id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Fetches the session.
    pub async fn get(&self) -> Result<Session> {
        let p = &self.profile;
        p.instance
            .hermes
            .sdk()
            .session_get(&p.instance.id, &p.id, &self.id)
            .await
    }

    /// Changes the session's title.
    pub async fn set_title(&self, title: &str) -> Result<Session> {
        let p = &self.profile;
        let body = UpdateSession {
            title: Some(title.to_owned()),
        };
        let sdk = p.instance.hermes.sdk();
        sdk.session_update(&p.instance.id, &p.id, &self.id, &body)
            .await
    }

    /// Deletes the session with its turns (409 while one has not finished); the runtime's
    /// stored session stays and can be resumed by its native id.
    pub async fn delete(&self) -> Result<Session> {
        let p = &self.profile;
        let sdk = p.instance.hermes.sdk();
        sdk.session_delete(&p.instance.id, &p.id, &self.id).await
    }

    /// Starts a turn with `input`; follow it with [`TurnHandle::events`].
    pub async fn send(&self, input: &str) -> Result<TurnHandle> {
        let p = &self.profile;
        let turn = p
            .instance
            .hermes
            .sdk()
            .turn_create(
                &p.instance.id,
                &p.id,
                &self.id,
                &CreateTurn {
                    input: input.to_owned(),
                },
            )
            .await?;
        Ok(self.turn(&turn.id))
    }

    /// Starts a turn with `input` and streams its events, in one request (where [`send`] and
    /// [`TurnHandle::events`] take two); resumes by itself if the connection drops. Every event
    /// names its turn (`turn_id`), for [`SessionHandle::turn`].
    ///
    /// [`send`]: SessionHandle::send
    pub async fn stream(&self, input: &str) -> Result<EventStream<TurnEvent>> {
        let p = &self.profile;
        let body = CreateTurn {
            input: input.to_owned(),
        };
        let sdk = p.instance.hermes.sdk();
        sdk.turn_create_stream(&p.instance.id, &p.id, &self.id, &body)
            .await
    }

    /// A handle on one turn; no I/O.
    pub fn turn(&self, id: &TurnId) -> TurnHandle {
        TurnHandle {
            session: self.clone(),
            id: id.clone(),
        }
    }
}

/// One turn.
#[derive(Debug, Clone)]
pub struct TurnHandle {
    session: SessionHandle,
    id: TurnId,
}

impl TurnHandle {
    /// Its id.
    pub fn id(&self) -> &TurnId {
        &self.id
    }

    /// Fetches the turn.
    pub async fn get(&self) -> Result<Turn> {
        let s = &self.session;
        let p = &s.profile;
        p.instance
            .hermes
            .sdk()
            .turn_get(&p.instance.id, &p.id, &s.id, &self.id)
            .await
    }

    /// The turn's events from the start, live until it finishes; resumes by itself if the
    /// connection drops.
    pub fn events(&self) -> EventStream<TurnEvent> {
        self.events_after(0)
    }

    /// The events after sequence number `after`.
    pub fn events_after(&self, after: u64) -> EventStream<TurnEvent> {
        let s = &self.session;
        let p = &s.profile;
        p.instance
            .hermes
            .sdk()
            .turn_events(&p.instance.id, &p.id, &s.id, &self.id, after)
    }

    /// Answers a pending approval (`approval.requested`): `Once`, `Session`, `Always` or `Deny`.
    pub async fn approve(&self, choice: ApprovalChoice) -> Result<Turn> {
        self.act(TurnAction::Approval { choice, all: false }).await
    }

    /// Answers the question of a `clarify.requested` event.
    pub async fn answer(&self, request_id: &str, answer: &str) -> Result<Turn> {
        self.act(TurnAction::Clarify {
            request_id: request_id.to_owned(),
            answer: answer.to_owned(),
        })
        .await
    }

    async fn act(&self, action: TurnAction) -> Result<Turn> {
        let s = &self.session;
        let p = &s.profile;
        p.instance
            .hermes
            .sdk()
            .turn_action(&p.instance.id, &p.id, &s.id, &self.id, &action)
            .await
    }

    /// Cancels the turn (pending approvals are denied); it ends `cancelled`. A finished turn
    /// stays as it is.
    pub async fn cancel(&self) -> Result<Turn> {
        let s = &self.session;
        let p = &s.profile;
        p.instance
            .hermes
            .sdk()
            .turn_cancel(&p.instance.id, &p.id, &s.id, &self.id)
            .await
    }

    /// Waits for the turn to finish and returns it.
    pub async fn wait(&self) -> Result<Turn> {
        let mut events = self.events();
        while let Some(event) = events.next().await {
            if event?.kind.is_final() {
                break;
            }
        }
        self.get().await
    }
}
