//! The gateway pool: one multiplexed native gateway connection per instance, shared by every
//! turn, plus which live session serves each control-plane session on it.

use std::sync::Arc;
use std::time::Duration;

use edith_store::InstanceRecord;
use edith_types::InstanceId;
use hermes_native::GatewayClient;

use super::live_sessions::LiveSessions;
use super::live_turns::LiveTurns;
use super::slots::Slots;
use super::{RuntimeEndpoint, RuntimeProvider};
use crate::error::AppResult;

/// Replies slower than this mean the runtime is stuck.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Link {
    pub gateway: GatewayClient,
    /// Live sessions opened on this connection, by control-plane session.
    pub live: LiveSessions,
    /// The turn that runs on each live session, one at a time.
    pub turns: LiveTurns,
}

/// One instance's connection, behind its own lock: connecting to one runtime (which may mean
/// starting it) never waits on another's.
type Slot = super::slots::Slot<Arc<Link>>;

#[derive(Default)]
pub struct GatewayPool {
    slots: Slots<Arc<Link>>,
}

impl GatewayPool {
    /// The instance's gateway connection; starts the runtime with `provider` (a no-op when it
    /// runs) and reconnects when there is no open connection.
    pub async fn connect(
        &self,
        provider: &dyn RuntimeProvider,
        record: &InstanceRecord,
    ) -> AppResult<Arc<Link>> {
        let slot = self.slot(&record.instance.id);
        let mut current = slot.lock().await;
        if let Some(link) = current.as_ref()
            && !link.gateway.is_closed()
        {
            return Ok(link.clone());
        }
        // Boxed: starting a runtime and connecting to it is a future of kilobytes, and this
        // call is on every turn's way (inline, it made each turn's task that much larger), where
        // the connection is almost always open.
        let link = Box::pin(open(provider, record)).await?;
        *current = Some(link.clone());
        Ok(link)
    }

    /// Opens the instance's connection again at `endpoint` unless one is open by now; nothing is
    /// started. An error when the runtime there does not take it.
    pub async fn reconnect(
        &self,
        instance: &InstanceId,
        endpoint: &RuntimeEndpoint,
    ) -> AppResult<()> {
        let slot = self.slot(instance);
        // Someone connecting now (a turn) is left to it.
        let Ok(mut current) = slot.try_lock() else {
            return Ok(());
        };
        if current
            .as_ref()
            .is_some_and(|link| !link.gateway.is_closed())
        {
            return Ok(());
        }
        *current = Some(Box::pin(connect_at(endpoint)).await?);
        Ok(())
    }

    /// The instance's slot, made empty when it has none.
    fn slot(&self, instance: &InstanceId) -> Slot {
        self.slots.slot(instance)
    }

    /// Every open connection now, by instance (slots being connected are left out).
    pub fn open_links(&self) -> Vec<(InstanceId, Arc<Link>)> {
        (self.slots.all().into_iter())
            .filter_map(|(id, slot)| Some((id, open_in(&slot)?)))
            .collect()
    }

    /// The instance's open connection, if there is one now (nothing is started or waited for).
    pub fn existing(&self, instance: &InstanceId) -> Option<Arc<Link>> {
        open_in(&self.slots.existing(instance)?)
    }

    /// The instances whose connection closed by itself (the runtime went away or dropped it)
    /// and was not opened again since. Slots being connected are left out.
    pub fn dropped(&self) -> Vec<InstanceId> {
        let closed = |slot: &Slot| {
            slot.try_lock()
                .is_ok_and(|current| current.as_ref().is_some_and(|l| l.gateway.is_closed()))
        };
        (self.slots.all().into_iter())
            .filter(|(_, slot)| closed(slot))
            .map(|(id, _)| id)
            .collect()
    }

    /// Forgets the instance's connection (it closes when the last user lets go). Never waits:
    /// a connection being opened now (by a turn, perhaps to a runtime that hangs) is opened
    /// outside the pool, and lives only as long as whoever opened it uses it.
    pub fn forget(&self, instance: &InstanceId) {
        if let Some(slot) = self.slots.forget(instance)
            && let Ok(mut current) = slot.try_lock()
        {
            current.take();
        }
    }

    pub async fn forget_all(&self) {
        for slot in self.slots.forget_all() {
            slot.lock().await.take();
        }
    }
}

/// The slot's connection if it is open, and nobody is connecting it now.
fn open_in(slot: &Slot) -> Option<Arc<Link>> {
    let current = slot.try_lock().ok()?;
    current.clone().filter(|link| !link.gateway.is_closed())
}

/// Starts the instance's runtime with `provider` (a no-op when it runs) and connects to its
/// gateway.
async fn open(provider: &dyn RuntimeProvider, record: &InstanceRecord) -> AppResult<Arc<Link>> {
    connect_at(&provider.start(record).await?).await
}

/// Connects to the gateway at `endpoint`.
async fn connect_at(endpoint: &RuntimeEndpoint) -> AppResult<Arc<Link>> {
    let gateway = match &endpoint.in_process {
        Some(in_process) => {
            let (requests, frames) = in_process();
            GatewayClient::in_process(requests, frames, GATEWAY_TIMEOUT).await?
        }
        None => GatewayClient::connect(&endpoint.ws_url, &endpoint.token, GATEWAY_TIMEOUT).await?,
    };
    Ok(Arc::new(Link {
        gateway,
        live: LiveSessions::default(),
        turns: LiveTurns::default(),
    }))
}
