//! WebSocket messages as a byte stream: each write one binary message, a
//! message read in as many reads as the caller's buffer needs, the close
//! frame as shutdown. Pings are answered by tungstenite as it reads.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::{Sink, Stream as _};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::Stream;

pub struct WsStream {
    /// Over TCP or TLS, never over another WebSocket.
    ws: WebSocketStream<Stream>,
    /// What is left of the message being read.
    reading: Bytes,
    /// Where a write is copied to become a message. tungstenite frames it
    /// into its own buffer and drops it, so the next write reclaims the
    /// same allocation: nothing is allocated per write once warm.
    writing: BytesMut,
}

impl WsStream {
    pub(crate) fn new(ws: WebSocketStream<Stream>) -> Self {
        Self::with_first(ws, Bytes::new())
    }

    /// A stream whose first bytes are `first`, read before any message (a
    /// server's early data).
    pub(crate) fn with_first(ws: WebSocketStream<Stream>, first: Bytes) -> Self {
        WsStream {
            ws,
            reading: first,
            writing: BytesMut::new(),
        }
    }

    /// The stream under the WebSocket.
    pub fn get_ref(&self) -> &Stream {
        self.ws.get_ref()
    }
}

/// tungstenite's error as an io::Error: its own I/O errors as they are,
/// the rest with its text.
fn io_error(e: WsError) -> io::Error {
    match e {
        WsError::Io(e) => e,
        WsError::ConnectionClosed | WsError::AlreadyClosed => io::Error::new(
            io::ErrorKind::BrokenPipe,
            "websocket: the connection is closed",
        ),
        other => io::Error::new(io::ErrorKind::InvalidData, format!("websocket: {other}")),
    }
}

impl AsyncRead for WsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.reading.is_empty() {
                let n = this.reading.len().min(buf.remaining());
                buf.put_slice(&this.reading[..n]);
                this.reading.advance(n);
                return Poll::Ready(Ok(()));
            }
            let message = match ready!(Pin::new(&mut this.ws).poll_next(cx)) {
                // The peer's close frame, or the connection gone after
                // the close handshake: the end of the stream.
                None | Some(Ok(Message::Close(_))) => return Poll::Ready(Ok(())),
                // A server that drops the connection between messages
                // without a close frame (v2ray when its target ends) has
                // ended the stream all the same.
                Some(Err(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake))) => {
                    return Poll::Ready(Ok(()))
                }
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Some(Ok(message)) => message,
            };
            match message {
                Message::Binary(bytes) => this.reading = bytes,
                // Not what a proxy server sends, but bytes all the same.
                Message::Text(text) => this.reading = Bytes::from(text),
                // A ping's pong is queued by tungstenite and sent with the
                // next write or flush.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) | Message::Close(_) => {}
            }
        }
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
        ready!(Pin::new(&mut this.ws).poll_ready(cx)).map_err(io_error)?;
        this.writing.reserve(buf.len());
        this.writing.extend_from_slice(buf);
        let message = Message::Binary(this.writing.split().freeze());
        Pin::new(&mut this.ws)
            .start_send(message)
            .map_err(io_error)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().ws)
            .poll_flush(cx)
            .map_err(io_error)
    }

    /// Sends the close frame; the peer's own close ends the reads.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(Pin::new(&mut this.ws).poll_close(cx)).map_err(io_error)?;
        // tungstenite's server writes its answer to the peer's close and
        // ends without flushing the stream under it, where a TLS session
        // gathers records until flushed.
        Pin::new(this.ws.get_mut()).poll_flush(cx)
    }
}
