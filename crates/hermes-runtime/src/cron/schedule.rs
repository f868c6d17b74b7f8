//! Schedules as Hermes writes them: `every 30m` (recurring), `30m` (once, from now), a
//! five-field cron expression, or a date and time (once). Times are UTC.

use std::str::FromStr;

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use hermes_native::desktop::replies::CronSchedule;

/// The longest interval or delay: ten years. (Hermes also takes `every 0m`, which would run a
/// job at every tick; this runtime refuses it.)
const MAX_MINUTES: i64 = 10 * 366 * 24 * 60;

/// A one-shot time may lie this far in the past (a clock skew), no further.
const PAST_GRACE_SECS: i64 = 120;

/// ISO 8601 with microseconds and offset, as Hermes writes its times.
pub fn iso(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, false)
}

pub fn parse_iso(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn invalid(text: &str) -> String {
    format!(
        "Invalid schedule '{text}'. Use:\n  - Duration: '30m', '2h', '1d' (one-shot)\n  - \
         Interval: 'every 30m', 'every 2h' (recurring)\n  - Cron: '0 9 * * *' (cron expression)\n  \
         - Timestamp: '2026-02-03T14:00:00' (one-shot at time)"
    )
}

/// Minutes in `<n><unit>` / `<n> <unit>` (m, min, minute(s), h, hr(s), hour(s), d, day(s)).
fn minutes_of(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (count, unit) = text.split_at(digits);
    let count: i64 = count.parse().ok()?;
    let per = match unit.trim() {
        "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 1440,
        _ => return None,
    };
    count.checked_mul(per)
}

/// A date and time (`2030-01-02`, `2030-01-02T14:00`, with seconds, `Z` or an offset).
fn timestamp_of(text: &str) -> Option<DateTime<Utc>> {
    if let Some(time) = parse_iso(text) {
        return Some(time);
    }
    let naive = text.trim_end_matches('Z');
    [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(naive, format).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(naive, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .map(|t| t.and_utc())
}

fn is_cron_field(field: &str) -> bool {
    !field.is_empty()
        && field
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '*' | '-' | ',' | '/'))
}

/// Reads a schedule; the error says what is wrong, as Hermes says it.
pub fn parse(text: &str, now: DateTime<Utc>) -> Result<CronSchedule, String> {
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    if let Some(every) = lower.strip_prefix("every ") {
        let minutes = minutes_of(every)
            .filter(|m| (1..=MAX_MINUTES).contains(m))
            .ok_or_else(|| invalid(trimmed))?;
        return Ok(CronSchedule {
            kind: "interval".to_owned(),
            minutes: Some(minutes),
            expr: None,
            run_at: None,
            display: format!("every {minutes}m"),
        });
    }
    if let Some(at) = minutes_of(&lower)
        .filter(|m| *m <= MAX_MINUTES)
        .and_then(|m| now.checked_add_signed(Duration::minutes(m)))
    {
        return Ok(once(at, format!("once in {trimmed}")));
    }
    let fields: Vec<&str> = trimmed.split_whitespace().collect();
    if fields.len() == 5 && fields.iter().all(|f| is_cron_field(f)) {
        croner::Cron::from_str(trimmed)
            .map_err(|e| format!("Invalid cron expression '{trimmed}': {e}"))?;
        return Ok(CronSchedule {
            kind: "cron".to_owned(),
            minutes: None,
            expr: Some(trimmed.to_owned()),
            run_at: None,
            display: trimmed.to_owned(),
        });
    }
    if let Some(at) = timestamp_of(trimmed) {
        if (now - at).num_seconds() > PAST_GRACE_SECS {
            return Err(format!(
                "Requested one-shot time {} is more than {PAST_GRACE_SECS}s in the past and \
                 cannot be scheduled.",
                at.to_rfc3339_opts(SecondsFormat::Secs, false)
            ));
        }
        return Ok(once(at, format!("once at {}", at.format("%Y-%m-%d %H:%M"))));
    }
    Err(invalid(trimmed))
}

fn once(at: DateTime<Utc>, display: String) -> CronSchedule {
    CronSchedule {
        kind: "once".to_owned(),
        minutes: None,
        expr: None,
        run_at: Some(iso(at)),
        display,
    }
}

/// When a job on `schedule` runs next after `after` (a once-job: its time, until it has run).
pub fn next_run(
    schedule: &CronSchedule,
    after: DateTime<Utc>,
    runs_done: i64,
) -> Option<DateTime<Utc>> {
    match schedule.kind.as_str() {
        "interval" => after.checked_add_signed(Duration::minutes(
            schedule.minutes.unwrap_or(1).clamp(1, MAX_MINUTES),
        )),
        "cron" => croner::Cron::from_str(schedule.expr.as_deref()?)
            .ok()?
            .find_next_occurrence(&after, false)
            .ok(),
        "once" if runs_done == 0 => schedule.run_at.as_deref().and_then(parse_iso),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        parse_iso(text).unwrap()
    }

    #[test]
    fn schedules_read_as_hermes_reads_them() {
        let now = at("2026-12-01T03:33:24+00:00");
        let every = parse("every 2h", now).unwrap();
        assert_eq!(
            (every.kind.as_str(), every.minutes),
            ("interval", Some(120))
        );
        assert_eq!(every.display, "every 120m");
        assert_eq!(parse("every 90 mins", now).unwrap().minutes, Some(90));
        let soon = parse("30m", now).unwrap();
        assert_eq!(soon.kind, "once");
        assert_eq!(
            soon.run_at.as_deref(),
            Some("2026-12-01T04:03:24.000000+00:00")
        );
        assert_eq!(soon.display, "once in 30m");
        let daily = parse("0 9 * * *", now).unwrap();
        assert_eq!(daily.expr.as_deref(), Some("0 9 * * *"));
        assert_eq!(
            next_run(&daily, now, 0).map(iso).as_deref(),
            Some("2026-12-01T09:00:00.000000+00:00")
        );
        let later = parse("2030-01-02T14:00", now).unwrap();
        assert_eq!(later.display, "once at 2030-01-02 14:00");
        assert_eq!(
            later.run_at.as_deref(),
            Some("2030-01-02T14:00:00.000000+00:00")
        );
        assert_eq!(next_run(&later, now, 1), None, "a once-job runs once");

        for wrong in [
            "tomorrow",
            "",
            "@daily",
            "5 4 * * sun",
            "every fortnight",
            "every 0m",
            "every 99999999999999999m",
            "99999999999999d",
        ] {
            let error = parse(wrong, now).unwrap_err();
            assert!(
                error.starts_with(&format!("Invalid schedule '{wrong}'")),
                "{error}"
            );
        }
        assert!(
            parse("61 * * * *", now)
                .unwrap_err()
                .starts_with("Invalid cron expression")
        );
        assert!(
            parse("2020-01-01", now)
                .unwrap_err()
                .contains("in the past")
        );
    }
}
