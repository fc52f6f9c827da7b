//! One direction of a relay: reads from one socket, writes to the other,
//! and shuts the other's write side down once the first ends.
//!
//! Bytes are carried either by a pipe, spliced in and out inside the kernel
//! (Linux, when both sides are plain TCP sockets), or by a pooled buffer
//! read into and written from user space (any other stream, or when no pipe
//! can be had, say the descriptors ran out), or, when one end is a framed
//! stream, by that end's own frame buffer: bytes are read where they are
//! sealed, or written from where they were opened, with no copy between. A
//! direction holds its carrier only while bytes move: it waits for
//! readiness with none, takes one to read, and gives it back once the bytes
//! are written and the next read would block. Backpressure is simply not
//! reading: while a direction's bytes are unwritten it does not read more.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::ReadBuf;

use super::Relayed;
use crate::buffers;

/// The relay buffer of one direction: 16 KiB, the size of the socks and
/// http clients' buffers.
pub const RELAY_BUF: usize = 16 * 1024;
/// Reads one direction may make in one poll before yielding to the rest of
/// the runtime: 64, which with a write a read is also where tokio's own
/// budget (128) would make the sockets wait. A yield costs a round through the worker's I/O driver, so a
/// smaller cap costs a bulk transfer one every few reads.
const READS_PER_POLL: u32 = 64;

/// How a direction carries its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through a pipe with splice(2) where the platform has it and both
    /// sides are plain TCP sockets, else as `Buffer`.
    Splice,
    /// Through a pooled buffer of this many bytes in user space: any
    /// stream, and plain TCP (in a [`RELAY_BUF`] one) when no pipe can be
    /// had.
    Buffer(usize),
    /// Read straight into the writer's own frame buffer (a framed stream
    /// seals bytes where they were read).
    Fill,
    /// Written straight out of the reader's own frame buffer (a framed
    /// stream's payload from where it was opened).
    Drain,
}

/// A direction meant to use a framed end's own buffers whose end has
/// none: the mode is chosen from both ends when the relay starts, so this
/// cannot happen.
fn no_own_buffers() -> io::Error {
    io::Error::other("relay: the framed end lost its buffers")
}

/// The bytes read and not yet written, and what holds them.
enum Carrier {
    Buffer {
        buf: Box<[u8]>,
        start: usize,
        end: usize,
    },
    #[cfg(target_os = "linux")]
    Pipe {
        pipe: super::pipe::Pipe,
        pending: usize,
    },
}

/// A splice between two streams that are not both plain sockets: the mode
/// is chosen from both ends when the relay starts, so this cannot happen.
fn not_a_socket() -> io::Error {
    io::Error::other("relay: splice needs a plain socket at both ends")
}

impl Carrier {
    fn new(mode: Mode) -> Carrier {
        #[cfg(target_os = "linux")]
        if mode == Mode::Splice {
            match super::pool::take_pipe() {
                Ok(pipe) => return Carrier::Pipe { pipe, pending: 0 },
                Err(e) => tracing::debug!("relaying through a buffer: no pipe: {e}"),
            }
        }
        let len = match mode {
            Mode::Buffer(len) => len,
            _ => RELAY_BUF,
        };
        Carrier::Buffer {
            buf: buffers::take(len),
            start: 0,
            end: 0,
        }
    }

    /// Writes what it holds to `to`; `Ready(Ok(false))` when it holds
    /// nothing, `Ready(Ok(true))` when some bytes went.
    fn poll_write<W: Relayed>(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut W,
    ) -> Poll<io::Result<bool>> {
        let n = match self {
            Carrier::Buffer { buf, start, end } => {
                if start == end {
                    return Poll::Ready(Ok(false));
                }
                let n = ready!(Pin::new(&mut *to).poll_write(cx, &buf[*start..*end]))?;
                *start += n;
                n
            }
            #[cfg(target_os = "linux")]
            Carrier::Pipe { pipe, pending } => {
                if *pending == 0 {
                    return Poll::Ready(Ok(false));
                }
                let to = to.plain_tcp().ok_or_else(not_a_socket)?;
                let n = loop {
                    ready!(to.poll_write_ready(cx))?;
                    let drained = to.try_io(tokio::io::Interest::WRITABLE, || {
                        use std::os::fd::AsFd;
                        pipe.drain(to.as_fd(), *pending)
                    });
                    match drained {
                        Ok(n) => break n,
                        // try_io cleared the readiness: wait for it again.
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                };
                *pending -= n;
                n
            }
        };
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        Poll::Ready(Ok(true))
    }

    /// Whether everything read was written.
    fn is_empty(&self) -> bool {
        match self {
            Carrier::Buffer { start, end, .. } => start == end,
            #[cfg(target_os = "linux")]
            Carrier::Pipe { pending, .. } => *pending == 0,
        }
    }

    /// One read from `from` into an empty carrier: `Ready(Ok(0))` at end of
    /// stream, `Pending` when `from` has nothing now.
    fn poll_read<R: Relayed>(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut R,
    ) -> Poll<io::Result<usize>> {
        match self {
            Carrier::Buffer { buf, start, end } => {
                let mut read = ReadBuf::new(buf);
                ready!(Pin::new(from).poll_read(cx, &mut read))?;
                let n = read.filled().len();
                (*start, *end) = (0, n);
                Poll::Ready(Ok(n))
            }
            #[cfg(target_os = "linux")]
            Carrier::Pipe { pipe, pending } => {
                let from = from.plain_tcp().ok_or_else(not_a_socket)?;
                loop {
                    ready!(from.poll_read_ready(cx))?;
                    let filled = from.try_io(tokio::io::Interest::READABLE, || {
                        use std::os::fd::AsFd;
                        pipe.fill(from.as_fd())
                    });
                    match filled {
                        Ok(n) => {
                            *pending = n;
                            return Poll::Ready(Ok(n));
                        }
                        // try_io cleared the readiness: wait for it again.
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            }
        }
    }

    /// Lets go of an empty carrier: a pipe or a buffer goes back to the
    /// spares.
    fn release(self) {
        match self {
            Carrier::Buffer { buf, .. } => buffers::give(buf),
            #[cfg(target_os = "linux")]
            Carrier::Pipe { pipe, pending } => {
                debug_assert_eq!(pending, 0, "only an empty pipe is a spare");
                super::pool::give_pipe(pipe);
            }
        }
    }
}

pub struct Half {
    mode: Mode,
    carrier: Option<Carrier>,
    /// Bytes were written since the last flush.
    unflushed: bool,
    eof: bool,
    done: bool,
}

impl Half {
    pub fn new(mode: Mode) -> Half {
        Half {
            mode,
            carrier: None,
            unflushed: false,
            eof: false,
            done: false,
        }
    }

    /// Whether `from` ended and `to` was shut down for writing.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Moves bytes from `from` to `to` until it would block; `Ready` once
    /// `from` ended and `to` was shut down for writing.
    pub fn poll<R: Relayed, W: Relayed>(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut R,
        to: &mut W,
        moved: &mut bool,
    ) -> Poll<io::Result<()>> {
        if matches!(self.mode, Mode::Fill | Mode::Drain) {
            return self.poll_own_buffers(cx, from, to, moved);
        }
        let mut reads = 0;
        loop {
            if let Some(carrier) = &mut self.carrier {
                if ready!(carrier.poll_write(cx, to))? {
                    *moved = true;
                    self.unflushed = true;
                    continue;
                }
            }
            if let Some(finished) = self.poll_end_or_yield(cx, to, reads) {
                return finished;
            }
            let mode = self.mode;
            let carrier = self.carrier.get_or_insert_with(|| Carrier::new(mode));
            debug_assert!(carrier.is_empty());
            match carrier.poll_read(cx, from) {
                Poll::Ready(Ok(0)) => {
                    self.eof = true;
                    self.release();
                }
                Poll::Ready(Ok(_)) => {
                    reads += 1;
                    *moved = true;
                }
                Poll::Pending => {
                    // Nothing to carry: an idle direction holds no carrier.
                    self.release();
                    // A layered stream (TLS) may hold written bytes until
                    // flushed, gathering what several reads carried into
                    // one send; a socket's flush is free.
                    if self.unflushed {
                        ready!(Pin::new(&mut *to).poll_flush(cx))?;
                        self.unflushed = false;
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => {
                    // The carrier was empty before the read that failed, so
                    // a pipe goes back to the spares: a client that resets
                    // its connection (the common way a short one ends) must
                    // not cost a pipe2 and two closes every time.
                    self.release();
                    return Poll::Ready(Err(e));
                }
            }
        }
    }

    /// [`Half::poll`] through a framed end's own buffers: each step reads
    /// once and sends what it read, and the end holds a buffer only while
    /// bytes move.
    fn poll_own_buffers<R: Relayed, W: Relayed>(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut R,
        to: &mut W,
        moved: &mut bool,
    ) -> Poll<io::Result<()>> {
        let mut steps = 0;
        loop {
            if let Some(finished) = self.poll_end_or_yield(cx, to, steps) {
                return finished;
            }
            let step = if self.mode == Mode::Fill {
                let to = to.fills().ok_or_else(no_own_buffers)?;
                to.poll_fill_from(cx, from)
            } else {
                let from = from.drains().ok_or_else(no_own_buffers)?;
                from.poll_drain_into(cx, to)
            };
            match step {
                Poll::Ready(Ok(0)) => self.eof = true,
                Poll::Ready(Ok(_)) => {
                    steps += 1;
                    *moved = true;
                    self.unflushed = true;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // A layered stream (TLS) may hold written bytes until
                    // flushed; a socket's flush is free.
                    if self.unflushed {
                        ready!(Pin::new(&mut *to).poll_flush(cx))?;
                        self.unflushed = false;
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Once `from` ended, shuts `to` down and finishes the direction;
    /// after READS_PER_POLL reads in one poll, yields to the rest of the
    /// runtime. `None` when the direction goes on reading.
    fn poll_end_or_yield<W: Relayed>(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut W,
        reads: u32,
    ) -> Option<Poll<io::Result<()>>> {
        if self.eof {
            return Some(match Pin::new(&mut *to).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => {
                    self.done = true;
                    Poll::Ready(Ok(()))
                }
                other => other,
            });
        }
        if reads == READS_PER_POLL {
            return Some(etemenanki_transport::yield_task(cx));
        }
        None
    }

    fn release(&mut self) {
        if let Some(carrier) = self.carrier.take() {
            carrier.release();
        }
    }
}
