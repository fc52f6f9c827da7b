//! A proxied TCP flow: one bidirectional QUIC stream after its TCPRequest
//! and TCPResponse, with the bytes that came in the same read as the
//! handshake served first. The client's and the server's are the same
//! type; `K` is what the flow keeps alive while it lives (the client's
//! stream permit and connection, nothing on the server).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct QuicStream<K> {
    pub(crate) send: quinn::SendStream,
    recv: quinn::RecvStream,
    /// Bytes read past the handshake, `ahead[at..]` not yet served.
    ahead: Vec<u8>,
    at: usize,
    _keep: K,
}

impl<K> QuicStream<K> {
    pub(crate) fn new(
        send: quinn::SendStream,
        recv: quinn::RecvStream,
        ahead: Vec<u8>,
        keep: K,
    ) -> Self {
        QuicStream {
            send,
            recv,
            // Nothing came ahead: hold no storage for the stream's life.
            ahead: if ahead.is_empty() { Vec::new() } else { ahead },
            at: 0,
            _keep: keep,
        }
    }
}

impl<K: Unpin> AsyncRead for QuicStream<K> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.ahead.len() {
            let n = buf.remaining().min(this.ahead.len() - this.at);
            buf.put_slice(&this.ahead[this.at..this.at + n]);
            this.at += n;
            if this.at == this.ahead.len() {
                // Read out: no longer held.
                this.ahead = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.recv).poll_read(cx, buf)
    }
}

impl<K: Unpin> AsyncWrite for QuicStream<K> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().send)
            .poll_write(cx, buf)
            .map_err(io::Error::from)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().send).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().send).poll_shutdown(cx)
    }
}
