//! Outbounds: where a routed flow leaves the process. One [`Outbound`] per
//! built tag and version; it opens a TCP flow as a stream and a UDP flow as a
//! datagram link, through the protocol its spec names. Every protocol is a
//! module implementing [`protocol::Protocol`], listed once in the registry
//! below.

mod blackhole;
mod dns_service;
mod freedom;
mod handshake;
mod http;
mod hysteria2;
mod link;
mod link_names;
mod protocol;
mod registry;
mod shadowsocks;
mod shadowsocks_udp;
mod socks;
mod socks_udp;
mod ss2022;
mod ss2022_udp;
mod trojan;
mod vless;
mod vless_stream;
mod vmess;
mod wireguard;

use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{HostPort, OutboundProtocol, OutboundSpec};
use etemenanki_proto::Address;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::dial::Dialer;
use crate::drain::Drain;
use crate::id::OutboundId;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::{Drains, Fills, Relayed};
use crate::resolve::Dns;
pub use link::{DatagramFuture, DatagramLink};
use protocol::{Build, Protocol};

#[cfg(test)]
pub(crate) use blackhole::Blackhole;
pub use trojan::TROJAN_BUF;
pub use vless::VLESS_BUF;
pub use vmess::VMESS_BUF;

registry::registry! {
    Freedom(freedom::Freedom),
    Blackhole(blackhole::Blackhole),
    Socks(socks::Socks),
    Http(http::Http),
    Trojan(trojan::Trojan),
    /// Boxed: it holds a resolver beside its connector.
    Shadowsocks(Box<shadowsocks::Shadowsocks>),
    /// Boxed: it holds a resolver for its UDP sessions.
    Ss2022(Box<ss2022::Ss2022>),
    Vless(vless::Vless),
    /// Boxed: the auth id's AES key schedule is large.
    Vmess(Box<vmess::Vmess>),
    /// Boxed: a connector with its resolvers and tunnel slot.
    Wireguard(Box<wireguard::Wireguard>),
    /// Boxed: it holds a resolver, a dialer and its connection slot.
    Hysteria2(Box<hysteria2::Hysteria2>),
    /// The internal DNS service, the route target `dns`: built with the DNS
    /// spec, never from an outbound spec.
    Dns(crate::dns::Service),
}

pub struct Outbound {
    pub id: OutboundId,
    pub drain: Drain,
    kind: Kind,
    probe: Option<HostPort>,
}

impl Outbound {
    /// Builds `spec` at `version`. Construction opens no socket.
    pub fn build(
        spec: &OutboundSpec,
        version: u32,
        dns: &Dns,
        dialer: &Dialer,
    ) -> io::Result<Outbound> {
        let kind = Kind::build(&spec.protocol, &Build { dialer, dns })?;
        Ok(Outbound {
            id: OutboundId::new(&spec.tag, version),
            drain: Drain::default(),
            kind,
            probe: spec.protocol.probe_target().cloned(),
        })
    }

    /// A blackhole outside any spec, for the placeholder plane.
    pub fn blackhole(id: OutboundId) -> Outbound {
        Outbound {
            id,
            drain: Drain::default(),
            kind: Kind::Blackhole(blackhole::Blackhole),
            probe: None,
        }
    }

    /// The internal DNS service as a route target: its id has the empty
    /// tag, which no spec tag may have, and the DNS spec's version.
    pub fn dns_service(version: u32, service: crate::dns::Service) -> Outbound {
        Outbound {
            id: OutboundId::new("", version),
            drain: Drain::default(),
            kind: Kind::Dns(service),
            probe: None,
        }
    }

    pub fn is_dns_service(&self) -> bool {
        matches!(self.kind, Kind::Dns(_))
    }

    /// Where a balancer's TCP health probe connects.
    pub fn probe_target(&self) -> Option<&HostPort> {
        self.probe.as_ref()
    }

    /// Opens a TCP flow to `destination` ([`Protocol::connect`]).
    pub async fn connect_stream(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> io::Result<OutboundStream> {
        self.kind.connect(destination, resolved, own).await
    }

    /// Opens a UDP link on this version. The future owns a reference to
    /// the outbound, as the link it yields does through the fan-out, so a
    /// connection or tunnel the version shares lives while any flow needs
    /// it, whatever the drain policy.
    ///
    /// `toward` and `plane` are as [`Protocol::associate`] takes them.
    pub fn connect_datagram(
        self: &Arc<Self>,
        toward: &Address,
        plane: &Arc<ArcSwap<Plane>>,
    ) -> DatagramFuture {
        let outbound = self.clone();
        let toward = toward.clone();
        let plane = plane.clone();
        Box::pin(async move { outbound.kind.associate(&toward, plane).await })
    }
}
