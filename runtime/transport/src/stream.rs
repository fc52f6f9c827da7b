//! The stream a transport yields: what an inbound accepts and what a proxy
//! client talks to its server over.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::dial;
use crate::grpc::GrpcStream;
use crate::tls::TlsStream;
use crate::ws::WsStream;

/// A closed enum, so the relay can see plain TCP (its splice fast path)
/// and nothing is boxed but what is far larger than the rest.
pub enum Stream {
    Tcp(TcpStream),
    /// Boxed: the TLS session is far larger than a socket.
    Tls(Box<TlsStream<TcpStream>>),
    /// Boxed: a WebSocket over TCP or TLS, with its buffers, either side.
    Ws(Box<WsStream>),
    /// Boxed: one HTTP/2 stream carrying gun messages, a client's call or
    /// a server's answer to one; the connection under it is driven
    /// elsewhere (a client's by a task of its own, a server's by whoever
    /// awaits its `GrpcConnection::next`).
    Grpc(Box<GrpcStream>),
}

impl Stream {
    /// The local address of the TCP connection under every layer.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Tcp(tcp) => tcp.local_addr(),
            Stream::Tls(tls) => tls.get_ref().local_addr(),
            Stream::Ws(ws) => ws.get_ref().local_addr(),
            Stream::Grpc(grpc) => Ok(grpc.local_addr()),
        }
    }

    /// The peer address of the TCP connection under every layer.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Tcp(tcp) => tcp.peer_addr(),
            Stream::Tls(tls) => tls.get_ref().peer_addr(),
            Stream::Ws(ws) => ws.get_ref().peer_addr(),
            Stream::Grpc(grpc) => Ok(grpc.peer_addr()),
        }
    }

    /// The socket itself when nothing is layered over it, so bytes may move
    /// in the kernel.
    pub fn as_plain_tcp(&mut self) -> Option<&mut TcpStream> {
        match self {
            Stream::Tcp(tcp) => Some(tcp),
            Stream::Tls(_) | Stream::Ws(_) | Stream::Grpc(_) => None,
        }
    }

    /// Sends what the socket takes of `buf` at once ([`dial::send_now`]);
    /// 0 when a layer is over the socket: the bytes go through
    /// `AsyncWrite`, sealed by it.
    pub fn send_now(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => dial::send_now(tcp, buf),
            Stream::Tls(_) | Stream::Ws(_) | Stream::Grpc(_) => Ok(0),
        }
    }

    /// Sends `buf` ahead of the next send ([`dial::send_ahead`]); 0 when a
    /// layer is over the socket, or the kernel cannot: the caller holds the
    /// bytes itself.
    pub fn send_ahead(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => dial::send_ahead(tcp, buf),
            Stream::Tls(_) | Stream::Ws(_) | Stream::Grpc(_) => Ok(0),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
            Stream::Ws(ws) => Pin::new(ws.as_mut()).poll_read(cx, buf),
            Stream::Grpc(grpc) => Pin::new(grpc.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
            Stream::Ws(ws) => Pin::new(ws.as_mut()).poll_write(cx, buf),
            Stream::Grpc(grpc) => Pin::new(grpc.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Ws(ws) => Pin::new(ws.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Grpc(grpc) => Pin::new(grpc.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
            Stream::Ws(ws) => ws.is_write_vectored(),
            Stream::Grpc(grpc) => grpc.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
            Stream::Ws(ws) => Pin::new(ws.as_mut()).poll_flush(cx),
            Stream::Grpc(grpc) => Pin::new(grpc.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
            Stream::Ws(ws) => Pin::new(ws.as_mut()).poll_shutdown(cx),
            Stream::Grpc(grpc) => Pin::new(grpc.as_mut()).poll_shutdown(cx),
        }
    }
}
