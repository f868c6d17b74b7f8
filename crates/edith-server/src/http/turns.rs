//! Turns and their event streams.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, response::IntoResponse};
use edith_store::InstanceRecord;
use edith_types::{
    CreateTurn, Page, Profile, Session, Turn, TurnAction, TurnEvent, TurnFilter, TurnId,
};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::Arrived;
use super::extract::{AfterParams, ApiJson, ApiQuery, Ids, PageParams};
use super::resources::load_session;
use super::spec::{Api, Op};
use super::sse;
use crate::app::{sessions, turns};
use crate::auth::Principal;
use crate::error::AppResult;
use crate::state::AppState;

const TURNS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns";
const TURNS_STREAM: &str =
    "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/stream";
const TURN: &str =
    "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}";
const TURN_ACTIONS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/actions";
const TURN_CANCEL: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/cancel";
const TURN_EVENTS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/events";

pub fn routes(api: &mut Api) {
    let op = Op::post(TURNS, "turn_create")
        .summary("Start a turn; one runs at a time per session.")
        .body::<CreateTurn>(api)
        .returns::<Turn>(api, 202, "The turn (queued); follow its events.");
    api.add(op, post(create_turn));
    let op = Op::post(TURNS_STREAM, "turn_create_stream")
        .summary(
            "Start a turn and stream its events in the reply (SSE), from its first to its last: \
             one request where `turn_create` and `turn_events` take two.",
        )
        .body::<CreateTurn>(api)
        .starts_stream::<TurnEvent>(api, "The turn's events as they happen, until it finishes.");
    api.add(op, post(create_turn_streamed));
    let op = Op::get(TURNS, "turn_list")
        .summary("List the session's turns, oldest first, optionally only those in a state.")
        .paginated::<edith_types::TurnId>(api)
        .filtered::<TurnFilter>(api)
        .returns::<Page<Turn>>(api, 200, "A page of turns.");
    api.add(op, get(list_turns));
    let op = Op::get(TURN, "turn_get")
        .summary("Get a turn.")
        .returns::<Turn>(api, 200, "The turn.");
    api.add(op, get(get_turn));
    let op = Op::get(TURN_EVENTS, "turn_events")
        .summary("Stream a turn's events (SSE), from the start or after a sequence number.")
        .streams::<TurnEvent>(
            api,
            "The turn's event log, then live events until it finishes.",
        );
    api.add(op, get(turn_events));
    let op = Op::post(TURN_ACTIONS, "turn_action")
        .summary("Answer what a `requires_action` turn waits for: an approval or a question.")
        .body::<TurnAction>(api)
        .returns::<Turn>(
            api,
            202,
            "The turn; it goes on once the runtime has the answer.",
        );
    api.add(op, post(turn_action));
    let op = Op::post(TURN_CANCEL, "turn_cancel")
        .summary(
            "Cancel a turn: the runtime interrupts it (pending approvals are denied) and it ends \
             `cancelled`. Cancelling a finished turn changes nothing.",
        )
        .returns::<Turn>(api, 202, "The turn, being cancelled.")
        .returns::<Turn>(api, 200, "The turn, already finished: nothing changed.");
    api.add(op, post(cancel_turn));
}

/// When the request arrived (now, for one that did not come through `count_request`).
fn arrival(arrived: Option<Extension<Arrived>>) -> std::time::Instant {
    arrived.map_or_else(std::time::Instant::now, |Extension(Arrived(at))| at)
}

async fn create_turn(
    State(state): State<AppState>,
    arrived: Option<Extension<Arrived>>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateTurn>,
) -> AppResult<impl IntoResponse> {
    let arrived = arrival(arrived);
    let (record, profile, session) = load_path(&state, &ids).await?;
    let turn = turns::start(&state, record, profile, session, body, arrived).await?;
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

async fn create_turn_streamed(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    arrived: Option<Extension<Arrived>>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateTurn>,
) -> AppResult<impl IntoResponse> {
    let arrived = arrival(arrived);
    let (record, profile, session) = load_path(&state, &ids).await?;
    // The stream's place is taken first: a caller over its limit gets no turn it cannot follow.
    let permit = state.gate.open_stream(&caller.0.id)?;
    let started = turns::start_with(&state, record, profile, session, body, arrived, |turn| {
        state.turn_events.subscribe(turn.id.as_str())
    });
    let (turn, live) = started.await?;
    let replay = stored_events(&state, &turn.id);
    let events = sse::follow(
        live,
        replay,
        0,
        sse::Log::New,
        permit,
        state.shutdown.clone(),
    );
    let location = ids.fill(TURN_EVENTS, &[("turn_id", turn.id.as_str())]);
    Ok((
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, location)],
        events,
    ))
}

/// The instance, profile and session the path names.
async fn load_path(state: &AppState, ids: &Ids) -> AppResult<(InstanceRecord, Profile, Session)> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    sessions::load_all(state, &instance, &profile, &ids.get("session_id")?).await
}

/// Reads turn `id`'s stored events after a sequence number, for its SSE stream.
fn stored_events(
    state: &AppState,
    id: &TurnId,
) -> impl Fn(u64) -> BoxFuture<'static, AppResult<Vec<TurnEvent>>> + Send + Sync + use<> {
    let (store, id) = (state.store.clone(), id.clone());
    move |after| {
        let (store, id) = (store.clone(), id.clone());
        async move { Ok(store.turn_events_after(&id, after).await?) }.boxed()
    }
}

/// The turn the path names, in one read when it is there; when it is not, what is missing
/// (instance, profile, session or turn) is the 404.
async fn turn_on_path(state: &AppState, ids: &Ids) -> AppResult<Turn> {
    let (instance, profile) = (ids.get("instance_id")?, ids.get("profile_id")?);
    let (session, id) = (ids.get("session_id")?, ids.get("turn_id")?);
    let found = state
        .store
        .turn_on_path(&instance, &profile, &session, &id)
        .await?;
    match found {
        Some(turn) => Ok(turn),
        None => load_turn(state, ids).await,
    }
}

/// The turn the path names, read after its session (whose 404s come first).
async fn load_turn(state: &AppState, ids: &Ids) -> AppResult<Turn> {
    let (_, session) = load_session(state, ids).await?;
    turns::load(state, &session, &ids.get("turn_id")?).await
}

async fn list_turns(
    State(state): State<AppState>,
    ids: Ids,
    ApiQuery(params): ApiQuery<PageParams>,
    ApiQuery(filter): ApiQuery<TurnFilter>,
) -> AppResult<Json<Page<Turn>>> {
    let (_, session) = load_session(&state, &ids).await?;
    let cursor = params.cursor::<TurnId>()?;
    let page = state
        .store
        .list_turns(&session.id, cursor.as_ref(), params.limit()?, filter.state)
        .await?;
    Ok(Json(page))
}

async fn get_turn(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Turn>> {
    Ok(Json(turn_on_path(&state, &ids).await?))
}

async fn turn_action(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(action): ApiJson<TurnAction>,
) -> AppResult<impl IntoResponse> {
    let (profile, session) = load_session(&state, &ids).await?;
    let turn = turns::answer(&state, &profile, &session, &ids.get("turn_id")?, action).await?;
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

async fn cancel_turn(State(state): State<AppState>, ids: Ids) -> AppResult<impl IntoResponse> {
    let (profile, session) = load_session(&state, &ids).await?;
    let turn = turns::cancel(&state, &profile, &session, &ids.get("turn_id")?).await?;
    let status = match turn.state.is_terminal() {
        true => StatusCode::OK,
        false => StatusCode::ACCEPTED,
    };
    Ok((status, Json(turn)))
}

async fn turn_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    ids: Ids,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<AfterParams>,
) -> AppResult<impl IntoResponse> {
    let turn = turn_on_path(&state, &ids).await?;
    let live = state.turn_events.subscribe(turn.id.as_str());
    let replay = stored_events(&state, &turn.id);
    let log = if turn.state.is_terminal() {
        sse::Log::Ended
    } else {
        sse::Log::Open
    };
    sse::serve_log(&state, &caller, &headers, params.after, live, replay, log)
}
