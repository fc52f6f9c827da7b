//! The one registry: every protocol the runtime speaks, one line each, for
//! its inbound server (a [`Server`], `runtime/run/src/inbound/`) and its
//! outbound (a [`Protocol`], `runtime/run/src/outbound/`). The macros
//! generate from these lists the closed enums the runtime holds, built
//! outbounds and their streams and datagram links, inbound servers, and
//! the matches that dispatch to them: static dispatch, no `Box<dyn>` on the
//! data path. Adding a protocol is its module and a line here.

use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{InboundProtocol, OutboundProtocol, ServerShape, ServerTls};
use etemenanki_proto::Address;
use etemenanki_transport::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::inbound::admission::Handshaking;
use crate::inbound::server::{inbounds, Listens, Server};
use crate::inbound::{ss_udp, Member, Shared};
use crate::outbound::link::DatagramLink;
use crate::outbound::protocol::{Build, Protocol};
use crate::outbound::registry::outbounds;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::{Drains, Fills, Relayed};
use crate::{inbound, outbound};

outbounds! {
    Freedom(outbound::freedom::Freedom),
    Blackhole(outbound::blackhole::Blackhole),
    Socks(outbound::socks::Socks),
    Http(outbound::http::Http),
    Trojan(outbound::trojan::Trojan),
    /// Boxed: it holds a resolver beside its connector.
    Shadowsocks(Box<outbound::shadowsocks::Shadowsocks>),
    /// Boxed: it holds a resolver for its UDP sessions.
    Ss2022(Box<outbound::ss2022::Ss2022>),
    Vless(outbound::vless::Vless),
    /// Boxed: the auth id's AES key schedule is large.
    Vmess(Box<outbound::vmess::Vmess>),
    /// Boxed: a connector with its resolvers and tunnel slot.
    Wireguard(Box<outbound::wireguard::Wireguard>),
    /// Boxed: it holds a resolver, a dialer and its connection slot.
    Hysteria2(Box<outbound::hysteria2::Hysteria2>),
    /// The internal DNS service, the route target `dns`: built with the DNS
    /// spec, never from an outbound spec.
    Dns(crate::dns::Service),
}

inbounds! {
    Socks(inbound::socks::Socks),
    Http(inbound::http::Http),
    /// QUIC on a UDP socket: served by its own listener, never by the TCP
    /// accept loop.
    Hysteria2(inbound::hysteria2::Hysteria2),
    Trojan(inbound::proxy::Trojan),
    Vless(inbound::proxy::Vless),
    Vmess(inbound::proxy::Vmess),
    Shadowsocks(inbound::proxy::Shadowsocks),
    Ss2022(inbound::proxy::Ss2022),
    /// The DNS service for the host, on UDP and TCP.
    Dns(inbound::dns::Dns),
}
