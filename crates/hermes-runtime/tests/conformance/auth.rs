//! Authentication of the gateway socket and the REST routes.

use crate::harness::{Peer, TOKEN};
use crate::shared;

shared!(a_wrong_token_is_refused_and_status_is_public, auth);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] =
    &[a_wrong_token_is_refused_and_status_is_public::CHECK];

async fn auth(peer: &Peer) {
    let wrong = format!("ws://127.0.0.1:{}/api/ws?token=wrong", peer.port);
    let refused = tokio_tungstenite::connect_async(wrong).await;
    assert!(refused.is_err(), "a wrong token must not get a socket");
    let missing = format!("ws://127.0.0.1:{}/api/ws", peer.port);
    assert!(tokio_tungstenite::connect_async(missing).await.is_err());

    let http = reqwest::Client::new();
    let status = http.get(peer.url("/api/status")).send().await.unwrap();
    assert_eq!(status.status(), 200, "/api/status is public");
    let anonymous = http.get(peer.url("/api/sessions")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = http
        .get(peer.url("/api/sessions"))
        .header("X-Hermes-Session-Token", "wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let authorized = http
        .get(peer.url("/api/sessions"))
        .header("X-Hermes-Session-Token", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(authorized.status(), 200);
}
