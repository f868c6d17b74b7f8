//! The tools a server listed, kept until the server says they changed.
//!
//! Kept only while the server's event stream is open: a change announced while nobody was
//! listening would be missed. So the stream is opened before the tools are listed, and every
//! end of it (the server stopped, the connection died, nothing came for [`SILENCE_LIMIT`])
//! makes the next listing ask the server again, and open the stream again first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::{StreamExt, stream};
use tokio::task::AbortHandle;

use crate::client::{ClientError, Connection, without_bom};
use crate::protocol::{LIST_CHANGED, ToolDescriptor};
use crate::server::KEEP_ALIVE;

/// An event stream silent for this long is taken for dead (a server sends a comment at least
/// every [`KEEP_ALIVE`]; ours does).
const SILENCE_LIMIT: Duration = Duration::from_secs(3 * KEEP_ALIVE.as_secs());

/// After the event stream could not be opened, listings ask the server without trying again
/// for this long (a server whose stream hangs would otherwise hold up each listing).
const RETRY_STREAM_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub(crate) struct ToolList {
    /// The last listing and the generation it was made in. Held while the tools are listed, so
    /// a listing asked for meanwhile waits for that one and uses it.
    listed: tokio::sync::Mutex<Option<(u64, Vec<ToolDescriptor>)>>,
    /// Moves on when the server says the tools changed and when its event stream ends: a
    /// listing made in an earlier generation is not used.
    generation: AtomicU64,
    /// The task reading the server's event stream, once started.
    watcher: std::sync::Mutex<Option<AbortHandle>>,
    /// The server offers no event stream: every listing asks it.
    no_stream: AtomicBool,
    /// When opening the event stream failed last, if it did.
    failed_at: std::sync::Mutex<Option<Instant>>,
}

impl ToolList {
    /// The tools: as last listed while that listing still holds, or else listed now.
    pub(crate) async fn list(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
    ) -> Result<Vec<ToolDescriptor>, ClientError> {
        let mut listed = self.listed.lock().await;
        if self.watching()
            && let Some((generation, tools)) = listed.as_ref()
            && *generation == self.generation.load(Ordering::SeqCst)
        {
            return Ok(tools.clone());
        }
        if !self.watching() && self.may_open_stream() {
            // Without the stream the tools are listed all the same, only not kept.
            if let Err(e) = self.watch(connection).await {
                tracing::debug!(error = %e, "the MCP server's event stream could not be opened");
                *self.failed_at.lock().expect("not poisoned") = Some(Instant::now());
            }
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let tools = connection.list_tools().await?;
        *listed = Some((generation, tools.clone()));
        Ok(tools)
    }

    /// Stops reading the server's event stream (its client is gone).
    pub(crate) fn stop_watching(&self) {
        if let Some(watcher) = self.watcher.lock().expect("not poisoned").take() {
            watcher.abort();
        }
    }

    fn may_open_stream(&self) -> bool {
        let failed_at = *self.failed_at.lock().expect("not poisoned");
        !self.no_stream.load(Ordering::SeqCst)
            && failed_at.is_none_or(|at| at.elapsed() >= RETRY_STREAM_AFTER)
    }

    pub(crate) fn watching(&self) -> bool {
        let watcher = self.watcher.lock().expect("not poisoned");
        watcher.as_ref().is_some_and(|w| !w.is_finished())
    }

    /// Opens the server's event stream and reads it in a task of its own.
    async fn watch(self: &Arc<Self>, connection: &Arc<Connection>) -> Result<(), ClientError> {
        let Some(response) = connection.open_events().await? else {
            self.no_stream.store(true, Ordering::SeqCst);
            return Ok(());
        };
        let reading = read_events(Arc::downgrade(connection), self.clone(), response);
        let task = tokio::spawn(reading);
        *self.watcher.lock().expect("not poisoned") = Some(task.abort_handle());
        Ok(())
    }
}

/// Reads the server's event stream until it ends. At each [`LIST_CHANGED`] the kept tools go
/// stale and are listed again at once, the listing held from before the request goes out: a
/// server that waits for that listing (see [`crate::RELISTS_ON_CHANGE`]) before it sends
/// anything relying on the change finds whoever asks for the tools after it waiting for the
/// new list.
async fn read_events(
    connection: Weak<Connection>,
    list: Arc<ToolList>,
    response: reqwest::Response,
) {
    let body = stream::unfold(Box::pin(response.bytes_stream()), |mut body| async move {
        match tokio::time::timeout(SILENCE_LIMIT, body.next()).await {
            Ok(Some(chunk)) => Some((chunk, body)),
            // Ended, or silent for too long.
            Ok(None) | Err(_) => None,
        }
    });
    let mut events = std::pin::pin!(without_bom(body).eventsource());
    while let Some(Ok(event)) = events.next().await {
        let changed = serde_json::from_str::<serde_json::Value>(&event.data)
            .is_ok_and(|message| message["method"] == LIST_CHANGED);
        if !changed {
            continue;
        }
        list.generation.fetch_add(1, Ordering::SeqCst);
        let Some(connection) = connection.upgrade() else {
            break;
        };
        let mut listed = list.listed.lock().await;
        let generation = list.generation.load(Ordering::SeqCst);
        *listed = match connection.list_tools().await {
            Ok(tools) => Some((generation, tools)),
            Err(e) => {
                tracing::debug!(error = %e, "listing an MCP server's changed tools");
                None
            }
        };
    }
    list.generation.fetch_add(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    use crate::server::{ToolCallError, ToolService, handle_post, list_changes};
    use crate::{McpClient, ToolOutput};

    use super::*;

    /// A server whose tools the test changes, counting the listings it answers.
    #[derive(Default)]
    struct Changing {
        announces: bool,
        /// Answers the event stream's `GET` with 405 all the same.
        refuses_stream: bool,
        stream_asks: AtomicUsize,
        tools: Mutex<Vec<String>>,
        listings: AtomicUsize,
        /// The open event streams, and the sessions they were opened with.
        streams: Mutex<Vec<(mpsc::UnboundedSender<()>, String)>>,
    }

    impl ToolService for Changing {
        fn announces_list_changes(&self) -> bool {
            self.announces
        }
        async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, String> {
            self.listings.fetch_add(1, Ordering::SeqCst);
            let tools = self.tools.lock().unwrap().clone();
            Ok(tools
                .into_iter()
                .map(|name| ToolDescriptor {
                    name,
                    description: String::new(),
                    input_schema: json!({"type": "object"}),
                })
                .collect())
        }
        async fn call_tool(&self, _: &str, _: Value) -> Result<ToolOutput, ToolCallError> {
            Err(ToolCallError::Unavailable("no calls here".to_owned()))
        }
    }

    impl Changing {
        fn set(&self, tools: &[&str]) {
            *self.tools.lock().unwrap() = tools.iter().map(|t| t.to_string()).collect();
            for (stream, _) in self.streams.lock().unwrap().iter() {
                let _ = stream.send(());
            }
        }

        fn listings(&self) -> usize {
            self.listings.load(Ordering::SeqCst)
        }

        /// Waits (at most 10 s) until the server has answered `n` listings.
        async fn until_listed(&self, n: usize) {
            let waited = tokio::time::timeout(Duration::from_secs(10), async {
                while self.listings() < n {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            waited.await.expect("listed in time");
        }
    }

    async fn serve(service: Changing) -> (String, Arc<Changing>) {
        async fn post(State(service): State<Arc<Changing>>, body: axum::body::Bytes) -> Response {
            handle_post(service.as_ref(), &body).await
        }
        async fn get(State(service): State<Arc<Changing>>, headers: HeaderMap) -> Response {
            service.stream_asks.fetch_add(1, Ordering::SeqCst);
            if !service.announces || service.refuses_stream {
                return StatusCode::METHOD_NOT_ALLOWED.into_response();
            }
            let session = headers
                .get(crate::server::SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let (sender, receiver) = mpsc::unbounded_channel();
            service.streams.lock().unwrap().push((sender, session));
            let changes = stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|()| ((), receiver))
            });
            list_changes(changes)
        }
        let service = Arc::new(service);
        let app = axum::Router::new()
            .route("/mcp", axum::routing::post(post).get(get))
            .with_state(service.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, service)
    }

    async fn connect(url: &str) -> McpClient {
        let timeout = Duration::from_secs(5);
        McpClient::connect(
            reqwest::Client::new(),
            url,
            HeaderMap::new(),
            timeout,
            timeout,
        )
        .await
        .expect("connect")
    }

    fn names(tools: &[ToolDescriptor]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    #[tokio::test]
    async fn tools_are_kept_until_the_server_says_they_changed_then_listed_again_at_once() {
        let service = Changing {
            announces: true,
            ..Default::default()
        };
        service.set(&["first"]);
        let (url, service) = serve(service).await;
        let client = connect(&url).await;
        for _ in 0..3 {
            assert_eq!(names(&client.list_tools().await.unwrap()), ["first"]);
        }
        assert_eq!(service.listings(), 1, "listed once, then kept");
        // The stream was opened in the session the server gave, marked as one that lists again.
        let sessions: Vec<String> = (service.streams.lock().unwrap().iter())
            .map(|(_, session)| session.clone())
            .collect();
        assert_eq!(sessions.len(), 1);
        assert!(crate::session_relists(&sessions[0]), "{}", sessions[0]);

        // A change is listed again without being asked for, and that listing is what the next
        // ask gets.
        service.set(&["first", "second"]);
        service.until_listed(2).await;
        assert_eq!(
            names(&client.list_tools().await.unwrap()),
            ["first", "second"]
        );
        assert_eq!(service.listings(), 2);

        // A stream that ends (the server went away) makes the next ask list again, on a new
        // stream.
        service.streams.lock().unwrap().clear();
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while client.tools.as_ref().unwrap().watching() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        waited.await.expect("the client saw its stream end");
        assert_eq!(
            names(&client.list_tools().await.unwrap()),
            ["first", "second"]
        );
        assert_eq!(service.listings(), 3);
        assert_eq!(service.streams.lock().unwrap().len(), 1, "a new stream");
        client.list_tools().await.unwrap();
        assert_eq!(service.listings(), 3);

        // The client gone, so is its stream.
        drop(client);
        let sender = service.streams.lock().unwrap()[0].0.clone();
        let waited = tokio::time::timeout(Duration::from_secs(10), sender.closed());
        waited.await.expect("the stream ended with its client");
    }

    #[tokio::test]
    async fn a_server_that_announces_no_changes_is_asked_each_time() {
        let service = Changing::default();
        service.set(&["only"]);
        let (url, service) = serve(service).await;
        let client = connect(&url).await;
        for n in 1..=3 {
            assert_eq!(names(&client.list_tools().await.unwrap()), ["only"]);
            assert_eq!(service.listings(), n);
        }
        assert!(client.tools.is_none());
        assert_eq!(
            service.stream_asks.load(Ordering::SeqCst),
            0,
            "no stream asked for"
        );
    }

    #[tokio::test]
    async fn a_server_that_refuses_the_stream_is_asked_each_time_and_the_stream_once() {
        let service = Changing {
            announces: true,
            refuses_stream: true,
            ..Default::default()
        };
        service.set(&["only"]);
        let (url, service) = serve(service).await;
        let client = connect(&url).await;
        for n in 1..=3 {
            assert_eq!(names(&client.list_tools().await.unwrap()), ["only"]);
            assert_eq!(service.listings(), n);
        }
        assert_eq!(service.stream_asks.load(Ordering::SeqCst), 1);
    }
}
