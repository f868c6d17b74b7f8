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

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use edith_server::{RunningServer, ServerConfig};
use edith_types::{InstanceId, RegisterTool, RegisterToolHost, ToolHostId};

use crate::client::EdithHermes;
use crate::error::{Error, Result};
use crate::handles::{InstanceHandle, Instances};
use crate::tool::Tool;
use crate::tool_host::ToolHost;

/// The SDK's root. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Hermes {
    pub(crate) root: Arc<Root>,
}

impl std::fmt::Debug for Hermes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hermes")
            .field("base_url", &self.root.sdk.base_url())
            .field("local", &self.root.local.is_some())
            .finish()
    }
}

pub(crate) struct Root {
    pub(crate) sdk: EdithHermes,
    local: Option<Local>,
    closed: AtomicBool,
}

/// What `Hermes::local()` runs in-process.
struct Local {
    server: tokio::sync::Mutex<Option<RunningServer>>,
    tool_host: Mutex<Option<ToolHost>>,
    tool_host_id: ToolHostId,
    cleanup: bool,
    /// Instances created through this context, deleted at close when `cleanup` is on.
    owned: Mutex<Vec<InstanceId>>,
    /// Where the embedded control plane keeps its database and runtime homes.
    data_dir: PathBuf,
    /// A data dir made for this context; removed when the context goes.
    _temp_dir: Option<tempfile::TempDir>,
}

/// Options of [`Hermes::local`].
#[derive(Debug, Clone)]
pub struct LocalBuilder {
    data_dir: Option<PathBuf>,
    cleanup: bool,
}

impl LocalBuilder {
    /// Keep the control plane's database and runtime homes here (default: a temporary dir that
    /// is removed when the context closes).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Whether `close()` deletes the instances created through this context (default `true`).
    pub fn cleanup(mut self, cleanup: bool) -> Self {
        self.cleanup = cleanup;
        self
    }

    /// Starts the embedded control plane (SQLite) and the tool host, both on loopback.
    pub async fn start(self) -> Result<Hermes> {
        let (data_dir, temp_dir) = match self.data_dir {
            Some(dir) => (dir, None),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("hermes-local-")
                    .tempdir()
                    .map_err(|e| Error::Local(format!("cannot make a temp dir: {e}")))?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let server = edith_server::start(ServerConfig {
            listen: ([127, 0, 0, 1], 0).into(),
            data_dir: data_dir.clone(),
        })
        .await
        .map_err(|e| Error::Local(e.to_string()))?;
        let sdk = EdithHermes::remote(server.url(), None);
        let tool_host = ToolHost::serve(([127, 0, 0, 1], 0).into()).await?;
        let host = sdk
            .tool_host_register(&RegisterToolHost {
                url: tool_host.url().to_owned(),
                secret: tool_host.secret().to_owned(),
            })
            .await?;
        Ok(Hermes {
            root: Arc::new(Root {
                sdk,
                local: Some(Local {
                    server: tokio::sync::Mutex::new(Some(server)),
                    tool_host: Mutex::new(Some(tool_host)),
                    tool_host_id: host.id,
                    cleanup: self.cleanup,
                    owned: Mutex::new(Vec::new()),
                    data_dir,
                    _temp_dir: temp_dir,
                }),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

impl Hermes {
    /// An embedded control plane and tool host with the default options.
    pub async fn local() -> Result<Self> {
        Self::local_builder().start().await
    }

    pub fn local_builder() -> LocalBuilder {
        LocalBuilder {
            data_dir: None,
            cleanup: true,
        }
    }

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

    fn from_sdk(sdk: EdithHermes) -> Self {
        Self {
            root: Arc::new(Root {
                sdk,
                local: None,
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The embedded control plane's data dir (`Hermes::local()` only).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.root
            .local
            .as_ref()
            .map(|local| local.data_dir.as_path())
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

    /// Serves `tool` from this context's tool host and registers it with the control plane.
    /// Only `Hermes::local()` has a tool host; a remote control plane needs a `ToolHost`
    /// served where it can reach it.
    pub async fn register_tool(&self, tool: Tool) -> Result<edith_types::Tool> {
        let local = self.root.local.as_ref().ok_or_else(|| {
            Error::Local(
                "this client has no tool host; serve a ToolHost the control plane can reach"
                    .to_owned(),
            )
        })?;
        let host_id = local.tool_host_id.clone();
        let body = RegisterTool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
            host_id,
        };
        {
            let host = local.tool_host.lock().expect("not poisoned");
            host.as_ref().ok_or(Error::Closed)?.add(tool);
        }
        self.root.sdk.tool_register(&body).await
    }

    /// Records an instance created through this context, for cleanup at close.
    pub(crate) fn own(&self, id: &InstanceId) {
        if let Some(local) = &self.root.local {
            local.owned.lock().expect("not poisoned").push(id.clone());
        }
    }

    /// Closes the context. For `Hermes::local()`: deletes the instances it created (unless
    /// `cleanup(false)`), then stops the tool host and the control plane. For a remote client:
    /// nothing is deleted. Closing twice is a no-op.
    pub async fn close(&self) -> Result<()> {
        if self.root.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let Some(local) = &self.root.local else {
            return Ok(());
        };
        let mut first_error = None;
        if local.cleanup {
            let owned: Vec<InstanceId> =
                std::mem::take(&mut *local.owned.lock().expect("not poisoned"));
            for id in owned {
                if let Err(e) = self.instance(&id).delete().await
                    && e.code() != Some(edith_types::ErrorCode::NotFound)
                {
                    first_error.get_or_insert(e);
                }
            }
        }
        let tool_host = local.tool_host.lock().expect("not poisoned").take();
        if let Some(tool_host) = tool_host {
            tool_host.shutdown().await;
        }
        if let Some(server) = local.server.lock().await.take() {
            server.shutdown().await;
        }
        first_error.map_or(Ok(()), Err)
    }
}
