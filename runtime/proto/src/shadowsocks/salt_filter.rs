//! The salts one Shadowsocks AEAD inbound has seen, so a recorded stream
//! replayed to it is refused. (AEAD requests carry no timestamp, so there
//! is no window to keep salts for; Shadowsocks 2022 keeps its salts by age,
//! in `ss2022::server::SaltFilter`.)
//!
//! shadowsocks-rust keeps its salts in a pair of Bloom filters used in
//! turn: bounded, but a Bloom filter answers "seen" for salts it never saw,
//! so now and then a genuine client is refused. This filter keeps the salts
//! themselves, in two generations: new salts go into the current one, a
//! salt is known if either holds it, and when the current one is full the
//! older is cleared and becomes current (its allocation is reused). So it
//! never refuses a salt it has not seen, holds at most twice its capacity,
//! and remembers every salt for at least `capacity` insertions after it.
//!
//! Only salts of authenticated streams are inserted (the cores check after
//! the first record opens), so a prober without the key cannot push genuine
//! salts out; the server's own salts go in too, so a server stream reflected
//! back at it is refused.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use super::MAX_SALT_LEN;

/// Salts a generation holds by default: at most 2 × 131,072 salts of 32
/// bytes, 16.5 MiB when full (2 × 2^18 buckets of 33 bytes). A server
/// opening 1,000 streams a second remembers each salt for over two
/// minutes.
pub const DEFAULT_CAPACITY: usize = 1 << 17;

type Salt = [u8; MAX_SALT_LEN];

struct Generations {
    current: HashSet<Salt>,
    previous: HashSet<Salt>,
}

/// The salts of one inbound, shared by its connections.
pub struct SaltFilter {
    capacity: usize,
    generations: Mutex<Generations>,
}

impl Default for SaltFilter {
    fn default() -> Self {
        SaltFilter::new()
    }
}

impl SaltFilter {
    pub fn new() -> SaltFilter {
        SaltFilter::with_capacity(DEFAULT_CAPACITY)
    }

    /// Generations of `capacity` salts (at least one).
    pub fn with_capacity(capacity: usize) -> SaltFilter {
        SaltFilter {
            capacity: capacity.max(1),
            generations: Mutex::new(Generations {
                current: HashSet::new(),
                previous: HashSet::new(),
            }),
        }
    }

    /// Records `salt` (16 or 32 bytes) and says whether it was new: false
    /// for a salt seen before, which the caller refuses.
    pub fn insert(&self, salt: &[u8]) -> bool {
        let mut key = [0; MAX_SALT_LEN];
        let len = salt.len().min(MAX_SALT_LEN);
        key[..len].copy_from_slice(&salt[..len]);
        // A panic elsewhere while the lock was held leaves the sets whole:
        // every operation on them is a single insert or swap.
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if generations.previous.contains(&key) {
            return false;
        }
        if generations.current.len() >= self.capacity {
            // Once a generation: a salt the full one holds stays known.
            if generations.current.contains(&key) {
                return false;
            }
            let generations = &mut *generations;
            std::mem::swap(&mut generations.current, &mut generations.previous);
            generations.current.clear();
        }
        // Two hashes of the salt a stream, not three: the insert is the
        // lookup in the current generation.
        generations.current.insert(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_salt_is_new_once_and_known_for_a_generation_after() {
        let filter = SaltFilter::with_capacity(4);
        let salt = |n: u8| [n; 32];
        for n in 0..4 {
            assert!(filter.insert(&salt(n)));
            assert!(!filter.insert(&salt(n)));
        }
        // The fifth starts a new generation: the first four are still known.
        for n in 4..8 {
            assert!(filter.insert(&salt(n)));
        }
        for n in 0..8 {
            assert!(!filter.insert(&salt(n)), "{n}");
        }
        // The ninth drops the oldest generation, 0..4, and only it.
        assert!(filter.insert(&salt(8)));
        assert!(!filter.insert(&salt(4)));
        assert!(filter.insert(&salt(0)), "forgotten after two generations");
    }

    #[test]
    fn never_refuses_what_it_has_not_seen() {
        let filter = SaltFilter::with_capacity(100);
        for n in 0..10_000u32 {
            let mut salt = [0; 16];
            salt[..4].copy_from_slice(&n.to_be_bytes());
            assert!(filter.insert(&salt), "{n}");
        }
        let generations = filter.generations.lock().unwrap();
        assert!(generations.current.len() + generations.previous.len() <= 200);
    }
}
