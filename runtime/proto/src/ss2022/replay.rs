//! The sliding window of packet ids a UDP session accepts (SIP022 3.2.4),
//! as WireGuard keeps its counters: the highest id seen and a bitmap of the
//! WINDOW ids below it. An id is checked before the packet is trusted and
//! recorded only after it is.

/// How far behind the highest id a late packet may arrive.
pub const WINDOW: u64 = 1024;

const WORDS: usize = (WINDOW / 64) as usize;

#[derive(Clone, Debug)]
pub struct Window {
    /// One more than the highest id recorded; 0 before the first.
    next: u64,
    /// Bit `id % WINDOW` is set for every recorded id in the window.
    bits: [u64; WORDS],
}

impl Default for Window {
    fn default() -> Self {
        Window {
            next: 0,
            bits: [0; WORDS],
        }
    }
}

fn slot(id: u64) -> (usize, u64) {
    let bit = id % WINDOW;
    ((bit / 64) as usize, 1 << (bit % 64))
}

impl Window {
    /// Whether `id` is new and not too old.
    pub fn admits(&self, id: u64) -> bool {
        if id >= self.next {
            return true;
        }
        if self.next - id > WINDOW {
            return false;
        }
        let (word, mask) = slot(id);
        self.bits[word] & mask == 0
    }

    /// Records `id`, which [`admits`](Self::admits) accepted.
    pub fn record(&mut self, id: u64) {
        if id >= self.next {
            // Forget the ids the window slides past.
            let advance = id - self.next + 1;
            if advance >= WINDOW {
                self.bits = [0; WORDS];
            } else {
                for past in self.next..=id {
                    let (word, mask) = slot(past);
                    self.bits[word] &= !mask;
                }
            }
            self.next = id.saturating_add(1);
        }
        let (word, mask) = slot(id);
        self.bits[word] |= mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_id_is_accepted_once_and_late_ones_within_the_window() {
        let mut w = Window::default();
        for id in [0, 1, 5, 3] {
            assert!(w.admits(id), "{id}");
            w.record(id);
            assert!(!w.admits(id), "{id} twice");
        }
        assert!(w.admits(2) && w.admits(4));
        w.record(5000);
        assert!(!w.admits(5000 - WINDOW - 1), "behind the window");
        assert!(w.admits(5000 - WINDOW + 1));
        assert!(!w.admits(5000));
        // Slot reuse: the id WINDOW below a recorded one is not confused with it.
        w.record(5001);
        assert!(w.admits(5001 - WINDOW + 2));
        assert!(!w.admits(5001));
    }
}
