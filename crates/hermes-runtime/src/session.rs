//! Live sessions: the in-memory side of a conversation on one gateway connection.
//!
//! A live session has an 8-hex id that exists only in this process; it points at a stored
//! session (`state.db` row) whose id looks like `20261129_075703_0525c1`. The two are never
//! interchangeable, as in Hermes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hermes_native::events::NativeUsage;
use hermes_native::{EventFrame, LiveSessionId, NativeEvent};
use tokio::sync::{Notify, mpsc};

use crate::model::ChatMessage;

/// Where a session's events go: the outgoing frames of one gateway connection.
#[derive(Clone, Debug)]
pub struct Transport {
    /// Identifies the connection, so a reaper can tell whether the session moved elsewhere.
    pub connection: u64,
    pub frames: mpsc::UnboundedSender<String>,
}

impl Transport {
    /// A transport that reaches nobody: a session's with no connection of its own.
    pub fn nowhere() -> Self {
        let (frames, _nowhere) = mpsc::unbounded_channel();
        Self {
            connection: 0,
            frames,
        }
    }
}

/// A turn in progress.
pub struct RunningTurn {
    /// Notified by `session.interrupt`, a busy prompt, and on shutdown.
    pub interrupt: Arc<Notify>,
    /// Closed when the turn (and any prompt queued behind it) has ended.
    pub done: tokio::sync::watch::Receiver<()>,
    /// A prompt that arrived while this turn ran; it runs next, on this transport.
    pub queued: Option<(String, Transport)>,
    /// The prompt this turn answers, and what it has streamed of its answer so far (what a
    /// client that attaches mid-turn is shown).
    pub prompt: String,
    pub streamed: String,
}

/// Token accounting of a live session, across its turns (as Hermes reports it).
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionUsage {
    pub input: u64,
    pub output: u64,
    pub calls: u64,
    /// The prompt tokens of the last model call: how full the context window is now.
    pub last_prompt: u64,
}

impl SessionUsage {
    /// The `usage` object of `message.complete`, `session.info` and the `session.usage`
    /// result. With the model's context window known and a call made, it says how full the
    /// window is (`context_used`, `context_max`, `context_percent`), as Hermes does; otherwise
    /// it leaves that unknown rather than guess.
    pub fn native(self, model: &str, context_window: Option<u64>) -> NativeUsage {
        let mut other = serde_json::Map::new();
        if let Some(max) = context_window.filter(|_| self.last_prompt > 0) {
            let percent = (self.last_prompt as f64 / max as f64 * 100.0)
                .round()
                .min(100.0);
            other.insert("context_used".to_owned(), self.last_prompt.into());
            other.insert("context_max".to_owned(), max.into());
            other.insert("context_percent".to_owned(), (percent as u64).into());
        }
        NativeUsage {
            model: model.to_owned(),
            input: self.input,
            output: self.output,
            prompt: self.input,
            completion: self.output,
            total: self.input + self.output,
            calls: self.calls,
            other,
        }
    }
}

impl SessionState {
    /// Binds the session to `transport` (its events go there from now on), active now; `false`,
    /// and nothing changed, for a session that was closed meanwhile (a lookup that found it
    /// before the close).
    pub fn bind(&mut self, transport: &Transport) -> bool {
        if self.closed {
            return false;
        }
        self.transport = transport.clone();
        self.last_active = crate::store::unix_now();
        true
    }
}

pub struct LiveSession {
    pub sid: LiveSessionId,
    pub stored_id: String,
    /// The Hermes home this session belongs to (root or `profiles/<name>`).
    pub home: PathBuf,
    pub profile: Option<String>,
    pub source: String,
    pub started_at: f64,
    pub model_name: String,
    /// The model's context window (`model.context_length`), if the config says.
    pub context_window: Option<u64>,
    pub state: Mutex<SessionState>,
    /// Held while the conversation is written to `state.db`, so that a compaction and a turn's
    /// messages are written one after the other, never interleaved.
    pub writes: tokio::sync::Mutex<()>,
}

pub struct SessionState {
    pub messages: Vec<ChatMessage>,
    /// The connection the session's events go to ([`SessionState::bind`]).
    pub transport: Transport,
    /// Closed: gone from the runtime's live sessions, whoever still holds it.
    pub closed: bool,
    pub running: Option<RunningTurn>,
    pub title: Option<String>,
    /// Whether the `state.db` row exists (it is written at the first prompt).
    pub persisted: bool,
    /// Whether what the session was started with (`model_config`, a chosen `cwd`) is stored:
    /// at its first turn, even when the row was made before (`session.title`).
    pub setup_noted: bool,
    pub close_on_disconnect: bool,
    pub usage: SessionUsage,
    /// Unix seconds of the last prompt or resume.
    pub last_active: f64,
    /// What the user steered the agent with, for the next tool batch's result.
    pub steer: Option<String>,
    pub settings: SessionSettings,
    /// How many times the conversation was compressed (`session.compress`), and the summary
    /// the last compression made (the next one updates it).
    pub compressions: u32,
    pub summary: Option<String>,
    /// The sudo password the user gave in this session (`sudo.respond`), until sudo refuses it.
    pub sudo_password: Option<String>,
    /// Credentials the session's commands may see: those a skill it read declared.
    pub passthrough: std::collections::BTreeSet<String>,
    /// The info last announced (`session.info` with the agent's tools), less what a turn
    /// changes, which is set over it after each turn (`session_info::after_turn`). Until there
    /// is one, replies carry only what is known without an agent, as in Hermes. Kept as its
    /// JSON text: a tree of it held several KiB for every idle session, its text a fraction of
    /// that, and the text is sent on as it is.
    pub info: Option<Box<str>>,
}

/// What a detached session is opened with.
pub struct Detached {
    pub stored_id: String,
    pub home: PathBuf,
    pub profile: Option<String>,
    pub source: String,
    pub title: Option<String>,
    /// The model to use instead of the config's.
    pub model_name: Option<String>,
}

/// What a client set for one live session (`session.cwd.set`, `config.set` with a session).
#[derive(Debug, Clone, Default)]
pub struct SessionSettings {
    /// Where the agent's commands run.
    pub cwd: PathBuf,
    /// The client chose `cwd` (`session.create`, `session.cwd.set`): as in Hermes, only a
    /// chosen directory is stored with the session.
    pub cwd_chosen: bool,
    /// Dangerous commands run without asking (`/yolo`).
    pub yolo: bool,
    /// The model this session was switched to (`config.set model`), instead of the config's.
    pub model: Option<String>,
    /// The switch is for the next turn only (`--once`).
    pub model_once: bool,
    /// The reasoning effort asked of the model for this session (`low`, `none`, …), instead
    /// of the config's.
    pub reasoning: Option<String>,
}

impl SessionSettings {
    /// A new session's: it works in the config's `terminal.cwd` when that is a directory,
    /// else where the runtime was started.
    pub fn new(config: &hermes_native::config::HermesConfig) -> Self {
        let configured = config
            .value_at("terminal.cwd")
            .and_then(|v| v.as_str().map(PathBuf::from))
            .filter(|dir| dir.is_dir());
        Self {
            cwd: configured
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_else(|| PathBuf::from("/")),
            ..Self::default()
        }
    }
}

impl LiveSession {
    /// The session's usage so far, as the protocol reports it.
    pub fn usage_now(&self) -> NativeUsage {
        let usage = self.state.lock().expect("not poisoned").usage;
        usage.native(&self.model(), self.context_window)
    }

    /// The model the session's turns use now.
    pub fn model(&self) -> String {
        let state = self.state.lock().expect("not poisoned");
        state
            .settings
            .model
            .clone()
            .unwrap_or_else(|| self.model_name.clone())
    }

    /// Whether the session's agent was announced (`session.info` with its tools).
    pub fn announced(&self) -> bool {
        self.state.lock().expect("not poisoned").info.is_some()
    }

    /// What a client set for this session, as it is now.
    pub fn settings(&self) -> SessionSettings {
        self.state.lock().expect("not poisoned").settings.clone()
    }

    /// Keeps a piece of the running turn's answer, as it is streamed.
    pub fn note_streamed(&self, piece: &str) {
        let mut state = self.state.lock().expect("not poisoned");
        if let Some(running) = state.running.as_mut() {
            running.streamed.push_str(piece);
        }
    }

    /// A session no client watches (a scheduled run, a background prompt): its events go
    /// nowhere, and it is not among the runtime's live sessions.
    pub fn detached(opening: Detached, config: &hermes_native::config::HermesConfig) -> Arc<Self> {
        let Detached {
            stored_id,
            home,
            profile,
            source,
            title,
            model_name,
        } = opening;
        let now = crate::store::unix_now();
        Arc::new(Self {
            sid: new_live_id(),
            stored_id,
            home,
            profile,
            source,
            started_at: now,
            model_name: model_name.unwrap_or_else(|| config.model_name()),
            context_window: config.context_length(),
            state: Mutex::new(SessionState {
                messages: Vec::new(),
                transport: Transport::nowhere(),
                closed: false,
                running: None,
                title,
                persisted: false,
                setup_noted: false,
                close_on_disconnect: true,
                usage: SessionUsage::default(),
                last_active: now,
                steer: None,
                settings: SessionSettings::new(config),
                compressions: 0,
                summary: None,
                sudo_password: None,
                passthrough: Default::default(),
                info: None,
            }),
            writes: Default::default(),
        })
    }

    /// A `status.update` of `kind` (`lifecycle`, `warn`, `compressing`, …) for the client.
    pub fn status(&self, kind: &str, text: String) {
        self.emit(NativeEvent::StatusUpdate(
            hermes_native::events::StatusUpdate {
                kind: kind.to_owned(),
                text,
            },
        ));
    }

    /// Sends an event to whichever connection the session is bound to now.
    pub fn emit(&self, event: NativeEvent) {
        self.send(EventFrame::new(Some(self.sid.clone()), event).to_frame());
    }

    /// Sends the event `kind` whose payload is JSON text written already, like [`Self::emit`].
    pub fn emit_payload(&self, kind: &str, payload: &serde_json::value::RawValue) {
        self.send(EventFrame::frame_with_payload(
            Some(&self.sid),
            kind,
            payload,
        ));
    }

    fn send(&self, frame: String) {
        let transport = self.state.lock().expect("not poisoned").transport.clone();
        let _ = transport.frames.send(frame);
    }
}

/// A new live id: 8 lowercase hex digits.
pub fn new_live_id() -> LiveSessionId {
    LiveSessionId::new(uuid::Uuid::new_v4().simple().to_string()[..8].to_owned())
}

/// A new stored id in Hermes's shape: `YYYYMMDD_HHMMSS_<6 hex>` (UTC).
pub fn new_stored_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, secs) = (now / 86_400, now % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    format!(
        "{y:04}{m:02}{d:02}_{:02}{:02}{:02}_{suffix}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_hermes_shapes() {
        let live = new_live_id();
        assert_eq!(live.as_str().len(), 8);
        assert!(live.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        let stored = new_stored_id();
        let parts: Vec<_> = stored.split('_').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 6, 6],
            "{stored}"
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
