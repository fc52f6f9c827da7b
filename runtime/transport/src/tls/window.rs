//! A buffer window over the socket side of a TLS session: bytes read and
//! not yet opened, or sealed and not yet sent.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;

use crate::buffers;

use super::WIRE_BUF;

/// Bytes `start..end` of a spare buffer, held only while it holds bytes.
#[derive(Default)]
pub(super) struct Window {
    buf: Option<Box<[u8]>>,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Window {
    pub(super) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub(super) fn is_full(&self) -> bool {
        self.end == WIRE_BUF
    }

    pub(super) fn len(&self) -> usize {
        self.end - self.start
    }

    pub(super) fn bytes(&self) -> &[u8] {
        self.buf
            .as_deref()
            .map_or(&[], |buf| &buf[self.start..self.end])
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Some(buf) => &mut buf[self.start..self.end],
            None => &mut [],
        }
    }

    /// The room after the bytes held, taking a buffer when there is none.
    pub(super) fn spare(&mut self) -> &mut [u8] {
        let end = self.end;
        let buf = self.buf.get_or_insert_with(|| buffers::take(WIRE_BUF));
        &mut buf[end..]
    }

    /// `n` bytes of the front are gone; an emptied window lets go of its
    /// buffer.
    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.release();
        }
    }

    /// Moves the bytes held to the front of the buffer.
    pub(super) fn compact(&mut self) {
        if let Some(buf) = &mut self.buf {
            buf.copy_within(self.start..self.end, 0);
        }
        self.end -= self.start;
        self.start = 0;
    }

    /// Sends everything the window holds to `io`, then flushes `io`.
    pub(super) fn poll_send<S: AsyncWrite + Unpin>(
        &mut self,
        io: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while !self.is_empty() {
            let n = ready!(Pin::new(&mut *io).poll_write(cx, self.bytes()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.consume(n);
        }
        Pin::new(io).poll_flush(cx)
    }

    pub(super) fn release(&mut self) {
        if let Some(buf) = self.buf.take() {
            buffers::give(buf);
        }
        (self.start, self.end) = (0, 0);
    }

    #[cfg(test)]
    pub(super) fn held(&self) -> Option<usize> {
        self.buf.as_ref().map(|_| self.len())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.release();
    }
}
