//! The SDK's HTTP requests sent through an `httpx.AsyncClient` the application owns: an
//! `HttpTransport` that runs `edith_hermes._httpx.send` on the event loop the client was given
//! on, and reads the body chunk by chunk. The SDK above it still does the key, retries,
//! problems and event streams; the client is never closed here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, stream};
use hermes::{HttpRequest, HttpResponse, HttpTransport, TransportFailure};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_async_runtimes::TaskLocals;

/// How long one step (the reply's head, one body chunk) may take at most: an event stream is
/// quiet at times, but its server sends a keep-alive long before. A request with a timeout of
/// its own (the Desktop routes' 60 s) gets that much for the whole exchange.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) struct HttpxTransport {
    client: Arc<Py<PyAny>>,
    locals: TaskLocals,
}

impl HttpxTransport {
    /// A transport over `client`, run on the event loop running now.
    pub(crate) fn new(py: Python<'_>, client: Bound<'_, PyAny>) -> PyResult<Arc<Self>> {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py).map_err(|_| {
            pyo3::exceptions::PyRuntimeError::new_err(
                "http_client= needs a running event loop: create the client inside async code",
            )
        })?;
        Ok(Arc::new(Self {
            client: Arc::new(client.unbind()),
            locals,
        }))
    }
}

fn failure(err: PyErr) -> TransportFailure {
    Python::attach(|py| {
        let kind: String = err
            .value(py)
            .getattr("kind")
            .and_then(|k| k.extract())
            .unwrap_or_default();
        TransportFailure {
            message: err.value(py).to_string(),
            connect: kind == "connect",
            timeout: kind == "timeout",
            request: kind == "request",
        }
    })
}

fn hanging(what: &str) -> TransportFailure {
    TransportFailure {
        message: format!("{what}: no answer within {STEP_TIMEOUT:?} (hanging)"),
        connect: false,
        timeout: true,
        request: false,
    }
}

/// How long the next step may take: [`STEP_TIMEOUT`], or less when the request's own time
/// (its whole exchange) ends sooner.
fn step_limit(deadline: Option<Instant>) -> Duration {
    deadline.map_or(STEP_TIMEOUT, |deadline| {
        deadline
            .saturating_duration_since(Instant::now())
            .min(STEP_TIMEOUT)
    })
}

/// Runs `step` (which makes a coroutine) on `locals`' loop and waits for it at most `limit`.
/// Not waited for to the end (timed out, or this future dropped because its caller was
/// cancelled), the step is abandoned on its loop: cancelled, or its late reply closed.
async fn on_loop(
    locals: &TaskLocals,
    what: &str,
    limit: Duration,
    step: impl FnOnce(Python<'_>) -> PyResult<Bound<'_, PyAny>>,
) -> Result<Py<PyAny>, TransportFailure> {
    let (pending, mut abandon) = Python::attach(|py| {
        // A loop that no longer runs would never answer: say so at once.
        let running: bool = locals
            .event_loop(py)
            .call_method0("is_running")?
            .extract()?;
        if !running {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "the event loop the http_client was given on is not running",
            ));
        }
        let step = py
            .import("edith_hermes._httpx")?
            .getattr("Step")?
            .call1((step(py)?,))?;
        let pending =
            pyo3_async_runtimes::into_future_with_locals(locals, step.call_method0("run")?)?;
        let abandon = AbandonOnDrop {
            step: Some(step.unbind()),
            locals: locals.clone(),
        };
        Ok((pending, abandon))
    })
    .map_err(failure)?;
    let outcome = match tokio::time::timeout(limit, pending).await {
        Ok(done) => done.map_err(failure),
        Err(_) => return Err(hanging(what)),
    };
    abandon.step = None; // waited for to the end: whatever it returned is ours now
    outcome
}

/// A step on the client's loop that its waiter may stop waiting for (see [`on_loop`]).
struct AbandonOnDrop {
    step: Option<Py<PyAny>>,
    locals: TaskLocals,
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        let Some(step) = self.step.take() else {
            return;
        };
        Python::attach(|py| {
            let abandon = step.bind(py).getattr("abandon");
            let scheduled = abandon.and_then(|abandon| {
                self.locals
                    .event_loop(py)
                    .call_method1("call_soon_threadsafe", (abandon,))
            });
            // A loop that has closed has closed its connections too.
            drop(scheduled);
        });
    }
}

/// A reply being read. When the SDK stops reading before the end (an event stream it no
/// longer follows), the response is closed on its loop, so the connection goes back to the
/// caller's pool.
struct OpenResponse {
    response: Py<PyAny>,
    locals: TaskLocals,
}

impl Drop for OpenResponse {
    fn drop(&mut self) {
        Python::attach(|py| {
            let Ok(coroutine) = self.response.bind(py).call_method0("close") else {
                return;
            };
            let scheduled = py.import("asyncio").and_then(|asyncio| {
                asyncio
                    .getattr("run_coroutine_threadsafe")?
                    .call1((&coroutine, self.locals.event_loop(py)))
            });
            if scheduled.is_err() {
                // A loop that has closed has closed its connections too.
                let _ = coroutine.call_method0("close");
            }
        });
    }
}

impl HttpTransport for HttpxTransport {
    fn send(
        &self,
        request: HttpRequest,
    ) -> BoxFuture<'static, Result<HttpResponse, TransportFailure>> {
        let client = self.client.clone();
        let locals = self.locals.clone();
        async move {
            let shown = format!("{} {}", request.method, request.url);
            let timeout = request.timeout.map(|t| t.as_secs_f64());
            let deadline = request.timeout.map(|t| Instant::now() + t);
            let response = on_loop(&locals, &shown, step_limit(deadline), |py| {
                let body = request.body.as_ref().map(|b| PyBytes::new(py, b));
                py.import("edith_hermes._httpx")?.getattr("send")?.call1((
                    client.bind(py),
                    &request.method,
                    &request.url,
                    request.headers.clone(),
                    body,
                    timeout,
                ))
            })
            .await?;
            // Owned at once: whatever happens next, the response is closed.
            let open = OpenResponse {
                response,
                locals: locals.clone(),
            };
            let (status, content_type, location) = Python::attach(|py| {
                let response = open.response.bind(py);
                let header = |name| response.getattr(name)?.extract::<Option<String>>();
                Ok::<_, PyErr>((
                    response.getattr("status")?.extract::<u16>()?,
                    header("content_type")?,
                    header("location")?,
                ))
            })
            .map_err(failure)?;
            let body = stream::unfold(Some((open, shown)), move |state| async move {
                let (open, shown) = state?;
                let chunk = on_loop(&open.locals, &shown, step_limit(deadline), |py| {
                    open.response.bind(py).call_method0("next_chunk")
                })
                .await;
                let chunk = chunk.and_then(|chunk| {
                    Python::attach(|py| chunk.extract::<Option<Vec<u8>>>(py)).map_err(failure)
                });
                match chunk {
                    Ok(Some(bytes)) => Some((Ok(Bytes::from(bytes)), Some((open, shown)))),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), None)),
                }
            });
            Ok(HttpResponse {
                status,
                content_type,
                location,
                body: body.boxed(),
            })
        }
        .boxed()
    }
}
