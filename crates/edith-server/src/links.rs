//! The control plane's connections to its runtimes: one multiplexed gateway connection per
//! instance, shared by every turn, plus which live session serves each control-plane session.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use edith_store::InstanceRecord;
use edith_types::{ErrorCode, InstanceId, LiveSessionId, SessionId};
use hermes_native::GatewayClient;
use tokio::sync::Mutex;

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// Replies slower than this mean the runtime is stuck.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Link {
    pub gateway: GatewayClient,
    /// Live sessions opened on this connection, by control-plane session.
    pub live: std::sync::Mutex<HashMap<SessionId, LiveSessionId>>,
}

#[derive(Default)]
pub struct Links {
    links: Mutex<HashMap<InstanceId, Arc<Link>>>,
}

impl Links {
    /// The instance's gateway connection; starts the runtime (a no-op when it runs) and
    /// reconnects when there is no open connection.
    pub async fn connect(&self, state: &AppState, record: &InstanceRecord) -> AppResult<Arc<Link>> {
        let id = &record.instance.id;
        let mut links = self.links.lock().await;
        if let Some(link) = links.get(id)
            && !link.gateway.is_closed()
        {
            return Ok(link.clone());
        }
        let endpoint = state
            .provider(record.instance.provider)
            .start(record)
            .await
            .map_err(|e| AppError::new(ErrorCode::RuntimeUnavailable, e.0))?;
        let gateway = GatewayClient::connect(&endpoint.ws_url, &endpoint.token, GATEWAY_TIMEOUT)
            .await
            .map_err(|e| AppError::new(ErrorCode::RuntimeUnavailable, e.to_string()))?;
        let link = Arc::new(Link {
            gateway,
            live: std::sync::Mutex::new(HashMap::new()),
        });
        links.insert(id.clone(), link.clone());
        Ok(link)
    }

    /// Forgets the instance's connection (it closes when the last user lets go).
    pub async fn forget(&self, instance: &InstanceId) {
        self.links.lock().await.remove(instance);
    }

    pub async fn forget_all(&self) {
        self.links.lock().await.clear();
    }
}
