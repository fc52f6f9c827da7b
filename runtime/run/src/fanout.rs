//! The UDP fan-out: every packet of an
//! association is routed on the current plane, sent on a sub-link keyed by
//! the outbound version that carries it, and replies come back attributed to
//! their source.
//!
//! Everything is polled. A sub-link's open is a future kept beside the
//! links already open and driven from [`FanOut::poll_recv_from`], so an open
//! that takes round trips (a SOCKS association, a proxy over TLS) never
//! stalls the replies or the packets of another sub-link.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::route::Network;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use crate::drain::{Guard, DRAINED};
use crate::id::OutboundId;
use crate::names::Names;
use crate::outbound::{DatagramFuture, DatagramLink, Outbound, OutboundDatagram};
use crate::plane::Plane;
use crate::route::{route_datagram, RouteInput, Unrouted};

struct Sub {
    /// The outbound version the link is open on, held so whatever the
    /// version shares lives while the sub-link does.
    outbound: Arc<Outbound>,
    /// The route target that led here: the outbound itself, or the balancer
    /// that picked it. The next packet routed there prefers this sub-link.
    via: OutboundId,
    link: OutboundDatagram,
    guard: Guard,
    /// The packet that opened the sub-link, while its send is pending.
    held: Option<(Vec<u8>, Address)>,
}

/// A sub-link being opened.
struct Opening {
    outbound: Arc<Outbound>,
    via: OutboundId,
    future: DatagramFuture,
    /// The packet that asked for the open, sent once it is done. Later
    /// packets to the same version while it opens are dropped, as a lossy
    /// link drops them.
    held: (Vec<u8>, Address),
}

pub struct FanOut {
    plane: Arc<ArcSwap<Plane>>,
    inbound_tag: Arc<str>,
    source: Option<IpAddr>,
    max_subs: usize,
    /// Most recently sent to at the back.
    subs: Vec<Sub>,
    /// Opens in flight, at most `max_subs`.
    opening: Vec<Opening>,
    /// Names looked up for the domain strategy, and lookups in flight.
    names: Names,
    /// Where the last receive stopped, so every sub-link gets its turn.
    next: usize,
}

fn drained() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, DRAINED)
}

impl FanOut {
    pub fn new(
        plane: Arc<ArcSwap<Plane>>,
        inbound_tag: Arc<str>,
        source: Option<IpAddr>,
        max_subs: usize,
    ) -> Self {
        FanOut {
            plane,
            inbound_tag,
            source,
            max_subs: max_subs.max(1),
            subs: Vec::new(),
            opening: Vec::new(),
            names: Names::default(),
            next: 0,
        }
    }

    /// Routes and sends one packet. `Pending` only while the sub-link it
    /// routes to cannot take it yet; a failed open or send drops the packet,
    /// as a lossy link would, and never ends the association.
    pub fn poll_send_to(&mut self, cx: &mut Context<'_>, payload: &[u8], to: &Address) -> Poll<()> {
        let (outbound, via) = {
            let plane = self.plane.load();
            let input = RouteInput {
                destination: to,
                sniffed: None,
                inbound_tag: &self.inbound_tag,
                source: self.source,
                network: Network::Udp,
            };
            let addresses = to.domain().and_then(|name| self.names.get(name));
            let routed = match route_datagram(&plane, &input, addresses) {
                Ok(routed) => routed,
                Err(Unrouted::Refused(refused)) => {
                    tracing::debug!("udp fan-out: {refused}, dropping a packet");
                    return Poll::Ready(());
                }
                Err(Unrouted::Resolve) => {
                    match (plane.resolver(), to.domain()) {
                        (Some(resolver), Some(name)) => {
                            self.names.resolve(resolver, name, payload, to);
                            return Poll::Ready(());
                        }
                        // Nothing to ask: the name routes by itself.
                        _ => match route_datagram(&plane, &input, Some(&[])) {
                            Ok(routed) => routed,
                            Err(_) => return Poll::Ready(()),
                        },
                    }
                }
            };
            let via = routed.target.id().clone();
            let prefer = self
                .subs
                .iter()
                .rev()
                .find(|s| s.via == via)
                .map(|s| &s.outbound.id);
            (routed.target.resolve(prefer), via)
        };
        if let Some(index) = self.subs.iter().position(|s| s.outbound.id == outbound.id) {
            return self.poll_send_on(cx, index, payload, to, via);
        }
        if self.opening.iter().any(|o| o.outbound.id == outbound.id) {
            tracing::debug!("udp fan-out: {} is opening, dropping a packet", outbound.id);
            return Poll::Ready(());
        }
        if self.opening.len() >= self.max_subs {
            tracing::debug!("udp fan-out: too many opens in flight, dropping a packet");
            return Poll::Ready(());
        }
        let mut future = outbound.connect_datagram(to, &self.plane);
        match future.as_mut().poll(cx) {
            // Opened at once (freedom, blackhole): send without holding.
            Poll::Ready(Ok(link)) => {
                let index = self.join(outbound, via.clone(), link, None);
                self.poll_send_on(cx, index, payload, to, via)
            }
            Poll::Ready(Err(e)) => {
                tracing::debug!("udp fan-out: opening {} failed: {e}", outbound.id);
                Poll::Ready(())
            }
            Poll::Pending => {
                self.opening.push(Opening {
                    outbound,
                    via,
                    future,
                    held: (payload.to_vec(), to.clone()),
                });
                Poll::Ready(())
            }
        }
    }

    /// Sends on the sub-link at `index`: a success moves it to the back, a
    /// failure removes it.
    fn poll_send_on(
        &mut self,
        cx: &mut Context<'_>,
        index: usize,
        payload: &[u8],
        to: &Address,
        via: OutboundId,
    ) -> Poll<()> {
        let sub = &mut self.subs[index];
        let sent = match sub.poll_held(cx) {
            Poll::Ready(Ok(())) if sub.guard.is_closed() => Err(drained()),
            Poll::Ready(Ok(())) => ready!(sub.link.poll_send_to(cx, payload, to)),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => return Poll::Pending,
        };
        match sent {
            Ok(()) => {
                let mut sub = self.subs.remove(index);
                sub.via = via;
                self.subs.push(sub);
                if self.next > index {
                    self.next -= 1;
                }
            }
            Err(e) => {
                tracing::debug!(
                    "udp fan-out: sending on {} failed: {e}",
                    self.subs[index].outbound.id
                );
                self.subs.remove(index);
                self.next = 0;
            }
        }
        Poll::Ready(())
    }

    /// Adds an opened sub-link at the back, evicting the one least recently
    /// sent to (or opened) past the limit; returns its index.
    fn join(
        &mut self,
        outbound: Arc<Outbound>,
        via: OutboundId,
        link: OutboundDatagram,
        held: Option<(Vec<u8>, Address)>,
    ) -> usize {
        let guard = outbound.drain.guard();
        self.subs.push(Sub {
            outbound,
            via,
            link,
            guard,
            held,
        });
        if self.subs.len() > self.max_subs {
            self.subs.remove(0);
            self.next = self.next.saturating_sub(1);
        }
        self.subs.len() - 1
    }

    /// Drives the opens in flight; an opened sub-link joins the table and
    /// its held packet goes out on it.
    fn poll_opening(&mut self, cx: &mut Context<'_>) {
        let mut i = 0;
        while i < self.opening.len() {
            let opened = match self.opening[i].future.as_mut().poll(cx) {
                Poll::Pending => {
                    i += 1;
                    continue;
                }
                Poll::Ready(opened) => opened,
            };
            let Opening {
                outbound,
                via,
                held,
                ..
            } = self.opening.swap_remove(i);
            match opened {
                Ok(link) => {
                    self.join(outbound, via, link, Some(held));
                }
                Err(e) => tracing::debug!("udp fan-out: opening {} failed: {e}", outbound.id),
            }
        }
    }

    /// The next reply from any sub-link, and its source. Never fails: a
    /// sub-link that ends is removed and the rest carry on.
    pub fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<(Address, usize)> {
        // A packet held for its name's lookup goes out once it is answered
        // (dropped if its sub-link cannot take it at once).
        while let Poll::Ready((payload, to)) = self.names.poll_resolved(cx) {
            let _ = self.poll_send_to(cx, &payload, &to);
        }
        self.poll_opening(cx);
        let mut polled = 0;
        while polled < self.subs.len() {
            if self.next >= self.subs.len() {
                self.next = 0;
            }
            let index = self.next;
            let sub = &mut self.subs[index];
            let mut read = ReadBuf::new(buf);
            let result = if sub.guard.is_closed() {
                Poll::Ready(Err(drained()))
            } else {
                match sub.poll_held(cx) {
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    _ => sub.link.poll_recv_from(cx, &mut read),
                }
            };
            match result {
                Poll::Ready(Ok(from)) => {
                    self.next = index + 1;
                    return Poll::Ready((from, read.filled().len()));
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!("udp fan-out: sub-link {} ended: {e}", sub.outbound.id);
                    self.subs.remove(index);
                }
                Poll::Pending => {
                    self.next = index + 1;
                    polled += 1;
                }
            }
        }
        Poll::Pending
    }
}

impl Sub {
    /// Sends the packet that opened this sub-link, if it is still held.
    fn poll_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some((payload, to)) = &self.held {
            ready!(self.link.poll_send_to(cx, payload, to))?;
            self.held = None;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::future::poll_fn;
    use std::net::SocketAddr;
    use std::time::Duration;

    use etemenanki_ir::route::{PortRange, RouteTable, Rule};
    use etemenanki_ir::spec::{
        AddressFamily, DrainPolicy, Host, HostPort, Limits, OutboundProtocol, OutboundSpec,
        SocketPolicy, StreamShape, TransportSpec, Upstream,
    };
    use tokio::net::{TcpListener, UdpSocket};

    use super::*;
    use crate::dial::Dialer;
    use crate::outbound::Outbound;
    use crate::plane::Target;

    fn freedom(family: AddressFamily) -> OutboundProtocol {
        OutboundProtocol::Freedom {
            address_family: family,
        }
    }

    /// A plane with outbounds `o0..o<n>`, the i-th of `outbounds` reached
    /// by destination port `ports[i]`; the default is `o0`.
    pub(crate) fn plane(outbounds: &[(OutboundProtocol, u16)]) -> Arc<ArcSwap<Plane>> {
        let dns = crate::dns::no_servers();
        let dialer = Dialer::new(
            SocketPolicy::default(),
            Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default())),
        );
        let mut targets = HashMap::new();
        let mut rules = Vec::new();
        for (i, (protocol, port)) in outbounds.iter().enumerate() {
            let tag = format!("o{i}");
            let spec = OutboundSpec {
                tag: tag.clone(),
                protocol: protocol.clone(),
                drain: DrainPolicy::Keep,
            };
            let outbound = Outbound::build(&spec, 1, &dns, &dialer).unwrap();
            targets.insert(tag.clone(), Target::Outbound(Arc::new(outbound)));
            rules.push(Rule {
                target: tag,
                line: 1,
                port: vec![PortRange {
                    start: *port,
                    end: *port,
                }],
                ..Rule::default()
            });
        }
        let table = RouteTable::new(rules, "o0".into()).unwrap();
        Arc::new(ArcSwap::from_pointee(Plane::new(table, &targets).unwrap()))
    }

    /// `n` freedom outbounds, `o<i>` reached by port `base + i`.
    fn freedoms(n: u16, base: u16, family: AddressFamily) -> Arc<ArcSwap<Plane>> {
        let outbounds: Vec<_> = (0..n).map(|i| (freedom(family), base + i)).collect();
        plane(&outbounds)
    }

    fn to(port: u16) -> Address {
        Address::Ip(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn open(fanout: &FanOut) -> Vec<String> {
        fanout
            .subs
            .iter()
            .map(|s| s.outbound.id.to_string())
            .collect()
    }

    async fn send(fanout: &mut FanOut, payload: &[u8], to: &Address) {
        poll_fn(|cx| fanout.poll_send_to(cx, payload, to)).await
    }

    async fn recv(fanout: &mut FanOut, buf: &mut [u8]) -> (Address, usize) {
        tokio::time::timeout(
            Duration::from_secs(5),
            poll_fn(|cx| fanout.poll_recv_from(cx, buf)),
        )
        .await
        .expect("a reply within 5 s")
    }

    #[tokio::test]
    async fn at_most_max_subs_are_open_and_the_least_recently_sent_to_goes_first() {
        let base = 40_000;
        let mut fanout = FanOut::new(freedoms(3, base, AddressFamily::Auto), "in".into(), None, 2);
        send(&mut fanout, b"a", &to(base)).await;
        send(&mut fanout, b"b", &to(base + 1)).await;
        assert_eq!(open(&fanout), ["o0@v1", "o1@v1"]);
        // A successful send moves its sub-link to the back.
        send(&mut fanout, b"c", &to(base)).await;
        assert_eq!(open(&fanout), ["o1@v1", "o0@v1"]);
        // Opening a third evicts the one least recently sent to.
        send(&mut fanout, b"d", &to(base + 2)).await;
        assert_eq!(open(&fanout), ["o0@v1", "o2@v1"]);
    }

    #[tokio::test]
    async fn peers_on_one_outbound_share_its_sub_link_and_replies_keep_their_source() {
        let base = 41_000;
        let mut fanout = FanOut::new(
            freedoms(1, base, AddressFamily::Auto),
            "in".into(),
            None,
            64,
        );
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        send(&mut fanout, b"to a", &Address::Ip(a_addr)).await;
        send(&mut fanout, b"to b", &Address::Ip(b_addr)).await;
        assert_eq!(open(&fanout), ["o0@v1"]);
        let mut buf = [0u8; 64];
        let (_, from_fanout) = b.recv_from(&mut buf).await.unwrap();
        b.send_to(b"from b", from_fanout).await.unwrap();
        let (source, n) = recv(&mut fanout, &mut buf).await;
        assert_eq!((source, &buf[..n]), (Address::Ip(b_addr), &b"from b"[..]));
    }

    #[tokio::test]
    async fn a_failed_send_drops_the_packet_and_the_sub_link_but_not_the_association() {
        let base = 42_000;
        // An ipv6_only freedom has no socket for an IPv4 peer.
        let mut fanout = FanOut::new(
            freedoms(1, base, AddressFamily::Ipv6Only),
            "in".into(),
            None,
            64,
        );
        send(&mut fanout, b"lost", &to(base)).await;
        assert!(open(&fanout).is_empty());
        // The next packet opens a fresh sub-link, and a send that works keeps it.
        let peer = UdpSocket::bind("[::1]:0").await.unwrap();
        send(
            &mut fanout,
            b"kept",
            &Address::Ip(peer.local_addr().unwrap()),
        )
        .await;
        assert_eq!(open(&fanout), ["o0@v1"]);
    }

    #[tokio::test]
    async fn a_slow_open_on_one_sub_link_does_not_delay_replies_on_another() {
        // o0 is a SOCKS upstream that accepts and never answers: its
        // association stays in its handshake for as long as the test runs.
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let _held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                held.push(socket);
            }
        });
        let socks = OutboundProtocol::Socks {
            upstream: Upstream {
                server: HostPort {
                    host: Host::Ip("127.0.0.1".parse().unwrap()),
                    port: silent_port,
                },
                transport: TransportSpec {
                    shape: StreamShape::Tcp,
                    tls: None,
                    address_family: AddressFamily::Auto,
                },
            },
            account: None,
        };
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        let _echo = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = echo.recv_from(&mut buf).await {
                echo.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let plane = plane(&[(socks, 9), (freedom(AddressFamily::Auto), echo_addr.port())]);
        let mut fanout = FanOut::new(plane, "in".into(), None, 64);

        send(&mut fanout, b"to the silent upstream", &to(9)).await;
        assert_eq!(fanout.opening.len(), 1, "the socks open is in flight");
        send(&mut fanout, b"ping", &Address::Ip(echo_addr)).await;
        let mut buf = [0u8; 64];
        let (source, n) = recv(&mut fanout, &mut buf).await;
        assert_eq!((source, &buf[..n]), (Address::Ip(echo_addr), &b"ping"[..]));
        assert_eq!(fanout.opening.len(), 1, "the socks open is still in flight");
        assert_eq!(open(&fanout), ["o1@v1"]);
    }

    #[tokio::test]
    async fn a_packet_to_a_name_is_routed_by_its_addresses_when_the_strategy_wants_them() {
        use etemenanki_ir::route::DomainStrategy;
        // geoip private -> block, default direct, under ip_if_non_match;
        // `localhost` resolves to loopback even with no DNS server.
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = echo.local_addr().unwrap().port();
        let dns = crate::dns::no_servers();
        let dialer = Dialer::new(
            SocketPolicy::default(),
            Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default())),
        );
        let mut targets = HashMap::new();
        for (tag, protocol) in [
            ("direct", freedom(AddressFamily::Auto)),
            ("block", OutboundProtocol::Blackhole),
        ] {
            let spec = OutboundSpec {
                tag: tag.into(),
                protocol,
                drain: DrainPolicy::Keep,
            };
            let outbound = Outbound::build(&spec, 1, &dns, &dialer).unwrap();
            targets.insert(tag.to_owned(), Target::Outbound(Arc::new(outbound)));
        }
        let table = RouteTable::new(
            vec![Rule {
                target: "block".into(),
                line: 1,
                geoip: vec!["private".into()],
                ..Rule::default()
            }],
            "direct".into(),
        )
        .unwrap()
        .with_domain_strategy(DomainStrategy::IpIfNonMatch);
        let plane = Plane::new(table, &targets)
            .unwrap()
            .with_resolver(dns.destinations);
        let mut fanout = FanOut::new(
            Arc::new(ArcSwap::from_pointee(plane)),
            "in".into(),
            None,
            64,
        );
        send(
            &mut fanout,
            b"to localhost",
            &Address::Domain("localhost".into(), port),
        )
        .await;
        assert!(open(&fanout).is_empty(), "held for its lookup");
        // Receiving drives the lookup; the packet then goes to the block.
        let mut buf = [0u8; 64];
        let driven = tokio::time::timeout(
            Duration::from_secs(1),
            poll_fn(|cx| fanout.poll_recv_from(cx, &mut buf)),
        )
        .await;
        assert!(driven.is_err(), "nothing answers from a blackhole");
        assert_eq!(open(&fanout), ["block@v1"]);
        // The answer is kept: the next packet to the name routes at once.
        send(
            &mut fanout,
            b"again",
            &Address::Domain("localhost".into(), port),
        )
        .await;
        assert_eq!(open(&fanout), ["block@v1"]);
        let mut probe = [0u8; 16];
        let nothing =
            tokio::time::timeout(Duration::from_millis(200), echo.recv_from(&mut probe)).await;
        assert!(nothing.is_err(), "the loopback echo never heard a packet");
    }
}
