//! A WebSocket (the gateway relay) asked of a replica that does not own its instance: the
//! replica opens the same WebSocket on the owner and passes messages both ways until either
//! side closes. A resume (`?connection=…`) reaches the owner the same way, whichever replica it
//! is asked of, so the owner's resend buffer serves it.

use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

use super::{FORWARDED_BY, HOP_BY_HOP};
use crate::error::AppError;
use crate::state::AppState;

type Upstream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the WebSocket on the owner at `base` first, so that its refusal (a wrong key, an
/// unknown connection) comes back as its answer; then takes the client's upgrade.
pub(super) async fn relay(
    state: &AppState,
    base: &str,
    request: Request,
    unavailable: impl Fn(String) -> AppError,
) -> Result<Response, AppError> {
    let (mut parts, _) = request.into_parts();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, state)
        .await
        .map_err(|e| AppError::invalid(format!("not a WebSocket upgrade: {}", e.body_text())))?;
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("ws{}{path}", base.trim_start_matches("http"));
    let mut outgoing = url
        .into_client_request()
        .map_err(|e| AppError::internal(format!("the owner's address: {e}")))?;
    for (name, value) in &parts.headers {
        let handshake = name.as_str().starts_with("sec-websocket-");
        if !HOP_BY_HOP.contains(name) && !handshake {
            outgoing.headers_mut().insert(name, value.clone());
        }
    }
    let by = state
        .replica
        .name()
        .parse()
        .expect("a replica name is a header value");
    outgoing.headers_mut().insert(FORWARDED_BY, by);
    crate::telemetry::pass_on_trace(outgoing.headers_mut());
    let connect = tokio_tungstenite::connect_async(outgoing);
    let (upstream, answered) = match tokio::time::timeout(super::FORWARD_LIMIT, connect).await {
        Ok(Ok(connected)) => connected,
        Ok(Err(tungstenite::Error::Http(refused))) => return Ok(refusal(*refused)),
        Ok(Err(e)) => return Err(unavailable(format!("could not be reached ({e})"))),
        Err(_) => return Err(unavailable("did not answer".to_owned())),
    };
    let stopping = state.shutdown.clone();
    let mut response = upgrade.on_upgrade(move |client| pass_both_ways(client, upstream, stopping));
    // The owner's name, as on any answer it gave.
    if let Some(owner) = answered.headers().get(super::REPLICA) {
        response.headers_mut().insert(super::REPLICA, owner.clone());
    }
    Ok(response)
}

/// The owner's refusal of the handshake, as the client's answer.
fn refusal(refused: tungstenite::http::Response<Option<Vec<u8>>>) -> Response {
    let (parts, body) = refused.into_parts();
    let mut response = (parts.status, body.unwrap_or_default()).into_response();
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// How long one message, or closing the client's side, may take to be passed on: a side that
/// stops reading (its buffers full) ends the pass rather than holding it forever. As long as
/// the owner's relay gives a client of its own.
const HOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Passes messages until either side closes or fails, or this replica stops; then closes the
/// client's side. The owner's side is dropped, never closed with a Close the client did not
/// send (one it sent was passed on): to the owner's relay a Close is a goodbye that ends the
/// connection, a drop one the client may resume from. (Each hop answers its own pings; the
/// owner's relay drops a client that stops answering its pings, which ends this pass too.)
async fn pass_both_ways(
    client: WebSocket,
    upstream: Upstream,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let (mut to_client, mut from_client) = client.split();
    let (mut to_owner, mut from_owner) = upstream.split();
    loop {
        tokio::select! {
            _ = crate::state::stopped(&mut stopping) => break,
            message = from_client.next() => {
                let Some(Ok(message)) = message else { break };
                let Some(message) = to_owner_message(message) else { continue };
                if !matches!(tokio::time::timeout(HOP_LIMIT, to_owner.send(message)).await, Ok(Ok(()))) {
                    break;
                }
            }
            message = from_owner.next() => {
                let Some(Ok(message)) = message else { break };
                let Some(message) = to_client_message(message) else { continue };
                if !matches!(tokio::time::timeout(HOP_LIMIT, to_client.send(message)).await, Ok(Ok(()))) {
                    break;
                }
            }
        }
    }
    let _ = tokio::time::timeout(HOP_LIMIT, to_client.close()).await;
}

fn to_owner_message(message: ws::Message) -> Option<tungstenite::Message> {
    Some(match message {
        ws::Message::Text(text) => tungstenite::Message::text(text.as_str()),
        ws::Message::Binary(bytes) => tungstenite::Message::binary(bytes),
        ws::Message::Close(frame) => {
            tungstenite::Message::Close(frame.map(|frame| tungstenite::protocol::CloseFrame {
                code: frame.code.into(),
                reason: frame.reason.as_str().into(),
            }))
        }
        ws::Message::Ping(_) | ws::Message::Pong(_) => return None,
    })
}

fn to_client_message(message: tungstenite::Message) -> Option<ws::Message> {
    Some(match message {
        tungstenite::Message::Text(text) => ws::Message::text(text.as_str()),
        tungstenite::Message::Binary(bytes) => ws::Message::binary(bytes),
        tungstenite::Message::Close(frame) => {
            ws::Message::Close(frame.map(|frame| ws::CloseFrame {
                code: frame.code.into(),
                reason: frame.reason.as_str().into(),
            }))
        }
        tungstenite::Message::Ping(_)
        | tungstenite::Message::Pong(_)
        | tungstenite::Message::Frame(_) => return None,
    })
}
