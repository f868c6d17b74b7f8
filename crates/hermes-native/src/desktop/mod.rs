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

/// What [`lenient_bool`] says of a value it cannot read.
pub const NOT_A_BOOLEAN: &str = "not a boolean";

/// Reads a query flag as Hermes (pydantic) does: `true`/`false`, `1`/`0`, `yes`/`no`,
/// `on`/`off`, `t`/`f`, `y`/`n`, in any case.
pub fn lenient_bool<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<bool>, D::Error> {
    use serde::Deserialize;
    let Some(raw) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Ok(Some(true)),
        "false" | "0" | "no" | "off" | "f" | "n" => Ok(Some(false)),
        _ => Err(serde::de::Error::custom(format!("{NOT_A_BOOLEAN}: {raw}"))),
    }
}

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

impl Route {
    /// The route a request for `method` and `path` (without its query) goes to, if it is one of
    /// the contract's. A literal segment wins over a parameter (`/api/sessions/search` is the
    /// search, not the session `search`).
    pub fn matching(method: &str, path: &str) -> Option<Route> {
        let segments: Vec<&str> = path.split('/').collect();
        let fits = |route: &Route| {
            let template: Vec<&str> = route.path().split('/').collect();
            route.method().eq_ignore_ascii_case(method)
                && template.len() == segments.len()
                && template
                    .iter()
                    .zip(&segments)
                    .all(|(t, s)| t == s || (t.starts_with('{') && plain_segment(s)))
        };
        let fitting: Vec<Route> = Route::ALL.iter().copied().filter(fits).collect();
        fitting
            .iter()
            .copied()
            .find(|route| !route.path().contains('{'))
            .or(fitting.first().copied())
    }
}

/// Whether a path segment names one thing: not empty, not `.` or `..` (even percent-encoded,
/// which URL parsers resolve as dot segments), and no encoded separator.
fn plain_segment(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let dots = lower.replace("%2e", ".");
    !segment.is_empty()
        && dots != "."
        && dots != ".."
        && !lower.contains("%2f")
        && !lower.contains("%5c")
}

/// Percent-encodes everything but the unreserved characters of RFC 3986.
pub fn encode_segment(value: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_finds_its_route_and_only_the_contracts_routes_are_found() {
        assert_eq!(
            Route::matching("GET", "/api/sessions"),
            Some(Route::SessionList)
        );
        assert_eq!(
            Route::matching("GET", "/api/sessions/search"),
            Some(Route::SessionSearch)
        );
        assert_eq!(
            Route::matching("get", "/api/sessions/20261201_1/messages"),
            Some(Route::SessionMessages)
        );
        assert_eq!(
            Route::matching("PATCH", "/api/profiles/work"),
            Some(Route::ProfileRename)
        );
        assert_eq!(Route::matching("POST", "/api/sessions"), None);
        assert_eq!(Route::matching("GET", "/api/env/reveal"), None);
        assert_eq!(Route::matching("GET", "/api/sessions/"), None);
        assert_eq!(Route::matching("GET", "/api/ws"), None);
        // A parameter that URL parsers would resolve away never passes.
        for sneaky in ["..", "%2e%2e", "%2E.", ".", "a%2Fb", "a%5cb"] {
            let path = format!("/api/sessions/{sneaky}/messages");
            assert_eq!(Route::matching("GET", &path), None, "{path}");
        }
    }

    #[test]
    fn path_parameters_are_filled_encoded() {
        assert_eq!(
            Route::SessionGet.fill(&[("session_id", "a b/../c")]),
            "/api/sessions/a%20b%2F..%2Fc"
        );
    }
}
