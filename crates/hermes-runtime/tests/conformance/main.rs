//! The native conformance suite: the same expectations, run against our `hermes-runtime` and
//! against the real Hermes Agent 0.19.0 (`hermes serve`), both launched the same way and both
//! driven by the same fake OpenAI-compatible model.
//!
//! Each `conformance!` check becomes two tests, `<check>::ours` and `<check>::hermes`. Checks
//! that the real Hermes cannot be made to show with a fake model are marked `ours_only!`, with
//! the reason beside them.

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
