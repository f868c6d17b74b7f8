//! The `shared!` checks, run one after another on one runtime per target: the real Hermes
//! starts and answers its first prompt once instead of once per check. Each check opens its own
//! connections and sessions; the fake model's log of requests is cleared before each. A check
//! that fails is reported by name at the end, after the others ran; one that takes longer than
//! [`CHECK_LIMIT`] is reported as hanging and the next one runs.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::FutureExt;

use crate::harness::{Peer, Target};

/// A shared check, running.
pub type Running<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A check that may share its runtime, as `shared!` declares it.
pub struct Check {
    /// Its module path, which names it as its own test would be named.
    pub name: &'static str,
    pub run: for<'a> fn(&'a Peer) -> Running<'a>,
}

/// How long one shared check may take (its frames are bounded too, by the harness).
const CHECK_LIMIT: Duration = Duration::from_secs(120);

/// Every shared check, by name.
fn checks() -> Vec<&'static Check> {
    let lists: &[&[Check]] = &[
        crate::auth::SHARED,
        crate::background::SHARED,
        crate::clients::SHARED,
        crate::desktop::SHARED,
        crate::facts::SHARED,
        crate::features::SHARED,
        crate::framing::SHARED,
        crate::rollback::SHARED,
        crate::session_work::SHARED,
        crate::sessions::SHARED,
        crate::settings::SHARED,
        crate::tools::SHARED,
        crate::turns::SHARED,
    ];
    let mut checks: Vec<&Check> = lists.iter().flat_map(|list| list.iter()).collect();
    checks.sort_by_key(|check| check.name);
    checks
}

#[tokio::test]
async fn ours() {
    run_all(Target::Ours).await
}

#[tokio::test]
async fn hermes() {
    run_all(Target::Hermes).await
}

async fn run_all(target: Target) {
    let checks = checks();
    let peer = Peer::start(target).await;
    let mut failed = Vec::new();
    for check in &checks {
        peer.model.forget_requests();
        let started = Instant::now();
        let run = AssertUnwindSafe((check.run)(&peer)).catch_unwind();
        let outcome = match tokio::time::timeout(CHECK_LIMIT, run).await {
            Ok(Ok(())) => "passed",
            // The panic's message is already on stderr, from the panic hook.
            Ok(Err(_)) => "FAILED",
            Err(_) => "HUNG, stopped",
        };
        println!("{outcome}: {} ({:.2?})", check.name, started.elapsed());
        if outcome != "passed" {
            failed.push(format!("{outcome}: {}", check.name));
        }
    }
    peer.stop().await;
    assert!(
        failed.is_empty(),
        "{} of {} shared checks did not pass on {target:?}: {failed:#?}",
        failed.len(),
        checks.len()
    );
}
