//! API keys (scope `admin`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, response::IntoResponse};
use edith_types::{ApiKey, ApiKeyId, CreateApiKey, CreatedApiKey, Page, Scope};

use super::extract::{ApiJson, ApiQuery, Ids, PageParams};
use super::spec::{Api, Op};
use crate::app::keys;
use crate::error::AppResult;
use crate::state::AppState;

pub fn routes(api: &mut Api) {
    let create = Op::post("/v1/keys", "key_create")
        .scope(Scope::Admin)
        .summary("Create an API key; its secret is in this reply only (just its hash is kept).")
        .body::<CreateApiKey>(api)
        .returns::<CreatedApiKey>(api, 201, "The key and its secret.");
    let list = Op::get("/v1/keys", "key_list")
        .scope(Scope::Admin)
        .summary("List API keys (never their secrets).")
        .paginated::<edith_types::ApiKeyId>(api)
        .returns::<Page<ApiKey>>(api, 200, "A page of keys.");
    api.add(create, axum::routing::post(create_key));
    api.add(list, get(list_keys));
    let get_op = Op::get("/v1/keys/{key_id}", "key_get")
        .scope(Scope::Admin)
        .summary("Get an API key (never its secret).")
        .returns::<ApiKey>(api, 200, "The key.");
    let revoke = Op::delete("/v1/keys/{key_id}", "key_revoke")
        .scope(Scope::Admin)
        .summary("Revoke an API key: it is refused from now on. Revoking twice changes nothing.")
        .returns::<ApiKey>(api, 200, "The key, revoked.");
    api.add(get_op, get(get_key));
    api.add(revoke, axum::routing::delete(revoke_key));
}

async fn create_key(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateApiKey>,
) -> AppResult<impl IntoResponse> {
    Ok((StatusCode::CREATED, Json(keys::create(&state, body).await?)))
}

async fn list_keys(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> AppResult<Json<Page<ApiKey>>> {
    let page = state
        .store
        .list_api_keys(params.cursor::<ApiKeyId>()?.as_ref(), params.limit()?)
        .await?;
    Ok(Json(page))
}

async fn get_key(State(state): State<AppState>, ids: Ids) -> AppResult<Json<ApiKey>> {
    Ok(Json(keys::load(&state, &ids.get("key_id")?).await?))
}

async fn revoke_key(State(state): State<AppState>, ids: Ids) -> AppResult<Json<ApiKey>> {
    Ok(Json(keys::revoke(&state, &ids.get("key_id")?).await?))
}
