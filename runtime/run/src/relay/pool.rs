//! Spare pipes, a few per worker thread, so that a relay direction can
//! take a pipe when bytes start to move and give it back the moment its
//! socket runs dry without a pipe2 and two closes every time.
//!
//! A pipe costs two descriptors. Only directions that are moving bytes
//! hold one (an idle connection holds none), so with 65,536 connections
//! per inbound the descriptors stay those of the sockets plus two per
//! direction in flight, plus at most `SPARE` pipes per worker thread.

use std::cell::RefCell;
use std::io;

use super::pipe::Pipe;

/// Empty pipes kept per thread.
const SPARE: usize = 8;

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
