//! The socket under an HTTP/2 connection, as h2 writes to it.
//!
//! h2 writes a DATA frame as two writes (its head with the payload's first
//! bytes, then the rest) and flushes after every frame; over TLS each write
//! is a record and a system call of its own, so a 16 KiB message took two
//! records, one of them 1 KiB. A [`Wire`] gathers what h2 writes and passes
//! it on in whole records: h2's flushes send the whole records gathered,
//! and the rest waits until the connection's driver has done all it can
//! for now ([`Tail::poll_flush`]), so frames written back to back, from one
//! stream or many, share full records.
//!
//! A payload's whole records, once the records before them are passed on,
//! go straight from h2's buffer to the socket, with no copy: the frame's
//! head and the payload's first bytes are gathered up to a record's end,
//! and the rest goes as it is.
//!
//! The gathered bytes are held only while bytes move: the buffer is let go
//! once a driver's turn finds nothing written since the last.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{ready, Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Stream;

/// The most plaintext one TLS record carries (RFC 8446, section 5.1).
pub(super) const RECORD: usize = 16 * 1024;

/// The most gathered before a write waits for the socket.
const GATHER_MAX: usize = 4 * RECORD;

struct Inner {
    io: Stream,
    /// Written by h2, not yet passed on.
    out: BytesMut,
    /// Whether h2 wrote since the driver's last flush.
    wrote: bool,
}

fn locked(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // Every change under the lock leaves `out` whole: a panic elsewhere
    // while it was held cannot have left half a write in it.
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// Passes on the whole records gathered, or with `all` every byte.
    fn poll_send(&mut self, cx: &mut Context<'_>, all: bool) -> Poll<io::Result<()>> {
        let keep = if all { 0 } else { self.out.len() % RECORD };
        while self.out.len() > keep {
            let end = self.out.len() - keep;
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out[..end]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

/// h2's side: the socket, with its writes gathered.
pub(super) struct Wire(Arc<Mutex<Inner>>);

/// The driver's side: sends what h2 left gathered.
pub(super) struct Tail(Arc<Mutex<Inner>>);

/// A socket for h2 to write to through a [`Wire`], and the [`Tail`] its
/// driver flushes.
pub(super) fn wire(io: Stream) -> (Wire, Tail) {
    let inner = Arc::new(Mutex::new(Inner {
        io,
        out: BytesMut::new(),
        wrote: false,
    }));
    (Wire(inner.clone()), Tail(inner))
}

impl Tail {
    /// Sends every byte gathered and flushes the socket; the driver calls
    /// it whenever h2 has done all it can for now. A turn with nothing
    /// written since the last lets the buffer go.
    pub(super) fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = locked(&self.0);
        if !inner.wrote {
            if inner.out.is_empty() && inner.out.capacity() > 0 {
                inner.out = BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        ready!(inner.poll_send(cx, true))?;
        ready!(Pin::new(&mut inner.io).poll_flush(cx))?;
        inner.wrote = false;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut locked(&self.0).io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut inner = locked(&self.0);
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(0, |b| b.len());
        if inner.out.len() >= GATHER_MAX
            || (first >= RECORD && inner.out.len().is_multiple_of(RECORD))
        {
            ready!(inner.poll_send(cx, false))?;
        }
        if inner.out.is_empty() && first >= RECORD {
            // Whole records straight from h2's buffer (a message's payload),
            // with no copy. A write that must wait is offered the same
            // bytes again, as a TLS write wants its retry.
            let Some(buf) = bufs.iter().find(|b| !b.is_empty()) else {
                return Poll::Ready(Ok(0));
            };
            let whole = (buf.len() / RECORD * RECORD).min(GATHER_MAX);
            let n = ready!(Pin::new(&mut inner.io).poll_write(cx, &buf[..whole]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            inner.wrote = true;
            return Poll::Ready(Ok(n));
        }
        let mut room = GATHER_MAX - inner.out.len();
        if inner.out.capacity() < GATHER_MAX {
            // Once per burst: the buffer is let go between bursts.
            let more = GATHER_MAX - inner.out.len();
            inner.out.reserve(more);
        }
        let mut taken = 0;
        for buf in bufs {
            // Up to a record's end only, when what follows in this buffer
            // is a whole record or more: that goes straight on the next
            // write.
            let to_end = RECORD - inner.out.len() % RECORD;
            let n = if buf.len() >= to_end + RECORD {
                to_end
            } else {
                buf.len()
            }
            .min(room);
            inner.out.put_slice(&buf[..n]);
            taken += n;
            room -= n;
            if room == 0 || n < buf.len() {
                break;
            }
        }
        if taken > 0 {
            inner.wrote = true;
        }
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Sends the whole records gathered; the rest, and the socket's own
    /// flush (a layer that buffers records may send several at once), wait
    /// for the driver's [`Tail::poll_flush`].
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = locked(&self.0);
        if inner.out.len() >= RECORD {
            ready!(inner.poll_send(cx, false))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = locked(&self.0);
        ready!(inner.poll_send(cx, true))?;
        ready!(Pin::new(&mut inner.io).poll_flush(cx))?;
        inner.wrote = false;
        Pin::new(&mut inner.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    impl Tail {
        /// Bytes gathered and not yet passed on, and the buffer's capacity.
        fn held(&self) -> (usize, usize) {
            let inner = locked(&self.0);
            (inner.out.len(), inner.out.capacity())
        }
    }

    /// A wire over one end of a loopback connection, and the other end.
    async fn pair() -> (Wire, Tail, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (wire, tail) = wire(Stream::Tcp(client.unwrap()));
        (wire, tail, accepted.unwrap().0)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// Writes `data` as h2 does a DATA frame: a head, then the payload.
    async fn write_frame(wire: &mut Wire, head: &[u8], data: &[u8]) {
        let (mut head, mut data) = (head, data);
        while !head.is_empty() || !data.is_empty() {
            let bufs = [IoSlice::new(head), IoSlice::new(data)];
            let n = poll_fn(|cx| Pin::new(&mut *wire).poll_write_vectored(cx, &bufs))
                .await
                .unwrap();
            assert!(n > 0);
            let from_head = n.min(head.len());
            head = &head[from_head..];
            data = &data[n - from_head..];
        }
    }

    #[tokio::test]
    async fn frames_go_on_in_whole_records_and_the_rest_when_the_driver_is_done() {
        let (mut wire, tail, mut peer) = pair().await;
        let sent = pattern(40_000);
        write_frame(&mut wire, &sent[..9], &sent[9..20_000]).await;
        wire.flush().await.unwrap();
        write_frame(&mut wire, &sent[20_000..20_009], &sent[20_009..]).await;
        wire.flush().await.unwrap();
        assert_eq!(
            tail.held().0,
            40_000 - 2 * RECORD,
            "only whole records went"
        );
        let mut got = vec![0; 40_000];
        peer.read_exact(&mut got[..2 * RECORD]).await.unwrap();
        poll_fn(|cx| tail.poll_flush(cx)).await.unwrap();
        assert_eq!(tail.held().0, 0);
        peer.read_exact(&mut got[2 * RECORD..]).await.unwrap();
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn a_write_past_the_gathering_limit_takes_what_fits_and_nothing_is_lost() {
        let (mut wire, tail, mut peer) = pair().await;
        let sent = pattern(GATHER_MAX + 5_000);
        let mut at = 0;
        while at < GATHER_MAX - 1_000 {
            at += wire.write(&sent[at..at + 1_000]).await.unwrap();
        }
        let n = wire.write(&sent[at..at + 2_000]).await.unwrap();
        assert_eq!(at + n, GATHER_MAX, "a write takes no more than the limit");
        assert_eq!(tail.held().0, GATHER_MAX);
        // The next write passes the whole records on first.
        wire.write_all(&sent[GATHER_MAX..]).await.unwrap();
        assert_eq!(tail.held().0, 5_000);
        poll_fn(|cx| tail.poll_flush(cx)).await.unwrap();
        let mut got = vec![0; sent.len()];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn a_payloads_whole_records_after_the_first_go_on_uncopied() {
        let (mut wire, tail, mut peer) = pair().await;
        let sent = pattern(9 + 3 * RECORD + 5_000);
        // The head and the payload up to the first record's end are
        // gathered; that record goes on, then the two whole records after
        // it straight from the payload; the last bytes are gathered.
        let bufs = [IoSlice::new(&sent[..9]), IoSlice::new(&sent[9..])];
        let n = poll_fn(|cx| Pin::new(&mut wire).poll_write_vectored(cx, &bufs))
            .await
            .unwrap();
        assert_eq!(n, RECORD, "gathered to the record's end");
        let n = wire.write(&sent[RECORD..]).await.unwrap();
        assert_eq!(n, 2 * RECORD, "whole records, straight");
        assert_eq!(tail.held().0, 0, "nothing copied");
        wire.write_all(&sent[3 * RECORD..]).await.unwrap();
        assert_eq!(tail.held().0, 5_009);
        let mut got = vec![0; sent.len()];
        peer.read_exact(&mut got[..3 * RECORD]).await.unwrap();
        poll_fn(|cx| tail.poll_flush(cx)).await.unwrap();
        peer.read_exact(&mut got[3 * RECORD..]).await.unwrap();
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn a_turn_with_nothing_written_lets_the_buffer_go() {
        let (mut wire, tail, mut peer) = pair().await;
        wire.write_all(b"settings").await.unwrap();
        poll_fn(|cx| tail.poll_flush(cx)).await.unwrap();
        assert!(tail.held().1 > 0, "kept while bytes move");
        let mut got = [0; 8];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"settings");
        poll_fn(|cx| tail.poll_flush(cx)).await.unwrap();
        assert_eq!(tail.held(), (0, 0), "let go once a turn wrote nothing");
    }

    #[tokio::test]
    async fn shutdown_sends_everything_gathered_then_ends_the_stream() {
        let (mut wire, _tail, mut peer) = pair().await;
        wire.write_all(b"goaway").await.unwrap();
        wire.shutdown().await.unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"goaway");
    }
}
