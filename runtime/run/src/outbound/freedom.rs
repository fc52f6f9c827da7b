//! freedom: resolve and connect directly; UDP through one socket per family.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use etemenanki_ir::spec::AddressFamily;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;
use tokio::net::{TcpStream, UdpSocket};

use crate::dial::Dialer;
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

    async fn candidates(&self, destination: &Address) -> io::Result<Vec<SocketAddr>> {
        let (host, port) = match destination {
            Address::Ip(addr) => return Ok(vec![*addr]),
            Address::Domain(host, port) => (host, *port),
        };
        let found = self.resolver.lookup(host).await?;
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

    pub async fn connect(&self, destination: &Address) -> io::Result<TcpStream> {
        let addrs = self.candidates(destination).await?;
        self.dialer.connect_any(&addrs).await
    }

    /// Binds up to one UDP socket per family the address family allows.
    pub fn bind_udp(&self) -> io::Result<ResolvingUdp> {
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
        })
    }
}

/// A freedom UDP link: sends to IPs from the socket of their family and to
/// names through the outbound's resolver.
pub struct ResolvingUdp {
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    resolver: Resolver,
    family: AddressFamily,
}

impl ResolvingUdp {
    pub async fn send_to(&self, payload: &[u8], to: &Address) -> io::Result<()> {
        let peer = match to {
            Address::Ip(addr) => *addr,
            Address::Domain(host, port) => {
                let found = order(
                    self.resolver.lookup(host).await.unwrap_or_default(),
                    self.family,
                );
                let Some(ip) = found
                    .into_iter()
                    .find(|ip| self.socket_for(ip.is_ipv6()).is_some())
                else {
                    tracing::debug!("freedom: dropping a datagram to an unresolvable {to:?}");
                    return Ok(());
                };
                SocketAddr::new(ip, *port)
            }
        };
        let socket = self.socket_for(peer.is_ipv6()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("udp: no local socket in the family of {peer}"),
            )
        })?;
        socket.send_to(payload, peer).await.map(drop)
    }

    fn socket_for(&self, v6: bool) -> Option<&UdpSocket> {
        if v6 {
            self.v6.as_ref()
        } else {
            self.v4.as_ref()
        }
    }

    /// Receives from whichever socket has a datagram, v4 before v6.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        for socket in [&self.v4, &self.v6].into_iter().flatten() {
            if let Poll::Ready(result) = socket.poll_recv_from(cx, buf) {
                return Poll::Ready(result);
            }
        }
        Poll::Pending
    }
}
