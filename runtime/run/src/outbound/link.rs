//! The datagram links a fan-out sub-link holds, polled: a send that cannot
//! go now returns `Pending` instead of holding up the association.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use super::freedom::ResolvingUdp;
use super::hysteria2::Hy2DatagramLink;
use super::shadowsocks_udp::SsUdp;
use super::socks_udp::SocksUdp;
use super::ss2022_udp::Ss2022Udp;
use super::trojan::TrojanUdp;
use super::vless::VlessUdp;
use super::vmess::VmessUdp;
use super::wireguard::WgDatagram;

/// What every datagram link does: send a packet to its own address, and
/// receive the next one with its source.
pub trait DatagramLink {
    /// Sends `payload` to `to`; `Ready(Ok)` once it is sent (or dropped, as
    /// a lossy link drops what cannot be delivered).
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>>;

    /// The next datagram, copied into `buf` (truncated if it does not fit,
    /// as UDP does), and its source.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>>;
}

/// The link a UDP flow opened on an outbound: a closed enum, so the fan-out
/// holds links of different outbounds side by side.
pub enum OutboundDatagram {
    /// Boxed: it holds a resolver, far larger than the other variants.
    Freedom(Box<ResolvingUdp>),
    Socks(Box<SocksUdp>),
    Trojan(Box<TrojanUdp>),
    Vless(Box<VlessUdp>),
    Shadowsocks(Box<SsUdp>),
    /// Boxed: two datagram buffers' pointers and a session's keys.
    Ss2022(Box<Ss2022Udp>),
    Vmess(Box<VmessUdp>),
    Wireguard(Box<WgDatagram>),
    /// A UDP session over the outbound's QUIC connection.
    Hy2(Box<Hy2DatagramLink>),
    /// Swallows every packet and never receives: how a blocked peer's
    /// packets are dropped without harming the rest of the association.
    Blackhole,
    /// Answered by the internal DNS service.
    Dns(Box<crate::dns::DnsUdpLink>),
}

/// A datagram's source as a link compares it with its server's address:
/// IPv4-mapped IPv6 addresses compare as the IPv4 address they carry.
pub(super) fn endpoint(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(etemenanki_proto::socks::canonical(addr.ip()), addr.port())
}

/// An open in flight; the fan-out polls it beside the links already open,
/// so an open that takes round trips never stalls another sub-link.
pub type DatagramFuture = Pin<Box<dyn Future<Output = io::Result<OutboundDatagram>> + Send>>;

impl DatagramLink for OutboundDatagram {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        match self {
            OutboundDatagram::Freedom(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Socks(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Trojan(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Vless(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Shadowsocks(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Ss2022(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Vmess(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Wireguard(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Hy2(udp) => udp.poll_send_to(cx, payload, to),
            OutboundDatagram::Blackhole => Poll::Ready(Ok(())),
            OutboundDatagram::Dns(udp) => udp.poll_send_to(cx, payload, to),
        }
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        match self {
            OutboundDatagram::Freedom(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Socks(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Trojan(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Vless(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Shadowsocks(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Ss2022(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Vmess(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Wireguard(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Hy2(udp) => udp.poll_recv_from(cx, buf),
            OutboundDatagram::Blackhole => Poll::Pending,
            OutboundDatagram::Dns(udp) => udp.poll_recv_from(cx, buf),
        }
    }
}
