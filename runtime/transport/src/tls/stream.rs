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

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};
use std::time::{Duration, Instant};

use openssl::error::ErrorStack;
use openssl::ssl::{self, Ssl, SslRef};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;
use tokio_openssl::SslStream;

use super::records::Records;
use super::track::Track;
use super::window::Window;

/// The most ciphertext one read takes from the socket, and the most sealed
/// records gathered before they are sent: four full records, the most a
/// socket send takes at once on loopback in practice.
pub const WIRE_BUF: usize = 64 * 1024;

/// How long a client waits, after its handshake, for the session tickets
/// a server sends right after it before it hands the session over (the
/// tickets are OpenSSL's to read, for the connector to resume with): twice
/// the handshake's own time, within these bounds.
const TICKET_WAIT_MIN: Duration = Duration::from_millis(10);
const TICKET_WAIT_MAX: Duration = Duration::from_secs(2);

/// A TLS session over `S` (a TCP connection, or a proxied stream under a
/// DNS-over-TLS upstream).
pub struct TlsStream<S: AsyncRead + AsyncWrite + Unpin> {
    session: Session<S>,
}

enum Session<S: AsyncRead + AsyncWrite + Unpin> {
    /// OpenSSL's, handshake included.
    OpenSsl(OpenSsl<S>),
    /// A TLS 1.3 session past its handshake, its records ours
    /// (records.rs); boxed, so that a session OpenSSL keeps does not carry
    /// the room of two directions' keys.
    Own(Box<Records<S>>),
}

struct OpenSsl<S: AsyncRead + AsyncWrite + Unpin> {
    tls: SslStream<Wire<S>>,
    /// SSL_shutdown has put the close_notify in the wire: a shutdown that
    /// waits for the socket goes on sending it and never calls SSL_shutdown
    /// again (a second call would wait for the peer's close_notify, reading
    /// and dropping whatever the peer still sends).
    close_notified: bool,
    /// How long the handshake took, once it is done (a client's wait for
    /// its tickets is measured by it).
    handshake: Option<Duration>,
    /// A client's wait for its session tickets, once it went idle with
    /// none read.
    ticket_wait: Option<Pin<Box<Sleep>>>,
    /// The session stays OpenSSL's for good (not TLS 1.3, another suite,
    /// a KeyUpdate before it could be handed over).
    kept: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream<S> {
    pub(super) fn new(mut ssl: Ssl, io: S) -> Result<Self, ErrorStack> {
        Track::attach(&mut ssl);
        let wire = Wire {
            io: Some(io),
            read: Window::default(),
            write: Window::default(),
            refill: true,
        };
        Ok(TlsStream {
            session: Session::OpenSsl(OpenSsl {
                tls: SslStream::new(ssl, wire)?,
                close_notified: false,
                handshake: None,
                ticket_wait: None,
                kept: false,
            }),
        })
    }

    /// The client handshake; its last flight may still be in the wire,
    /// until the stream is flushed.
    pub(super) async fn connect(&mut self) -> Result<(), ssl::Error> {
        let Session::OpenSsl(openssl) = &mut self.session else {
            // Handed over only after a handshake: none is left to do.
            return Ok(());
        };
        let started = Instant::now();
        std::future::poll_fn(|cx| Pin::new(&mut openssl.tls).poll_connect(cx)).await?;
        openssl.handshake = Some(started.elapsed());
        Ok(())
    }

    /// The server handshake, likewise.
    pub(super) async fn accept(&mut self) -> Result<(), ssl::Error> {
        let Session::OpenSsl(openssl) = &mut self.session else {
            // Handed over only after a handshake: none is left to do.
            return Ok(());
        };
        let started = Instant::now();
        std::future::poll_fn(|cx| Pin::new(&mut openssl.tls).poll_accept(cx)).await?;
        openssl.handshake = Some(started.elapsed());
        Ok(())
    }

    /// OpenSSL's session, until the records are handed over (at the
    /// session's first idle moment after its handshake).
    pub fn ssl(&self) -> Option<&SslRef> {
        match &self.session {
            Session::OpenSsl(openssl) => Some(openssl.tls.ssl()),
            Session::Own(_) => None,
        }
    }

    /// Whether the session's records are ours now.
    #[cfg(test)]
    pub(super) fn is_handed_over(&self) -> bool {
        matches!(self.session, Session::Own(_))
    }

    /// The stream under the session.
    pub fn get_ref(&self) -> &S {
        match &self.session {
            Session::OpenSsl(openssl) => openssl.tls.get_ref().io(),
            Session::Own(records) => records.get_ref(),
        }
    }

    /// Bytes read from the socket and not yet taken by OpenSSL, and sealed
    /// records not yet sent, for tests that watch the buffers come and go.
    #[cfg(test)]
    fn buffered(&self) -> (Option<usize>, Option<usize>) {
        match &self.session {
            Session::OpenSsl(openssl) => {
                let wire = openssl.tls.get_ref();
                (wire.read.held(), wire.write.held())
            }
            Session::Own(records) => records.buffered(),
        }
    }

    /// At an idle moment of an OpenSSL session (a read found nothing):
    /// gives back its record buffers, and hands a TLS 1.3 session's records
    /// over once OpenSSL holds none of them. A client first waits for its
    /// session tickets: for one record read after the handshake, or for
    /// twice the handshake's time. True if the session was handed over.
    fn idle(&mut self, cx: &mut Context<'_>) -> bool {
        let Session::OpenSsl(openssl) = &mut self.session else {
            return false;
        };
        let ssl = openssl.tls.ssl();
        if !super::idle::release_buffers(ssl) || openssl.kept || openssl.close_notified {
            return false;
        }
        let Some(took) = openssl.handshake else {
            return false;
        };
        if !ssl.is_server() && !Track::has_read(ssl) {
            let wait = openssl.ticket_wait.get_or_insert_with(|| {
                let wait = (took * 2).clamp(TICKET_WAIT_MIN, TICKET_WAIT_MAX);
                Box::pin(tokio::time::sleep(wait))
            });
            if wait.as_mut().poll(cx).is_pending() {
                return false;
            }
        }
        let Some(keys) = Track::handover(ssl) else {
            openssl.kept = true;
            openssl.ticket_wait = None;
            return false;
        };
        let wire = openssl.tls.get_mut();
        let (Some(io), read, write) = (
            wire.io.take(),
            std::mem::take(&mut wire.read),
            std::mem::take(&mut wire.write),
        ) else {
            return false;
        };
        self.session = Session::Own(Box::new(Records::new(io, read, write, keys)));
        true
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let openssl = match &mut this.session {
            Session::Own(records) => return Pin::new(&mut **records).poll_read(cx, buf),
            Session::OpenSsl(openssl) => openssl,
        };
        // The wire sends what was written before it waits for the socket.
        let first = Pin::new(&mut openssl.tls).poll_read(cx, buf);
        if first.is_pending() {
            if this.idle(cx) {
                // Ours now, and the socket not yet asked since.
                return Pin::new(this).poll_read(cx, buf);
            }
            return Poll::Pending;
        }
        ready!(first)?;
        // SSL_read opens one record a call. Records already read from the
        // socket are opened into the same buffer while it has room, so a
        // relay's read carries several and its write to a socket is one
        // send (and one wakeup of whoever reads there) for them all. The
        // socket is not read again here: a record still partly on its way
        // waits for the next read, and so does an error or the end of the
        // stream, after the bytes before it.
        openssl.tls.get_mut().refill = false;
        while buf.remaining() > 0 && !openssl.tls.get_ref().read.is_empty() {
            let before = buf.filled().len();
            match Pin::new(&mut openssl.tls).poll_read(cx, buf) {
                Poll::Ready(Ok(())) if buf.filled().len() > before => {}
                _ => break,
            }
        }
        openssl.tls.get_mut().refill = true;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().session {
            Session::OpenSsl(openssl) => Pin::new(&mut openssl.tls).poll_write(cx, buf),
            Session::Own(records) => Pin::new(&mut **records).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().session {
            Session::OpenSsl(openssl) => openssl.tls.get_mut().poll_send(cx),
            Session::Own(records) => Pin::new(&mut **records).poll_flush(cx),
        }
    }

    /// The close_notify, everything still in the wire, then the shutdown of
    /// the stream underneath.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let openssl = match &mut self.get_mut().session {
            Session::Own(records) => return Pin::new(&mut **records).poll_shutdown(cx),
            Session::OpenSsl(openssl) => openssl,
        };
        if !openssl.close_notified {
            // SSL_shutdown, then the wire's own poll_shutdown, which only
            // agrees: the sending is done below.
            ready!(Pin::new(&mut openssl.tls).poll_shutdown(cx))?;
            openssl.close_notified = true;
        }
        let wire = openssl.tls.get_mut();
        ready!(wire.poll_send(cx))?;
        Pin::new(wire.io_mut()?).poll_shutdown(cx)
    }
}

/// The BIO under OpenSSL: the stream, and the bytes on their way through.
struct Wire<S: AsyncRead + AsyncWrite + Unpin> {
    /// None once the session is handed over, and the wire about to go.
    io: Option<S>,
    /// Ciphertext read from `io` that OpenSSL has not taken yet.
    read: Window,
    /// Sealed records OpenSSL wrote that `io` has not taken yet.
    write: Window,
    /// Whether an empty read window is refilled from `io`; false while a
    /// read goes on opening records already read, which must not wait.
    refill: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    fn io(&self) -> &S {
        match &self.io {
            Some(io) => io,
            None => unreachable!("the wire is dropped as soon as its stream is taken"),
        }
    }

    fn io_mut(&mut self) -> io::Result<&mut S> {
        self.io
            .as_mut()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// Sends everything in the write window, then flushes `io`.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let io = self.io.as_mut().ok_or(io::ErrorKind::NotConnected)?;
        self.write.poll_send(io, cx)
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
            let io = this.io.as_mut().ok_or(io::ErrorKind::NotConnected)?;
            let mut filled = ReadBuf::new(this.read.spare());
            match Pin::new(io).poll_read(cx, &mut filled) {
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

#[cfg(test)]
mod tests;
