//! Turns and their event streams.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, response::IntoResponse};
use edith_types::{
    CreateTurn, ErrorCode, Profile, Session, Timestamp, Turn, TurnAction, TurnEvent, TurnEventKind,
    TurnId, TurnState,
};
use hermes_native::methods::{
    ApprovalRespond, ApprovalRespondParams, ClarifyRespond, ClarifyRespondParams,
    LiveSessionParams, SessionInterrupt,
};
use hermes_native::{GatewayError, LiveSessionId, codes};

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
const TURN_ACTIONS: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/actions";
const TURN_CANCEL: &str = "/v1/instances/{instance_id}/profiles/{profile_id}/sessions/{session_id}/turns/{turn_id}/cancel";
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
        .returns::<Turn>(api, 202, "The turn.");
    api.add(op, post(cancel_turn));
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
    Ok(load_turn_in_session(state, ids).await?.2)
}

async fn load_turn_in_session(state: &AppState, ids: &Ids) -> AppResult<(Profile, Session, Turn)> {
    let (profile, session) = load_session(state, ids).await?;
    let id: TurnId = ids.get("turn_id")?;
    let turn =
        state.store.turn(&session.id, &id).await?.ok_or_else(|| {
            AppError::not_found(format!("turn `{id}` of session `{}`", session.id))
        })?;
    Ok((profile, session, turn))
}

async fn get_turn(State(state): State<AppState>, ids: Ids) -> AppResult<Json<Turn>> {
    Ok(Json(load_turn(&state, &ids).await?))
}

/// The runtime connection and live session a running turn uses, if it has one yet.
async fn live_session(
    state: &AppState,
    profile: &Profile,
    session: &Session,
) -> AppResult<Option<(std::sync::Arc<crate::links::Link>, LiveSessionId)>> {
    let record = load_ready_instance(state, &profile.instance_id).await?;
    let link = state.links.connect(state, &record).await?;
    let sid = link
        .live
        .lock()
        .expect("not poisoned")
        .get(&session.id)
        .cloned();
    Ok(sid.map(|sid| (link, sid)))
}

async fn turn_action(
    State(state): State<AppState>,
    ids: Ids,
    ApiJson(action): ApiJson<TurnAction>,
) -> AppResult<impl IntoResponse> {
    let (profile, session, turn) = load_turn_in_session(&state, &ids).await?;
    let conflict = |detail: String| AppError::new(ErrorCode::Conflict, detail);
    if turn.state != TurnState::RequiresAction {
        return Err(conflict(format!(
            "turn `{}` is {}; it waits for no answer",
            turn.id,
            turn.state.as_str()
        )));
    }
    let Some((link, sid)) = live_session(&state, &profile, &session).await? else {
        return Err(conflict(format!("turn `{}` has no live session", turn.id)));
    };
    let runtime_error =
        |e: GatewayError| AppError::new(ErrorCode::RuntimeUnavailable, e.to_string());
    match &action {
        TurnAction::Approval { choice, all } => {
            let params = ApprovalRespondParams {
                session_id: Some(sid),
                choice: Some(choice.as_str().to_owned()),
                all: Some(*all),
            };
            let reply = link
                .gateway
                .request::<ApprovalRespond>(&params)
                .await
                .map_err(runtime_error)?;
            if reply.resolved == 0 {
                return Err(conflict("no approval is pending".to_owned()));
            }
        }
        TurnAction::Clarify { request_id, answer } => {
            let params = ClarifyRespondParams {
                session_id: Some(sid),
                request_id: Some(request_id.clone()),
                answer: Some(answer.clone()),
            };
            match link.gateway.request::<ClarifyRespond>(&params).await {
                Ok(_) => {}
                Err(e) if e.code() == Some(codes::BUSY) => {
                    return Err(conflict(format!("no question `{request_id}` is pending")));
                }
                Err(e) => return Err(runtime_error(e)),
            }
        }
    }
    let event = state
        .store
        .append_turn_event(&turn.id, &TurnEventKind::ActionAnswered { action })
        .await?;
    state.turn_events.publish(turn.id.as_str(), event);
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

async fn cancel_turn(State(state): State<AppState>, ids: Ids) -> AppResult<impl IntoResponse> {
    let (profile, session, turn) = load_turn_in_session(&state, &ids).await?;
    if turn.state.is_terminal() {
        return Ok((StatusCode::OK, Json(turn)));
    }
    state
        .cancels
        .lock()
        .expect("not poisoned")
        .insert(turn.id.clone());
    // Not yet on the runtime: the driver sees the request before it submits the prompt.
    if let Some((link, sid)) = live_session(&state, &profile, &session).await? {
        link.gateway
            .request::<SessionInterrupt>(&LiveSessionParams::new(&sid))
            .await
            .map_err(|e| AppError::new(ErrorCode::RuntimeUnavailable, e.to_string()))?;
    }
    Ok((StatusCode::ACCEPTED, Json(turn)))
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
