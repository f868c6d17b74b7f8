//! Calls to tool hosts: one MCP connection per host, made on first use and remade after a
//! failure (the host may have restarted), or when the host's record names another address or
//! secret than the one the connection was made with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use edith_mcp::{McpClient, ToolOutput};
use edith_store::ToolHostRecord;
use edith_types::ToolHostId;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::sync::Mutex;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Default)]
pub struct ToolHosts {
    http: reqwest::Client,
    clients: Mutex<Clients>,
}

#[derive(Default)]
struct Clients {
    by_host: HashMap<ToolHostId, Connected>,
    /// How many times connections were forgotten: a connection made from a record read before a
    /// `forget` is used for its call but not kept (its host may be gone, and its entry would
    /// then stay for good).
    forgets: u64,
}

/// How many forgets there had been when a caller began reading a host's record
/// ([`ToolHosts::before_reading`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForgetsSoFar(u64);

/// A connection to a host, with what it was made from: a connection made from a record read
/// before the host changed (its connect may outlast the change's `forget`) is never used for
/// the changed host.
struct Connected {
    client: Arc<McpClient>,
    url: String,
    secret: String,
}

impl Connected {
    fn made_from(&self, record: &ToolHostRecord) -> bool {
        self.url == record.host.url && self.secret == record.secret
    }
}

impl ToolHosts {
    /// To be taken before a host's record is read for a call ([`ToolHosts::call`]).
    pub async fn before_reading(&self) -> ForgetsSoFar {
        ForgetsSoFar(self.clients.lock().await.forgets)
    }

    async fn client(
        &self,
        record: &ToolHostRecord,
        read: ForgetsSoFar,
    ) -> Result<Arc<McpClient>, String> {
        let cached = (self.clients.lock().await.by_host.get(&record.host.id))
            .and_then(|c| c.made_from(record).then(|| c.client.clone()));
        if let Some(client) = cached {
            return Ok(client);
        }
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::try_from(format!("Bearer {}", record.secret))
            .map_err(|_| "the tool host secret is not a valid header value".to_owned())?;
        headers.insert(AUTHORIZATION, bearer);
        let client = McpClient::connect(
            self.http.clone(),
            record.host.url.clone(),
            headers,
            CONNECT_TIMEOUT,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
        let client = Arc::new(client);
        let connected = Connected {
            client: client.clone(),
            url: record.host.url.clone(),
            secret: record.secret.clone(),
        };
        let mut clients = self.clients.lock().await;
        if ForgetsSoFar(clients.forgets) == read {
            clients.by_host.insert(record.host.id.clone(), connected);
        }
        Ok(client)
    }

    /// Drops the connection to a host (it was changed or deleted).
    pub async fn forget(&self, host: &ToolHostId) {
        let mut clients = self.clients.lock().await;
        clients.by_host.remove(host);
        clients.forgets += 1;
    }

    /// Drops every connection (a change to any host may have gone unheard).
    pub async fn forget_all(&self) {
        let mut clients = self.clients.lock().await;
        clients.by_host.clear();
        clients.forgets += 1;
    }

    /// Calls `tool` on the host of `record`, read after `read` was taken. Failures to reach it
    /// are told to the model as a failed call.
    pub async fn call(
        &self,
        record: &ToolHostRecord,
        read: ForgetsSoFar,
        tool: &str,
        args: Value,
    ) -> ToolOutput {
        let client = match self.client(record, read).await {
            Ok(client) => client,
            Err(e) => return ToolOutput::error(format!("tool host unreachable: {e}")),
        };
        match client.call_tool(tool, args).await {
            Ok(output) => output,
            Err(e) => {
                // This connection only: another may have replaced it meanwhile.
                let mut clients = self.clients.lock().await;
                let id = &record.host.id;
                if (clients.by_host.get(id)).is_some_and(|c| Arc::ptr_eq(&c.client, &client)) {
                    clients.by_host.remove(id);
                }
                drop(clients);
                if e.is_unreachable() {
                    ToolOutput::error(format!("tool host unreachable: {e}"))
                } else {
                    ToolOutput::error(format!("tool host call failed: {e}"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use edith_mcp::ToolDescriptor;
    use edith_mcp::server::{ToolCallError, ToolService, handle_post};
    use edith_types::Timestamp;

    use super::*;

    /// A tool host whose one tool answers with the host's name; returns its MCP URL.
    async fn named_host(name: &'static str) -> String {
        slow_named_host(name, Duration::ZERO).await
    }

    /// Like `named_host`, answering every request after `delay`.
    async fn slow_named_host(name: &'static str, delay: Duration) -> String {
        struct Named(&'static str);
        impl ToolService for Named {
            async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
                Ok(Vec::new())
            }
            async fn call_tool(&self, _: &str, _: Value) -> Result<ToolOutput, ToolCallError> {
                Ok(ToolOutput::value(Value::from(self.0)))
            }
        }
        let serve = move |body: Bytes| async move {
            tokio::time::sleep(delay).await;
            handle_post(&Named(name), &body).await
        };
        let app = axum::Router::new().route("/mcp", axum::routing::post(serve));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn record(id: &ToolHostId, url: &str, secret: &str) -> ToolHostRecord {
        ToolHostRecord {
            host: edith_types::ToolHost {
                id: id.clone(),
                url: url.to_owned(),
                created_at: Timestamp::now(),
            },
            secret: secret.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_connection_made_from_a_record_read_before_a_forget_serves_its_call_and_is_not_kept()
    {
        let url = slow_named_host("slow", Duration::from_millis(200)).await;
        let id = ToolHostId::generate();
        let hosts = Arc::new(ToolHosts::default());
        // Read, then deleted before its connection is made.
        let read = hosts.before_reading().await;
        hosts.forget(&id).await;
        let host = record(&id, &url, "secret-one");
        let output = hosts.call(&host, read, "name", Value::Null);
        let output = tokio::time::timeout(Duration::from_secs(10), output).await;
        assert_eq!(output.expect("answered in time").text, "slow");
        assert!(hosts.clients.lock().await.by_host.is_empty(), "kept");
        // Deleted while its connection is being made.
        let call = {
            let (hosts, record) = (hosts.clone(), record(&id, &url, "secret-one"));
            let read = hosts.before_reading().await;
            tokio::spawn(async move { hosts.call(&record, read, "name", Value::Null).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        hosts.forget(&id).await;
        let output = tokio::time::timeout(Duration::from_secs(10), call).await;
        let output = output.expect("answered in time").unwrap();
        assert_eq!(output.text, "slow");
        assert!(hosts.clients.lock().await.by_host.is_empty(), "kept");
    }

    #[tokio::test]
    async fn a_connection_serves_only_the_record_it_was_made_from() {
        let (first, second) = (named_host("first").await, named_host("second").await);
        let id = ToolHostId::generate();
        let record = |url: &str, secret: &str| record(&id, url, secret);
        let hosts = ToolHosts::default();
        let name_of = async |record: &ToolHostRecord| {
            let called = hosts.call(record, hosts.before_reading().await, "name", Value::Null);
            let output = tokio::time::timeout(Duration::from_secs(10), called).await;
            let output = output.expect("answered in time");
            assert!(!output.is_error, "{}", output.text);
            output.text
        };
        let was = record(&first, "secret-one");
        assert_eq!(name_of(&was).await, "first");
        // Moved, with no `forget` (as when it moved while this connection was being made).
        let moved = record(&second, "secret-one");
        assert_eq!(name_of(&moved).await, "second");
        assert_eq!(name_of(&was).await, "first");
    }
}
