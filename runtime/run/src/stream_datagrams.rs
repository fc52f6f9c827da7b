//! UDP packets carried inside a stream (Trojan, and VLESS and VMess, whose
//! packets name one target): a [`DatagramLink`] that polls the stream's
//! reads and writes through a [`DatagramCodec`], the datagram counterpart
//! of the framed-stream runtime (`framed.rs`). A client's link to its proxy
//! server, and a server inbound's link to its client, are the same shape.
//!
//! Two buffers of `BUF` bytes, one per direction, each taken from the
//! thread's spares only while its bytes move and given back once drained:
//! an idle link holds neither, and nothing is allocated per packet.
//!
//! - Sending: a packet is copied once, behind the codec's headroom, sealed
//!   where it lies and written; backpressure is not taking a packet while a
//!   sealed one is unwritten.
//! - Receiving: the stream is read into the buffer and packets are opened
//!   where they lie; a packet split across reads waits for the rest, and one
//!   that cannot fit the buffer fails the link. The one allocation a
//!   packet can cost is a reply from a domain source, whose name the owned
//!   [`Address`] the fan-out gets must hold; servers name replies by IP.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use etemenanki_proto::codec::{DatagramCodec, Packet};
use etemenanki_proto::Address;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::buffers;
use crate::outbound::DatagramLink;

pub struct StreamDatagrams<S, C, const BUF: usize> {
    inner: S,
    codec: C,
    /// The sealed packet, `write[staged]` not yet written.
    write: Option<Box<[u8]>>,
    staged: Range<usize>,
    /// Bytes read, `read[filled]` not yet opened.
    read: Option<Box<[u8]>>,
    filled: Range<usize>,
    /// The wire failed: every later call fails too.
    broken: bool,
}

/// A frame from the server that the receive buffer cannot hold whole.
fn upstream_frame_too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "upstream frame larger than the client runtime's buffer",
    )
}

/// A packet whose sealed frame the send buffer cannot hold.
fn frame_too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "frame larger than the client runtime's buffer",
    )
}

impl<S, C: DatagramCodec, const BUF: usize> StreamDatagrams<S, C, BUF> {
    /// A link over `inner`, whose request is written; `ahead` holds bytes
    /// the handshake read past its answer, the first of the packets.
    pub fn new(inner: S, codec: C, ahead: &[u8]) -> io::Result<Self> {
        const {
            assert!(
                BUF > C::HEADROOM + C::TAILROOM,
                "BUF must exceed the codec's reserve or nothing can be sealed"
            )
        };
        if ahead.len() > BUF {
            return Err(upstream_frame_too_large());
        }
        let mut link = StreamDatagrams {
            inner,
            codec,
            write: None,
            staged: 0..0,
            read: None,
            filled: 0..0,
            broken: false,
        };
        if !ahead.is_empty() {
            let mut buf = buffers::take(BUF);
            buf[..ahead.len()].copy_from_slice(ahead);
            link.read = Some(buf);
            link.filled = 0..ahead.len();
        }
        Ok(link)
    }

    /// Seals `payload` for `to` into a buffer of its own.
    fn seal(&mut self, payload: &[u8], to: &Address) -> io::Result<()> {
        let end = C::HEADROOM + payload.len() + C::TAILROOM;
        if end > BUF {
            return Err(frame_too_large());
        }
        let mut buf = buffers::take(BUF);
        buf[C::HEADROOM..C::HEADROOM + payload.len()].copy_from_slice(payload);
        match self.codec.seal_to(&mut buf[..end], payload.len(), to) {
            // Dropped, as UDP may: a multiplexed stream with no session
            // left for it.
            Ok(sealed) if sealed.is_empty() => {
                buffers::give(buf);
                Ok(())
            }
            Ok(sealed) if sealed.end <= end => {
                self.write = Some(buf);
                self.staged = sealed;
                Ok(())
            }
            Ok(_) => {
                buffers::give(buf);
                Err(io::Error::other("codec sealed an impossible byte count"))
            }
            Err(e) => {
                buffers::give(buf);
                Err(e)
            }
        }
    }

    /// The next packet opened from what was read, if one is whole: its
    /// payload copied into `buf` (truncated if it does not fit, as UDP
    /// does) and its source.
    fn open(&mut self, buf: &mut ReadBuf<'_>) -> io::Result<Option<Address>> {
        let Some(read) = &mut self.read else {
            return Ok(None);
        };
        let filled = self.filled.clone();
        let Some(Packet {
            consumed,
            peer,
            payload,
        }) = self.codec.open_from(&mut read[filled.clone()])?
        else {
            return Ok(None);
        };
        if consumed == 0
            || payload.start > payload.end
            || payload.end > consumed
            || consumed > filled.len()
        {
            return Err(io::Error::other("codec opened an impossible frame"));
        }
        let payload = &read[filled.start + payload.start..filled.start + payload.end];
        let n = payload.len().min(buf.remaining());
        buf.put_slice(&payload[..n]);
        self.filled.start += consumed;
        self.release_read();
        Ok(Some(peer))
    }

    /// Gives the read buffer back once nothing in it is left to open.
    fn release_read(&mut self) {
        if self.filled.is_empty() {
            if let Some(buf) = self.read.take() {
                buffers::give(buf);
            }
            self.filled = 0..0;
        }
    }

    /// The wire failed: this call fails with `e`, every later one too.
    fn fail<T>(&mut self, e: io::Error) -> Poll<io::Result<T>> {
        self.broken = true;
        Poll::Ready(Err(e))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin, C: DatagramCodec, const BUF: usize>
    StreamDatagrams<S, C, BUF>
{
    /// Writes the sealed packet out and flushes it; gives the buffer back
    /// once it is.
    fn poll_staged(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(buf) = &self.write else {
            return Poll::Ready(Ok(()));
        };
        while !self.staged.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &buf[self.staged.clone()]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.staged.start += n;
        }
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        if let Some(buf) = self.write.take() {
            buffers::give(buf);
        }
        Poll::Ready(Ok(()))
    }

    /// Reads more of the stream behind what is held, moving a partial packet
    /// to the front when the buffer's end is reached.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let buf = self.read.get_or_insert_with(|| buffers::take(BUF));
        if self.filled.end == BUF {
            if self.filled.start == 0 {
                return Poll::Ready(Err(upstream_frame_too_large()));
            }
            buf.copy_within(self.filled.clone(), 0);
            self.filled = 0..self.filled.len();
        }
        let mut read = ReadBuf::new(&mut buf[self.filled.end..]);
        match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                self.release_read();
                return Poll::Pending;
            }
        }
        let n = read.filled().len();
        if n == 0 {
            return Poll::Ready(Err(if self.filled.is_empty() {
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the upstream closed the stream the datagrams ride on",
                )
            } else {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "upstream closed inside a frame",
                )
            }));
        }
        self.filled.end += n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin, C: DatagramCodec, const BUF: usize> DatagramLink
    for StreamDatagrams<S, C, BUF>
{
    /// `Pending` while the previous packet is still being written, so this
    /// one is not taken; once taken, what the stream cannot take at once is
    /// written by the next call, a send or a receive.
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        if self.broken {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        }
        if let Err(e) = ready!(self.poll_staged(cx)) {
            return self.fail(e);
        }
        // A packet refused here never reached the wire.
        self.seal(payload, to)?;
        if let Poll::Ready(Err(e)) = self.poll_staged(cx) {
            return self.fail(e);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        if self.broken {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        }
        // A packet the stream did not take at once goes on here too: the
        // waker its write registered is this task's.
        if let Poll::Ready(Err(e)) = self.poll_staged(cx) {
            return self.fail(e);
        }
        loop {
            match self.open(buf) {
                Ok(Some(source)) => return Poll::Ready(Ok(source)),
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
            if let Err(e) = ready!(self.poll_fill(cx)) {
                return self.fail(e);
            }
        }
    }
}

impl<S, C, const BUF: usize> Drop for StreamDatagrams<S, C, BUF> {
    fn drop(&mut self) {
        for buf in [self.write.take(), self.read.take()].into_iter().flatten() {
            buffers::give(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use etemenanki_proto::trojan::{UdpFraming, PACKET_HEADER_MAX};
    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    const BUF: usize = 1024;

    type Link = StreamDatagrams<DuplexStream, UdpFraming, BUF>;

    /// A link over one end of an in-memory pipe of `capacity` bytes, and
    /// the other end as the server.
    fn pair(capacity: usize) -> (Link, DuplexStream) {
        let (client, server) = duplex(capacity);
        (
            StreamDatagrams::new(client, UdpFraming, &[]).unwrap(),
            server,
        )
    }

    async fn send(link: &mut Link, payload: &[u8], to: &Address) -> io::Result<()> {
        poll_fn(|cx| link.poll_send_to(cx, payload, to)).await
    }

    async fn recv(link: &mut Link) -> io::Result<(Address, Vec<u8>)> {
        let mut buf = [0u8; BUF];
        let mut read = ReadBuf::new(&mut buf);
        let source = poll_fn(|cx| link.poll_recv_from(cx, &mut read)).await?;
        Ok((source, read.filled().to_vec()))
    }

    fn frame(from: &Address, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; PACKET_HEADER_MAX];
        buf.extend_from_slice(payload);
        let range = UdpFraming.seal_to(&mut buf, payload.len(), from).unwrap();
        buf[range].to_vec()
    }

    fn ip(text: &str) -> Address {
        Address::Ip(text.parse().unwrap())
    }

    #[tokio::test]
    async fn packets_go_out_framed_and_replies_split_across_reads_come_back_whole() {
        let (mut link, mut server) = pair(64 * 1024);
        let dns = ip("192.0.2.1:53");
        let named = Address::Domain("peer.example".into(), 7);
        send(&mut link, b"query", &dns).await.unwrap();
        send(&mut link, b"hello", &named).await.unwrap();
        let mut expected = frame(&dns, b"query");
        expected.extend_from_slice(&frame(&named, b"hello"));
        let mut got = vec![0u8; expected.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        assert!(
            link.write.is_none(),
            "a written packet's buffer is given back"
        );

        // Replies dribbled three bytes at a time.
        let mut replies = frame(&dns, b"answer");
        replies.extend_from_slice(&frame(&named, b"olleh"));
        let writer = tokio::spawn(async move {
            for piece in replies.chunks(3) {
                server.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            server
        });
        assert_eq!(recv(&mut link).await.unwrap(), (dns, b"answer".to_vec()));
        assert_eq!(recv(&mut link).await.unwrap(), (named, b"olleh".to_vec()));
        assert!(link.read.is_none(), "a drained read buffer is given back");
        drop(writer.await.unwrap());
        let e = recv(&mut link).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        let e = recv(&mut link).await.unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::NotConnected,
            "the wire failed once and for all"
        );
    }

    #[tokio::test]
    async fn a_packet_the_stream_takes_in_pieces_is_finished_by_the_next_receive() {
        let (mut link, mut server) = pair(16);
        let to = ip("192.0.2.1:53");
        let payload = vec![9u8; 100];
        // Taken at once, though the pipe holds only 16 bytes of it.
        send(&mut link, &payload, &to).await.unwrap();
        let expected = frame(&to, &payload);
        let server_side = async move {
            let mut got = vec![0u8; expected.len()];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(got, expected);
            server.write_all(&frame(&to, b"ack")).await.unwrap();
            server
        };
        let (reply, _server) = tokio::join!(recv(&mut link), server_side);
        assert_eq!(reply.unwrap(), (ip("192.0.2.1:53"), b"ack".to_vec()));
    }

    #[tokio::test]
    async fn a_packet_too_large_for_the_buffer_fails_its_send_and_says_so() {
        let (mut link, mut server) = pair(64 * 1024);
        let to = ip("192.0.2.1:53");
        let largest = vec![7u8; BUF - PACKET_HEADER_MAX];
        send(&mut link, &largest, &to).await.unwrap();
        let e = send(&mut link, &[0u8; BUF - PACKET_HEADER_MAX + 1], &to)
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer".into()
            )
        );
        let mut got = vec![0u8; frame(&to, &largest).len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, frame(&to, &largest));
        send(&mut link, b"still sound", &to).await.unwrap();
    }

    #[tokio::test]
    async fn an_upstream_frame_larger_than_the_buffer_fails_the_link() {
        let (mut link, mut server) = pair(64 * 1024);
        let from = ip("192.0.2.1:53");
        // One byte too many for the buffer, after a packet that fits.
        let mut bytes = frame(&from, b"fits");
        bytes.extend_from_slice(&frame(&from, &vec![1u8; BUF - 7 - 4 + 1]));
        server.write_all(&bytes).await.unwrap();
        assert_eq!(recv(&mut link).await.unwrap(), (from, b"fits".to_vec()));
        let e = recv(&mut link).await.unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::InvalidData,
                "upstream frame larger than the client runtime's buffer".into()
            )
        );
    }

    #[tokio::test]
    async fn a_frame_that_just_fits_is_opened_after_the_buffer_is_compacted() {
        let (mut link, mut server) = pair(64 * 1024);
        let from = ip("192.0.2.1:53");
        let whole = vec![3u8; BUF - 7 - 4];
        let mut bytes = frame(&from, b"first");
        bytes.extend_from_slice(&frame(&from, &whole));
        server.write_all(&bytes).await.unwrap();
        assert_eq!(
            recv(&mut link).await.unwrap(),
            (from.clone(), b"first".to_vec())
        );
        assert_eq!(recv(&mut link).await.unwrap(), (from, whole));
    }

    #[tokio::test]
    async fn the_upstream_closing_inside_a_frame_is_unexpected_eof() {
        let (mut link, mut server) = pair(64 * 1024);
        let bytes = frame(&ip("192.0.2.1:53"), b"cut short");
        server.write_all(&bytes[..bytes.len() - 1]).await.unwrap();
        drop(server);
        let e = recv(&mut link).await.unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::UnexpectedEof,
                "upstream closed inside a frame".into()
            )
        );
    }
}
