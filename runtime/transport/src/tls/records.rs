//! A TLS 1.3 session whose records the runtime protects itself, once
//! OpenSSL has done the handshake (what kernel TLS does, in userspace: this
//! kernel has none).
//!
//! OpenSSL 3.0 holds about 15 KiB a session for its whole life, most of it
//! the SSL object's record layer, whatever the session carries; an idle
//! proxied connection is mostly that. Handed over (see `track.rs`), a
//! session holds its two directions' keys, about 1 KiB, and the socket
//! buffers only while bytes move, as before: the same [`Window`]s, the
//! same sends (records gather until the window fills, the stream is
//! flushed, or a read finds nothing to read).
//!
//! Application data (at most 32 empty records in a row), a server's session
//! tickets (skipped: the connector keeps the ones OpenSSL read before the
//! hand-over), KeyUpdates (followed, and answered when asked) and alerts
//! (close_notify ends the stream; any other fails it) are what a TLS 1.3
//! peer may send after its handshake; anything else (a client's ticket
//! included) fails the stream with the alert OpenSSL would send.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use etemenanki_proto::tls13::{
    self, ContentType, EmptyRecords, Keys, Message, PostHandshake, HEADER_LEN, MAX_BODY,
    MAX_PLAINTEXT, SEAL_OVERHEAD,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::track::Handover;
use super::window::Window;
use super::WIRE_BUF;

/// The most a record takes on the wire.
const RECORD_MAX: usize = HEADER_LEN + MAX_BODY;
/// Records sealed under one key before we move to the next: under RFC
/// 8446 5.5's limit for AES-GCM (2^24.5 full records), and ChaCha20's
/// is far above it.
const REKEY_AFTER: u64 = 1 << 24;
/// The alert a peer may send before its close_notify (RFC 8446 6.1),
/// which OpenSSL reads past.
const USER_CANCELED: u8 = 90;

/// The plaintext of the record at the front of the read window, not yet
/// read.
struct Opened {
    /// Where it lies, from the window's start.
    plain: Range<usize>,
    /// The record's whole length, consumed once its plaintext is read.
    len: usize,
}

pub(super) struct Records<S: AsyncRead + AsyncWrite + Unpin> {
    io: S,
    /// Ciphertext read from `io`; the record at its front may be opened.
    read: Window,
    /// Sealed records `io` has not taken yet.
    write: Window,
    opener: Keys,
    sealer: Keys,
    opened: Option<Opened>,
    post: PostHandshake,
    empty: EmptyRecords,
    /// A KeyUpdate of ours is due: the peer asked for one, or our key has
    /// sealed [`REKEY_AFTER`] records.
    owe_update: bool,
    /// The peer's close_notify came: every later read is the end.
    peer_closed: bool,
    /// Our close_notify is in the write window.
    close_notified: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Records<S> {
    /// Takes over a session from OpenSSL, with the socket and whatever
    /// bytes its wire still holds either way.
    pub(super) fn new(io: S, read: Window, write: Window, keys: Handover) -> Records<S> {
        Records {
            io,
            read,
            write,
            opener: keys.read,
            sealer: keys.write,
            opened: None,
            post: PostHandshake::new(keys.peer),
            empty: EmptyRecords::default(),
            owe_update: false,
            peer_closed: false,
            close_notified: false,
        }
    }

    pub(super) fn get_ref(&self) -> &S {
        &self.io
    }

    /// What the read and write windows hold, as `TlsStream::buffered`.
    #[cfg(test)]
    pub(super) fn buffered(&self) -> (Option<usize>, Option<usize>) {
        (self.read.held(), self.write.held())
    }

    /// The length of the whole record at the front of the read window, if
    /// all of it is there.
    fn front_record(&self) -> Result<Option<usize>, tls13::Error> {
        let bytes = self.read.bytes();
        let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let len = tls13::record_len(header)?;
        Ok((bytes.len() >= len).then_some(len))
    }

    /// Opens the record of `len` bytes at the front of the read window.
    fn open_front(&mut self, len: usize) -> Result<(), tls13::Error> {
        let record = &mut self.read.bytes_mut()[..len];
        let (kind, plain) = self.opener.open(record)?;
        self.empty.note(plain.len())?;
        let content = &record[plain.clone()];
        if kind != ContentType::Handshake && self.post.is_mid_message() {
            return Err(tls13::Error::UnexpectedMessage);
        }
        match kind {
            ContentType::ApplicationData if !plain.is_empty() => {
                self.opened = Some(Opened { plain, len });
                return Ok(());
            }
            ContentType::ApplicationData => {}
            ContentType::Handshake => {
                let mut update = None;
                self.post.feed(content, |message| {
                    if let Message::KeyUpdate { update_requested } = message {
                        update = Some(update_requested);
                    }
                })?;
                if let Some(requested) = update {
                    // A KeyUpdate ends its record (RFC 8446 5.1): what
                    // follows is under the next secret.
                    self.opener.update();
                    self.owe_update |= requested;
                }
            }
            ContentType::Alert => match tls13::alert(content) {
                Ok(()) => self.peer_closed = true,
                Err(tls13::Error::Alert(USER_CANCELED)) => {}
                Err(e) => return Err(e),
            },
        }
        self.read.consume(len);
        Ok(())
    }

    /// A peer's fault: the fatal alert RFC 8446 names for it goes out as
    /// far as the socket takes it now (as OpenSSL's does), and the stream
    /// fails with the fault.
    fn fail(&mut self, error: tls13::Error) -> io::Error {
        let alert = error.alert_to_send().filter(|_| !self.close_notified);
        if let Some(description) = alert {
            if WIRE_BUF - self.write.end >= 2 + SEAL_OVERHEAD
                && self.seal(ContentType::Alert, &[2, description]).is_ok()
            {
                self.close_notified = true;
                let _ = self.poll_send(&mut Context::from_waker(Waker::noop()));
            }
        }
        error.into()
    }

    /// Reads more ciphertext from `io` into the read window.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Room for the longest record after what is held of the next.
        if self.read.start > 0 && WIRE_BUF - self.read.start < RECORD_MAX {
            self.read.compact();
        }
        let mut filled = ReadBuf::new(self.read.spare());
        match Pin::new(&mut self.io).poll_read(cx, &mut filled) {
            Poll::Ready(Ok(())) => {
                let n = filled.filled().len();
                if n == 0 {
                    self.read.release();
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "tls peer closed the connection without a close_notify",
                    )));
                }
                self.read.end += n;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                self.read.release();
                Poll::Ready(Err(e))
            }
            Poll::Pending => {
                if self.read.is_empty() {
                    self.read.release();
                }
                Poll::Pending
            }
        }
    }

    /// Makes room for a record of `need` bytes in the write window, sealing
    /// a KeyUpdate first if the peer asked for one or our key has sealed
    /// enough.
    fn poll_room(&mut self, cx: &mut Context<'_>, need: usize) -> Poll<io::Result<()>> {
        if self.sealer.seq() >= REKEY_AFTER {
            self.owe_update = true;
        }
        if self.owe_update {
            ready!(self.poll_fit(cx, tls13::KEY_UPDATE_NOT_REQUESTED.len() + SEAL_OVERHEAD))?;
            self.seal(ContentType::Handshake, &tls13::KEY_UPDATE_NOT_REQUESTED)?;
            self.sealer.update();
            self.owe_update = false;
        }
        self.poll_fit(cx, need)
    }

    /// Sends until `need` bytes fit after what the write window holds.
    fn poll_fit(&mut self, cx: &mut Context<'_>, need: usize) -> Poll<io::Result<()>> {
        if WIRE_BUF - self.write.end >= need {
            return Poll::Ready(Ok(()));
        }
        match self.poll_send(cx) {
            Poll::Ready(result) => Poll::Ready(result),
            // The socket took part of the window: room at its end.
            Poll::Pending if self.write.start > 0 => {
                self.write.compact();
                if WIRE_BUF - self.write.end >= need {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Seals `plain` (at most [`MAX_PLAINTEXT`] bytes, with room made for
    /// it) as one record at the end of the write window.
    fn seal(&mut self, kind: ContentType, plain: &[u8]) -> io::Result<()> {
        let spare = self.write.spare();
        spare[HEADER_LEN..HEADER_LEN + plain.len()].copy_from_slice(plain);
        let sealed = self.sealer.seal(kind, spare, plain.len())?;
        self.write.end += sealed;
        Ok(())
    }

    /// Sends everything in the write window, then flushes `io`.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.write.poll_send(&mut self.io, cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Records<S> {
    /// Opens records into `out` while it has room and whole records are
    /// at hand; reads the socket only when nothing was opened yet.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut given = false;
        loop {
            if let Some(opened) = &mut this.opened {
                let n = opened.plain.len().min(out.remaining());
                let start = opened.plain.start;
                out.put_slice(&this.read.bytes()[start..start + n]);
                opened.plain.start += n;
                given |= n > 0;
                if !opened.plain.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                let len = opened.len;
                this.opened = None;
                this.read.consume(len);
            }
            if this.peer_closed || out.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let front = match this.front_record() {
                Ok(Some(len)) => this.open_front(len).map(|()| true),
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            };
            match front {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => return Poll::Ready(Err(this.fail(e))),
            }
            if given {
                // A record partly here waits for the next read.
                return Poll::Ready(Ok(()));
            }
            match this.poll_fill(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // Nothing to read: whatever was written goes out
                    // before the wait, a KeyUpdate owed included.
                    let sent = match this.poll_room(cx, 0) {
                        Poll::Ready(Ok(())) => this.poll_send(cx),
                        other => other,
                    };
                    if let Poll::Ready(Err(e)) = sent {
                        return Poll::Ready(Err(e));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Records<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let want = buf.len().min(MAX_PLAINTEXT);
        // A whole record if the socket lets the window make room for it,
        // else what fits now.
        match this.poll_room(cx, want + SEAL_OVERHEAD) {
            Poll::Ready(result) => result?,
            Poll::Pending if WIRE_BUF - this.write.end > SEAL_OVERHEAD && !this.owe_update => {}
            Poll::Pending => return Poll::Pending,
        }
        let n = want.min(WIRE_BUF - this.write.end - SEAL_OVERHEAD);
        this.seal(ContentType::ApplicationData, &buf[..n])?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx, 0))?;
        this.poll_send(cx)
    }

    /// The close_notify, everything still in the window, then the
    /// shutdown of the stream underneath.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_notified {
            ready!(this.poll_room(cx, tls13::CLOSE_NOTIFY.len() + SEAL_OVERHEAD))?;
            this.seal(ContentType::Alert, &tls13::CLOSE_NOTIFY)?;
            this.close_notified = true;
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Drop for Records<S> {
    /// Records sealed and unsent when the stream is dropped (a refusal
    /// written just before the connection is given up) go out as far as
    /// the socket takes them now, as the OpenSSL wire's do.
    fn drop(&mut self) {
        if !self.write.is_empty() {
            let _ = self.poll_send(&mut Context::from_waker(Waker::noop()));
        }
    }
}

#[cfg(test)]
mod tests;
