//! Outbounds: where a routed flow leaves the process. One [`Outbound`] per
//! built tag and version; it opens a TCP flow as a stream and a UDP flow as a
//! datagram link.

mod freedom;
mod handshake;
mod http;
mod hysteria2;
mod link;
mod link_names;
mod shadowsocks;
mod shadowsocks_udp;
mod socks;
mod socks_udp;
mod ss2022;
mod ss2022_udp;
mod stream;
mod trojan;
mod vless;
mod vless_stream;
mod vmess;
mod wireguard;

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{HostPort, OutboundProtocol, OutboundSpec};
use etemenanki_proto::ss2022::Keys;
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};

use crate::dial::Dialer;
use crate::drain::Drain;
use crate::id::OutboundId;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::resolve::Dns;
use freedom::Freedom;
use http::Http;
use hysteria2::Hysteria2;
pub use link::{DatagramFuture, DatagramLink, OutboundDatagram};
use shadowsocks::Shadowsocks;
use socks::Socks;
use ss2022::Ss2022;
pub use stream::OutboundStream;
use trojan::Trojan;
pub use trojan::TROJAN_BUF;
use vless::Vless;
pub use vless::VLESS_BUF;
use vmess::Vmess;
pub use vmess::VMESS_BUF;
use wireguard::Wireguard;

pub struct Outbound {
    pub id: OutboundId,
    pub drain: Drain,
    kind: Kind,
    probe: Option<HostPort>,
}

enum Kind {
    Freedom(Freedom),
    Socks(Socks),
    Http(Http),
    Trojan(Trojan),
    /// Boxed: it holds a resolver beside its connector.
    Shadowsocks(Box<Shadowsocks>),
    /// Boxed: it holds a resolver for its UDP sessions.
    Ss2022(Box<Ss2022>),
    Vless(Vless),
    /// Boxed: the auth id's AES key schedule is large.
    Vmess(Box<Vmess>),
    /// Boxed: a connector with its resolvers and tunnel slot.
    Wireguard(Box<Wireguard>),
    /// Boxed: it holds a resolver, a dialer and its connection slot.
    Hysteria2(Box<Hysteria2>),
    Blackhole,
    /// The internal DNS service, the route target `dns`: built with the DNS
    /// spec, never from an outbound spec.
    Dns(crate::dns::Service),
}

impl Outbound {
    /// Builds `spec` at `version`. Construction opens no socket.
    pub fn build(
        spec: &OutboundSpec,
        version: u32,
        dns: &Dns,
        dialer: &Dialer,
    ) -> io::Result<Outbound> {
        let kind = match &spec.protocol {
            OutboundProtocol::Freedom { address_family } => Kind::Freedom(Freedom::new(
                dialer.clone(),
                dns.destinations.clone(),
                *address_family,
            )),
            OutboundProtocol::Blackhole => Kind::Blackhole,
            OutboundProtocol::Socks { upstream, account }
            | OutboundProtocol::Http { upstream, account } => {
                let connector = Connector::build(upstream, dialer.clone(), dns.servers.clone())?;
                let account = account
                    .as_ref()
                    .map(|a| (a.user.clone(), a.pass.expose().clone()));
                match spec.protocol {
                    OutboundProtocol::Socks { .. } => Kind::Socks(Socks::new(connector, account)),
                    _ => Kind::Http(Http::new(connector, account)),
                }
            }
            OutboundProtocol::Trojan { upstream, password } => {
                let connector = Connector::build(upstream, dialer.clone(), dns.servers.clone())?;
                Kind::Trojan(Trojan::new(connector, password.expose()))
            }
            OutboundProtocol::Shadowsocks {
                upstream,
                method,
                password,
            } => Kind::Shadowsocks(Box::new(Shadowsocks::new(
                Connector::build(upstream, dialer.clone(), dns.servers.clone())?,
                *method,
                password.expose(),
            ))),
            OutboundProtocol::Ss2022 {
                upstream,
                method,
                psk,
                identity_psks,
            } => {
                let connector = Connector::build(upstream, dialer.clone(), dns.servers.clone())?;
                let identities: Vec<&[u8]> = identity_psks
                    .iter()
                    .map(|k| k.expose().as_slice())
                    .collect();
                let keys = Keys::new(*method, psk.expose(), &identities)?;
                Kind::Ss2022(Box::new(Ss2022::new(connector, keys)))
            }
            OutboundProtocol::Vless { upstream, id } => {
                let connector = Connector::build(upstream, dialer.clone(), dns.servers.clone())?;
                Kind::Vless(Vless::new(connector, id.expose()))
            }
            OutboundProtocol::Vmess {
                upstream,
                id,
                security,
            } => {
                let connector = Connector::build(upstream, dialer.clone(), dns.servers.clone())?;
                Kind::Vmess(Box::new(Vmess::new(connector, id.expose(), *security)?))
            }
            OutboundProtocol::Wireguard(wg) => {
                Kind::Wireguard(Box::new(Wireguard::new(wg, dialer, dns)))
            }
            OutboundProtocol::Hysteria2(hy2) => Kind::Hysteria2(Box::new(Hysteria2::new(
                hy2,
                dialer.clone(),
                dns.servers.clone(),
            ))),
        };
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
            kind: Kind::Blackhole,
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

    /// Opens a TCP flow to `destination`. `resolved` holds the addresses
    /// routing resolved a name to, if it did: a direct dial goes to those
    /// and looks nothing up again; a proxy sends the name as it was. A
    /// direct dial that looks a name up itself refuses it, before any
    /// connect, if one of its addresses is among `own` inbounds.
    pub async fn connect_stream(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> io::Result<OutboundStream> {
        match &self.kind {
            Kind::Freedom(freedom) => freedom
                .connect(destination, resolved, own)
                .await
                .map(|tcp| OutboundStream::Transport(Stream::Tcp(tcp))),
            Kind::Socks(socks) => socks.connect(destination).await,
            Kind::Http(http) => http.connect(destination).await,
            Kind::Trojan(trojan) => trojan.connect(destination).await,
            Kind::Shadowsocks(ss) => ss.connect(destination).await,
            Kind::Ss2022(ss) => ss.connect(destination).await,
            Kind::Vless(vless) => vless.connect(destination).await,
            Kind::Vmess(vmess) => vmess.connect(destination).await,
            Kind::Wireguard(wg) => wg.connect(destination, resolved).await,
            Kind::Hysteria2(hy2) => hy2.connect(destination).await,
            Kind::Blackhole => Ok(OutboundStream::Blackhole),
            Kind::Dns(service) => Ok(OutboundStream::Dns(Box::new(
                crate::dns::DnsTcpStream::new(service.clone()),
            ))),
        }
    }

    /// Opens a UDP link on this version. The future owns a reference to
    /// the outbound, as the link it yields does through the fan-out, so a
    /// connection or tunnel the version shares lives while any flow needs
    /// it, whatever the drain policy.
    ///
    /// `toward` is where the packet that opens the link goes: the one
    /// target of a VLESS or VMess link (seed 000, "VLESS and VMess
    /// sub-links carry one target"); the other links address every packet
    /// on its own.
    ///
    /// A direct link drops a packet to a name it resolves to one of the
    /// own inbounds of the current `plane`, as the fan-out drops one
    /// addressed to them.
    pub fn connect_datagram(
        self: &Arc<Self>,
        toward: &Address,
        plane: &Arc<ArcSwap<Plane>>,
    ) -> DatagramFuture {
        let outbound = self.clone();
        let toward = toward.clone();
        let plane = plane.clone();
        Box::pin(async move { outbound.open_datagram(&toward, plane).await })
    }

    async fn open_datagram(
        &self,
        toward: &Address,
        plane: Arc<ArcSwap<Plane>>,
    ) -> io::Result<OutboundDatagram> {
        match &self.kind {
            Kind::Freedom(freedom) => freedom
                .bind_udp(plane)
                .map(|udp| OutboundDatagram::Freedom(Box::new(udp))),
            Kind::Socks(socks) => socks
                .associate()
                .await
                .map(|udp| OutboundDatagram::Socks(Box::new(udp))),
            Kind::Trojan(trojan) => trojan
                .associate()
                .await
                .map(|udp| OutboundDatagram::Trojan(Box::new(udp))),
            Kind::Shadowsocks(ss) => ss
                .open_udp()
                .await
                .map(|udp| OutboundDatagram::Shadowsocks(Box::new(udp))),
            Kind::Ss2022(ss) => ss
                .associate()
                .await
                .map(|udp| OutboundDatagram::Ss2022(Box::new(udp))),
            Kind::Vmess(vmess) => vmess
                .associate(toward)
                .await
                .map(|udp| OutboundDatagram::Vmess(Box::new(udp))),
            Kind::Http(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "http carries no datagrams",
            )),
            Kind::Vless(vless) => vless
                .associate(toward)
                .await
                .map(|udp| OutboundDatagram::Vless(Box::new(udp))),
            Kind::Wireguard(wg) => wg
                .associate()
                .await
                .map(|udp| OutboundDatagram::Wireguard(Box::new(udp))),
            Kind::Hysteria2(hy2) => hy2
                .associate()
                .await
                .map(|udp| OutboundDatagram::Hy2(Box::new(udp))),
            Kind::Blackhole => Ok(OutboundDatagram::Blackhole),
            Kind::Dns(service) => Ok(OutboundDatagram::Dns(Box::new(
                crate::dns::DnsUdpLink::new(service.clone()),
            ))),
        }
    }
}
