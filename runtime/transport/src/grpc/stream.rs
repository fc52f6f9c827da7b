//! One gun tunnel as a byte stream: writes become gun messages under the
//! HTTP/2 flow control, reads unwrap them across DATA frames. The same
//! stream serves a client's call and a server's answer to one, on `Tun` or
//! `TunMulti` (whose messages only the reader tells apart: one message of
//! ours carries one field, which is the same bytes in both).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use etemenanki_proto::gun::{self, Decoder, Step};
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use http::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::io::poll_read_buf;

use super::pool::Lease;
use super::{h2_error, h2_error_by, Addrs};

/// The head of the HTTP/2 DATA frame a message goes in (RFC 9113,
/// section 4.1).
const FRAME_HEAD: usize = 9;

/// The most payload one message carries, and one fill reads: with its
/// header, and the head of the DATA frame that carries it where the server
/// takes frames that large (Go's servers take up to 1 MiB, as sing-box's
/// and Xray's do), three whole TLS records, so the message a flow sends is
/// sealed as whole records with no short one after it ([`super::wire`]),
/// and its ciphertext goes in one send. More than a relay's buffer, so one
/// write is one message.
pub(super) const MESSAGE_MAX: usize = 3 * super::wire::RECORD - FRAME_HEAD - 9;

/// Messages are cut from blocks of this size, so a write allocates only
/// when the block before is used up and h2 still holds part of it.
const OUT_BLOCK: usize = 64 * 1024;

/// What is known of the server's side.
enum Answer {
    /// The response head has not come yet.
    Waiting(ResponseFuture),
    Body(RecvStream),
    /// The stream ended cleanly.
    Done,
}

pub struct GrpcStream {
    answer: Answer,
    send: SendStream<Bytes>,
    addrs: Addrs,
    /// A client flow's place on its pooled connection, whose I/O the flow
    /// runs after each message it sends.
    lease: Option<Lease>,
    decoder: Decoder,
    /// The DATA frame being read, and its length for the window.
    frame: Bytes,
    frame_len: usize,
    /// Where the messages written are built; reclaimed once h2 has sent them.
    out: BytesMut,
    ended: bool,
    side: Side,
}

/// Which end of the call a stream is: how it ends, and whom an h2 error is
/// blamed on.
#[derive(Clone, Copy, Debug)]
pub(super) enum Side {
    /// Ends its half with an empty DATA frame that closes the stream.
    Client,
    /// Ends its half with the trailers of gRPC status 0, as a gRPC server
    /// ends a call.
    Server,
}

impl Side {
    fn error(self, e: h2::Error) -> io::Error {
        match self {
            Side::Client => h2_error(e),
            Side::Server => h2_error_by(e, "client"),
        }
    }
}

fn closed(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, text)
}

/// A gRPC status other than 0 in a response head or its trailers.
fn status_error(headers: &HeaderMap) -> Option<io::Error> {
    let status = headers.get("grpc-status")?;
    if status.as_bytes() == b"0" {
        return None;
    }
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("");
    Some(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        format!(
            "grpc server ended the stream with status {}: {message}",
            String::from_utf8_lossy(status.as_bytes())
        ),
    ))
}

impl GrpcStream {
    pub(super) fn new(response: ResponseFuture, send: SendStream<Bytes>, lease: Lease) -> Self {
        let addrs = lease.addrs();
        Self::with(
            Answer::Waiting(response),
            send,
            addrs,
            Some(lease),
            Side::Client,
        )
    }

    /// A client's end of a call on a connection no pool holds.
    #[cfg(test)]
    pub(super) fn unpooled(
        response: ResponseFuture,
        send: SendStream<Bytes>,
        addrs: Addrs,
    ) -> Self {
        Self::with(Answer::Waiting(response), send, addrs, None, Side::Client)
    }

    /// A server's end of a call carrying `message`s: `body` is the
    /// request's, `send` the response's, its head sent.
    pub(super) fn serving(
        body: RecvStream,
        send: SendStream<Bytes>,
        addrs: Addrs,
        message: gun::Message,
    ) -> Self {
        let mut stream = Self::with(Answer::Body(body), send, addrs, None, Side::Server);
        stream.decoder = Decoder::new(message);
        stream
    }

    fn with(
        answer: Answer,
        send: SendStream<Bytes>,
        addrs: Addrs,
        lease: Option<Lease>,
        side: Side,
    ) -> Self {
        GrpcStream {
            answer,
            send,
            addrs,
            lease,
            decoder: Decoder::default(),
            frame: Bytes::new(),
            frame_len: 0,
            out: BytesMut::new(),
            ended: false,
            side,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addrs.local
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.addrs.peer
    }

    /// Gives the server back the window of the frame read through.
    fn release(&mut self) {
        if let Answer::Body(body) = &mut self.answer {
            let _ = body.flow_control().release_capacity(self.frame_len);
        }
        self.frame_len = 0;
    }

    /// The next DATA frame, or `None` at a clean end of the stream.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let side = self.side;
        loop {
            match &mut self.answer {
                Answer::Done => return Poll::Ready(Ok(None)),
                Answer::Waiting(response) => {
                    let response = ready!(Pin::new(response).poll(cx)).map_err(h2_error)?;
                    if response.status() != http::StatusCode::OK {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::ConnectionRefused,
                            format!("grpc server answered http status {}", response.status()),
                        )));
                    }
                    if let Some(e) = status_error(response.headers()) {
                        return Poll::Ready(Err(e));
                    }
                    self.answer = Answer::Body(response.into_body());
                }
                Answer::Body(body) => match ready!(body.poll_data(cx)) {
                    Some(frame) => return Poll::Ready(frame.map(Some).map_err(|e| side.error(e))),
                    None => {
                        let trailers = ready!(body.poll_trailers(cx)).map_err(|e| side.error(e))?;
                        if let Some(e) = trailers.as_ref().and_then(status_error) {
                            return Poll::Ready(Err(e));
                        }
                        self.answer = Answer::Done;
                    }
                },
            }
        }
    }
}

impl AsyncRead for GrpcStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if this.frame.is_empty() {
                this.release();
                match ready!(this.poll_frame(cx))? {
                    Some(frame) => {
                        this.frame_len = frame.len();
                        this.frame = frame;
                        continue;
                    }
                    None if this.decoder.at_boundary() => return Poll::Ready(Ok(())),
                    None => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "grpc stream ended inside a gun message",
                        )))
                    }
                }
            }
            let (used, step) = this.decoder.decode(&this.frame, buf.remaining())?;
            if let Step::Payload(range) = step {
                buf.put_slice(&this.frame[range]);
                bytes::Buf::advance(&mut this.frame, used);
                return Poll::Ready(Ok(()));
            }
            bytes::Buf::advance(&mut this.frame, used);
        }
    }
}

impl GrpcStream {
    /// Waits for h2 to grant room for a message of up to `want` payload
    /// bytes and its header; returns how much payload it may carry.
    fn poll_room(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        if self.ended {
            return Poll::Ready(Err(closed("grpc stream already shut down")));
        }
        let head = gun::header_len(want);
        // Wait for room for the header and at least one byte.
        while self.send.capacity() <= head {
            self.send.reserve_capacity(head + want);
            match ready!(self.send.poll_capacity(cx)) {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Poll::Ready(Err(self.side.error(e))),
                None => return Poll::Ready(Err(closed("grpc stream closed"))),
            }
        }
        Poll::Ready(Ok(want.min(self.send.capacity() - head)))
    }

    /// Sends `message`, `room` bytes of header room then `n` payload
    /// bytes, as one gun message: its header laid right before the
    /// payload, the room before it cut off.
    fn send_message(&mut self, mut message: BytesMut, room: usize, n: usize) -> io::Result<()> {
        let mut header = [0u8; gun::HEADER_MAX];
        let used = gun::encode_header(n, &mut header)?;
        let at = room - used;
        message[at..room].copy_from_slice(&header[..used]);
        bytes::Buf::advance(&mut message, at);
        self.send_data(message.freeze(), false)
    }

    /// Hands h2 `data` to send and, on a pooled connection no one else is
    /// polling, sends it from this task at once (see [`super::driver`]).
    fn send_data(&mut self, data: Bytes, end: bool) -> io::Result<()> {
        let sent = match &self.lease {
            Some(lease) => lease.driver().send(|| self.send.send_data(data, end)),
            None => self.send.send_data(data, end),
        };
        sent.map_err(|e| self.side.error(e))
    }

    /// Reads once from `from` straight behind a header's room in the
    /// message block and sends what came as one gun message: the relay's
    /// way in, with no copy between the read and h2, up to a whole
    /// message a read. The block and the unused window are let go when
    /// `from` has nothing (h2 frees the block once sent), so an idle
    /// stream holds neither. `Ready(Ok(0))` is `from`'s end of stream.
    pub fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        // As a write's, a closed stream's error is for a read that brought
        // bytes to send: the fill waits on its source before any, and the
        // other direction may still carry the peer's last bytes.
        let (max, refused) = match ready!(self.poll_room(cx, MESSAGE_MAX)) {
            Ok(max) => (max, None),
            Err(e) => (MESSAGE_MAX, Some(e)),
        };
        let room = gun::header_len(max);
        if self.out.capacity() < room + max {
            self.out.reserve(OUT_BLOCK);
        }
        self.out.put_bytes(0, room);
        let read = poll_read_buf(Pin::new(from), cx, &mut (&mut self.out).limit(max));
        match read {
            Poll::Ready(Ok(n)) if n > 0 => {
                if let Some(e) = refused {
                    self.out = BytesMut::new();
                    return Poll::Ready(Err(e));
                }
                let message = self.out.split();
                self.send_message(message, room, n)?;
                Poll::Ready(Ok(n))
            }
            other => {
                // Neither the block nor the window reserved for it is
                // held while the source has nothing: the connection's
                // window is shared, and idle streams holding a message's
                // worth each would stall the others.
                self.out = BytesMut::new();
                self.send.reserve_capacity(0);
                other
            }
        }
    }

    /// Whether the stream holds a message block of its own now.
    #[cfg(test)]
    pub(super) fn holds_block(&self) -> bool {
        self.out.capacity() > 0
    }
}

impl AsyncWrite for GrpcStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = ready!(this.poll_room(cx, buf.len().min(MESSAGE_MAX)))?;
        let room = gun::header_len(n);
        if this.out.capacity() < room + n {
            this.out.reserve(OUT_BLOCK);
        }
        this.out.put_bytes(0, room);
        this.out.put_slice(&buf[..n]);
        let message = this.out.split();
        this.send_message(message, room, n)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The connection's task writes what h2 has queued.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.ended {
            this.ended = true;
            match this.side {
                Side::Client => this.send_data(Bytes::new(), true)?,
                Side::Server => this
                    .send
                    .send_trailers(super::server::status_ok())
                    .map_err(|e| this.side.error(e))?,
            }
        }
        Poll::Ready(Ok(()))
    }
}
