//! `Hermes::local()`: an embedded control plane (SQLite, our runtime in-process) and a tool
//! host, both on loopback, owned by the context (feature `local`, on by default).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use edith_server::{RunningServer, RuntimeCommand, ServerConfig};
use edith_types::{InstanceId, RegisterTool, RegisterToolHost, ToolHostId};

use crate::client::EdithHermes;
use crate::error::{Error, Result};
use crate::hermes::{Hermes, Root};
use crate::tool::Tool;
use crate::tool_host::ToolHost;

/// What `Hermes::local()` runs in-process.
pub(crate) struct Local {
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
    /// Runtimes `process` instances may run besides our own `hermes-runtime`.
    runtimes: BTreeMap<String, RuntimeCommand>,
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

    /// Lets `process` instances of this context run `command` as the runtime `name`, as
    /// `edith serve --runtime NAME=COMMAND` does (e.g. the real `hermes`; our own
    /// `hermes-runtime` is always there). It is started as `COMMAND serve --host 127.0.0.1
    /// --port 0` in each instance's own home.
    pub fn runtime(mut self, name: &str, command: RuntimeCommand) -> Self {
        self.runtimes.insert(name.to_owned(), command);
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
        let mut config = ServerConfig::local(data_dir.clone());
        config.runtimes.extend(self.runtimes);
        let server = edith_server::start(config)
            .await
            .map_err(|e| Error::Local(e.to_string()))?;
        // The embedded control plane keeps its first admin key in its data dir.
        let key_file = data_dir.join(edith_server::ADMIN_KEY_FILE);
        let key = tokio::fs::read_to_string(&key_file).await.map_err(|e| {
            Error::Local(format!(
                "cannot read the admin key {}: {e}",
                key_file.display()
            ))
        })?;
        let sdk = EdithHermes::remote(server.url(), Some(key.trim()));
        let tool_host = ToolHost::serve(([127, 0, 0, 1], 0).into()).await?;
        let host = sdk
            .tool_host_register(&RegisterToolHost {
                url: tool_host.url().to_owned(),
                secret: tool_host.secret().to_owned(),
            })
            .await?;
        let local = Local {
            server: tokio::sync::Mutex::new(Some(server)),
            tool_host: Mutex::new(Some(tool_host)),
            tool_host_id: host.id,
            cleanup: self.cleanup,
            owned: Mutex::new(Vec::new()),
            data_dir,
            _temp_dir: temp_dir,
        };
        Ok(Hermes {
            root: Arc::new(Root {
                sdk,
                local: Some(local),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

impl Local {
    pub(crate) fn own(&self, id: &InstanceId) {
        self.owned.lock().expect("not poisoned").push(id.clone());
    }

    /// Deletes the instances the context created (unless `cleanup(false)`), then stops the tool
    /// host and the control plane.
    pub(crate) async fn close(&self, hermes: &Hermes) -> Result<()> {
        let mut first_error = None;
        if self.cleanup {
            let owned: Vec<InstanceId> =
                std::mem::take(&mut *self.owned.lock().expect("not poisoned"));
            for id in owned {
                if let Err(e) = hermes.instance(&id).delete().await
                    && e.code() != Some(edith_types::ErrorCode::NotFound)
                {
                    first_error.get_or_insert(e);
                }
            }
        }
        let tool_host = self.tool_host.lock().expect("not poisoned").take();
        if let Some(tool_host) = tool_host {
            tool_host.shutdown().await;
        }
        if let Some(server) = self.server.lock().await.take() {
            server.shutdown().await;
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Hermes {
    /// An embedded control plane and tool host with the default options.
    pub async fn local() -> Result<Self> {
        Self::local_builder().start().await
    }

    /// Options for [`Hermes::local`]: a data dir of your choice, cleanup on or off.
    pub fn local_builder() -> LocalBuilder {
        LocalBuilder {
            data_dir: None,
            cleanup: true,
            runtimes: BTreeMap::new(),
        }
    }

    /// The embedded control plane's data dir (`Hermes::local()` only).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.root
            .local
            .as_ref()
            .map(|local| local.data_dir.as_path())
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
        let body = RegisterTool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
            host_id: local.tool_host_id.clone(),
        };
        {
            let host = local.tool_host.lock().expect("not poisoned");
            host.as_ref().ok_or(Error::Closed)?.add(tool);
        }
        self.root.sdk.tool_register(&body).await
    }
}
