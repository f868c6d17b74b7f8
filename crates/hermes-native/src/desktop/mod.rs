//! Hermes Desktop's REST surface: `hermes serve`'s routes under `/api`, authenticated with the
//! [`TOKEN_HEADER`] header (only [`Route::public`] ones answer without it).
//!
//! - [`Route`], [`RouteGroup`] and each route's query and body types are generated from
//!   `contracts/hermes-desktop.routes.json`, which is extracted from hermes-agent 0.19.0.
//! - [`replies`]: what each route answers, declared from observation of 0.19.0.
//!
//! Our runtime serves these routes and the SDK's `HermesDesktop` calls them, both through these
//! declarations.

#[rustfmt::skip]
mod generated;
pub mod replies;

pub use generated::*;

/// The header that carries the runtime's session token.
pub const TOKEN_HEADER: &str = "x-hermes-session-token";

impl Route {
    /// The path with each `{name}` replaced by its value (values are percent-encoded).
    pub fn fill(self, params: &[(&str, &str)]) -> String {
        let mut path = self.path().to_owned();
        for (name, value) in params {
            path = path.replace(&format!("{{{name}}}"), &encode_segment(value));
        }
        path
    }
}

/// Percent-encodes everything but the unreserved characters of RFC 3986.
fn encode_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
