//! Spare buffers, a few of each size per worker thread, so that a stream
//! can take one when bytes start to move and give it back the moment it
//! runs dry, without an allocation and a free every time. An idle
//! connection holds none: its memory is its sockets'. Shared by the
//! transports (a TLS session's record buffers) and the runtime (the relay,
//! framed streams).

use std::cell::RefCell;

/// Empty buffers kept per size per thread.
const SPARE: usize = 8;

/// The spare buffers of one length.
type Spares = (usize, Vec<Box<[u8]>>);

thread_local! {
    /// A few lengths only: one per protocol buffer size in use.
    static SPARES: RefCell<Vec<Spares>> = const { RefCell::new(Vec::new()) };
}

/// A spare buffer of `len` bytes of this thread, or a new one. Its bytes
/// are whatever the last user left.
pub fn take(len: usize) -> Box<[u8]> {
    SPARES
        .with_borrow_mut(|spares| {
            spares
                .iter_mut()
                .find(|(size, _)| *size == len)
                .and_then(|(_, list)| list.pop())
        })
        .unwrap_or_else(|| vec![0; len].into_boxed_slice())
}

/// Keeps a buffer for the next burst, or frees it when this thread already
/// has enough of its size.
pub fn give(buf: Box<[u8]>) {
    SPARES.with_borrow_mut(|spares| {
        let len = buf.len();
        match spares.iter_mut().find(|(size, _)| *size == len) {
            Some((_, list)) if list.len() < SPARE => list.push(buf),
            Some(_) => {}
            None => spares.push((len, vec![buf])),
        }
    });
}

/// How many spare buffers of `len` bytes this thread keeps now: what
/// tests see of a stream giving its buffers back.
pub fn spares(len: usize) -> usize {
    SPARES.with_borrow(|spares| {
        spares
            .iter()
            .find(|(size, _)| *size == len)
            .map_or(0, |(_, list)| list.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_taken_again_and_sizes_stay_apart() {
        let a = take(100);
        let a_ptr = a.as_ptr();
        give(a);
        give(take(200));
        assert_eq!((spares(100), spares(200)), (1, 1));
        let again = take(100);
        assert_eq!(again.as_ptr(), a_ptr, "the spare is reused");
        assert_eq!(spares(100), 0);
        for _ in 0..SPARE + 2 {
            give(vec![0; 300].into_boxed_slice());
        }
        assert_eq!(spares(300), SPARE, "at most SPARE are kept");
    }
}
