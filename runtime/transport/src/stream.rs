//! The stream a transport yields: what an inbound accepts and what a proxy
//! client talks to its server over.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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

    /// Writes what the socket takes of `buf` at once, without waiting on
    /// the event loop: how many bytes went, 0 when the socket would block.
    /// Only plain TCP writes here; TLS, WebSocket and gRPC write nothing
    /// (0), their bytes must pass through their layer's state.
    ///
    /// For the first bytes on a connection just dialed: the socket is
    /// writable, but tokio learns that only from the socket's first event,
    /// so a write through it waits a turn of the event loop (tokio assumes
    /// accepted sockets ready, not connected ones). The rest of `buf` goes
    /// through `AsyncWrite` as usual.
    pub fn write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            #[cfg(unix)]
            Stream::Tcp(tcp) if !buf.is_empty() => {
                use rustix::io::Errno;
                use rustix::net::{send, SendFlags};
                match send(&*tcp, buf, SendFlags::NOSIGNAL) {
                    Ok(sent) => Ok(sent),
                    Err(Errno::WOULDBLOCK | Errno::INTR) => Ok(0),
                    Err(e) => Err(e.into()),
                }
            }
            _ => Ok(0),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[tokio::test]
    async fn write_now_sends_on_a_socket_just_dialed_before_tokio_sees_it_writable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dialed = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        dialed.set_nonblocking(true).unwrap();
        let tcp = TcpStream::from_std(dialed).unwrap();
        // No event has reached the registration yet: a write through tokio
        // would wait for the loop to turn.
        assert_eq!(
            tcp.try_write(b"x").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let mut stream = Stream::Tcp(tcp);
        assert_eq!(stream.write_now(b"hello").unwrap(), 5);
        assert_eq!(stream.write_now(b"").unwrap(), 0);
        let (mut peer, _) = listener.accept().unwrap();
        let mut got = [0; 5];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
    }

    #[tokio::test]
    async fn write_now_is_a_would_block_not_an_error_when_the_socket_is_full() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dialed = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        dialed.set_nonblocking(true).unwrap();
        let _peer = listener.accept().unwrap();
        let mut stream = Stream::Tcp(TcpStream::from_std(dialed).unwrap());
        // The peer reads nothing: both buffers fill, then nothing more goes.
        let chunk = vec![0; 1 << 16];
        let mut rounds = 0;
        while stream.write_now(&chunk).unwrap() > 0 {
            rounds += 1;
            assert!(rounds < 10_000, "the socket never filled");
        }
        assert_eq!(stream.write_now(&chunk).unwrap(), 0);
    }
}
