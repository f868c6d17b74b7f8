//! A session's title, asked of the model after the session's first exchanges, as Hermes asks:
//! one short call that neither the turn nor the client waits for; the title is kept only when
//! the session still has none, and announced as `session.title`.

use std::sync::Arc;
use std::time::Duration;

use hermes_native::NativeEvent;
use hermes_native::config::HermesConfig;
use hermes_native::events::SessionTitlePayload;

use crate::model::{self, AuxTask, ChatMessage, OneShot, Role};
use crate::runtime::Runtime;
use crate::session::LiveSession;

/// Titles are asked for on the first and second exchange only (Hermes's rule).
const TITLED_EXCHANGES: usize = 2;
/// How much of each side of the exchange the model is shown.
const SHOWN_CHARS: usize = 500;
/// A title longer than this is cut, with `...`.
const MAX_TITLE_CHARS: usize = 80;
/// How long the call may take when `auxiliary.title_generation.timeout` does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// After a turn that completed: asks for a title in the background when the session is one of
/// its first exchanges in, has none yet, and the config does not switch titles off.
pub fn after_turn(runtime: &Arc<Runtime>, session: &Arc<LiveSession>, asked: &str, answer: &str) {
    if asked.trim().is_empty() || answer.trim().is_empty() {
        return;
    }
    let (untitled, exchanges) = {
        let state = session.state.lock().expect("not poisoned");
        let exchanges = state
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count();
        (state.title.is_none() && state.persisted, exchanges)
    };
    if !untitled || exchanges > TITLED_EXCHANGES {
        return;
    }
    let exchange = format!(
        "User: {}\n\nAssistant: {}",
        first_chars(asked, SHOWN_CHARS),
        first_chars(answer, SHOWN_CHARS)
    );
    let (runtime_for_task, session) = (runtime.clone(), session.clone());
    runtime.spawn_background(async move {
        if let Err(problem) = give_title(&runtime_for_task, &session, exchange).await {
            // As in Hermes, a title that could not be made is not the client's concern.
            tracing::debug!(session = %session.stored_id, %problem, "no title");
        }
    });
}

async fn give_title(
    runtime: &Runtime,
    session: &LiveSession,
    exchange: String,
) -> Result<(), String> {
    let config = HermesConfig::load(&session.home)
        .await
        .map_err(|e| e.to_string())?;
    let setting = |key: &str| config.value_at(&format!("auxiliary.title_generation.{key}"));
    if setting("enabled").and_then(|v| v.as_bool()) == Some(false) {
        return Ok(());
    }
    let timeout = setting("timeout")
        .and_then(|v| v.as_f64())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs_f64(s.min(600.0)));
    let language = setting("language").and_then(|v| v.as_str().map(str::to_owned));
    let mut config = config;
    if let Some(switched) = session.settings().model {
        config.model.default = Some(switched);
    }
    let model = model::from_config(&config, &runtime.http).map_err(|e| e.to_string())?;
    let messages = [
        ChatMessage::plain(Role::System, instructions(language.as_deref())),
        ChatMessage::user(exchange),
    ];
    // Hermes asks for at most 500 tokens, but its client leaves the limit out of the request
    // to a custom endpoint; so do we.
    let settings = OneShot {
        task: AuxTask::Title,
        temperature: Some(0.3),
    };
    let answer = tokio::time::timeout(timeout, model.complete(&messages, settings))
        .await
        .map_err(|_| "the model took too long".to_owned())?
        .map_err(|e| e.to_string())?;
    let Some(title) = clean(&answer.text) else {
        return Ok(());
    };
    let db = runtime.db(&session.home).await.map_err(|e| e.to_string())?;
    let failed = |e: sqlx::Error| e.to_string();
    // Another session has the title: this one gets the next of its lineage (`… #2`).
    let title = match db.title_taken(&title).await.map_err(failed)? {
        true => db.next_title_in_lineage(&title).await.map_err(failed)?,
        false => title,
    };
    // A title the user set meanwhile wins, in the database and in the session.
    if session.state.lock().expect("not poisoned").title.is_some()
        || !db
            .set_title_if_untitled(&session.stored_id, &title)
            .await
            .map_err(failed)?
    {
        return Ok(());
    }
    {
        let mut state = session.state.lock().expect("not poisoned");
        if state.title.is_some() {
            return Ok(());
        }
        state.title = Some(title.clone());
    }
    session.emit(NativeEvent::SessionTitle(SessionTitlePayload {
        session_id: session.stored_id.clone(),
        title,
    }));
    Ok(())
}

/// What the model is asked: a few words, in the user's language (or the configured one), the
/// title alone.
fn instructions(language: Option<&str>) -> String {
    let language = match language {
        Some(language) => format!("Write it in {language}."),
        None => "Write it in the language the user writes in.".to_owned(),
    };
    format!(
        "Give the conversation that begins with the exchange below a short title of three to \
         seven words that says what it is about. {language} Answer with the title alone: no \
         quotes, no prefix, no closing punctuation."
    )
}

/// The model's answer made a title: reasoning blocks dropped, quotes and a `Title:` prefix
/// taken off, control and zero-width characters removed, spaces collapsed, cut to 80
/// characters. Nothing left is no title.
pub fn clean(answer: &str) -> Option<String> {
    let mut text = model::without_reasoning(answer);
    text = text
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_owned();
    if text
        .get(..6)
        .is_some_and(|head| head.eq_ignore_ascii_case("title:"))
    {
        text = text[6..].trim().to_owned();
    }
    let visible: String = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .filter(|c| !matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}'))
        .collect();
    let mut title = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.chars().count() > MAX_TITLE_CHARS {
        title = format!("{}...", first_chars(&title, MAX_TITLE_CHARS - 3));
    }
    (!title.is_empty()).then_some(title)
}

fn first_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_titles_as_hermes_cleans_them() {
        assert_eq!(
            clean("  \"Planning a trip\"  ").as_deref(),
            Some("Planning a trip")
        );
        assert_eq!(
            clean("Title: Rust lifetimes").as_deref(),
            Some("Rust lifetimes")
        );
        assert_eq!(
            clean("<think>they ask about…</think>Bread\u{200b} baking\n\tbasics").as_deref(),
            Some("Bread baking basics")
        );
        assert_eq!(clean("<think>never closed"), None);
        assert_eq!(clean(" '' "), None);
        let long = "word ".repeat(40);
        let cut = clean(&long).unwrap();
        assert_eq!(cut.chars().count(), 80);
        assert!(cut.ends_with("..."), "{cut}");
    }

    #[test]
    fn the_model_is_told_which_language_to_use() {
        assert!(instructions(None).contains("the language the user writes in"));
        assert!(instructions(Some("French")).contains("Write it in French."));
    }
}
