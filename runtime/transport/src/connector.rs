//! The client side of a transport: built once per apply from an upstream's
//! spec, it dials the proxy server and layers what the spec asks for.

use std::io;
use std::net::SocketAddr;

use etemenanki_ir::spec::{AddressFamily, HostPort, StreamShape, Upstream};
use socket2::SockRef;

use crate::dial::Dialer;
use crate::keepalive::set_keepalive;
use crate::resolve::{order, Resolver};
use crate::tls::TlsConnector;
use crate::Stream;

/// How to reach one proxy server.
pub struct Connector {
    server: HostPort,
    family: AddressFamily,
    dialer: Dialer,
    /// The `servers` resolver of the DNS spec: proxy servers are resolved
    /// directly, never through the route table.
    resolver: Resolver,
    /// Layered over the TCP connection when the spec carries TLS.
    tls: Option<TlsConnector>,
}

impl Connector {
    /// Checks the spec and prepares everything a dial needs, the TLS
    /// configuration and its CA bundle included; opens no socket.
    pub fn build(upstream: &Upstream, dialer: Dialer, resolver: Resolver) -> io::Result<Self> {
        let transport = &upstream.transport;
        let tls = match transport.shape {
            StreamShape::Tcp => None,
            StreamShape::Tls => {
                let spec = transport
                    .tls
                    .as_ref()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "missing tls"))?;
                Some(TlsConnector::build(spec, &[])?)
            }
            ref other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the {} transport is not supported by this runtime yet",
                        other.name()
                    ),
                ))
            }
        };
        Ok(Connector {
            server: upstream.server.clone(),
            family: transport.address_family,
            dialer,
            resolver,
            tls,
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
        let Some(tls) = &self.tls else {
            return Ok(Stream::Tcp(tcp));
        };
        // A server that takes the connection and never answers the hello
        // fails the dial in the connect timeout, as a silent address does.
        let limit = self.dialer.connect_timeout();
        match tokio::time::timeout(limit, tls.connect(tcp)).await {
            Ok(session) => Ok(Stream::Tls(Box::new(session?))),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("tls handshake with {} timed out", self.server.host),
            )),
        }
    }
}
