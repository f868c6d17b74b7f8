//! One gateway connection: sends `gateway.ready`, reads requests, writes replies and events;
//! over a WebSocket, or over channels for a client in the same process.

use std::future::ready;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::ws::{Message, WebSocket};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use hermes_native::events::GatewayReady;
use hermes_native::{EventFrame, NativeEvent, codes};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::methods::{self, Handled, RpcError};
use super::reaper;
use crate::runtime::Runtime;
use crate::session::Transport;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

pub async fn serve_connection(runtime: Arc<Runtime>, socket: WebSocket) {
    let (sink, stream) = socket.split();
    let sink = sink.with(|frame: String| ready(Ok::<_, axum::Error>(Message::Text(frame.into()))));
    // The frames' text, until a close or an error; pings and pongs are the socket's own.
    let incoming = stream
        .take_while(|message| ready(matches!(message, Ok(m) if !matches!(m, Message::Close(_)))))
        .filter_map(|message| {
            ready(match message {
                Ok(Message::Text(text)) => Some(text.to_string()),
                Ok(Message::Binary(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                _ => None,
            })
        });
    serve_frames(runtime, incoming, sink).await;
}

/// A gateway connection in this process, for a client in it (the control plane driving its
/// embedded runtime): the same frames as over a WebSocket, carried by channels. Send requests
/// into the first; replies and events come out of the second, which ends when the connection
/// does.
pub fn in_process(
    runtime: Arc<Runtime>,
) -> (
    mpsc::UnboundedSender<String>,
    mpsc::UnboundedReceiver<String>,
) {
    let (requests, mut requests_rx) = mpsc::unbounded_channel::<String>();
    let (frames_tx, frames) = mpsc::unbounded_channel::<String>();
    let incoming = futures_util::stream::poll_fn(move |cx| requests_rx.poll_recv(cx));
    let sink = futures_util::sink::unfold(frames_tx, |frames_tx, frame: String| async move {
        frames_tx.send(frame).map(|()| frames_tx)
    });
    tokio::spawn(serve_frames(runtime, incoming, Box::pin(sink)));
    (requests, frames)
}

/// Serves one connection: sends `gateway.ready`, answers each request of `incoming` (a frame
/// may hold several, one per line) and writes replies and events to `sink`, until either side
/// ends or the runtime stops.
async fn serve_frames<I, S>(runtime: Arc<Runtime>, incoming: I, mut sink: S)
where
    I: Stream<Item = String> + Send + 'static,
    S: Sink<String> + Unpin + Send + 'static,
{
    // A stop waits (bounded) for this connection to write what it has queued (a turn's
    // `message.complete`, ended by the stop itself) before the process exits.
    let _until_written = runtime.background_token();
    let mut incoming = std::pin::pin!(incoming);
    let (frames, mut outgoing) = mpsc::unbounded_channel::<String>();
    let transport = Transport {
        connection: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
        frames,
    };
    reaper::attach_connection(&runtime, transport.connection);

    let mut stopping_writer = runtime.stopping.clone();
    let writer = tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                biased;
                frame = outgoing.recv() => frame,
                _ = stopping_writer.wait_for(|stop| *stop) => None,
            };
            let Some(frame) = frame else { break };
            if sink.send(frame).await.is_err() {
                return;
            }
        }
        // Stopping, or every sender gone: what is queued still goes out, then the close.
        while let Ok(frame) = outgoing.try_recv() {
            if sink.send(frame).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });

    let ready = EventFrame::new(
        None,
        NativeEvent::GatewayReady(GatewayReady {
            skin: json!({"name": "default"}),
            runtime: Some(format!("hermes-runtime {}", env!("CARGO_PKG_VERSION"))),
        }),
    );
    let _ = transport.frames.send(ready.to_frame());

    let mut stopping = runtime.stopping.clone();
    loop {
        let text = tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => break,
            text = incoming.next() => text,
        };
        let Some(text) = text else { break };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            handle_frame(&runtime, &transport, line);
        }
    }

    reaper::detach_connection(&runtime, transport.connection);
    drop(transport);
    let _ = writer.await;
}

/// Parses one request and answers it on a task of its own, so a slow method does not hold up
/// the others; replies may therefore arrive out of order, as with Hermes.
fn handle_frame(runtime: &Arc<Runtime>, transport: &Transport, line: &str) {
    let frame: Value = match serde_json::from_str(line) {
        Ok(frame) => frame,
        Err(e) => {
            reply(
                transport,
                Value::Null,
                Err(RpcError::new(
                    codes::PARSE_ERROR,
                    format!("parse error: {e}"),
                )),
            );
            return;
        }
    };
    let id = frame.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = frame
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        reply(
            transport,
            id,
            Err(RpcError::new(
                codes::INVALID_REQUEST,
                "invalid request: `method` must be a string",
            )),
        );
        return;
    };
    let params = match frame.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => {
            reply(
                transport,
                id,
                Err(RpcError::new(
                    codes::INVALID_PARAMS,
                    "invalid params: must be an object",
                )),
            );
            return;
        }
    };
    let runtime = runtime.clone();
    let transport = transport.clone();
    tokio::spawn(async move {
        match methods::dispatch(&runtime, &transport, &method, params).await {
            Ok(Handled::Reply(result)) => reply(&transport, id, Ok(result)),
            Ok(Handled::ReplyThen(result, after)) => {
                // The reply is queued before anything `after` emits, so it arrives first.
                reply(&transport, id, Ok(result));
                after.await;
            }
            Err(e) => reply(&transport, id, Err(e)),
        }
    });
}

fn reply(transport: &Transport, id: Value, outcome: Result<Value, RpcError>) {
    let frame = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
        }
    };
    let _ = transport.frames.send(frame.to_string());
}
