//! What a Mux.Cool connection's task shares with its sessions' tasks: each
//! TCP session's bytes both ways, each UDP session's packets both ways,
//! and the wakers that move them. One lock for the whole connection: every
//! hold is a copy into or out of a buffer.
//!
//! Every buffer is taken from the thread's spares when bytes arrive and
//! given back once they are drained, so an idle session holds none.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use etemenanki_proto::mux::{Key, DATA_HEADER_LEN};
use etemenanki_proto::Address;
use tokio::task::AbortHandle;

use crate::buffers;

/// The bytes one session holds in each direction: the relay's buffer
/// size, so the same spares serve both.
pub const SESSION_BUF: usize = 16 * 1024;

/// The most bytes of a session one keep frame carries: what the buffer
/// holds behind the frame's head.
pub const SESSION_DATA: usize = SESSION_BUF - DATA_HEADER_LEN;

#[derive(Default)]
pub struct Hub {
    pub slots: Vec<Option<Slot>>,
    /// Slots with something for the connection's task to send or free.
    pub ready: VecDeque<usize>,
    pub udp: Vec<Option<Udp>>,
    /// UDP slots with a reply to send.
    pub udp_ready: VecDeque<usize>,
    /// The client's stream ended: every UDP association ends too.
    pub udp_ended: bool,
    /// The connection's task.
    pub mux: Option<Waker>,
    /// The connection's task waits for a session to take bytes.
    pub stalled: bool,
    /// The connection's task ended: every session's call fails.
    pub gone: bool,
}

/// One TCP session.
pub struct Slot {
    pub key: Key,
    /// The client's bytes not yet read: `up[up_at]`.
    pub up: Option<Box<[u8]>>,
    pub up_at: Range<usize>,
    /// The client sends no more.
    pub up_end: bool,
    pub reader: Option<Waker>,
    /// The session's bytes not yet sent, behind a keep frame's head:
    /// `down[DATA_HEADER_LEN..DATA_HEADER_LEN + down_len]`.
    pub down: Option<Box<[u8]>>,
    pub down_len: usize,
    /// The connection's task is sending them: it holds the buffer.
    pub sending: bool,
    pub writer: Option<Waker>,
    /// The session shut its write side.
    pub shut: bool,
    /// The session's stream was dropped: the slot is freed once its end
    /// is sent.
    pub dropped: bool,
    pub end_sent: bool,
    /// The client aborted the session: its calls fail, nothing more of it
    /// is sent.
    pub aborted: bool,
    /// In [`Hub::ready`].
    pub queued: bool,
    pub task: Option<AbortHandle>,
}

impl Slot {
    pub fn new(key: Key) -> Slot {
        Slot {
            key,
            up: None,
            up_at: 0..0,
            up_end: false,
            reader: None,
            down: None,
            down_len: 0,
            sending: false,
            writer: None,
            shut: false,
            dropped: false,
            end_sent: false,
            aborted: false,
            queued: false,
            task: None,
        }
    }

    /// Gives back whatever buffers it holds.
    pub fn release(&mut self) {
        for buf in [self.up.take(), self.down.take()].into_iter().flatten() {
            buffers::give(buf);
        }
        self.up_at = 0..0;
        self.down_len = 0;
    }
}

/// One UDP session's association: its packets, one each way.
pub struct Udp {
    pub key: Key,
    /// Its association's task runs.
    pub running: bool,
    pub task: Option<AbortHandle>,
    /// A client's packet for the association: its buffer, length and
    /// destination.
    pub up: Option<(Box<[u8]>, usize, Address)>,
    pub reader: Option<Waker>,
    /// A reply for the client, behind the keep frame's headroom: its
    /// buffer, length and source.
    pub down: Option<(Box<[u8]>, usize, Address)>,
    pub writer: Option<Waker>,
}

impl Udp {
    pub fn new(key: Key) -> Udp {
        Udp {
            key,
            running: false,
            task: None,
            up: None,
            reader: None,
            down: None,
            writer: None,
        }
    }

    pub fn release(&mut self) {
        for (buf, ..) in [self.up.take(), self.down.take()].into_iter().flatten() {
            buffers::give(buf);
        }
    }
}

pub fn lock(hub: &Mutex<Hub>) -> MutexGuard<'_, Hub> {
    hub.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    pub fn slot(&mut self, at: usize) -> Option<&mut Slot> {
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// UDP session `key`'s slot at `at`.
    pub fn udp(&mut self, at: usize, key: Key) -> Option<&mut Udp> {
        self.udp
            .get_mut(at)
            .and_then(Option::as_mut)
            .filter(|udp| udp.key == key)
    }

    pub fn wake_mux(&self) {
        if let Some(waker) = &self.mux {
            waker.wake_by_ref();
        }
    }

    /// Puts slot `at` in the queue of the connection's task.
    pub fn queue(&mut self, at: usize) {
        if let Some(slot) = self.slot(at) {
            if !slot.queued {
                slot.queued = true;
                self.ready.push_back(at);
            }
        }
        self.wake_mux();
    }

    /// The connection ended: every session's next call fails.
    pub fn end(&mut self) {
        self.gone = true;
        for slot in self.slots.iter_mut().flatten() {
            slot.release();
            for waker in [slot.reader.take(), slot.writer.take()]
                .into_iter()
                .flatten()
            {
                waker.wake();
            }
        }
        self.end_udp();
        for udp in self.udp.iter_mut().flatten() {
            udp.release();
        }
    }

    /// The client's stream ended: every association ends.
    pub fn end_udp(&mut self) {
        self.udp_ended = true;
        for udp in self.udp.iter_mut().flatten() {
            for waker in [udp.reader.take(), udp.writer.take()].into_iter().flatten() {
                waker.wake();
            }
        }
    }
}

/// A session's call once the connection is gone.
pub fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "mux: the connection ended")
}
