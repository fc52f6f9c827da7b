//! The TCP connection a proxy client opens to its server.

use std::io;
use std::net::SocketAddr;

use etemenanki_ir::spec::{Account, AddressFamily, HostPort, StreamShape, Upstream};
use tokio::net::TcpStream;

use crate::dial::Dialer;
use crate::resolve::{order, Resolver};

/// A proxy server, how to reach it, and the account to present.
pub struct UpstreamDialer {
    server: HostPort,
    family: AddressFamily,
    pub account: Option<(String, String)>,
    dialer: Dialer,
    resolver: Resolver,
}

impl UpstreamDialer {
    /// Plain TCP only: TLS, WebSocket and gRPC transports come with the
    /// protocol issues.
    pub fn new(
        upstream: &Upstream,
        account: Option<&Account>,
        dialer: Dialer,
        resolver: Resolver,
    ) -> io::Result<Self> {
        if upstream.transport.shape != StreamShape::Tcp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the {} transport is not supported by this runtime yet",
                    upstream.transport.shape.name()
                ),
            ));
        }
        Ok(UpstreamDialer {
            server: upstream.server.clone(),
            family: upstream.transport.address_family,
            account: account.map(|a| (a.user.clone(), a.pass.expose().clone())),
            dialer,
            resolver,
        })
    }

    /// Resolves the server and connects to its addresses in order.
    pub async fn connect(&self) -> io::Result<TcpStream> {
        let ips = order(
            self.resolver.lookup(&self.server.host.name()).await?,
            self.family,
        );
        let addrs: Vec<SocketAddr> = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, self.server.port))
            .collect();
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "dial: destination did not resolve",
            ));
        }
        self.dialer.connect_any(&addrs).await
    }

    /// A UDP socket under the socket policy, for a SOCKS association.
    pub fn bind_udp(&self, v6: bool) -> io::Result<tokio::net::UdpSocket> {
        self.dialer.bind_udp(v6)
    }
}
