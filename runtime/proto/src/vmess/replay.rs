//! The auth ids an inbound has accepted, so a recorded request replayed
//! within the time window is refused.
//!
//! Exact, not probabilistic: v2ray's filter (a cuckoo filter) refused a few
//! legitimate clients in every few thousand under load; this one never
//! refuses an id it has not seen. An id is kept while its timestamp is
//! inside the window: a request whose timestamp is `t` is accepted only
//! while the server's time is within `t ± WINDOW`, so once `now > t +
//! WINDOW` the id is refused as stale anyway and can be forgotten. Expired
//! ids are swept at most once every half window, so the cost of a sweep
//! spreads over the requests between.

use std::collections::HashMap;
use std::sync::Mutex;

/// How far a request's timestamp may be from the server's time, seconds.
pub const WINDOW: u64 = 120;

/// The most ids held at once (each about 32 bytes: some 32 MiB): an id is
/// only remembered once its request authenticated, so only clients with a
/// user's key can fill it, at more than 4,000 connections a second
/// sustained over the window.
const MAX_IDS: usize = 1 << 20;

/// Shared by every connection of one VMess inbound.
pub struct ReplayFilter {
    seen: Mutex<Seen>,
}

struct Seen {
    /// Each id with its request's timestamp.
    ids: HashMap<[u8; 16], u64>,
    /// When to sweep next, Unix seconds.
    next_sweep: u64,
}

/// Why an id was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rejected {
    Replayed,
    Full,
}

impl Default for ReplayFilter {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayFilter {
    pub fn new() -> Self {
        ReplayFilter {
            seen: Mutex::new(Seen {
                ids: HashMap::new(),
                next_sweep: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        // A panic elsewhere cannot leave the map half-changed: every
        // change is one call on it.
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `id` was accepted before.
    pub(super) fn seen(&self, id: &[u8; 16]) -> bool {
        self.lock().ids.contains_key(id)
    }

    /// Accepts `id`, of a request made at `time`, seen at `now` (Unix
    /// seconds), unless it was accepted before.
    pub(super) fn accept(&self, id: [u8; 16], time: u64, now: u64) -> Result<(), Rejected> {
        let mut seen = self.lock();
        if now >= seen.next_sweep {
            seen.ids.retain(|_, t| t.saturating_add(WINDOW) >= now);
            seen.next_sweep = now.saturating_add(WINDOW / 2);
        }
        if seen.ids.contains_key(&id) {
            return Err(Rejected::Replayed);
        }
        if seen.ids.len() >= MAX_IDS {
            return Err(Rejected::Full);
        }
        seen.ids.insert(id, time);
        Ok(())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> [u8; 16] {
        let mut id = [0; 16];
        id[..4].copy_from_slice(&n.to_be_bytes());
        id
    }

    #[test]
    fn an_id_is_accepted_once_and_distinct_ids_of_one_second_all_are() {
        let filter = ReplayFilter::new();
        for n in 0..50 {
            assert_eq!(filter.accept(id(n), 1000, 1000), Ok(()));
        }
        for n in 0..50 {
            assert!(filter.seen(&id(n)));
            assert_eq!(filter.accept(id(n), 1000, 1000), Err(Rejected::Replayed));
        }
    }

    #[test]
    fn of_connections_racing_with_one_id_exactly_one_is_accepted() {
        let filter = std::sync::Arc::new(ReplayFilter::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let filter = filter.clone();
                std::thread::spawn(move || {
                    let mine = (0..50).filter(|n| filter.accept(id(1000 * t + n), 5, 5).is_ok());
                    (mine.count(), filter.accept(id(999_999), 5, 5).is_ok())
                })
            })
            .collect();
        let results: Vec<(usize, bool)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(results.iter().all(|&(distinct, _)| distinct == 50));
        assert_eq!(results.iter().filter(|&&(_, won)| won).count(), 1);
    }

    #[test]
    fn an_id_is_kept_while_its_timestamp_can_be_accepted_and_then_forgotten() {
        let filter = ReplayFilter::new();
        // A client 120 s ahead: its request stays acceptable until the
        // server's clock reaches its timestamp plus 120 s.
        filter.accept(id(1), 1120, 1000).unwrap();
        for now in [1000, 1100, 1200, 1239, 1240] {
            filter.accept(id(1000 + now as u32), now, now).unwrap();
            assert_eq!(
                filter.accept(id(1), 1120, now),
                Err(Rejected::Replayed),
                "{now}"
            );
        }
        filter.accept(id(2), 2000, 2000).unwrap();
        assert!(!filter.seen(&id(1)), "swept once stale");
        assert_eq!(filter.len(), 1, "every stale id is swept");
    }
}
