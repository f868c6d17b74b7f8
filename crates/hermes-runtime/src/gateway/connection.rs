//! One gateway connection: sends `gateway.ready`, reads requests, writes replies and events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use hermes_native::events::GatewayReady;
use hermes_native::{EventFrame, NativeEvent, codes};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::methods::{self, Handled, RpcError};
use crate::runtime::Runtime;
use crate::session::Transport;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

pub async fn serve_connection(runtime: Arc<Runtime>, socket: WebSocket) {
    // A stop waits (bounded) for this connection to write what it has queued (a turn's
    // `message.complete`, ended by the stop itself) before the process exits.
    let _until_written = runtime.background_token();
    let (mut sink, mut stream) = socket.split();
    let (frames, mut outgoing) = mpsc::unbounded_channel::<String>();
    let transport = Transport {
        connection: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
        frames,
    };

    let mut stopping_writer = runtime.stopping.clone();
    let writer = tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                biased;
                frame = outgoing.recv() => frame,
                _ = stopping_writer.wait_for(|stop| *stop) => None,
            };
            let Some(frame) = frame else { break };
            if sink.send(Message::Text(frame.into())).await.is_err() {
                return;
            }
        }
        // Stopping, or every sender gone: what is queued still goes out, then the close.
        while let Ok(frame) = outgoing.try_recv() {
            if sink.send(Message::Text(frame.into())).await.is_err() {
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
        let message = tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => break,
            message = stream.next() => message,
        };
        let Some(Ok(message)) = message else { break };
        let text = match message {
            Message::Text(text) => text.to_string(),
            Message::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            handle_frame(&runtime, &transport, line);
        }
    }

    methods::detach_connection(&runtime, transport.connection);
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
