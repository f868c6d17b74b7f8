//! How long to wait before attempting a failed model call again, as Hermes waits.

use std::time::Duration;

/// The first wait; each later one doubles, up to [`MAX_WAIT`].
const BASE_WAIT: Duration = Duration::from_secs(2);
const MAX_WAIT: Duration = Duration::from_secs(60);

/// The wait after failed attempt `attempt` (1-based): what the endpoint asked for
/// (`Retry-After`), else 2 s doubling per attempt up to 60 s, plus up to half again at random
/// (`jitter` in [0, 1)) so that many clients do not come back at the same moment.
pub fn backoff(attempt: u64, asked: Option<Duration>, jitter: f64) -> Duration {
    if let Some(asked) = asked {
        return asked;
    }
    let doublings = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(16);
    let wait = BASE_WAIT.saturating_mul(1 << doublings).min(MAX_WAIT);
    wait + wait.mul_f64(0.5 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_a_minute_with_up_to_half_again() {
        let secs = |attempt, jitter| backoff(attempt, None, jitter).as_secs_f64();
        assert_eq!(
            [
                secs(1, 0.0),
                secs(2, 0.0),
                secs(3, 0.0),
                secs(6, 0.0),
                secs(60, 0.0)
            ],
            [2.0, 4.0, 8.0, 60.0, 60.0]
        );
        assert_eq!(
            [secs(1, 0.5), secs(2, 0.999_999)].map(f64::round),
            [3.0, 6.0]
        );
    }

    #[test]
    fn what_the_endpoint_asks_for_wins() {
        let asked = Duration::from_millis(1500);
        assert_eq!(backoff(1, Some(asked), 0.9), asked);
    }
}
