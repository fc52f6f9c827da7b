//! wireguard: flows into a userspace tunnel (runtime/wireguard). The
//! endpoint is a proxy server like any other, so `servers` resolves it;
//! what is reached inside the tunnel is a destination this process
//! resolves, so `destinations` does. Building opens nothing: the first
//! flow starts the tunnel.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{OutboundProtocol, WireguardSpec};
use etemenanki_proto::Address;
use etemenanki_wireguard::{WgConnector, WgStream, WgUdp};
use tokio::io::ReadBuf;

use super::link::DatagramLink;
use super::link_names::LinkNames;
use super::protocol::{Build, Protocol};
use crate::dial::Dialer;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::Relayed;
use crate::resolve::Dns;

pub struct Wireguard {
    connector: WgConnector,
}

impl Wireguard {
    pub fn new(spec: &WireguardSpec, dialer: &Dialer, dns: &Dns) -> Wireguard {
        Wireguard {
            connector: WgConnector::new(
                spec,
                dialer.clone(),
                dns.servers.clone(),
                dns.destinations.clone(),
            ),
        }
    }
}

impl Protocol for Wireguard {
    type Stream = WgStream;
    type Datagram = Box<WgDatagram>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Wireguard>> {
        let OutboundProtocol::Wireguard(spec) = protocol else {
            return None;
        };
        Some(Ok(Wireguard::new(spec, with.dialer, with.dns)))
    }

    async fn connect(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<WgStream> {
        self.connector.connect(destination, resolved).await
    }

    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<WgDatagram>> {
        Ok(Box::new(WgDatagram {
            udp: self.connector.associate().await?,
            connector: self.connector.clone(),
            names: LinkNames::default(),
        }))
    }
}

/// A UDP link inside the tunnel: each datagram to its own address, a
/// name resolved with `destinations` inside the tunnel's families.
pub struct WgDatagram {
    udp: WgUdp,
    connector: WgConnector,
    names: LinkNames,
}

impl DatagramLink for WgDatagram {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        let peer = match to {
            Address::Ip(addr) => *addr,
            Address::Domain(host, port) => {
                let connector = &self.connector;
                let port = *port;
                let found = self.names.poll_resolve(cx, host, |name| {
                    let connector = connector.clone();
                    Box::pin(async move {
                        match connector.resolve_datagram(&name, port).await {
                            Ok(ip) => Some(ip),
                            Err(e) => {
                                tracing::debug!("{e}");
                                None
                            }
                        }
                    })
                });
                match ready!(found) {
                    Some(ip) => SocketAddr::new(ip, port),
                    None => return Poll::Ready(Ok(())),
                }
            }
        };
        self.udp.poll_send_to(cx, payload, peer)
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        self.udp.poll_recv_from(cx, buf).map_ok(Address::Ip)
    }
}

/// A flow inside the tunnel: bytes move through the tunnel's own stack.
impl Relayed for WgStream {
    fn plain_tcp(&mut self) -> Option<&mut tokio::net::TcpStream> {
        None
    }
}
