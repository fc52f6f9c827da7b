//! A pipe and splice(2): bytes move from one socket into the pipe and from
//! the pipe into the other socket inside the kernel, never copied through
//! user space.
//!
//! pipe2, splice and F_SETPIPE_SZ go through rustix's safe wrappers, which
//! take the descriptors as `AsFd` borrows, so no unsafe code is needed here
//! (the workspace denies it outside a few OpenSSL calls).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::pipe::{fcntl_setpipe_size, pipe_with, splice, PipeFlags, SpliceFlags};

/// The capacity a pipe asks for. More than the 64 KiB default lets one
/// splice take what a loopback socket holds: on the bench, 1 MiB moved
/// bulk TCP about 1.3x as fast as 64 KiB and at half the CPU per byte. The
/// kernel counts a pipe's capacity, not its contents, against a per-user
/// budget (`fs.pipe-user-pages-soft`, 64 MiB, unless the process has
/// CAP_SYS_RESOURCE): past it, resizing is refused and new pipes get fewer
/// slots. The relay still works then, each splice just moves less.
const PIPE_SIZE: usize = 1024 * 1024;

/// Both ends of one non-blocking pipe; closed on drop.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let (read, write) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
        // A refusal leaves the pipe at its default size, which is fine.
        let _ = fcntl_setpipe_size(&write, PIPE_SIZE);
        Ok(Pipe { read, write })
    }

    /// Moves what `socket` has into the pipe, as much as the pipe holds.
    /// `Ok(0)` is end of stream; `WouldBlock` means the socket has nothing
    /// (the caller only fills an empty pipe, so the pipe is never the one
    /// that is full).
    pub fn fill(&self, socket: BorrowedFd<'_>) -> io::Result<usize> {
        move_bytes(socket, self.write.as_fd(), PIPE_SIZE)
    }

    /// Moves up to `len` of the bytes in the pipe into `socket`;
    /// `WouldBlock` means the socket's send buffer is full.
    ///
    /// splice does not pass MSG_NOSIGNAL: writing to a reset connection
    /// raises SIGPIPE, which the Rust runtime ignores in every binary, so
    /// the call fails with `BrokenPipe` as a write would.
    pub fn drain(&self, socket: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        move_bytes(self.read.as_fd(), socket, len)
    }
}

/// One non-blocking splice; no offsets, which pipes and sockets have none
/// of. An error keeps its errno, so `EAGAIN` is `WouldBlock`.
fn move_bytes(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    Ok(splice(from, None, to, None, len, flags)?)
}
