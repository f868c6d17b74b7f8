//! The native conformance suite: the same expectations, run against our `hermes-runtime` and
//! against the real Hermes Agent 0.19.0 (`hermes serve`), both launched the same way and both
//! driven by the same fake OpenAI-compatible model.
//!
//! Each `conformance!` check becomes two tests, `<check>::ours` and `<check>::hermes`, each
//! with a runtime of its own. A `shared!` check needs nothing of a runtime that other checks
//! could change: it becomes `<check>::ours`, and it runs again, one after another with the other
//! shared checks on one runtime, in `shared::ours` and `shared::hermes` (the real Hermes spends
//! about 5 s starting and answering its first prompt, a fresh session of a warm one 0.3 s).
//! Checks that the real Hermes cannot be made to show with a fake model are marked
//! `ours_only!`, with the reason beside them.

mod harness;

mod auth;
mod background;
mod clients;
mod desktop;
mod facts;
mod features;
mod framing;
mod rollback;
mod runtime_only;
mod secrets;
mod session_work;
mod sessions;
mod settings;
mod shapes;
mod shared;
mod skills;
mod tools;
mod turns;

/// Defines a check run against both targets.
#[macro_export]
macro_rules! conformance {
    ($name:ident, $check:ident) => {
        mod $name {
            #[tokio::test]
            async fn ours() {
                super::$check($crate::harness::Target::Ours).await
            }

            #[tokio::test]
            async fn hermes() {
                super::$check($crate::harness::Target::Hermes).await
            }
        }
    };
}

/// Defines a check that may share its runtime with other checks (`shared`): it takes the
/// runtime instead of starting one. Its `CHECK` must be in its file's `SHARED` list; one left
/// out is never used, which the compiler reports.
#[macro_export]
macro_rules! shared {
    ($name:ident, $check:ident) => {
        mod $name {
            #[tokio::test]
            async fn ours() {
                let peer = $crate::harness::Peer::start($crate::harness::Target::Ours).await;
                super::$check(&peer).await;
                peer.stop().await;
            }

            fn run(peer: &$crate::harness::Peer) -> $crate::shared::Running<'_> {
                Box::pin(super::$check(peer))
            }

            pub(super) const CHECK: $crate::shared::Check = $crate::shared::Check {
                name: module_path!(),
                run,
            };
        }
    };
}
