//! Spare carriers, a few per worker thread, so that a relay direction can
//! take one when bytes start to move and give it back the moment its
//! stream runs dry, without a pipe2 and two closes, or an allocation and a
//! free, every time.
//!
//! Only directions that are moving bytes hold a carrier (an idle
//! connection holds none). A pipe costs two descriptors, so with 65,536
//! connections per inbound the descriptors stay those of the sockets plus
//! two per direction in flight, plus at most `SPARE` pipes per worker
//! thread; buffers likewise cost memory only while bytes move.

use std::cell::RefCell;

/// The relay buffer of one direction, as seed 003's `RELAY_BUF` and seed
/// 000's 16 KiB client buffers for socks and http.
pub const RELAY_BUF: usize = 16 * 1024;

/// Empty carriers of each kind kept per thread.
const SPARE: usize = 8;

thread_local! {
    static BUFFERS: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A spare buffer of this thread, or a new one.
pub fn take_buffer() -> Box<[u8]> {
    BUFFERS
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| vec![0; RELAY_BUF].into_boxed_slice())
}

/// Keeps a buffer for the next burst, or frees it when this thread already
/// has enough.
pub fn give_buffer(buf: Box<[u8]>) {
    BUFFERS.with_borrow_mut(|spares| {
        if spares.len() < SPARE {
            spares.push(buf);
        }
    });
}

#[cfg(target_os = "linux")]
pub use pipes::{give_pipe, take_pipe};

#[cfg(all(test, target_os = "linux"))]
pub use pipes::spare_pipes;

#[cfg(test)]
pub fn spare_buffers() -> usize {
    BUFFERS.with_borrow(Vec::len)
}

#[cfg(target_os = "linux")]
mod pipes {
    use std::cell::RefCell;
    use std::io;

    use super::super::pipe::Pipe;
    use super::SPARE;

    thread_local! {
        static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
    }

    /// A spare pipe of this thread, or a new one.
    pub fn take_pipe() -> io::Result<Pipe> {
        match PIPES.with_borrow_mut(Vec::pop) {
            Some(pipe) => Ok(pipe),
            None => Pipe::new(),
        }
    }

    /// Keeps an empty pipe for the next burst, or closes it when this thread
    /// already has enough. A pipe that still holds bytes must not come here.
    pub fn give_pipe(pipe: Pipe) {
        PIPES.with_borrow_mut(|spares| {
            if spares.len() < SPARE {
                spares.push(pipe);
            }
        });
    }

    /// How many spare pipes this thread keeps now.
    #[cfg(test)]
    pub fn spare_pipes() -> usize {
        PIPES.with_borrow(Vec::len)
    }
}
