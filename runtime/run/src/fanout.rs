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
            None => match outbound.connect_datagram() {
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
        let sub = &self.subs[index];
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
            let sub = &self.subs[index];
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
