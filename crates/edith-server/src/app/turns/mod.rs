//! Turns: started, answered and cancelled on behalf of clients; run by the driver.

mod driver;
mod gates;

use std::sync::Arc;
use std::time::Instant;

use edith_store::InstanceRecord;
use edith_types::{
    CreateTurn, ErrorCode, Profile, Session, Timestamp, Turn, TurnAction, TurnEventKind, TurnId,
    TurnState,
};
use hermes_native::LiveSessionId;
use hermes_native::codes;
use hermes_native::methods::{
    ApprovalRespond, ApprovalRespondParams, ClarifyRespond, ClarifyRespondParams,
    LiveSessionParams, SessionInterrupt,
};

pub use driver::{open_live_session, recover};
pub use gates::TurnGates;

use super::{instances, profiles};
use crate::error::{AppError, AppResult};
use crate::runtime::Link;
use crate::state::AppState;

/// Queues a turn on an idle session and starts driving it; one turn runs at a time per session.
/// `arrived`: when the request for it reached the control plane.
pub async fn start(
    state: &AppState,
    instance: InstanceRecord,
    profile: Profile,
    session: Session,
    body: CreateTurn,
    arrived: Instant,
) -> AppResult<Turn> {
    let started = start_with(state, instance, profile, session, body, arrived, |_| ());
    Ok(started.await?.0)
}

/// Starts a turn like [`start`], calling `before` with it once it is stored and before
/// anything can happen in it (to subscribe to its log, so that every event comes live).
pub async fn start_with<T>(
    state: &AppState,
    instance: InstanceRecord,
    profile: Profile,
    session: Session,
    body: CreateTurn,
    arrived: Instant,
    before: impl FnOnce(&Turn) -> T,
) -> AppResult<(Turn, T)> {
    if body.input.trim().is_empty() {
        return Err(AppError::invalid("`input` must not be empty or all blank"));
    }
    let most = state.gate.limits().max_input_chars;
    if body.input.chars().count() > most {
        return Err(AppError::invalid(format!(
            "`input` must be at most {most} characters"
        )));
    }
    let instance = instances::ready(instance)?;
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
    // Open before the turn is stored: a turn stored by this replica has its gate for as long
    // as it is driven here, so a cancel sent at once finds it.
    let gate = state.turn_gates.open(&turn.id);
    // Stored under the profile lock where a profile change restarts the runtime: such a change
    // either sees this turn and is refused, or is done before it (see `ProfileLocks`).
    let restarts = profiles::runtime_restarts_for_root_changes(instance.instance.provider);
    let no_restart = if restarts {
        let shared = state.profile_changes.share(&instance.instance.id).await;
        // A change or a deletion went first: the instance may be `deleting` by now.
        if shared.waited() {
            instances::load_ready(state, &instance.instance.id).await?;
        }
        Some(shared)
    } else {
        None
    };
    let busy = state
        .store
        .insert_turn_if_idle(&turn, state.replica.name())
        .await?;
    drop(no_restart);
    if let Some(busy) = busy {
        return Err(AppError::new(
            ErrorCode::Conflict,
            format!(
                "session `{}` already has turn `{busy}` in progress",
                session.id
            ),
        ));
    }
    let before = before(&turn);
    gate.hand_over();
    let asked = driver::Asked {
        instance,
        session,
        profile,
        arrived,
    };
    driver::spawn(state.clone(), turn.clone(), asked);
    Ok((turn, before))
}

pub async fn load(state: &AppState, session: &Session, id: &TurnId) -> AppResult<Turn> {
    state
        .store
        .turn(&session.id, id)
        .await?
        .ok_or_else(|| AppError::not_found(format!("turn `{id}` of session `{}`", session.id)))
}

/// The runtime connection and live session a running turn uses, if it has one yet.
async fn live_session(
    state: &AppState,
    profile: &Profile,
    session: &Session,
) -> AppResult<Option<(Arc<Link>, LiveSessionId)>> {
    let record = instances::load_ready(state, &profile.instance_id).await?;
    let link = state.gateway(&record).await?;
    let sid = link.live.get(&session.id);
    Ok(sid.map(|sid| (link, sid)))
}

/// Gives the runtime what a `requires_action` turn waits for, and logs the answer.
pub async fn answer(
    state: &AppState,
    profile: &Profile,
    session: &Session,
    turn: &TurnId,
    action: TurnAction,
) -> AppResult<Turn> {
    let conflict = |detail: String| AppError::new(ErrorCode::Conflict, detail);
    let (held, turn) = hold_and_read(state, session, turn).await?;
    if turn.state != TurnState::RequiresAction {
        return Err(conflict(format!(
            "turn `{}` is {}; it waits for no answer",
            turn.id,
            turn.state.as_str()
        )));
    }
    // Held until the answer is logged: the driver logs what the runtime does next after it.
    let Some(held) = held else {
        return Err(not_driven_here(&turn));
    };
    if held.ending() || !held.on_runtime() {
        return Err(conflict(format!(
            "turn `{}` is ending; it waits for no answer",
            turn.id
        )));
    }
    let Some((link, sid)) = live_session(state, profile, session).await? else {
        return Err(conflict(format!("turn `{}` has no live session", turn.id)));
    };
    match &action {
        TurnAction::Approval { choice, all } => {
            let params = ApprovalRespondParams {
                session_id: Some(sid),
                choice: Some(choice.as_str().to_owned()),
                all: Some(*all),
            };
            let reply = link.gateway.request::<ApprovalRespond>(&params).await?;
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
                Err(e) => return Err(e.into()),
            }
        }
    }
    let answered = TurnEventKind::ActionAnswered { action };
    match state.store.append_turn_event(&turn.id, &answered).await {
        Ok(event) => {
            state.metrics.turn_event_appended();
            state.turn_events.publish(turn.id.as_str(), event);
        }
        // The runtime had the answer and the turn ended at once (a denial, say): the answer
        // took effect; its entry comes too late for the log.
        Err(edith_store::StoreError::TurnEnded(_)) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(turn)
}

/// Asks the runtime to interrupt the turn; the driver ends it `cancelled`. A turn not yet on
/// the runtime is cancelled by the driver before it submits the prompt. A turn that has ended
/// is given back as it ended.
pub async fn cancel(
    state: &AppState,
    profile: &Profile,
    session: &Session,
    turn: &TurnId,
) -> AppResult<Turn> {
    let (held, turn) = hold_and_read(state, session, turn).await?;
    if turn.state.is_terminal() {
        return Ok(turn);
    }
    let Some(held) = held.inspect(gates::Held::request_cancel) else {
        return Err(not_driven_here(&turn));
    };
    // Ending: the runtime is done with it; the request still makes an interrupted end a
    // cancelled one. Not on the runtime yet: its driver, which sends the prompt holding the
    // gate, sees the cancel first; the live session may meanwhile run someone else's turn.
    if held.ending() || !held.on_runtime() {
        return Ok(turn);
    }
    if let Some((link, sid)) = live_session(state, profile, session).await? {
        link.gateway
            .request::<SessionInterrupt>(&LiveSessionParams::new(&sid))
            .await?;
    }
    Ok(turn)
}

/// Holds the turn's gate (none when it is not driven here) and reads the turn under it: what
/// is read then stays true of the runtime's live session until the gate is let go (see
/// `gates`).
async fn hold_and_read(
    state: &AppState,
    session: &Session,
    turn: &TurnId,
) -> AppResult<(Option<gates::Held>, Turn)> {
    let held = state.turn_gates.hold(turn).await;
    Ok((held, load(state, session, turn).await?))
}

/// A turn stored as unfinished that nothing here drives: its driver stopped (its replica
/// stopped or handed the instance on, or it could not record the turn's end). It is ended
/// `interrupted` once its driver's replica is found gone, or restarts.
fn not_driven_here(turn: &Turn) -> AppError {
    AppError::new(
        ErrorCode::Conflict,
        format!(
            "turn `{}` has no driver here any more; it ends as interrupted once the control \
             plane recovers it",
            turn.id
        ),
    )
}
