//! The UDP fan-out (seed 000 "The UDP fan-out in depth"): every packet of an
//! association is routed on the current plane, sent on a sub-link keyed by
//! the outbound version that carries it, and replies come back attributed to
//! their source.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::route::Network;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use crate::drain::{Guard, DRAINED};
use crate::id::OutboundId;
use crate::outbound::DatagramLink;
use crate::plane::Plane;
use crate::route::RouteInput;

struct Sub {
    /// The outbound version the link is open on.
    id: OutboundId,
    /// The route target that led here: the outbound itself, or the balancer
    /// that picked it. The next packet routed there prefers this sub-link.
    via: OutboundId,
    link: DatagramLink,
    guard: Guard,
}

pub struct FanOut {
    plane: Arc<ArcSwap<Plane>>,
    inbound_tag: Arc<str>,
    source: Option<IpAddr>,
    max_subs: usize,
    /// Most recently sent to at the back.
    subs: Vec<Sub>,
    /// Where the last receive stopped, so every sub-link gets its turn.
    next: usize,
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
            next: 0,
        }
    }

    /// Routes and sends one packet. Never fails: a failed open or send drops
    /// the packet, as a lossy link would, and never ends the association.
    pub async fn send_to(&mut self, payload: &[u8], to: &Address) {
        let (outbound, via) = {
            let plane = self.plane.load();
            let input = RouteInput {
                destination: to,
                sniffed: None,
                inbound_tag: &self.inbound_tag,
                source: self.source,
                network: Network::Udp,
            };
            let routed = plane.route(&input);
            let via = routed.target.id().clone();
            let prefer = self.subs.iter().rev().find(|s| s.via == via).map(|s| &s.id);
            (routed.target.resolve(prefer), via)
        };
        let index = match self.subs.iter().position(|s| s.id == outbound.id) {
            Some(index) => index,
            None => match outbound.connect_datagram().await {
                Ok(link) => {
                    let guard = outbound.drain.guard();
                    self.subs.push(Sub {
                        id: outbound.id.clone(),
                        via: via.clone(),
                        link,
                        guard,
                    });
                    if self.subs.len() > self.max_subs {
                        // The sub-link least recently sent to (or opened).
                        self.subs.remove(0);
                        self.next = self.next.saturating_sub(1);
                    }
                    self.subs.len() - 1
                }
                Err(e) => {
                    tracing::debug!("udp fan-out: opening {} failed: {e}", outbound.id);
                    return;
                }
            },
        };
        let sub = &mut self.subs[index];
        let sent = if sub.guard.is_closed() {
            Err(io::Error::new(io::ErrorKind::ConnectionAborted, DRAINED))
        } else {
            sub.link.send_to(payload, to).await
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
                    self.subs[index].id
                );
                self.subs.remove(index);
                self.next = 0;
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
        let mut polled = 0;
        while polled < self.subs.len() {
            if self.next >= self.subs.len() {
                self.next = 0;
            }
            let index = self.next;
            let sub = &mut self.subs[index];
            let mut read = ReadBuf::new(buf);
            let result = if sub.guard.is_closed() {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    DRAINED,
                )))
            } else {
                sub.link.poll_recv_from(cx, &mut read)
            };
            match result {
                Poll::Ready(Ok(from)) => {
                    self.next = index + 1;
                    return Poll::Ready((from, read.filled().len()));
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!("udp fan-out: sub-link {} ended: {e}", sub.id);
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::future::poll_fn;
    use std::net::SocketAddr;

    use etemenanki_ir::route::{PortRange, RouteTable, Rule};
    use etemenanki_ir::spec::{
        AddressFamily, DnsSpec, DrainPolicy, Limits, OutboundProtocol, OutboundSpec, SocketPolicy,
    };

    use super::*;
    use crate::dial::Dialer;
    use crate::outbound::Outbound;
    use crate::plane::Target;
    use crate::resolve::Dns;

    /// A plane with freedom outbounds `o0..o<n>`, `o<i>` reached by port
    /// `base + i`.
    fn plane(n: u16, base: u16, family: AddressFamily) -> Arc<ArcSwap<Plane>> {
        let dns = Dns::build(&DnsSpec::Single { servers: vec![] }).unwrap();
        let dialer = Dialer::new(
            SocketPolicy::default(),
            Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default())),
        );
        let mut targets = HashMap::new();
        let mut rules = Vec::new();
        for i in 0..n {
            let tag = format!("o{i}");
            let spec = OutboundSpec {
                tag: tag.clone(),
                protocol: OutboundProtocol::Freedom {
                    address_family: family,
                },
                drain: DrainPolicy::Keep,
            };
            let outbound = Outbound::build(&spec, 1, &dns, &dialer).unwrap();
            targets.insert(tag.clone(), Target::Outbound(Arc::new(outbound)));
            let port = base + i;
            rules.push(Rule {
                target: tag,
                line: 1,
                port: vec![PortRange {
                    start: port,
                    end: port,
                }],
                ..Rule::default()
            });
        }
        let table = RouteTable::new(rules, "o0".into()).unwrap();
        Arc::new(ArcSwap::from_pointee(Plane::new(table, &targets).unwrap()))
    }

    fn to(port: u16) -> Address {
        Address::Ip(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn open(fanout: &FanOut) -> Vec<String> {
        fanout.subs.iter().map(|s| s.id.to_string()).collect()
    }

    #[tokio::test]
    async fn at_most_max_subs_are_open_and_the_least_recently_sent_to_goes_first() {
        let base = 40_000;
        let mut fanout = FanOut::new(plane(3, base, AddressFamily::Auto), "in".into(), None, 2);
        fanout.send_to(b"a", &to(base)).await;
        fanout.send_to(b"b", &to(base + 1)).await;
        assert_eq!(open(&fanout), ["o0@v1", "o1@v1"]);
        // A successful send moves its sub-link to the back.
        fanout.send_to(b"c", &to(base)).await;
        assert_eq!(open(&fanout), ["o1@v1", "o0@v1"]);
        // Opening a third evicts the one least recently sent to.
        fanout.send_to(b"d", &to(base + 2)).await;
        assert_eq!(open(&fanout), ["o0@v1", "o2@v1"]);
    }

    #[tokio::test]
    async fn peers_on_one_outbound_share_its_sub_link_and_replies_keep_their_source() {
        let base = 41_000;
        let mut fanout = FanOut::new(plane(1, base, AddressFamily::Auto), "in".into(), None, 64);
        let a = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        fanout.send_to(b"to a", &Address::Ip(a_addr)).await;
        fanout.send_to(b"to b", &Address::Ip(b_addr)).await;
        assert_eq!(open(&fanout), ["o0@v1"]);
        let mut buf = [0u8; 64];
        let (_, from_fanout) = b.recv_from(&mut buf).await.unwrap();
        b.send_to(b"from b", from_fanout).await.unwrap();
        let (source, n) = poll_fn(|cx| fanout.poll_recv_from(cx, &mut buf)).await;
        assert_eq!((source, &buf[..n]), (Address::Ip(b_addr), &b"from b"[..]));
    }

    #[tokio::test]
    async fn a_failed_send_drops_the_packet_and_the_sub_link_but_not_the_association() {
        let base = 42_000;
        // An ipv6_only freedom has no socket for an IPv4 peer.
        let mut fanout = FanOut::new(
            plane(1, base, AddressFamily::Ipv6Only),
            "in".into(),
            None,
            64,
        );
        fanout.send_to(b"lost", &to(base)).await;
        assert!(open(&fanout).is_empty());
        // The next packet opens a fresh sub-link, and a send that works keeps it.
        let peer = tokio::net::UdpSocket::bind("[::1]:0").await.unwrap();
        fanout
            .send_to(b"kept", &Address::Ip(peer.local_addr().unwrap()))
            .await;
        assert_eq!(open(&fanout), ["o0@v1"]);
    }
}
