//! The client side of a transport: built once per apply from an upstream's
//! spec, it dials the proxy server and layers what the spec asks for.

use std::io;
use std::net::SocketAddr;

use etemenanki_ir::spec::{AddressFamily, HostPort, StreamShape, Upstream};
use socket2::SockRef;

use crate::dial::Dialer;
use crate::keepalive::set_keepalive;
use crate::resolve::{order, Resolver};
use crate::Stream;

/// How to reach one proxy server.
pub struct Connector {
    server: HostPort,
    family: AddressFamily,
    dialer: Dialer,
    /// The `servers` resolver of the DNS spec: proxy servers are resolved
    /// directly, never through the route table.
    resolver: Resolver,
}

impl Connector {
    /// Checks the spec and prepares everything a dial needs; opens no socket.
    pub fn build(upstream: &Upstream, dialer: Dialer, resolver: Resolver) -> io::Result<Self> {
        match upstream.transport.shape {
            StreamShape::Tcp => {}
            ref other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the {} transport is not supported by this runtime yet",
                        other.name()
                    ),
                ))
            }
        }
        Ok(Connector {
            server: upstream.server.clone(),
            family: upstream.transport.address_family,
            dialer,
            resolver,
        })
    }

    pub fn server(&self) -> &HostPort {
        &self.server
    }

    /// The dialer, for the sockets a protocol opens beside its stream (a
    /// SOCKS association's relay socket).
    pub fn dialer(&self) -> &Dialer {
        &self.dialer
    }

    /// Resolves the server under the address family, connects to the first
    /// address that answers, sets keepalive and layers the transport.
    pub async fn connect(&self) -> io::Result<Stream> {
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
        let tcp = self.dialer.connect_any(&addrs).await?;
        set_keepalive(SockRef::from(&tcp));
        Ok(Stream::Tcp(tcp))
    }
}
