//! The turn driver: runs a turn on its instance's runtime through the native gateway, and turns
//! the runtime's events into the turn's durable event log.

use std::sync::Arc;
use std::time::Instant;

use edith_store::{InstanceRecord, SessionChange};
use edith_types::{
    ErrorCode, NativeSessionId, Profile, Session, Timestamp, Turn, TurnEventKind, TurnState, Usage,
};
use hermes_native::events::CompletionStatus;
use hermes_native::methods::{
    LiveSessionParams, PROMPT_QUEUED, PromptSubmit, PromptSubmitParams, SessionCreate,
    SessionCreateParams, SessionInterrupt, SessionResume, SessionResumeParams,
};
use hermes_native::{GatewayError, LiveSessionId, NativeEvent, codes};
use serde_json::{Value, json};

use crate::error::{AppError, AppResult};
use crate::metrics::TurnLeg;
use crate::runtime::{Link, Live, RunningNow, TurnOn};
use crate::state::AppState;
use crate::tools::MCP_SERVER_NAME;

/// What a turn was asked on, and when.
pub struct Asked {
    pub instance: InstanceRecord,
    pub session: Session,
    pub profile: Profile,
    /// When the request that started the turn reached the control plane.
    pub arrived: Instant,
}

/// Drives `turn` on the instance's runtime, in a task of its own.
pub fn spawn(state: AppState, turn: Turn, asked: Asked) {
    let Asked {
        instance,
        session,
        profile,
        arrived,
    } = asked;
    // Every line logged while the turn is driven names what it is about.
    let span = tracing::info_span!(
        "turn",
        instance = %profile.instance_id,
        profile = %profile.id,
        session = %session.id,
        turn = %turn.id,
    );
    let driven = async move {
        let id = turn.id.clone();
        let _running = state.running_turns.started(
            &profile.instance_id,
            &profile.id,
            tracing::Span::current(),
        );
        if let Err(e) = drive(&state, &instance, turn, session, profile, arrived).await {
            tracing::error!(detail = %e.detail, "turn could not record its outcome");
        }
        state.turn_gates.close(&id);
        state.turn_events.finish(id.as_str());
    };
    tokio::spawn(tracing::Instrument::instrument(driven, span));
}

fn cancel_requested(state: &AppState, turn: &Turn) -> bool {
    state.turn_gates.cancel_requested(&turn.id)
}

/// At most this many events are written to the log in one go.
const MOST_AT_ONCE: usize = 64;

/// What the driver has not written yet: the events the runtime sent since the last write, and
/// whether the turn's state (as the driver holds it) is unwritten too.
struct Unlogged {
    events: Vec<TurnEventKind>,
    state_changed: bool,
}

impl Unlogged {
    /// A turn that has just started: its state and its `turn.started`.
    fn started() -> Self {
        Self {
            events: vec![TurnEventKind::TurnStarted],
            state_changed: true,
        }
    }

    /// Writes what is pending in one go, then publishes it: nobody is shown an event the log
    /// does not hold.
    async fn write(&mut self, state: &AppState, turn: &Turn) -> AppResult<()> {
        let state_changed = std::mem::take(&mut self.state_changed);
        if !state_changed && self.events.is_empty() {
            return Ok(());
        }
        // After an answer being given meanwhile (`turns::answer`), which comes first in the log.
        let _after_answers = state.turn_gates.hold(&turn.id).await;
        let events = if state_changed {
            // The turn's state with the events that explain it.
            (state.store.update_turn_and_log(turn, &self.events).await?)
                .ok_or_else(|| edith_store::StoreError::TurnEnded(turn.id.to_string()))?
        } else {
            state
                .store
                .append_turn_events(&turn.id, &self.events)
                .await?
        };
        publish(state, turn, events);
        self.events.clear();
        Ok(())
    }
}

/// Shows `events`, just written to the turn's log, to those who follow it.
fn publish(state: &AppState, turn: &Turn, events: Vec<edith_types::TurnEvent>) {
    for event in events {
        state.metrics.turn_event_appended();
        state.turn_events.publish(turn.id.as_str(), event);
    }
}

/// How a turn ended.
struct Outcome {
    state: TurnState,
    output: Option<String>,
    error: Option<String>,
    usage: Option<Usage>,
    /// What the runtime sent last, not logged yet: it goes to the log with the turn's end, in
    /// one write (the completed message, say).
    last_events: Vec<TurnEventKind>,
    /// When the runtime's event that ended the turn was read (none: it did not end it).
    ended_by_runtime: Option<Instant>,
}

impl Outcome {
    /// The turn's end as the client sees it: an interrupt the client asked for is a
    /// cancellation. Read under the turn's gate.
    fn state_seen(&self, state: &AppState, turn: &Turn) -> TurnState {
        match self.state {
            TurnState::Interrupted if cancel_requested(state, turn) => TurnState::Cancelled,
            other => other,
        }
    }

    fn cancelled_before_it_started() -> Self {
        Self {
            state: TurnState::Cancelled,
            ..Self::failed("cancelled before it started")
        }
    }

    fn failed(error: impl Into<String>) -> Self {
        Self {
            state: TurnState::Failed,
            output: None,
            error: Some(error.into()),
            usage: None,
            last_events: Vec::new(),
            ended_by_runtime: None,
        }
    }
}

async fn drive(
    state: &AppState,
    instance: &InstanceRecord,
    mut turn: Turn,
    session: Session,
    profile: Profile,
    arrived: Instant,
) -> AppResult<()> {
    let started = Instant::now();
    let outcome = match run(state, instance, &mut turn, session, &profile, arrived).await {
        Ok(outcome) => outcome,
        Err(e) => Outcome::failed(e.detail),
    };
    finish(state, turn, outcome, Some(started.elapsed())).await
}

/// Records the final state and the final event, together. `took`: how long it was driven
/// (unknown for a turn an earlier process left). A write the database failed is tried again
/// for about 45 s (a database restarting, a connection cut), so that a short outage does not
/// leave the turn unfinished until this replica restarts.
async fn finish(
    state: &AppState,
    mut turn: Turn,
    outcome: Outcome,
    took: Option<std::time::Duration>,
) -> AppResult<()> {
    let mut wait = FINISH_RETRY_FIRST;
    let mut attempt = 1;
    let mut stopping = state.shutdown.clone();
    let finished = loop {
        // After an answer or a cancel being given meanwhile (`turns::answer`,
        // `turns::cancel`): an answer comes first in the log, and a cancel that found the turn
        // running is seen.
        let gate = state.turn_gates.hold(&turn.id).await;
        let ended = outcome.state_seen(state, &turn);
        if attempt == 1 {
            gate.as_ref().inspect(|gate| gate.mark_ending());
            tracing::info!(
                state = ended.as_str(),
                error = outcome.error.as_deref().unwrap_or(""),
                "turn finished"
            );
        }
        turn.state = ended;
        turn.output = outcome.output.clone();
        turn.error = outcome.error.clone();
        turn.usage = outcome.usage.clone();
        turn.updated_at = Timestamp::now();
        let last = TurnEventKind::TurnFinished {
            state: ended,
            output: outcome.output.clone(),
            error: outcome.error.clone(),
        };
        let failed = match state
            .store
            .finish_turn(&turn, &outcome.last_events, &last)
            .await
        {
            Ok(finished) => break finished,
            Err(e) if attempt < FINISH_ATTEMPTS && e.is_transient() => e,
            Err(e) => return Err(e.into()),
        };
        tracing::warn!(attempt, error = %failed, "the turn's end was not written; trying again");
        // The gate is let go meanwhile: an answer or a cancel waits for no outage.
        drop(gate);
        tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => return Err(failed.into()),
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(FINISH_RETRY_LONGEST);
        attempt += 1;
    };
    let Some(events) = finished else {
        if attempt > 1 && written_before(state, &turn).await {
            // An attempt the database reported failed had written it: nothing is lost, and
            // those who follow the turn read its end from the log once its driver is done.
            state.metrics.turn_ended(turn.state.as_str(), took);
            return Ok(());
        }
        // Already ended by another replica (this one had stopped renewing its lease): that
        // end stands.
        tracing::warn!("the turn was ended elsewhere meanwhile");
        return Ok(());
    };
    state.metrics.turn_ended(turn.state.as_str(), took);
    // Counted before the end is shown, so a scrape by whoever saw it counts it.
    if let Some(ended) = outcome.ended_by_runtime {
        (state.metrics).turn_leg_took(TurnLeg::FromRuntime, ended.elapsed());
    }
    publish(state, &turn, events);
    Ok(())
}

/// How often, and how far apart, a turn's end is written when the database fails it: 50 ms,
/// doubling up to 5 s, 15 pauses of about 45 s in all.
const FINISH_ATTEMPTS: u32 = 16;
const FINISH_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(50);
const FINISH_RETRY_LONGEST: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the store holds `turn` ended as the driver ended it (written by an attempt whose
/// reply was lost, such as a commit whose connection dropped before it answered).
async fn written_before(state: &AppState, turn: &Turn) -> bool {
    match state.store.turn(&turn.session_id, &turn.id).await {
        // Not the state: a cancel between attempts may have made an interrupted end cancelled.
        Ok(Some(stored)) => {
            stored.state.is_terminal() && stored.error == turn.error && stored.output == turn.output
        }
        _ => false,
    }
}

async fn run(
    state: &AppState,
    instance: &InstanceRecord,
    turn: &mut Turn,
    mut session: Session,
    profile: &Profile,
    arrived: Instant,
) -> AppResult<Outcome> {
    let link = state.gateway(instance).await?;
    // A turn cancelled while it waited for its runtime goes no further (the look that counts
    // is the one under the gate, below).
    if cancel_requested(state, turn) {
        return Ok(Outcome::cancelled_before_it_started());
    }

    // A runtime that keeps the profile's tools between turns has listed them since they last
    // changed, so the turn sees the change.
    if !state.tool_lists.settled(&profile.id, RELIST_LIMIT).await {
        tracing::warn!(
            "the runtime did not list the profile's changed tools within {} s; the turn goes on",
            RELIST_LIMIT.as_secs()
        );
    }

    // Held from the last look at a cancel until the runtime has the prompt: a cancel sent
    // meanwhile waits for it, then interrupts the turn on the runtime (an interrupt sent
    // before would find the live session idle, and be lost).
    let mut no_cancel_unseen = state.turn_gates.hold(&turn.id).await;
    if cancel_requested(state, turn) {
        return Ok(Outcome::cancelled_before_it_started());
    }
    // A live session may have been closed meanwhile (by the runtime: Hermes reaps the idle ones
    // of clients that went away): then the stored session is resumed once and the prompt sent
    // again.
    let mut retried = false;
    let mut arrived = Some(arrived);
    // Bounds the whole wait for other sessions' turns on the live session.
    let waits_until = Instant::now() + IDLE_LIMIT;
    let mut waited_for: Option<TurnOn> = None;
    let (following, mut events, queued) = loop {
        let sid = open_live_session(state, &link, &mut session, profile).await?;
        // The live session's slot, which a turn of another session continuing the same stored
        // session may hold (see `LiveTurns`); one taken after a wait is kept if it is the same
        // live session still.
        let turn_on = match waited_for.take().filter(|held| held.sid == sid) {
            Some(held) => held,
            None => match link.turns.try_take(&sid) {
                Some(held) => held,
                None => {
                    // Waited for without the gate: a cancel meanwhile is looked for as it waits.
                    drop(no_cancel_unseen);
                    // The leg to the runtime is the control plane's own time, not this wait.
                    arrived = None;
                    match wait_for_live_session(state, &link, &sid, turn, waits_until).await {
                        Waited::Free(held) => waited_for = Some(held),
                        Waited::Cancelled => return Ok(Outcome::cancelled_before_it_started()),
                        Waited::TooLong(outcome) => return Ok(outcome),
                    }
                    no_cancel_unseen = state.turn_gates.hold(&turn.id).await;
                    if cancel_requested(state, turn) {
                        return Ok(Outcome::cancelled_before_it_started());
                    }
                    // Closed meanwhile, it is opened again.
                    continue;
                }
            },
        };
        let Some(events) = link.gateway.subscribe_from_now(&sid) else {
            // Only a turn holding the live session's slot follows it.
            return Err(AppError::internal(format!(
                "live session `{sid}` is followed by a turn that does not hold it"
            )));
        };
        if let Some(arrived) = arrived.take() {
            (state.metrics).turn_leg_took(TurnLeg::ToRuntime, arrived.elapsed());
        }
        let submitted = link
            .gateway
            .request::<PromptSubmit>(&PromptSubmitParams {
                session_id: Some(sid.clone()),
                text: Some(turn.input.clone()),
                ..Default::default()
            })
            .await;
        match submitted {
            Ok(reply) => {
                if let Some(gate) = &no_cancel_unseen {
                    gate.mark_on_runtime();
                }
                let queued = reply.status == PROMPT_QUEUED;
                break (Following::new(&link, turn_on), events, queued);
            }
            Err(e) if e.code() == Some(codes::LIVE_SESSION_NOT_FOUND) && !retried => {
                link.gateway.unsubscribe(&sid);
                link.live.forget(&session.id);
                retried = true;
            }
            Err(e) => {
                if matches!(e, GatewayError::Timeout { .. }) {
                    // The runtime may have the prompt, and run it.
                    drop(no_cancel_unseen);
                    let mut events = events;
                    give_up(state, &link, &sid, turn, &mut events).await;
                }
                link.gateway.unsubscribe(&sid);
                return Err(e.into());
            }
        }
    };

    drop(no_cancel_unseen);
    let sid = &following.turn_on.sid;
    let outcome = follow_on_runtime(state, &link, sid, turn, &mut events, queued, instance).await;
    // No cancel reaches the live session once it is let go: another session's turn may take it
    // at once, which an interrupt sent for this one would cut short. (Cancels find the turn
    // ending from here on, as they do once its end is being written.)
    if let Some(gate) = state.turn_gates.hold(&turn.id).await {
        gate.mark_ending();
    }
    // Idle from the turn's end on, not from its start.
    link.live.touch(&session.id);
    drop(following);
    outcome
}

/// Follows a turn whose prompt the runtime has: past the turn the live session was running when
/// the prompt was `queued`, then its own events to its end (given up when the runtime did not
/// end it).
async fn follow_on_runtime(
    state: &AppState,
    link: &Link,
    sid: &LiveSessionId,
    turn: &mut Turn,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<NativeEvent>,
    queued: bool,
    instance: &InstanceRecord,
) -> AppResult<Outcome> {
    let mut first = None;
    if queued {
        match pass_running_turn(state, turn, events).await {
            Passed::ToStart(start) => first = start,
            Passed::Cancelled => return Ok(Outcome::cancelled_before_it_started()),
            Passed::Never(outcome) => {
                give_up(state, link, sid, turn, events).await;
                return Ok(outcome);
            }
        }
    }
    let mut ended_by_runtime = false;
    let arrivals = Arrivals {
        first,
        rest: events,
    };
    let followed = follow(state, turn, arrivals, instance, &mut ended_by_runtime).await;
    if !ended_by_runtime {
        give_up(state, link, sid, turn, events).await;
    }
    followed
}

/// How long the runtime is given to end a turn given up here once it is told to.
const GIVEN_UP_ENDS_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Gives up a turn the runtime runs (its log could not be written, the runtime went quiet):
/// from now on it takes no answer (its end is decided here), and the runtime is told to stop
/// it and given a while to end it. Otherwise it would go on unseen, and the session's next
/// prompt would interrupt it and meet its end. A runtime that is gone needs no telling.
async fn give_up(
    state: &AppState,
    link: &Link,
    sid: &LiveSessionId,
    turn: &Turn,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<NativeEvent>,
) {
    // Under the gate: an answer being given now is given before.
    if let Some(gate) = state.turn_gates.hold(&turn.id).await {
        gate.mark_ending();
    }
    let interrupt = LiveSessionParams::new(sid);
    if let Err(e) = link.gateway.request::<SessionInterrupt>(&interrupt).await {
        tracing::debug!(error = %e, "the turn given up was not interrupted on the runtime");
        return;
    }
    let ended = tokio::time::timeout(GIVEN_UP_ENDS_WITHIN, async {
        while let Some(event) = events.recv().await {
            if translate(turn, event).outcome.is_some() {
                return;
            }
        }
    });
    if ended.await.is_err() {
        tracing::warn!(
            within = ?GIVEN_UP_ENDS_WITHIN,
            "the runtime did not end the turn given up after an interrupt"
        );
    }
}

/// Follows the turn's events on the runtime until they end it, writing them to its log.
/// `ended_by_runtime`: set once the runtime's event that ends the turn is read (even if what
/// follows fails).
async fn follow(
    state: &AppState,
    turn: &mut Turn,
    events: Arrivals<'_>,
    instance: &InstanceRecord,
    ended_by_runtime: &mut bool,
) -> AppResult<Outcome> {
    let Arrivals {
        first,
        rest: events,
    } = events;
    turn.state = TurnState::Running;
    turn.updated_at = Timestamp::now();
    // The start goes to the log with what the runtime has sent already (often a quick turn's
    // whole answer): one write, not two. Nothing is held back for it: when nothing has come
    // yet, it is logged at once.
    let mut pending = Unlogged::started();
    let mut arrived = first.or_else(|| events.try_recv().ok());
    if arrived.is_none() {
        pending.write(state, turn).await?;
    }

    let outcome = loop {
        let event = match arrived.take() {
            Some(event) => event,
            None => match tokio::time::timeout(IDLE_LIMIT, events.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    break Outcome::failed(lost_connection(state, instance).await);
                }
                Err(_) => {
                    break Outcome::failed(format!(
                        "the runtime sent nothing for {} minutes; the turn is given up",
                        IDLE_LIMIT.as_secs() / 60
                    ));
                }
            },
        };
        // When the event last taken was read: the runtime's part of the turn ends there, if it
        // ends the turn.
        let mut read_at = Instant::now();
        // The events that arrived while the last ones were written go to the log together
        // (a streamed answer's pieces, say), up to a change of the turn's state.
        let mut next = Some(event);
        let mut ended = None;
        while let Some(event) = next.take() {
            let step = translate(turn, event);
            *ended_by_runtime |= step.outcome.is_some();
            if let Some(to) = step.state.filter(|to| *to != turn.state) {
                pending.write(state, turn).await?;
                set_state(state, turn, to).await?;
            }
            pending.events.extend(step.log);
            if step.outcome.is_some() {
                ended = step.outcome;
                break;
            }
            if pending.events.len() < MOST_AT_ONCE {
                next = events.try_recv().ok();
                read_at = Instant::now();
            }
        }
        if let Some(outcome) = ended {
            // The turn's end rewrites its state in any case.
            break Outcome {
                last_events: pending.events,
                ended_by_runtime: Some(read_at),
                ..outcome
            };
        }
        pending.write(state, turn).await?;
    };
    Ok(outcome)
}

/// A turn's events from the runtime: one already read, if any, then the rest.
struct Arrivals<'a> {
    first: Option<NativeEvent>,
    rest: &'a mut tokio::sync::mpsc::UnboundedReceiver<NativeEvent>,
}

/// How passing over the turn a live session was running ended ([`pass_running_turn`]).
enum Passed {
    /// This turn's own events come next; the first of them, when it was read already.
    ToStart(Option<NativeEvent>),
    /// A cancel came meanwhile: the runtime drops the queued prompt when it interrupts.
    Cancelled,
    /// The running turn never ended.
    Never(Outcome),
}

/// Passes over the rest of the turn the live session was running when the runtime queued this
/// turn's prompt behind it (one a native call started on the same live session, or one given
/// up here that the runtime had not ended yet): the runtime interrupts that turn, and its last
/// events, up to its `message.complete`, come before this turn's own `message.start`. The real
/// Hermes also answers `queued` in the moment after a turn's `message.complete` (it is not done
/// with the turn yet): then this turn's `message.start` comes first, and nothing is passed over.
/// A cancel meanwhile ends the turn: both runtimes drop a queued prompt when they interrupt, and
/// nothing of this turn would ever come. A connection that closes meanwhile is left for
/// [`follow`] to find.
async fn pass_running_turn(
    state: &AppState,
    turn: &Turn,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<NativeEvent>,
) -> Passed {
    let deadline = tokio::time::Instant::now() + IDLE_LIMIT;
    loop {
        if cancel_requested(state, turn) {
            return Passed::Cancelled;
        }
        if tokio::time::Instant::now() >= deadline {
            return Passed::Never(Outcome::failed(format!(
                "the turn the live session was running did not end within {} minutes; this \
                 one, queued behind it, is given up",
                IDLE_LIMIT.as_secs() / 60
            )));
        }
        match tokio::time::timeout(CANCEL_LOOK, events.recv()).await {
            Ok(Some(start @ NativeEvent::MessageStart {})) => return Passed::ToStart(Some(start)),
            Ok(Some(NativeEvent::MessageComplete(_))) if cancel_requested(state, turn) => {
                return Passed::Cancelled;
            }
            Ok(Some(NativeEvent::MessageComplete(_))) | Ok(None) => return Passed::ToStart(None),
            // Another event of that turn, or none yet: a cancel is looked for again.
            Ok(Some(_)) | Err(_) => {}
        }
    }
}

/// How often a turn waiting behind another looks for a cancel.
const CANCEL_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// How waiting for a live session another turn here holds ended ([`wait_for_live_session`]).
enum Waited<'a> {
    /// The live session's slot, taken.
    Free(TurnOn<'a>),
    /// A cancel came meanwhile: the turn never reached the runtime.
    Cancelled,
    /// Other turns held it past the turn's bound.
    TooLong(Outcome),
}

/// Waits for the live session's slot, which another turn driven here holds: a turn of another
/// control-plane session continuing the same stored session, to which the runtime gave the
/// same live session (see `LiveTurns`). The turn stays `queued` meanwhile, and a cancel ends it
/// at once. `until`: when the turn stops waiting, failed.
async fn wait_for_live_session<'a>(
    state: &AppState,
    link: &'a Link,
    sid: &LiveSessionId,
    turn: &Turn,
    until: Instant,
) -> Waited<'a> {
    tracing::info!(
        live_session = %sid,
        "another session's turn runs on this session's live session (both continue one \
         stored session); the turn waits for it to end"
    );
    let taken = link.turns.take(sid);
    tokio::pin!(taken);
    loop {
        if cancel_requested(state, turn) {
            return Waited::Cancelled;
        }
        let Some(left) = until.checked_duration_since(Instant::now()) else {
            return Waited::TooLong(Outcome::failed(format!(
                "turns of other sessions continuing the same stored session kept its live \
                 session for over {} minutes; this one, waiting for them, is given up",
                IDLE_LIMIT.as_secs() / 60
            )));
        };
        if let Ok(held) = tokio::time::timeout(CANCEL_LOOK.min(left), &mut taken).await {
            return Waited::Free(held);
        }
    }
}

/// A live session's events followed for a turn, which holds its slot: both let go when
/// dropped, however the turn ends (the events first, so the next turn finds nobody following).
struct Following<'a> {
    link: &'a Link,
    turn_on: TurnOn<'a>,
}

impl<'a> Following<'a> {
    fn new(link: &'a Link, turn_on: TurnOn<'a>) -> Self {
        Self { link, turn_on }
    }
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        self.link.gateway.unsubscribe(&self.turn_on.sid);
    }
}

/// Why the connection to the runtime ended: the runtime's exit when it exited.
async fn lost_connection(state: &AppState, instance: &InstanceRecord) -> String {
    exit_shown(state, instance).await;
    crate::app::reconciler::check(state).await;
    match state.store.instance(&instance.instance.id).await {
        Ok(Some(record)) if record.instance.state == edith_types::InstanceState::Lost => record
            .instance
            .state_reason
            .unwrap_or_else(|| "the runtime exited".to_owned()),
        _ => "the connection to the runtime was lost during the turn".to_owned(),
    }
}

/// How long a turn whose connection closed waits for its runtime's exit to be seen.
const EXIT_SHOWN_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Once the connection closed, waits (at most [`EXIT_SHOWN_WITHIN`]) while a runtime this
/// control plane started still runs as far as its provider sees. A runtime killed closes its
/// sockets a moment before its exit can be seen: the real Hermes, a large process, took up to
/// tens of milliseconds to end, and a look made at once found it running and the turn said only
/// that its connection was lost (`providers::the_real_hermes_killed_during_a_turn_ends_it_saying_the_runtime_exited`).
/// A runtime that runs on and dropped the connection costs the turn that wait.
async fn exit_shown(state: &AppState, instance: &InstanceRecord) {
    let Ok(provider) = state.providers.get(instance.instance.provider) else {
        return;
    };
    let deadline = Instant::now() + EXIT_SHOWN_WITHIN;
    while let RunningNow::Running { since: Some(_), .. } = provider.running_now(instance).await {
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Moves the turn to `to`, before the event that explains it is logged, so a client that
/// reacts to the event finds the state already changed.
async fn set_state(state: &AppState, turn: &mut Turn, to: TurnState) -> AppResult<()> {
    turn.state = to;
    turn.updated_at = Timestamp::now();
    state.store.update_turn(turn).await?;
    Ok(())
}

/// What one runtime event means for the turn.
struct Step {
    /// The state the turn is in once the event is logged.
    state: Option<TurnState>,
    /// What goes to the turn's log.
    log: Option<TurnEventKind>,
    /// How the turn ended, when the event ends it.
    outcome: Option<Outcome>,
}

/// Reads one runtime event as a step of `turn`.
fn translate(turn: &Turn, event: NativeEvent) -> Step {
    let state = if event.waits_for_user() {
        Some(TurnState::RequiresAction)
    } else if turn.state == TurnState::RequiresAction {
        // Any event after the wait (the driver does not follow `session.info`).
        Some(TurnState::Running)
    } else {
        None
    };
    let logged = |kind| Step {
        state,
        log: Some(kind),
        outcome: None,
    };
    let kind = match event {
        NativeEvent::ApprovalRequest(request) => TurnEventKind::ApprovalRequested {
            command: request.command,
            description: request.description,
            pattern_key: request.pattern_key,
            choices: request.choices,
        },
        NativeEvent::ClarifyRequest(request) => TurnEventKind::ClarifyRequested {
            request_id: request.request_id,
            question: request.question,
            choices: request.choices.unwrap_or_default(),
        },
        NativeEvent::MessageStart {} => TurnEventKind::MessageStarted,
        NativeEvent::MessageDelta(delta) => TurnEventKind::MessageDelta { text: delta.text },
        NativeEvent::ToolStart(tool) => TurnEventKind::ToolStarted {
            tool_call_id: tool.tool_id,
            name: tool_name(&tool.name),
        },
        NativeEvent::ToolComplete(tool) => TurnEventKind::ToolCompleted {
            tool_call_id: tool.tool_id,
            name: tool_name(&tool.name),
            args: match tool.args {
                Value::Null => json!({}),
                args => args,
            },
            result: tool_result(tool.result),
        },
        NativeEvent::Error(error) => TurnEventKind::Error {
            message: error.message,
        },
        NativeEvent::MessageComplete(complete) => {
            let usage = Usage {
                input_tokens: complete.usage.input,
                output_tokens: complete.usage.output,
                calls: complete.usage.calls,
            };
            let completed = TurnEventKind::MessageCompleted {
                text: complete.text.clone(),
                usage: Some(usage.clone()),
            };
            let outcome = match complete.status {
                CompletionStatus::Interrupted => Outcome {
                    state: TurnState::Interrupted,
                    output: Some(complete.text),
                    error: None,
                    usage: Some(usage),
                    last_events: Vec::new(),
                    ended_by_runtime: None,
                },
                // The completion's text says what failed (Hermes sends no `error` event).
                CompletionStatus::Error if !complete.text.trim().is_empty() => Outcome {
                    usage: Some(usage),
                    ..Outcome::failed(complete.text)
                },
                CompletionStatus::Error => Outcome {
                    usage: Some(usage),
                    ..Outcome::failed("the runtime reported an error without saying which")
                },
                CompletionStatus::Unknown => Outcome {
                    usage: Some(usage),
                    ..Outcome::failed("the runtime ended the turn with a status it did not explain")
                },
                CompletionStatus::Complete => Outcome {
                    state: TurnState::Completed,
                    output: Some(complete.text),
                    error: None,
                    usage: Some(usage),
                    last_events: Vec::new(),
                    ended_by_runtime: None,
                },
            };
            return Step {
                outcome: Some(outcome),
                ..logged(completed)
            };
        }
        // A completion whose payload could not be read still ends the turn.
        other if other.ends_turn() => {
            tracing::warn!(turn = %turn.id, "unreadable turn completion");
            return Step {
                state,
                log: None,
                outcome: Some(Outcome::failed(
                    "the runtime ended the turn with a completion that could not be read",
                )),
            };
        }
        // session.info, status.update, thinking…: not part of the log
        other => {
            tracing::debug!(turn = %turn.id, kind = %other.kind(), "runtime event not logged");
            return Step {
                state,
                log: None,
                outcome: None,
            };
        }
    };
    logged(kind)
}

/// Callback tools reach the runtime as `mcp__edith__<name>`; the turn log uses `<name>`.
fn tool_name(native: &str) -> String {
    native
        .strip_prefix(&format!("mcp__{MCP_SERVER_NAME}__"))
        .unwrap_or(native)
        .to_owned()
}

/// A tool's result as the turn log shows it. Runtimes report an MCP tool's result as
/// `{"result": "<text>"}` (Hermes's shape); the text is given back as the JSON value it encodes
/// when it is JSON. Other results (built-in tools, errors) pass through as they are.
fn tool_result(result: Value) -> Value {
    let decode = |text: &str| serde_json::from_str(text).unwrap_or_else(|_| json!(text));
    match result {
        Value::Object(map) if map.len() == 1 && map.contains_key("result") => {
            match &map["result"] {
                Value::String(text) => decode(text),
                other => other.clone(),
            }
        }
        Value::String(text) => decode(&text),
        other => other,
    }
}

/// A turn whose runtime sends nothing for this long is given up. Longer than anything a runtime
/// waits on by itself (Hermes: 300 s for an approval or a question, 120 s for a tool call).
const IDLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// How long a turn waits for its runtime to list the profile's tools after they changed.
const RELIST_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How sessions the control plane opens are marked in the runtime's store.
const SOURCE: &str = "edith";

/// The live session serving `session` on this connection, opened when there is none.
pub async fn open_live_session(
    state: &AppState,
    link: &Arc<Link>,
    session: &mut Session,
    profile: &Profile,
) -> AppResult<LiveSessionId> {
    let limit = link.gateway.request_timeout();
    match link.live.used(&session.id) {
        Live::Open(sid) => return Ok(sid),
        // Closed for being idle just now: once it is, another is opened.
        Live::Closing(gate) => link.live.wait_closed(gate, limit).await,
        Live::None => {}
    }
    let sid = open_on_runtime(state, link, session, profile).await?;
    match link.live.insert(session.id.clone(), sid.clone()) {
        Ok(()) => Ok(sid),
        // The runtime gave back a live session being closed for going unused (a native call
        // opened it, or another session continuing the same stored session held it): once it
        // is, another is opened (the close would cut this turn short).
        Err(gate) => {
            link.live.wait_closed(gate, limit).await;
            let sid = open_on_runtime(state, link, session, profile).await?;
            let taken = link.live.insert(session.id.clone(), sid.clone());
            taken.map_err(|_| {
                AppError::new(
                    ErrorCode::RuntimeUnavailable,
                    "the runtime gave back a live session being closed, twice",
                )
            })?;
            Ok(sid)
        }
    }
}

/// Opens a live session on the runtime for `session`: its stored session resumed, or a new one
/// (whose stored id the session keeps from then on).
async fn open_on_runtime(
    state: &AppState,
    link: &Arc<Link>,
    session: &mut Session,
    profile: &Profile,
) -> AppResult<LiveSessionId> {
    let sid = match &session.native_session_id {
        Some(native) => {
            let params = SessionResumeParams {
                session_id: Some(native.as_str().to_owned()),
                profile: Some(profile.native_name.clone()),
                source: Some(SOURCE.to_owned()),
                ..Default::default()
            };
            let resumed = link
                .gateway
                .request::<SessionResume>(&params)
                .await
                .map_err(|e| match e.code() {
                    Some(codes::SESSION_NOT_FOUND) => AppError::new(
                        ErrorCode::NotFound,
                        format!("native session `{native}` does not exist on the runtime"),
                    ),
                    _ => e.into(),
                })?;
            resumed.session_id
        }
        None => {
            let params = SessionCreateParams {
                profile: Some(profile.native_name.clone()),
                source: Some(SOURCE.to_owned()),
                title: session.title.clone(),
                ..Default::default()
            };
            let created = link.gateway.request::<SessionCreate>(&params).await?;
            let native = NativeSessionId::new(created.stored_session_id.into_string());
            // The native id alone: a title the caller set meanwhile stays.
            let change = SessionChange::NativeSessionId(native.clone());
            state.store.change_session(&session.id, change).await?;
            session.native_session_id = Some(native);
            created.session_id
        }
    };
    Ok(sid)
}

/// Turns nobody drives any more end as interrupted: their driver's replica stopped (or is
/// `restarted`, this replica's own name from its earlier run), and nothing can resume them.
/// At a restart, too, a finished turn whose log lacks its end gets it, so its readers stop
/// waiting.
pub async fn recover(state: &AppState, restarted: Option<&str>) -> AppResult<()> {
    if restarted.is_some() {
        for turn in state.store.finished_turns_without_their_end().await? {
            let end = TurnEventKind::TurnFinished {
                state: turn.state,
                output: turn.output.clone(),
                error: turn.error.clone(),
            };
            state.store.append_missing_end(&turn.id, &end).await?;
            state.metrics.turn_event_appended();
        }
    }
    let now = super::super::replicas::now_ms();
    for turn in state
        .store
        .turns_left_by_their_driver(now, restarted)
        .await?
    {
        // This replica's own, still driven: it was taken for gone (it could not renew for a
        // lease) and is back; its driver ends the turn.
        if state.turn_gates.driven_here(&turn.id) {
            continue;
        }
        let outcome = Outcome {
            state: TurnState::Interrupted,
            ..Outcome::failed("the control plane stopped during the turn")
        };
        finish(state, turn, outcome, None).await?;
    }
    Ok(())
}
