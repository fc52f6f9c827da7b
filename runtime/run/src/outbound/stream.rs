//! The stream a TCP flow is relayed to, whatever opened it.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use etemenanki_transport::{Prefixed, Stream};
use etemenanki_wireguard::WgStream;

use super::vless_stream::VlessStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::hysteria2::Hy2Stream;
use super::shadowsocks::SsFramed;
use super::ss2022::Ss2022Framed;
use super::vmess::VmessFramed;

/// A closed enum, as shadowsocks-rust's outbound stream is: no box where
/// the types are known.
pub enum OutboundStream {
    /// A direct connection, or a proxy's tunnel whose handshake is done.
    Transport(Stream),
    /// A tunnel whose server sent bytes right after its reply, in the same
    /// read: they are the tunnel's first bytes.
    Prefixed(Prefixed<Stream>),
    /// A shadowsocks flow: chunks sealed and opened over the transport.
    Shadowsocks(Box<SsFramed>),
    /// A Shadowsocks 2022 flow: boxed, its codec holds two key schedules.
    Ss2022(Box<Ss2022Framed>),
    /// A VLESS tunnel, whose first reads skip the response header.
    Vless(VlessStream),
    /// A VMess tunnel: its body framed by the VMess codec. Boxed: two
    /// key schedules and the masks' states.
    Vmess(Box<VmessFramed>),
    /// A TCP connection inside a WireGuard tunnel.
    Wireguard(WgStream),
    /// A Hysteria 2 proxy stream over the outbound's QUIC connection.
    Hy2(Hy2Stream),
    /// Reads EOF at once and swallows every write.
    Blackhole,
    /// A TCP flow answered by the internal DNS service.
    Dns(Box<crate::dns::DnsTcpStream>),
}

impl OutboundStream {
    /// The tunnel `stream`, with `ahead`, bytes read past the handshake.
    pub fn opened(stream: Stream, ahead: Vec<u8>) -> OutboundStream {
        if ahead.is_empty() {
            OutboundStream::Transport(stream)
        } else {
            OutboundStream::Prefixed(Prefixed::new(ahead, stream))
        }
    }

    /// The socket itself when nothing is layered over it and nothing is
    /// held ahead of it.
    pub fn as_plain_tcp(&mut self) -> Option<&mut TcpStream> {
        match self {
            OutboundStream::Transport(stream) => stream.as_plain_tcp(),
            OutboundStream::Prefixed(_)
            | OutboundStream::Vless(_)
            | OutboundStream::Shadowsocks(_)
            | OutboundStream::Ss2022(_)
            | OutboundStream::Vmess(_)
            | OutboundStream::Wireguard(_)
            | OutboundStream::Hy2(_)
            | OutboundStream::Blackhole
            | OutboundStream::Dns(_) => None,
        }
    }

    /// The local address of the connection, where there is one.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        let addr = match self {
            OutboundStream::Transport(stream) => stream.local_addr(),
            OutboundStream::Prefixed(prefixed) => prefixed.get_ref().local_addr(),
            OutboundStream::Shadowsocks(framed) => framed.get_ref().local_addr(),
            OutboundStream::Ss2022(framed) => framed.get_ref().local_addr(),
            OutboundStream::Vless(vless) => vless.get_ref().local_addr(),
            OutboundStream::Vmess(framed) => framed.get_ref().local_addr(),
            OutboundStream::Wireguard(_)
            | OutboundStream::Hy2(_)
            | OutboundStream::Blackhole
            | OutboundStream::Dns(_) => return None,
        };
        addr.ok()
    }
}

impl AsyncRead for OutboundStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OutboundStream::Transport(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Prefixed(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Shadowsocks(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            OutboundStream::Ss2022(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Vless(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Vmess(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            OutboundStream::Wireguard(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Hy2(stream) => Pin::new(stream).poll_read(cx, buf),
            OutboundStream::Blackhole => Poll::Ready(Ok(())),
            OutboundStream::Dns(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for OutboundStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            OutboundStream::Transport(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Prefixed(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Shadowsocks(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            OutboundStream::Ss2022(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Vless(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Vmess(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            OutboundStream::Wireguard(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Hy2(stream) => Pin::new(stream).poll_write(cx, buf),
            OutboundStream::Blackhole => Poll::Ready(Ok(buf.len())),
            OutboundStream::Dns(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OutboundStream::Transport(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Prefixed(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Shadowsocks(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            OutboundStream::Ss2022(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Vless(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Vmess(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            OutboundStream::Wireguard(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Hy2(stream) => Pin::new(stream).poll_flush(cx),
            OutboundStream::Blackhole => Poll::Ready(Ok(())),
            OutboundStream::Dns(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OutboundStream::Transport(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Prefixed(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Shadowsocks(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            OutboundStream::Ss2022(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Vless(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Vmess(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            OutboundStream::Wireguard(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Hy2(stream) => Pin::new(stream).poll_shutdown(cx),
            OutboundStream::Blackhole => Poll::Ready(Ok(())),
            OutboundStream::Dns(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}
