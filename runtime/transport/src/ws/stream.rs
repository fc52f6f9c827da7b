//! WebSocket frames as a byte stream, over TCP or TLS, with the frame
//! codec of `etemenanki_proto::ws`: each write one binary frame (masked by
//! a client), data frames read as bytes, pings answered with pongs, our
//! close frame as shutdown and the peer's as the end of the stream.
//!
//! An idle stream holds no buffer, only the decoder's few bytes:
//! - a read lands in the reader's own buffer, where the decoder unmasks
//!   the payload and moves it over the headers, so a frame costs no copy
//!   of ours;
//! - a write lays its frame (header, then the payload, masked where it
//!   lies) in a spare buffer, given back to the thread's spares as soon
//!   as the frame is written: nothing is allocated per write once warm;
//! - a pong or close frame waits in a small buffer of its own until sent,
//!   behind the data frame being written.
//!
//! The peer's close frame ends our reads but not our writes: the close
//! frame answering it is sent when we shut down, so a proxied stream's
//! other direction finishes first, as a half-close should.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use etemenanki_proto::ws::{
    apply_mask, encode_control, encode_header, header_len, Close, Decoder, Masks, Opcode, Role,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{buffers, Stream};

/// The spare buffer a frame is laid in over TCP, header and payload: the
/// most a socket send takes at once on loopback in practice, as TLS's
/// `WIRE_BUF`. A bulk transfer's frames fill it: each costs one read of
/// the relay's source and one send, so 64 KiB frames take a quarter of
/// the system calls (and headers) 16 KiB ones did. A relay reads a
/// WebSocket as much at a time, so such a frame comes in one read too.
pub const FRAME_BUF: usize = 64 * 1024;

/// The most plaintext one TLS record carries: over TLS a frame's header
/// and payload fill one record at most, and the session gathers records
/// into its own sends.
const TLS_RECORD: usize = 16 * 1024;

/// Reads of the connection one poll_read may make that yield no payload
/// (control frames, headers split across reads) before yielding.
const READS_PER_POLL: usize = 16;

pub struct WsStream {
    /// Over TCP or TLS, never over another WebSocket.
    inner: Stream,
    decoder: Decoder,
    /// A client's masking keys; a server sends its frames unmasked.
    masks: Option<Masks>,
    /// Bytes read before any frame: a server's early data.
    first: Vec<u8>,
    /// Frames read past the upgrade, decoded before reading more.
    ahead: Vec<u8>,
    /// The data frame being written, at `staged` in its spare buffer.
    write: Option<Box<[u8]>>,
    staged: Range<usize>,
    /// A pong or our close frame, sent from `control_at` once the data
    /// frame is out.
    control: Vec<u8>,
    control_at: usize,
    close_sent: bool,
    /// The peer's close frame was read, or the connection ended.
    ended: bool,
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "websocket: the connection is closed",
    )
}

impl WsStream {
    /// A client's stream over `inner`, whose upgrade was answered;
    /// `ahead` holds the frames read right behind the answer. `seed` seeds
    /// the masking keys; a frame from the server longer than `max_frame`
    /// fails the stream.
    pub(crate) fn client(inner: Stream, ahead: Vec<u8>, seed: [u8; 8], max_frame: u64) -> Self {
        let mut ws = Self::new(inner, Role::Client, ahead, max_frame);
        ws.masks = Some(Masks::new(seed));
        ws
    }

    /// A server's stream over `inner`, whose upgrade it answered: `ahead`
    /// holds the frames read right behind the request, `first` the early
    /// data the request carried, read before any frame.
    pub(crate) fn server(inner: Stream, ahead: Vec<u8>, first: Vec<u8>, max_frame: u64) -> Self {
        let mut ws = Self::new(inner, Role::Server, ahead, max_frame);
        ws.first = first;
        ws
    }

    fn new(inner: Stream, role: Role, ahead: Vec<u8>, max_frame: u64) -> Self {
        WsStream {
            inner,
            decoder: Decoder::new(role, max_frame),
            masks: None,
            first: Vec::new(),
            ahead,
            write: None,
            staged: 0..0,
            control: Vec::new(),
            control_at: 0,
            close_sent: false,
            ended: false,
        }
    }

    /// The stream under the WebSocket.
    pub fn get_ref(&self) -> &Stream {
        &self.inner
    }

    /// Whether the stream holds a buffer of its own now: a frame or a
    /// control frame not yet written, bytes not yet read.
    #[cfg(test)]
    pub(crate) fn holds_buffers(&self) -> bool {
        self.write.is_some()
            || self.control.capacity() > 0
            || self.first.capacity() > 0
            || self.ahead.capacity() > 0
    }

    /// A control frame of `opcode` with `payload`, masked as we mask.
    fn control_frame(&mut self, opcode: Opcode, payload: &[u8]) {
        let key = self.masks.as_mut().map(Masks::next_key);
        self.control = encode_control(opcode, payload, key);
        self.control_at = 0;
    }

    /// The spare buffer a data frame is laid in over this stream, and the
    /// most payload the frame carries with its header in front.
    fn frame_len(&self) -> (usize, usize) {
        let len = if matches!(self.inner, Stream::Tls(_)) {
            TLS_RECORD
        } else {
            FRAME_BUF
        };
        (len, len - header_len(len, self.masks.is_some()))
    }

    /// Writes out the data frame being written, then the control frame;
    /// each buffer goes once its bytes are out.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(buf) = &self.write {
            while !self.staged.is_empty() {
                let n =
                    ready!(Pin::new(&mut self.inner).poll_write(cx, &buf[self.staged.clone()]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.staged.start += n;
            }
            if let Some(buf) = self.write.take() {
                buffers::give(buf);
            }
        }
        while self.control_at < self.control.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.control[self.control_at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.control_at += n;
        }
        if self.control.capacity() > 0 {
            self.control = Vec::new();
            self.control_at = 0;
        }
        Poll::Ready(Ok(()))
    }

    /// Reads once from `from` straight behind a header's room in a spare
    /// buffer, masks what came where it lies and starts sending it as one
    /// frame: the relay's way in, one read and one write a frame with no
    /// copy between. Over TLS a frame's header and payload fill one record
    /// at most. `Ready(Ok(0))` is `from`'s end of stream.
    pub fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if self.close_sent {
            return Poll::Ready(Err(closed()));
        }
        let (len, payload) = self.frame_len();
        let room = header_len(payload, self.masks.is_some());
        let mut frame = buffers::take(len);
        let mut read = ReadBuf::new(&mut frame[room..room + payload]);
        let n = match Pin::new(from).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) => read.filled().len(),
            other => {
                buffers::give(frame);
                return other.map_ok(|()| 0);
            }
        };
        if n == 0 {
            buffers::give(frame);
            return Poll::Ready(Ok(0));
        }
        self.send_frame(cx, frame, room, n)?;
        Poll::Ready(Ok(n))
    }

    /// Sends the `n` payload bytes at `room..` of `frame`, a spare
    /// buffer, as one binary frame: its header laid right before them,
    /// masked where they lie. What does not go now goes with the next
    /// write or flush.
    fn send_frame(
        &mut self,
        cx: &mut Context<'_>,
        mut frame: Box<[u8]>,
        room: usize,
        n: usize,
    ) -> io::Result<()> {
        let key = self.masks.as_mut().map(Masks::next_key);
        let at = room - header_len(n, key.is_some());
        encode_header(&mut frame[at..], true, Opcode::Binary, n, key);
        if let Some(key) = key {
            apply_mask(&mut frame[room..room + n], key, 0);
        }
        self.write = Some(frame);
        self.staged = at..room + n;
        match self.poll_pending(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Sends what is pending, then our close frame.
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        if !self.close_sent {
            let code = match self.decoder.close() {
                Some(Close { code: None }) => None,
                Some(Close { code: Some(code) }) => Some(code),
                // A normal closure.
                None => Some(1000),
            };
            let payload = code.map(u16::to_be_bytes);
            self.control_frame(Opcode::Close, payload.as_ref().map_or(&[], |p| &p[..]));
            self.close_sent = true;
            ready!(self.poll_pending(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Decodes `buf`, bytes just read, in place, and acts on the control
    /// frames among them; returns how many payload bytes lie at its front.
    fn decode(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = self.decoder.decode(buf)?;
        if let Some(ping) = self.decoder.take_ping() {
            // A pong answers the last ping only; none once we closed, and
            // none over a control frame still going out.
            if !self.close_sent && self.control.is_empty() {
                self.control_frame(Opcode::Pong, &ping);
            }
        }
        if self.decoder.close().is_some() {
            self.ended = true;
        }
        Ok(got)
    }
}

impl AsyncRead for WsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if !this.first.is_empty() {
            let n = this.first.len().min(buf.remaining());
            buf.put_slice(&this.first[..n]);
            this.first.drain(..n);
            if this.first.is_empty() {
                this.first = Vec::new();
            }
            return Poll::Ready(Ok(()));
        }
        for _ in 0..READS_PER_POLL {
            // A pong owed goes out when it can; one that would block is
            // sent by the next read, write or flush.
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let room = buf.initialize_unfilled();
            let n = if this.ahead.is_empty() {
                let mut read = ReadBuf::new(room);
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
                read.filled().len()
            } else {
                let n = this.ahead.len().min(room.len());
                room[..n].copy_from_slice(&this.ahead[..n]);
                this.ahead.drain(..n);
                if this.ahead.is_empty() {
                    this.ahead = Vec::new();
                }
                n
            };
            if n == 0 {
                // The connection ended without a close frame, as v2ray
                // ends it when its target does: the end of the stream, if
                // no frame was cut short.
                this.decoder.finish()?;
                this.ended = true;
                return Poll::Ready(Ok(()));
            }
            let got = this.decode(&mut room[..n])?;
            if got > 0 {
                buf.advance(got);
                return Poll::Ready(Ok(()));
            }
        }
        crate::yield_task(cx)
    }
}

impl AsyncWrite for WsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        ready!(this.poll_pending(cx))?;
        if this.close_sent {
            return Poll::Ready(Err(closed()));
        }
        let (len, payload) = this.frame_len();
        let n = buf.len().min(payload);
        let room = header_len(n, this.masks.is_some());
        let mut frame = buffers::take(len);
        frame[room..room + n].copy_from_slice(&buf[..n]);
        this.send_frame(cx, frame, room, n)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    /// Sends our close frame, echoing the peer's code when it closed
    /// first; the peer's own close ends the reads. When the peer closed or
    /// dropped the connection already, a close frame that cannot go is no
    /// error: there is no one left to tell.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match ready!(this.poll_close(cx)) {
            Err(e)
                if this.ended
                    && matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::NotConnected
                    ) =>
            {
                Poll::Ready(Ok(()))
            }
            other => Poll::Ready(other),
        }
    }
}
