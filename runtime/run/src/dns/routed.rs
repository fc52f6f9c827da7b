//! The carrier of a split spec's through_proxy queries: each query is a
//! flow of its own, routed by the rules on the current plane to its
//! outbound (UDP for plain DNS, TCP for a truncated answer, DNS over TLS and
//! DNS over HTTPS). Resolver queries carry no inbound tag, so no
//! `inbound_tag` rule matches them. A query routed to the DNS service
//! itself is refused: answering it would ask the same resolver again.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use arc_swap::ArcSwap;
use etemenanki_ir::route::Network;
use etemenanki_ir::spec::{Host, HostPort};
use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use crate::connect::Flow;
use crate::outbound::{DatagramLink, Outbound};
use crate::plane::Plane;
use crate::resolve::{answers, BoxFuture, Carrier, DnsStream, MAX_MESSAGE};
use crate::route::{route_datagram, route_stream, RouteInput, Unrouted};

pub struct Routed {
    plane: Arc<ArcSwap<Plane>>,
}

impl Routed {
    pub fn new(plane: Arc<ArcSwap<Plane>>) -> Routed {
        Routed { plane }
    }
}

fn refuse_the_service(outbound: &Outbound) -> io::Result<()> {
    match outbound.is_dns_service() {
        true => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "dns: refusing a resolver query routed to the DNS service itself",
        )),
        false => Ok(()),
    }
}

impl Carrier for Routed {
    fn exchange_udp<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a [u8],
    ) -> BoxFuture<'a, io::Result<Vec<u8>>> {
        Box::pin(async move {
            let to = Address::Ip(server);
            let outbound = {
                let plane = self.plane.load();
                let input = RouteInput {
                    destination: &to,
                    sniffed: None,
                    inbound_tag: "",
                    source: None,
                    network: Network::Udp,
                };
                match route_datagram(&plane, &input, Some(&[])) {
                    Ok(routed) => routed.target.resolve(None),
                    Err(Unrouted::Refused(refused)) => {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            refused.to_string(),
                        ))
                    }
                    Err(Unrouted::Resolve) => {
                        return Err(io::Error::other("dns: the server's address did not route"))
                    }
                }
            };
            refuse_the_service(&outbound)?;
            let _guard = outbound.drain.guard();
            let mut link = outbound.connect_datagram(&to, &self.plane).await?;
            poll_fn(|cx| link.poll_send_to(cx, query, &to)).await?;
            let mut buf = vec![0u8; MAX_MESSAGE];
            loop {
                let n = poll_fn(|cx| {
                    let mut read = ReadBuf::new(&mut buf);
                    match link.poll_recv_from(cx, &mut read) {
                        Poll::Ready(Ok(_)) => Poll::Ready(Ok(read.filled().len())),
                        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await?;
                if answers(query, &buf[..n]) {
                    buf.truncate(n);
                    return Ok(buf);
                }
            }
        })
    }

    fn connect<'a>(
        &'a self,
        server: &'a HostPort,
    ) -> BoxFuture<'a, io::Result<Box<dyn DnsStream>>> {
        Box::pin(async move {
            let destination = match &server.host {
                Host::Ip(ip) => Address::Ip(SocketAddr::new(*ip, server.port)),
                Host::Domain(name) => Address::Domain(name.clone(), server.port),
            };
            let flow = Flow {
                destination,
                sniffed: None,
                source: None,
            };
            let plane = self.plane.load_full();
            let (outbound, resolved) = route_stream(&plane, "", &flow).await?;
            refuse_the_service(&outbound)?;
            let stream = outbound
                .connect_stream(&flow.destination, resolved.as_deref(), plane.own_inbounds())
                .await?;
            Ok(Box::new(stream) as Box<dyn DnsStream>)
        })
    }
}
