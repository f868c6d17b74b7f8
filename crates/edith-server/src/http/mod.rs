//! The HTTP layer: the REST + SSE surface under `/v1`, declared once for both the router and
//! the contract (`spec`), with the extractors, SSE streams and `Idempotency-Key` handling it
//! needs. Handlers are thin: they parse the request and call `crate::app`.

pub mod extract;
pub mod idempotency;
mod instances;
mod native;
mod resources;
mod spec;
mod sse;
mod turns;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use edith_types::{ErrorCode, Health};
use serde_json::Value;

use crate::error::AppError;
use crate::state::AppState;
use crate::tools::mcp_endpoint;
use spec::Api;

pub use spec::Op;

/// The router (without state) and the OpenAPI document describing it.
pub fn build() -> (Router<AppState>, Value) {
    let mut api = Api::new();
    let op = Op::get("/healthz", "health_get")
        .summary("Liveness: the server answers.")
        .returns::<Health>(&mut api, 200, "The server is up.");
    api.add(op, get(health));
    let op = Op::get("/v1/openapi.json", "openapi_get")
        .summary("This contract.")
        .returns::<Value>(&mut api, 200, "The OpenAPI document.");
    api.add(op, get(openapi_json));
    instances::routes(&mut api);
    resources::routes(&mut api);
    turns::routes(&mut api);
    native::routes(&mut api);
    api.add_internal(
        mcp_endpoint::PATH,
        post(mcp_endpoint::post).get(mcp_endpoint::get),
    );
    let (router, doc) = api.finish();
    let router = router
        .fallback(|| async { AppError::new(ErrorCode::RouteNotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            AppError::new(
                ErrorCode::MethodNotAllowed,
                "this route does not take that method",
            )
        });
    (router, doc)
}

/// The contract as served and as checked in at `contracts/control-plane.openapi.json`.
pub fn openapi() -> &'static Value {
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| build().1)
}

async fn health() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

async fn openapi_json() -> (StatusCode, axum::Json<Value>) {
    (StatusCode::OK, axum::Json(openapi().clone()))
}
