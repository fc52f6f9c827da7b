//! A TLS session as a byte stream, with the socket side buffered both ways.
//!
//! OpenSSL writes each record (at most 16 KiB of plaintext) to its BIO as
//! soon as it is sealed, and tokio-openssl's BIO is the socket: one send a
//! record, two for a 16 KiB WebSocket frame that spills into a second
//! record. Here the BIO is a [`Wire`]: sealed records gather in a buffer of
//! [`WIRE_BUF`] bytes, sent in one write when it fills, when the stream is
//! flushed or shut down, or when a read finds nothing to read (whoever
//! waits for an answer has said everything first). Records read from the
//! socket likewise come in reads of up to [`WIRE_BUF`] bytes, several
//! records at once when the peer is sending fast, and one read of the
//! stream opens as many of those as its buffer takes (SSL_read opens one
//! a call).
//!
//! Both buffers are taken from the thread's spares when bytes start to move
//! and given back the moment they run dry: an idle session holds neither,
//! and a warm one allocates nothing per read or write.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use openssl::error::ErrorStack;
use openssl::ssl::{self, Ssl, SslRef};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_openssl::SslStream;

use crate::buffers;

/// The most ciphertext one read takes from the socket, and the most sealed
/// records gathered before they are sent: four full records, the most a
/// socket send takes at once on loopback in practice.
pub const WIRE_BUF: usize = 64 * 1024;

/// A TLS session over `S` (a TCP connection, or a proxied stream under a
/// DNS-over-TLS upstream).
pub struct TlsStream<S: AsyncRead + AsyncWrite + Unpin> {
    tls: SslStream<Wire<S>>,
    /// SSL_shutdown has put the close_notify in the wire: a shutdown that
    /// waits for the socket goes on sending it and never calls SSL_shutdown
    /// again (a second call would wait for the peer's close_notify, reading
    /// and dropping whatever the peer still sends).
    close_notified: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream<S> {
    pub(super) fn new(ssl: Ssl, io: S) -> Result<Self, ErrorStack> {
        let wire = Wire {
            io,
            read: Window::default(),
            write: Window::default(),
            refill: true,
        };
        Ok(TlsStream {
            tls: SslStream::new(ssl, wire)?,
            close_notified: false,
        })
    }

    /// The client handshake; its last flight may still be in the wire,
    /// until the stream is flushed.
    pub(super) async fn connect(&mut self) -> Result<(), ssl::Error> {
        std::future::poll_fn(|cx| Pin::new(&mut self.tls).poll_connect(cx)).await
    }

    /// The server handshake, likewise.
    pub(super) async fn accept(&mut self) -> Result<(), ssl::Error> {
        std::future::poll_fn(|cx| Pin::new(&mut self.tls).poll_accept(cx)).await
    }

    pub fn ssl(&self) -> &SslRef {
        self.tls.ssl()
    }

    /// The stream under the session.
    pub fn get_ref(&self) -> &S {
        &self.tls.get_ref().io
    }

    /// Bytes read from the socket and not yet taken by OpenSSL, and sealed
    /// records not yet sent, for tests that watch the buffers come and go.
    #[cfg(test)]
    fn buffered(&self) -> (Option<usize>, Option<usize>) {
        let wire = self.tls.get_ref();
        (wire.read.held(), wire.write.held())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // The wire sends what was written before it waits for the socket.
        let this = self.get_mut();
        let first = Pin::new(&mut this.tls).poll_read(cx, buf);
        if first.is_pending() {
            // Idle: the record buffers a session ticket set up go back.
            super::idle::release_buffers(this.tls.ssl());
        }
        ready!(first)?;
        // SSL_read opens one record a call. Records already read from the
        // socket are opened into the same buffer while it has room, so a
        // relay's read carries several and its write to a socket is one
        // send (and one wakeup of whoever reads there) for them all. The
        // socket is not read again here: a record still partly on its way
        // waits for the next read, and so does an error or the end of the
        // stream, after the bytes before it.
        this.tls.get_mut().refill = false;
        while buf.remaining() > 0 && !this.tls.get_ref().read.is_empty() {
            let before = buf.filled().len();
            match Pin::new(&mut this.tls).poll_read(cx, buf) {
                Poll::Ready(Ok(())) if buf.filled().len() > before => {}
                _ => break,
            }
        }
        this.tls.get_mut().refill = true;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tls).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().tls.get_mut().poll_send(cx)
    }

    /// The close_notify, everything still in the wire, then the shutdown of
    /// the stream underneath.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_notified {
            // SSL_shutdown, then the wire's own poll_shutdown, which only
            // agrees: the sending is done below.
            ready!(Pin::new(&mut this.tls).poll_shutdown(cx))?;
            this.close_notified = true;
        }
        let wire = this.tls.get_mut();
        ready!(wire.poll_send(cx))?;
        Pin::new(&mut wire.io).poll_shutdown(cx)
    }
}

/// The BIO under OpenSSL: the stream, and the bytes on their way through.
struct Wire<S: AsyncRead + AsyncWrite + Unpin> {
    io: S,
    /// Ciphertext read from `io` that OpenSSL has not taken yet.
    read: Window,
    /// Sealed records OpenSSL wrote that `io` has not taken yet.
    write: Window,
    /// Whether an empty read window is refilled from `io`; false while a
    /// read goes on opening records already read, which must not wait.
    refill: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    /// Sends everything in the write window, then flushes `io`.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.write.is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, self.write.bytes()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.write.consume(n);
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

/// What OpenSSL reads records from: the read window, refilled from `io`
/// in one read when empty.
impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Wire<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read.is_empty() {
            if !this.refill {
                // OpenSSL keeps the part of a record it has, for later.
                return Poll::Pending;
            }
            let mut filled = ReadBuf::new(this.read.spare());
            match Pin::new(&mut this.io).poll_read(cx, &mut filled) {
                Poll::Ready(Ok(())) => {
                    let n = filled.filled().len();
                    this.read.end += n;
                    if n == 0 {
                        // The end of the stream: OpenSSL sees it as such.
                        this.read.release();
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Ready(Err(e)) => {
                    this.read.release();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {
                    this.read.release();
                    // Nothing to read: whatever was written goes out
                    // before the wait (a handshake flight, a request, the
                    // relay's last records). A send that must wait is
                    // woken with this task; one that failed fails the
                    // read too.
                    if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                        return Poll::Ready(Err(e));
                    }
                    return Poll::Pending;
                }
            }
        }
        let n = this.read.len().min(out.remaining());
        out.put_slice(&this.read.bytes()[..n]);
        this.read.consume(n);
        Poll::Ready(Ok(()))
    }
}

/// What OpenSSL writes sealed records to: the write window, sent when full.
impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Wire<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.write.is_full() {
            match this.poll_send(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                // The socket took part of the window: room at its end.
                Poll::Pending if this.write.start > 0 => this.write.compact(),
                Poll::Pending => return Poll::Pending,
            }
        }
        let spare = this.write.spare();
        let n = spare.len().min(buf.len());
        spare[..n].copy_from_slice(&buf[..n]);
        this.write.end += n;
        Poll::Ready(Ok(n))
    }

    /// OpenSSL flushes its BIO after each handshake flight and alert; a
    /// handshake must not fail because the socket is full, so this only
    /// starts the send (the next read, or [`TlsStream`]'s own flush,
    /// finishes it). [`TlsStream::poll_flush`] does not come here.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().poll_send(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }

    /// Reached from tokio-openssl's shutdown once the close_notify is in
    /// the window; [`TlsStream::poll_shutdown`] sends it and shuts `io`.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Drop for Wire<S> {
    /// A stream dropped with records unsent (a refusal written just before
    /// the connection is given up) sends what the socket takes now, as a
    /// socket written directly would have.
    fn drop(&mut self) {
        if !self.write.is_empty() {
            let _ = self.poll_send(&mut Context::from_waker(Waker::noop()));
        }
    }
}

/// Bytes `start..end` of a spare buffer, held only while it holds bytes.
#[derive(Default)]
struct Window {
    buf: Option<Box<[u8]>>,
    start: usize,
    end: usize,
}

impl Window {
    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn is_full(&self) -> bool {
        self.end == WIRE_BUF
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    fn bytes(&self) -> &[u8] {
        self.buf
            .as_deref()
            .map_or(&[], |buf| &buf[self.start..self.end])
    }

    /// The room after the bytes held, taking a buffer when there is none.
    fn spare(&mut self) -> &mut [u8] {
        let end = self.end;
        let buf = self.buf.get_or_insert_with(|| buffers::take(WIRE_BUF));
        &mut buf[end..]
    }

    /// `n` bytes of the front are gone; an emptied window lets go of its
    /// buffer.
    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.release();
        }
    }

    /// Moves the bytes held to the front of the buffer.
    fn compact(&mut self) {
        if let Some(buf) = &mut self.buf {
            buf.copy_within(self.start..self.end, 0);
        }
        self.end -= self.start;
        self.start = 0;
    }

    fn release(&mut self) {
        if let Some(buf) = self.buf.take() {
            buffers::give(buf);
        }
        (self.start, self.end) = (0, 0);
    }

    #[cfg(test)]
    fn held(&self) -> Option<usize> {
        self.buf.as_ref().map(|_| self.len())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests;
