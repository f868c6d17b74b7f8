//! Turns and their event streams.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, response::IntoResponse};
use edith_types::{CreateTurn, ErrorCode, Timestamp, Turn, TurnEvent, TurnId, TurnState};

use super::extract::{AfterParams, ApiJson, ApiQuery, Ids};
use super::instances::load_ready_instance;
use super::resources::load_session;
use super::spec::{Api, Op};
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::{sse, turns};

const TURNS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns";
const TURN: &str =
    "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}";
const TURN_EVENTS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/events";

pub fn routes(api: &mut Api) {
    let op = Op::post(TURNS, "turn_create")
        .summary("Start a turn; one runs at a time per session.")
        .body::<CreateTurn>(api)
        .returns::<Turn>(api, 202, "The turn (queued); follow its events.");
    api.add(op, post(create_turn));
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
}

async fn create_turn(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(body): ApiJson<CreateTurn>,
) -> AppResult<impl IntoResponse> {
    let (profile, session) = load_session(&state, &ids).await?;
    if body.input.trim().is_empty() {
        return Err(AppError::invalid("`input` must not be empty"));
    }
    load_ready_instance(&state, &profile.instance_id).await?;
    let now = Timestamp::now();
    let turn = Turn {
        id: TurnId::generate(),
        session_id: session.id.clone(),
        state: TurnState::Queued,
        input: body.input,
        output: None,
        error: None,
        usage: None,
        created_at: now.clone(),
        updated_at: now,
    };
    if let Some(busy) = state.store.insert_turn_if_idle(&turn).await? {
        return Err(AppError::new(
            ErrorCode::Conflict,
            format!(
                "session `{}` already has turn `{busy}` in progress",
                session.id
            ),
        ));
    }
    turns::spawn(state, turn.clone(), session, profile);
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

async fn load_turn(state: &AppState, ids: &Ids) -> AppResult<Turn> {
    let (_, session) = load_session(state, ids).await?;
    let id: TurnId = ids.get("turn_id")?;
    state
        .store
        .turn(&session.id, &id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("turn `{id}` of session `{}`", session.id)))
}

async fn get_turn(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Turn>> {
    Ok(Json(load_turn(&state, &ids).await?))
}

async fn turn_events(
    State(state): State<AppState>,
    ids: Ids,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<AfterParams>,
) -> AppResult<impl IntoResponse> {
    let turn = load_turn(&state, &ids).await?;
    let after = sse::resume_cursor(&headers, params.after)?;
    let live = state.turn_events.subscribe(turn.id.as_str());
    let store = state.store.clone();
    let id = turn.id.clone();
    let replay = move |after: u64| {
        let (store, id) = (store.clone(), id.clone());
        async move { Ok(store.turn_events_after(&id, after).await?) }
    };
    Ok(sse::follow(live, replay, after, state.shutdown.clone()))
}
