//! freedom: resolve and connect directly; UDP through one socket per family.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{AddressFamily, OutboundProtocol};
use etemenanki_proto::Address;
use etemenanki_transport::Stream;
use tokio::io::ReadBuf;
use tokio::net::{TcpStream, UdpSocket};

use super::link::DatagramLink;
use super::link_names::LinkNames;
use super::protocol::{Build, Protocol};
use crate::dial::Dialer;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::resolve::{order, Resolver};

pub struct Freedom {
    dialer: Dialer,
    resolver: Resolver,
    family: AddressFamily,
}

impl Freedom {
    pub fn new(dialer: Dialer, resolver: Resolver, family: AddressFamily) -> Self {
        Freedom {
            dialer,
            resolver,
            family,
        }
    }

    /// The addresses to try for `destination`: itself, or what `resolved`
    /// (the addresses routing looked the name up to) or else the resolver
    /// says, in the address family's order.
    async fn candidates(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
    ) -> io::Result<Vec<SocketAddr>> {
        let (host, port) = match destination {
            Address::Ip(addr) => return Ok(vec![*addr]),
            Address::Domain(host, port) => (host, *port),
        };
        let found = match resolved {
            Some(addresses) => addresses.to_vec(),
            None => self.resolver.lookup_family(host, self.family).await?,
        };
        if found.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "dial: destination did not resolve",
            ));
        }
        let ordered = order(found, self.family);
        if ordered.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!(
                    "dial: no usable {} destination address for {host}:{port}",
                    self.family.name()
                ),
            ));
        }
        Ok(ordered
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }

    /// Connects to `destination`, refusing it if any address of a name
    /// looked up here is one of `own` inbounds (routing checked the
    /// addresses it resolved itself, and an IP destination, already): a
    /// name is refused as its address would be, whatever the domain
    /// strategy, before the first connect.
    pub async fn dial(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> io::Result<TcpStream> {
        let addrs = self.candidates(destination, resolved).await?;
        if let (Address::Domain(..), None) = (destination, resolved) {
            for addr in &addrs {
                own.check_local(*addr)?;
            }
        }
        self.dialer.connect_any(&addrs).await
    }

    /// Binds up to one UDP socket per family the address family allows;
    /// packets to a name resolving to one of the own inbounds of the
    /// current `plane` are dropped.
    pub fn bind_udp(&self, plane: Arc<ArcSwap<Plane>>) -> io::Result<ResolvingUdp> {
        let (want_v4, want_v6) = match self.family {
            AddressFamily::Ipv4Only => (true, false),
            AddressFamily::Ipv6Only => (false, true),
            _ => (true, true),
        };
        let bind = |v6: bool, wanted: bool| -> Option<UdpSocket> {
            if !wanted {
                return None;
            }
            match self.dialer.bind_udp(v6) {
                Ok(socket) => Some(socket),
                Err(e) => {
                    tracing::debug!("udp: no {} socket: {e}", if v6 { "V6" } else { "V4" });
                    None
                }
            }
        };
        let v4 = bind(false, want_v4);
        let v6 = bind(true, want_v6);
        if v4.is_none() && v6.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "udp: no usable local socket in any requested family",
            ));
        }
        Ok(ResolvingUdp {
            v4,
            v6,
            resolver: self.resolver.clone(),
            family: self.family,
            names: LinkNames::default(),
            plane,
        })
    }
}

impl Protocol for Freedom {
    type Stream = Stream;
    type Datagram = Box<ResolvingUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Freedom>> {
        let OutboundProtocol::Freedom { address_family } = protocol else {
            return None;
        };
        Some(Ok(Freedom::new(
            with.dialer.clone(),
            with.dns.destinations.clone(),
            *address_family,
        )))
    }

    async fn connect(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> io::Result<Stream> {
        self.dial(destination, resolved, own).await.map(Stream::Tcp)
    }

    async fn associate(
        &self,
        _: &Address,
        plane: Arc<ArcSwap<Plane>>,
    ) -> io::Result<Box<ResolvingUdp>> {
        self.bind_udp(plane).map(Box::new)
    }
}

/// A freedom UDP link: sends to IPs from the socket of their family and to
/// names through the outbound's resolver.
pub struct ResolvingUdp {
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    resolver: Resolver,
    family: AddressFamily,
    names: LinkNames,
    /// Whose own inbounds a name may not resolve to.
    plane: Arc<ArcSwap<Plane>>,
}

impl ResolvingUdp {
    fn socket_for(&self, v6: bool) -> Option<&UdpSocket> {
        if v6 {
            self.v6.as_ref()
        } else {
            self.v4.as_ref()
        }
    }
}

impl DatagramLink for ResolvingUdp {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        let peer = match to {
            Address::Ip(addr) => *addr,
            Address::Domain(host, port) => {
                let ResolvingUdp {
                    v4,
                    v6,
                    resolver,
                    family,
                    names,
                    ..
                } = self;
                let (has_v4, has_v6) = (v4.is_some(), v6.is_some());
                let found = names.poll_resolve(cx, host, |name| {
                    let resolver = resolver.clone();
                    let family = *family;
                    Box::pin(async move {
                        let found = resolver.lookup(&name).await.unwrap_or_default();
                        order(found, family).into_iter().find(|ip| {
                            if ip.is_ipv6() {
                                has_v6
                            } else {
                                has_v4
                            }
                        })
                    })
                });
                let peer = match ready!(found) {
                    Some(ip) => SocketAddr::new(ip, *port),
                    None => {
                        tracing::debug!("freedom: dropping a datagram to an unresolvable {to:?}");
                        return Poll::Ready(Ok(()));
                    }
                };
                if let Err(refused) = self.plane.load().own_inbounds().check(peer) {
                    tracing::debug!("freedom: {refused} ({to}), dropping a datagram");
                    return Poll::Ready(Ok(()));
                }
                peer
            }
        };
        let socket = self.socket_for(peer.is_ipv6()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("udp: no local socket in the family of {peer}"),
            )
        })?;
        socket.poll_send_to(cx, payload, peer).map_ok(drop)
    }

    /// Receives from whichever socket has a datagram, v4 before v6.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        for socket in [&self.v4, &self.v6].into_iter().flatten() {
            if let Poll::Ready(result) = socket.poll_recv_from(cx, buf) {
                return Poll::Ready(result.map(Address::Ip));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use etemenanki_ir::spec::{Limits, SocketPolicy};
    use tokio::net::TcpListener;

    use super::*;
    use crate::dial::Dialer;

    #[tokio::test]
    async fn a_name_that_resolves_to_our_own_inbound_is_refused_before_any_connect() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let limits = Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default()));
        let freedom = Freedom::new(
            Dialer::new(SocketPolicy::default(), limits),
            crate::dns::no_servers().destinations,
            AddressFamily::Auto,
        );
        // `localhost` resolves to 127.0.0.1 and ::1: an inbound on one of
        // them, or on a wildcard, refuses the name.
        for inbound in [format!("127.0.0.1:{port}"), format!("[::]:{port}")] {
            let own = OwnInbounds::new([inbound.parse().unwrap()]);
            for name in ["localhost", "api.localhost"] {
                let to = Address::Domain(name.into(), port);
                let refused = freedom.dial(&to, None, &own).await.unwrap_err();
                assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{name}");
                assert_eq!(
                    refused.to_string(),
                    format!("refusing a flow to this proxy's own inbound {inbound}")
                );
            }
        }
        assert_eq!(
            listener.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "a refused name is never connected to"
        );
        let elsewhere = OwnInbounds::new(["127.0.0.1:1".parse().unwrap()]);
        let to = Address::Domain("localhost".into(), port);
        let reached = freedom.dial(&to, None, &elsewhere).await.unwrap();
        assert_eq!(reached.peer_addr().unwrap().port(), port);
    }

    #[tokio::test]
    async fn a_datagram_to_a_name_that_resolves_to_our_own_inbound_is_dropped() {
        let inbound = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        inbound.set_nonblocking(true).unwrap();
        let elsewhere = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        elsewhere
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let plane = Arc::new(ArcSwap::from_pointee(
            Plane::empty().with_own_inbounds([inbound.local_addr().unwrap()]),
        ));
        let limits = Arc::new(ArcSwap::from_pointee(Limits::default()));
        let freedom = Freedom::new(
            Dialer::new(SocketPolicy::default(), limits),
            crate::dns::no_servers().destinations,
            AddressFamily::Ipv4Only,
        );
        let mut link = freedom.bind_udp(plane).unwrap();
        for (to, payload) in [(&inbound, &b"loop"[..]), (&elsewhere, b"out")] {
            let name = Address::Domain("localhost".into(), to.local_addr().unwrap().port());
            poll_fn(|cx| link.poll_send_to(cx, payload, &name))
                .await
                .unwrap();
        }
        let mut buf = [0u8; 16];
        let n = elsewhere.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"out");
        // Sent first on loopback, it would be queued by now.
        assert_eq!(
            inbound.recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[tokio::test]
    async fn a_name_routing_resolved_is_dialed_at_those_addresses_without_a_second_lookup() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // A resolver with no server: any lookup it made would fail.
        let dns = crate::dns::no_servers();
        let limits = Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default()));
        let freedom = Freedom::new(
            Dialer::new(SocketPolicy::default(), limits),
            dns.destinations,
            AddressFamily::Auto,
        );
        let name = Address::Domain("rebinds.example".into(), port);
        let resolved = ["127.0.0.1".parse().unwrap()];
        let own = OwnInbounds::default();
        let stream = freedom.dial(&name, Some(&resolved), &own).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
        assert!(
            freedom.dial(&name, None, &own).await.is_err(),
            "without them the name is looked up, and this resolver finds nothing"
        );
    }
}
