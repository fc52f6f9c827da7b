//! Outbounds: where a routed flow leaves the process. One [`Outbound`] per
//! built tag and version; it opens a TCP flow as a stream and a UDP flow as a
//! datagram link, through the protocol its spec names. Every protocol is a
//! module implementing [`protocol::Protocol`], listed once in the registry
//! (registry.rs).

pub(crate) mod blackhole;
pub(crate) mod dns_service;
pub(crate) mod freedom;
mod handshake;
pub(crate) mod http;
pub(crate) mod hysteria2;
pub(crate) mod link;
mod link_names;
pub(crate) mod protocol;
pub(crate) mod registry;
pub(crate) mod shadowsocks;
mod shadowsocks_udp;
pub(crate) mod socks;
mod socks_udp;
pub(crate) mod ss2022;
mod ss2022_udp;
pub(crate) mod trojan;
pub(crate) mod vless;
mod vless_stream;
pub(crate) mod vmess;
pub(crate) mod wireguard;

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{HostPort, OutboundSpec};
use etemenanki_proto::Address;

use crate::dial::Dialer;
use crate::drain::Drain;
use crate::id::OutboundId;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::registry::Kind;
pub use crate::registry::{OutboundDatagram, OutboundStream};
use crate::resolve::Dns;
pub use link::{DatagramFuture, DatagramLink};
use protocol::Build;

#[cfg(test)]
pub(crate) use blackhole::Blackhole;
pub use trojan::TROJAN_BUF;
pub use vless::VLESS_BUF;
pub use vmess::VMESS_BUF;

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

    /// Opens a TCP flow to `destination` ([`protocol::Protocol::connect`]).
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
    /// `toward` and `plane` are as [`protocol::Protocol::associate`] takes them.
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
