//! When a shared connection or tunnel may be started again after it failed
//! or died, sans-IO: time comes in as `now`. Hysteria 2's connection slot
//! and WireGuard's tunnel slot both follow it: after consecutive failures
//! the wait doubles from 2 s to at most 30 s, and a connection that dies
//! within 10 s of coming up counts as a failure.

use std::time::{Duration, Instant};

pub const RECONNECT_BACKOFF_BASE: Duration = Duration::from_secs(1);
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A connection lost sooner than this after it came up counts as a failed
/// attempt, so a server that authenticates and closes at once still makes
/// the backoff grow.
pub const MIN_HEALTHY_LIFETIME: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    /// The wait after `failures` consecutive failures: the base doubled
    /// per failure, capped: 2, 4, 8, 16, then 30 s.
    pub fn delay(failures: u32) -> Duration {
        RECONNECT_BACKOFF_BASE
            .checked_mul(1u32.checked_shl(failures).unwrap_or(u32::MAX))
            .map_or(RECONNECT_BACKOFF_MAX, |d| d.min(RECONNECT_BACKOFF_MAX))
    }

    /// An attempt failed at `now`.
    pub fn failed(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(now + Self::delay(self.failures));
    }

    /// A connection that came up at `since` was found dead at `now`.
    pub fn lost(&mut self, now: Instant, since: Instant) {
        if now.saturating_duration_since(since) < MIN_HEALTHY_LIFETIME {
            self.failed(now);
        } else {
            self.failures = 0;
            self.retry_at = None;
        }
    }

    /// Whether a dial at `now` must wait.
    pub fn waiting(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|at| now < at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_doubles_to_thirty_seconds() {
        let secs: Vec<u64> = (1..=7).map(|n| Backoff::delay(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(Backoff::delay(200), RECONNECT_BACKOFF_MAX);
    }

    #[test]
    fn a_dial_waits_out_the_backoff() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert!(!b.waiting(t0));
        b.failed(t0);
        assert!(b.waiting(t0 + Duration::from_millis(1999)));
        assert!(!b.waiting(t0 + Duration::from_secs(2)));
        b.failed(t0 + Duration::from_secs(2));
        assert!(b.waiting(t0 + Duration::from_secs(5)));
        assert!(!b.waiting(t0 + Duration::from_secs(6)));
    }

    #[test]
    fn a_short_lived_connection_counts_as_a_failure_and_a_long_one_resets() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        b.failed(t0);
        let up = t0 + Duration::from_secs(2);
        b.lost(up + Duration::from_secs(3), up);
        assert!(b.waiting(up + Duration::from_secs(3) + Duration::from_secs(3)));
        let up = t0 + Duration::from_secs(20);
        b.lost(up + MIN_HEALTHY_LIFETIME, up);
        assert!(!b.waiting(up + MIN_HEALTHY_LIFETIME));
        b.failed(up + MIN_HEALTHY_LIFETIME);
        assert!(
            !b.waiting(up + MIN_HEALTHY_LIFETIME + Duration::from_secs(2)),
            "count restarted at one"
        );
    }
}
