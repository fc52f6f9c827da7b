//! The salts one Shadowsocks 2022 inbound's TCP streams have used, so a
//! recorded stream replayed to it is refused.
//!
//! A request's timestamp may be up to 30 s either side of our clock, so a
//! recording stays fresh for 60 s after we first saw it: a salt must be
//! remembered for at least that long, however many streams come in
//! between. Salts are kept with the second they were first seen, and
//! evicted by age, never one 60 s old or younger: when the filter holds
//! [`MAX_SALTS`], the ones older than that are swept out, and if every
//! salt held is younger the filter refuses new streams ([`Verdict::Full`])
//! rather than forget one. A flood of authenticated streams can then keep
//! new clients out until its salts age, but never get a replay accepted.
//!
//! Only salts of authenticated streams are inserted (the core checks once
//! the fixed header opens), so a prober without a key cannot fill it; the
//! server's own salts go in too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use super::{unix_secs, MAX_KEY_LEN, TIMESTAMP_WINDOW_SECS};

/// How long a salt is remembered at least, in seconds: a request is fresh
/// while its timestamp is within 30 s of our clock, so one stamped 30 s
/// ahead when first seen is fresh until we are 30 s past it.
pub const KEEP_SECS: u64 = 2 * TIMESTAMP_WINDOW_SECS;

/// Most salts the filter holds: 229,376, the entries hashbrown keeps in a
/// table of 2^18 buckets (7/8 of them), so a full filter takes 2^18 × 41
/// bytes (a 32-byte salt, its 8-byte second, a control byte), 10.25 MiB,
/// and never grows its table. Two salts a stream: 114,688 streams within
/// the window, about 1,900 a second sustained. The count-bounded pair of
/// generations it replaces held up to 262,144 salts in 2 × 2^18 × 33 bytes
/// (16.5 MiB), but forgot salts by count, however young.
pub const MAX_SALTS: usize = (1 << 18) / 8 * 7;

type Salt = [u8; MAX_KEY_LEN];

/// What the filter says of a salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not seen before: now recorded.
    New,
    /// Seen before: a replay (or a server stream reflected back).
    Seen,
    /// Not seen, but the filter holds [`MAX_SALTS`] salts none of which is
    /// older than [`KEEP_SECS`]: not recorded, and the stream is refused.
    Full,
}

struct Salts {
    /// Each salt and the second it was first seen.
    seen: HashMap<Salt, u64>,
    /// No salt held was seen before this second.
    oldest: u64,
    /// Whether a full filter is to be reported: set once it has been
    /// reported, cleared when a sweep leaves it half empty.
    reported: bool,
}

/// The salts of one inbound, shared by its connections.
pub struct SaltFilter {
    /// [`MAX_SALTS`], but in tests.
    max: usize,
    salts: Mutex<Salts>,
    /// The filter refused a salt for being full since the last
    /// [`SaltFilter::take_full_report`].
    full: AtomicBool,
}

impl Default for SaltFilter {
    fn default() -> Self {
        SaltFilter::new()
    }
}

impl SaltFilter {
    pub fn new() -> SaltFilter {
        SaltFilter::with_max(MAX_SALTS)
    }

    /// A filter of at most `max` salts.
    pub(super) fn with_max(max: usize) -> SaltFilter {
        SaltFilter {
            max,
            salts: Mutex::new(Salts {
                seen: HashMap::new(),
                oldest: u64::MAX,
                reported: false,
            }),
            full: AtomicBool::new(false),
        }
    }

    /// Records `salt` (16 or 32 bytes), first seen at `now`.
    pub fn insert(&self, salt: &[u8], now: SystemTime) -> Verdict {
        let max = self.max;
        let mut key = [0; MAX_KEY_LEN];
        let len = salt.len().min(MAX_KEY_LEN);
        key[..len].copy_from_slice(&salt[..len]);
        let now = unix_secs(now);
        // A panic elsewhere while the lock was held leaves the map whole:
        // every operation on it is a single insert or sweep.
        let mut salts = self.salts.lock().unwrap_or_else(PoisonError::into_inner);
        let salts = &mut *salts;
        if salts.seen.len() < max {
            // One hash of the salt: the insert is the lookup.
            return match salts.seen.entry(key) {
                std::collections::hash_map::Entry::Occupied(_) => Verdict::Seen,
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert(now);
                    salts.oldest = salts.oldest.min(now);
                    Verdict::New
                }
            };
        }
        if salts.seen.contains_key(&key) {
            return Verdict::Seen;
        }
        // Full: a sweep frees something only once the oldest salt is past
        // the window, so a full filter sweeps at most once a second.
        if now.saturating_sub(salts.oldest) > KEEP_SECS {
            let mut oldest = u64::MAX;
            salts.seen.retain(|_, &mut first| {
                let keep = now.saturating_sub(first) <= KEEP_SECS;
                if keep {
                    oldest = oldest.min(first);
                }
                keep
            });
            salts.oldest = oldest;
            if salts.seen.len() <= max / 2 {
                salts.reported = false;
            }
        }
        if salts.seen.len() >= max {
            if !salts.reported {
                salts.reported = true;
                self.full.store(true, Ordering::Relaxed);
            }
            return Verdict::Full;
        }
        salts.seen.insert(key, now);
        salts.oldest = salts.oldest.min(now);
        Verdict::New
    }

    /// Whether the filter has refused a stream for being full since it was
    /// last asked, once each time it fills: for one log line, not one a
    /// connection.
    pub fn take_full_report(&self) -> bool {
        self.full.load(Ordering::Relaxed) && self.full.swap(false, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs) + Duration::from_millis(900)
    }

    fn salt(n: u32) -> [u8; 32] {
        let mut salt = [0x22; 32];
        salt[..4].copy_from_slice(&n.to_be_bytes());
        salt
    }

    #[test]
    fn a_salt_is_known_for_60_s_after_it_was_first_seen_however_many_come_after() {
        let filter = SaltFilter::new();
        assert_eq!(filter.insert(&salt(0), at(0)), Verdict::New);
        // Many more salts than the filter holds, spread over the window:
        // the first is still known at its end.
        let mut refused = 0;
        for n in 1..=(MAX_SALTS as u32 + 1000) {
            let secs = u64::from(n) * KEEP_SECS / (MAX_SALTS as u64 + 1000);
            match filter.insert(&salt(n), at(secs)) {
                Verdict::New => {}
                Verdict::Full => refused += 1,
                Verdict::Seen => panic!("salt {n} seen"),
            }
        }
        assert_eq!(refused, 1001, "every salt past the bound within 60 s");
        assert_eq!(filter.insert(&salt(0), at(KEEP_SECS)), Verdict::Seen);
        assert!(filter.take_full_report());
        assert!(!filter.take_full_report(), "reported once");
        // 61 s on, the first salts are swept and new ones fit again.
        assert_eq!(
            filter.insert(&salt(u32::MAX), at(KEEP_SECS + 1)),
            Verdict::New
        );
    }

    #[test]
    fn a_full_filter_refuses_new_salts_until_its_oldest_are_past_60_s() {
        let filter = SaltFilter::with_max(4);
        for n in 0..4 {
            assert_eq!(filter.insert(&salt(n), at(n.into())), Verdict::New);
        }
        for secs in [3, 30, KEEP_SECS] {
            assert_eq!(filter.insert(&salt(9), at(secs)), Verdict::Full);
            assert_eq!(filter.insert(&salt(0), at(secs)), Verdict::Seen);
        }
        assert!(filter.take_full_report());
        // Salt 0 is 61 s old: swept, and only it.
        assert_eq!(filter.insert(&salt(9), at(KEEP_SECS + 1)), Verdict::New);
        assert_eq!(filter.insert(&salt(0), at(KEEP_SECS + 1)), Verdict::Full);
        for n in 1..4 {
            assert_eq!(filter.insert(&salt(n), at(KEEP_SECS + 1)), Verdict::Seen);
        }
        assert!(!filter.take_full_report(), "still the same fill");
        // Once a sweep leaves it half empty, a new fill is reported again.
        assert_eq!(filter.insert(&salt(10), at(KEEP_SECS + 3)), Verdict::New);
        assert_eq!(filter.insert(&salt(11), at(KEEP_SECS + 3)), Verdict::New);
        assert_eq!(filter.insert(&salt(12), at(KEEP_SECS + 3)), Verdict::Full);
        assert!(filter.take_full_report());
    }

    #[test]
    fn a_full_filter_holds_its_table_and_never_refuses_what_it_has_not_seen_below_the_bound() {
        let filter = SaltFilter::new();
        for n in 0..MAX_SALTS as u32 {
            assert_eq!(filter.insert(&salt(n), at(0)), Verdict::New, "{n}");
        }
        let salts = filter.salts.lock().unwrap();
        // Full at exactly the table's capacity: it never grew past 2^18
        // buckets.
        assert_eq!(salts.seen.capacity(), MAX_SALTS);
    }
}
