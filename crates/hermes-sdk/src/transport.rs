//! How the SDK's HTTP requests reach the network: a reqwest client (the SDK's own, or one the
//! caller gave), or an [`HttpTransport`] the caller implements — e.g. the Python package's
//! bridge to an `httpx.AsyncClient` that stays the application's. Everything above it
//! (authentication, retries, problem details, resumable event streams) is the SDK's either way.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

/// One request, as the SDK sends it. Its `Debug` leaves the header values out (the key or token
/// is among them).
#[derive(Clone)]
pub struct HttpRequest {
    /// `GET`, `POST`, ….
    pub method: String,
    /// The whole URL, query included.
    pub url: String,
    /// Header names and values (the key or token among them: never log them).
    pub headers: Vec<(String, String)>,
    /// The JSON body, if any.
    pub body: Option<Bytes>,
    /// How long the whole exchange may take; `None` for event streams, which last as long as
    /// their log.
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A reply: its status and content type at once, its body as it arrives.
pub struct HttpResponse {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: Option<String>,
    /// The `Location` header: where a reply that starts a stream (`201`) or sends the client on
    /// (`303`) says the stream is read. A transport that follows redirects itself leaves it out.
    pub location: Option<String>,
    /// The body's chunks, as they arrive.
    pub body: BoxStream<'static, Result<Bytes, TransportFailure>>,
}

impl HttpResponse {
    /// The whole body.
    pub async fn bytes(mut self) -> Result<Bytes, TransportFailure> {
        let mut all = Vec::new();
        while let Some(chunk) = self.body.next().await {
            all.extend_from_slice(&chunk?);
        }
        Ok(all.into())
    }
}

/// A request that got no (whole) answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TransportFailure {
    /// What happened, for people.
    pub message: String,
    /// The connection could not be made: nothing reached the server.
    pub connect: bool,
    /// The exchange took longer than its timeout.
    pub timeout: bool,
    /// The request failed on its way (the server may or may not have seen it): a POST with an
    /// `Idempotency-Key` may be sent again.
    pub request: bool,
}

impl From<reqwest::Error> for TransportFailure {
    fn from(e: reqwest::Error) -> Self {
        // The causes ("Connection refused", a TLS error) are in the source chain.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        Self {
            message,
            connect: e.is_connect(),
            timeout: e.is_timeout(),
            request: e.is_request(),
        }
    }
}

/// Sends the SDK's requests somewhere other than through reqwest.
pub trait HttpTransport: Send + Sync + 'static {
    /// Sends `request`; the reply once its status is known.
    fn send(
        &self,
        request: HttpRequest,
    ) -> BoxFuture<'static, Result<HttpResponse, TransportFailure>>;
}

/// The transport a client sends through. Cloning shares it.
#[derive(Clone)]
pub(crate) enum Http {
    /// The caller's client: never shut down here.
    Reqwest(reqwest::Client),
    /// A client the SDK made: [`Http::shut_down`] drops it, and with it its pooled
    /// connections.
    Owned(Arc<std::sync::RwLock<Option<reqwest::Client>>>),
    Custom(Arc<dyn HttpTransport>),
}

impl Http {
    /// A client of the SDK's own, shut down when its owner closes.
    pub(crate) fn owned(client: reqwest::Client) -> Self {
        Http::Owned(Arc::new(std::sync::RwLock::new(Some(client))))
    }

    /// Drops a client the SDK made (its idle connections close once no request holds them);
    /// a caller's client or transport is left alone.
    pub(crate) fn shut_down(&self) {
        if let Http::Owned(slot) = self {
            slot.write().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    pub(crate) async fn send(
        &self,
        request: HttpRequest,
    ) -> Result<HttpResponse, TransportFailure> {
        match self {
            Http::Custom(transport) => transport.send(request).await,
            Http::Owned(slot) => {
                let client = slot.read().unwrap_or_else(|e| e.into_inner()).clone();
                match client {
                    Some(client) => send_with(&client, request).await,
                    None => Err(TransportFailure {
                        message: "the client was closed".to_owned(),
                        connect: false,
                        timeout: false,
                        request: false,
                    }),
                }
            }
            Http::Reqwest(client) => send_with(client, request).await,
        }
    }
}

async fn send_with(
    client: &reqwest::Client,
    request: HttpRequest,
) -> Result<HttpResponse, TransportFailure> {
    let method =
        reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|e| TransportFailure {
            message: format!("`{}` is not an HTTP method: {e}", request.method),
            connect: false,
            timeout: false,
            request: false,
        })?;
    let mut builder = client.request(method, &request.url);
    for (name, value) in &request.headers {
        let mut value =
            reqwest::header::HeaderValue::from_str(value).map_err(|_| TransportFailure {
                message: format!("the `{name}` header is not a valid header value"),
                connect: false,
                timeout: false,
                request: false,
            })?;
        // Keys and tokens: kept out of reqwest's and hyper's own debug output.
        value.set_sensitive(true);
        builder = builder.header(name, value);
    }
    if let Some(body) = request.body {
        builder = builder.body(body);
    }
    if let Some(timeout) = request.timeout {
        builder = builder.timeout(timeout);
    }
    let response = builder.send().await?;
    let header = |name| {
        let value = response.headers().get(name)?.to_str().ok()?;
        Some(value.to_owned())
    };
    let content_type = header(reqwest::header::CONTENT_TYPE);
    let location = header(reqwest::header::LOCATION);
    Ok(HttpResponse {
        status: response.status().as_u16(),
        content_type,
        location,
        body: response
            .bytes_stream()
            .map(|chunk| chunk.map_err(TransportFailure::from))
            .boxed(),
    })
}
