//! `Hermes`: the entry point. It owns (or borrows) a control plane connection and hands out
//! resource handles.
//!
//! Ownership rules:
//! - [`Hermes::local`] starts an embedded control plane and a tool host. Instances created
//!   through it are deleted by [`Hermes::close`] unless [`LocalBuilder::cleanup`] is `false`.
//!   Instances reached with [`Hermes::open_instance`] are never deleted by it.
//! - [`Hermes::remote`] talks to a control plane elsewhere; closing never deletes anything.
//! - Dropping a `Hermes` without `close()` deletes nothing (deletion needs `.await`): the
//!   embedded control plane, its runtimes and the tool host stop, and a temporary data dir is
//!   removed with everything in it; a data dir you chose keeps its instances.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use edith_types::InstanceId;

use crate::client::EdithHermes;
use crate::error::Result;
use crate::handles::{InstanceHandle, Instances};

/// The SDK's root. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Hermes {
    pub(crate) root: Arc<Root>,
}

impl std::fmt::Debug for Hermes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hermes")
            .field("base_url", &self.root.sdk.base_url())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Root {
    pub(crate) sdk: EdithHermes,
    /// What `Hermes::local()` runs in-process; `None` for a remote client.
    #[cfg(feature = "local")]
    pub(crate) local: Option<crate::local::Local>,
    pub(crate) closed: AtomicBool,
}

impl Hermes {
    /// A control plane at `base_url`. Closing it never deletes instances.
    pub fn remote(base_url: &str, api_key: Option<&str>) -> Self {
        Self::from_sdk(EdithHermes::remote(base_url, api_key))
    }

    /// Like [`Hermes::remote`], sending through the caller's HTTP client, which stays theirs.
    pub fn remote_with_http_client(
        base_url: &str,
        api_key: Option<&str>,
        http: reqwest::Client,
    ) -> Self {
        Self::from_sdk(EdithHermes::with_http_client(base_url, api_key, http))
    }

    /// Like [`Hermes::remote`], sending every HTTP request through `transport`, which stays the
    /// caller's (gateway connections open their own WebSockets).
    pub fn remote_with_transport(
        base_url: &str,
        api_key: Option<&str>,
        transport: Arc<dyn crate::HttpTransport>,
    ) -> Self {
        Self::from_sdk(EdithHermes::with_transport(base_url, api_key, transport))
    }

    fn from_sdk(sdk: EdithHermes) -> Self {
        Self {
            root: Arc::new(Root {
                sdk,
                #[cfg(feature = "local")]
                local: None,
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Registers `host` — a [`crate::ToolHost`] served on its own, e.g. in another process than
    /// the control plane — with its secret, and every tool it serves now, in one call: the
    /// control plane calls them with that secret. Returns the tools as registered (attach them
    /// to profiles by id).
    #[cfg(feature = "tool-host")]
    pub async fn register_tool_host(
        &self,
        host: &crate::ToolHost,
    ) -> Result<Vec<edith_types::Tool>> {
        let registered = self
            .sdk()
            .tool_host_register(&edith_types::RegisterToolHost {
                url: host.url().to_owned(),
                secret: host.secret().to_owned(),
            })
            .await?;
        let mut tools = Vec::new();
        for tool in host.descriptors() {
            let body = edith_types::RegisterTool {
                name: tool.name,
                description: tool.description,
                input_schema: tool.input_schema,
                host_id: registered.id.clone(),
            };
            tools.push(self.sdk().tool_register(&body).await?);
        }
        Ok(tools)
    }

    /// A registered callback tool, by id (no request is made; `get()` fetches it).
    pub fn tool(&self, id: &edith_types::ToolId) -> crate::ToolHandle {
        crate::ToolHandle::new(self.clone(), id.clone())
    }

    /// The registered callback tools, a page at a time.
    pub async fn tools(
        &self,
        page: &crate::PageRequest,
    ) -> Result<edith_types::Page<edith_types::Tool>> {
        self.sdk().tool_list(page).await
    }

    /// A registered tool host, by id (no request is made; `get()` fetches it).
    pub fn tool_host(&self, id: &edith_types::ToolHostId) -> crate::ToolHostHandle {
        crate::ToolHostHandle::new(self.clone(), id.clone())
    }

    /// The registered tool hosts (never their secrets), a page at a time.
    pub async fn tool_hosts(
        &self,
        page: &crate::PageRequest,
    ) -> Result<edith_types::Page<edith_types::ToolHost>> {
        self.sdk().tool_host_list(page).await
    }

    /// What the control plane offers: providers, runtimes, the pinned native catalog.
    pub async fn capabilities(&self) -> Result<edith_types::Capabilities> {
        self.root.sdk.capabilities_get().await
    }

    /// The low-level client, with one method per contract operation.
    pub fn sdk(&self) -> &EdithHermes {
        &self.root.sdk
    }

    /// The instances collection: create and list.
    pub fn instances(&self) -> Instances {
        Instances::new(self.clone())
    }

    /// A handle on instance `id`; no I/O. Handles never own: closing does not delete it.
    pub fn instance(&self, id: &InstanceId) -> InstanceHandle {
        InstanceHandle::new(self.clone(), id.clone())
    }

    /// Attaches to an existing instance (checking that it exists) without taking ownership:
    /// `close()` leaves it alone.
    pub async fn open_instance(&self, id: &InstanceId) -> Result<InstanceHandle> {
        let handle = self.instance(id);
        handle.get().await?;
        Ok(handle)
    }

    /// Closes the context. For `Hermes::local()`: deletes the instances it created (unless
    /// `cleanup(false)`), then stops the tool host and the control plane. For a remote client:
    /// nothing is deleted. Closing twice is a no-op.
    pub async fn close(&self) -> Result<()> {
        if self.root.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // Even when this future is dropped half-way, the client ends up closed.
        let _closes = CloseOnDrop(&self.root.sdk);
        #[cfg(feature = "local")]
        if let Some(local) = &self.root.local {
            return local.close(self).await;
        }
        Ok(())
    }

    /// Records an instance created through this context, for cleanup at close.
    pub(crate) fn own(&self, id: &InstanceId) {
        #[cfg(feature = "local")]
        if let Some(local) = &self.root.local {
            local.own(id);
        }
        let _ = id;
    }
}

/// Closes the client when dropped: later calls through it and its handles fail with `Closed`.
struct CloseOnDrop<'a>(&'a EdithHermes);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}
