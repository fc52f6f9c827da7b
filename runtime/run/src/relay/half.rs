//! One direction of a relay: reads from one socket, writes to the other,
//! and shuts the other's write side down once the first ends.
//!
//! Bytes are carried either by a pipe, spliced in and out inside the kernel
//! (Linux), or by a 16 KiB buffer read into and written from user space
//! (when no pipe can be had, say the descriptors ran out, or elsewhere). A
//! direction holds its carrier only while bytes move: it waits for
//! readiness with none, takes one to read, and gives it back once the bytes
//! are written and the next read would block. Backpressure is simply not
//! reading: while a direction's bytes are unwritten it does not read more.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

/// The relay buffer of one direction, as seed 003's `RELAY_BUF`.
const RELAY_BUF: usize = 16 * 1024;
/// Reads one direction may make in one poll before yielding to the rest of
/// the runtime.
const READS_PER_POLL: u32 = 16;

/// How a direction carries its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through a pipe with splice(2) where the platform has it, else as
    /// `Buffer`.
    Splice,
    /// Through a buffer in user space, which otherwise carries bytes only
    /// when no pipe can be had: tests force it to cover that path.
    #[cfg(test)]
    Buffer,
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

impl Carrier {
    fn new(mode: Mode) -> Carrier {
        #[cfg(target_os = "linux")]
        if mode == Mode::Splice {
            match super::pool::take() {
                Ok(pipe) => return Carrier::Pipe { pipe, pending: 0 },
                Err(e) => tracing::debug!("relaying through a buffer: no pipe: {e}"),
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = mode;
        Carrier::Buffer {
            buf: vec![0; RELAY_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Writes what it holds to `to`; `Ready(Ok(false))` when it holds
    /// nothing, `Ready(Ok(true))` when some bytes went.
    fn poll_write(&mut self, cx: &mut Context<'_>, to: &mut TcpStream) -> Poll<io::Result<bool>> {
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
                let to: &TcpStream = to;
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

    /// One read from `from` into an empty carrier: `Ok(0)` at end of
    /// stream, `WouldBlock` when `from` has nothing now.
    fn read(&mut self, from: &TcpStream) -> io::Result<usize> {
        match self {
            Carrier::Buffer { buf, start, end } => {
                let n = from.try_read(buf)?;
                (*start, *end) = (0, n);
                Ok(n)
            }
            #[cfg(target_os = "linux")]
            Carrier::Pipe { pipe, pending } => {
                let n = from.try_io(tokio::io::Interest::READABLE, || {
                    use std::os::fd::AsFd;
                    pipe.fill(from.as_fd())
                })?;
                *pending = n;
                Ok(n)
            }
        }
    }

    /// Lets go of an empty carrier: a pipe goes back to the spares.
    fn release(self) {
        #[cfg(target_os = "linux")]
        if let Carrier::Pipe { pipe, pending } = self {
            debug_assert_eq!(pending, 0, "only an empty pipe is a spare");
            super::pool::give(pipe);
        }
    }
}

pub struct Half {
    mode: Mode,
    carrier: Option<Carrier>,
    eof: bool,
    done: bool,
}

impl Half {
    pub fn new(mode: Mode) -> Half {
        Half {
            mode,
            carrier: None,
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
    pub fn poll(
        &mut self,
        cx: &mut Context<'_>,
        from: &TcpStream,
        to: &mut TcpStream,
        moved: &mut bool,
    ) -> Poll<io::Result<()>> {
        let mut reads = 0;
        loop {
            if let Some(carrier) = &mut self.carrier {
                if ready!(carrier.poll_write(cx, to))? {
                    *moved = true;
                    continue;
                }
            }
            if self.eof {
                ready!(Pin::new(&mut *to).poll_shutdown(cx))?;
                self.done = true;
                return Poll::Ready(Ok(()));
            }
            if reads == READS_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(from.poll_read_ready(cx))?;
            let mode = self.mode;
            let carrier = self.carrier.get_or_insert_with(|| Carrier::new(mode));
            match carrier.read(from) {
                Ok(0) => {
                    self.eof = true;
                    self.release();
                }
                Ok(_) => {
                    reads += 1;
                    *moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.release(),
                Err(e) => {
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

    fn release(&mut self) {
        if let Some(carrier) = self.carrier.take() {
            carrier.release();
        }
    }
}
