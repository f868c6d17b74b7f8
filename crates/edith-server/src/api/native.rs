//! One native gateway call, run on the instance's runtime over the control plane's connection
//! to it; routed by the pinned catalog's scope.

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use edith_types::{ErrorCode, NativeCall, NativeReply};
use hermes_native::catalog::{Scope, catalog};
use hermes_native::{GatewayError, codes};
use serde_json::Value;

use super::extract::{ApiJson, Ids};
use super::instances::load_ready_instance;
use super::spec::{Api, Op};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

pub fn routes(api: &mut Api) {
    let op = Op::post("/v1/instances/{instance_id}/native/rpc", "native_call")
        .summary(
            "Call one native Hermes gateway method on the instance's runtime. Profile-scoped \
             methods get the profile's native name; methods the runtime lacks are `unsupported`.",
        )
        .body::<NativeCall>(api)
        .returns::<NativeReply>(api, 200, "The method's result.");
    api.add(op, post(native_call));
}

async fn native_call(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<NativeCall>,
) -> AppResult<Json<NativeReply>> {
    let record = load_ready_instance(&state, &ids.get("instance_id")?).await?;
    let Value::Object(mut params) = body.params else {
        return Err(AppError::invalid("`params` must be an object"));
    };
    let info = catalog().method(&body.method).ok_or_else(|| {
        AppError::new(
            ErrorCode::Unsupported,
            format!(
                "`{}` is not a method of the pinned Hermes 0.19 catalog",
                body.method
            ),
        )
    })?;
    if let Some(profile_id) = &body.profile_id {
        let profile = state
            .store
            .profile(&record.instance.id, profile_id)
            .await?
            .ok_or_else(|| AppError::not_found(format!("profile `{profile_id}`")))?;
        if info.scope == Scope::Profile && !params.contains_key("profile") {
            params.insert("profile".to_owned(), Value::String(profile.native_name));
        }
    }
    let link = state.links.connect(&state, &record).await?;
    match link.gateway.call(&body.method, Value::Object(params)).await {
        Ok(result) => Ok(Json(NativeReply { result })),
        Err(GatewayError::Rpc { code, .. }) if code == codes::METHOD_NOT_FOUND => {
            Err(AppError::new(
                ErrorCode::Unsupported,
                format!(
                    "`{}` is not supported by this instance's runtime",
                    body.method
                ),
            ))
        }
        Err(GatewayError::Rpc { code, message, .. }) => Err(AppError {
            native_code: Some(code),
            ..AppError::new(
                ErrorCode::NativeError,
                format!("`{}`: {message}", body.method),
            )
        }),
        Err(other) => Err(AppError::new(
            ErrorCode::RuntimeUnavailable,
            other.to_string(),
        )),
    }
}
