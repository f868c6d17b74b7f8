//! The web console at `/console`: three static files (`crates/edith-server/console/`) built
//! into the binary — no CDN, no network, no build step. They need no key: the page asks for
//! one and calls the API with it. A strict Content-Security-Policy lets the page load only
//! its own files and talk only to this server.

use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::spec::{Access, Api};

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/console.js");
const STYLE: &str = include_str!("../../console/console.css");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// The page is the login screen: it needs no key to be fetched.
const PUBLIC_GET: &[(Method, Access)] = &[(Method::GET, Access::Public)];

pub fn routes(api: &mut Api) {
    api.add_unlisted(
        "/console",
        PUBLIC_GET,
        get(|| async { file("text/html; charset=utf-8", INDEX) }),
    );
    api.add_unlisted(
        "/console/console.js",
        PUBLIC_GET,
        get(|| async { file("text/javascript; charset=utf-8", SCRIPT) }),
    );
    api.add_unlisted(
        "/console/console.css",
        PUBLIC_GET,
        get(|| async { file("text/css; charset=utf-8", STYLE) }),
    );
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
