//! The client side of a transport: built once per apply from an upstream's
//! spec, it dials the proxy server and layers what the spec asks for.

use std::io;
use std::net::SocketAddr;

use etemenanki_ir::spec::{AddressFamily, HostPort, StreamShape, Upstream};
use socket2::SockRef;

use crate::dial::Dialer;
use crate::grpc::{self, GrpcSettings};
use crate::keepalive::set_keepalive;
use crate::resolve::{order, Resolver};
use crate::tls::TlsConnector;
use crate::ws::WsSettings;
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
    /// Layered over TCP or TLS for a ws shape.
    ws: Option<WsSettings>,
    /// Layered over TCP or TLS for a grpc shape.
    grpc: Option<GrpcSettings>,
}

impl Connector {
    /// Checks the spec and prepares everything a dial needs, the TLS
    /// configuration and its CA bundle included; opens no socket.
    pub fn build(upstream: &Upstream, dialer: Dialer, resolver: Resolver) -> io::Result<Self> {
        let transport = &upstream.transport;
        let mut ws = None;
        let mut grpc = None;
        let tls = match &transport.shape {
            StreamShape::Tcp => None,
            StreamShape::Tls => {
                let spec = transport
                    .tls
                    .as_ref()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "missing tls"))?;
                Some(TlsConnector::build(spec, &[])?)
            }
            StreamShape::Ws {
                path,
                host,
                early_data,
            } => {
                if host.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "missing ws host",
                    ));
                }
                ws = Some(WsSettings {
                    host: host.clone(),
                    path: path.clone(),
                    early_data: early_data.clone(),
                });
                // TLS exactly when the spec carries it, never implied by
                // the transport, with ALPN http/1.1 unless the spec names
                // its own.
                match &transport.tls {
                    Some(spec) => Some(TlsConnector::build(spec, &["http/1.1"])?),
                    None => None,
                }
            }
            StreamShape::Grpc {
                service_name,
                authority,
            } => {
                grpc = Some(GrpcSettings::new(
                    authority,
                    service_name,
                    transport.tls.is_some(),
                )?);
                // TLS exactly when the spec carries it, with ALPN h2.
                match &transport.tls {
                    Some(spec) => Some(TlsConnector::build(spec, &["h2"])?),
                    None => None,
                }
            }
        };
        Ok(Connector {
            server: upstream.server.clone(),
            family: transport.address_family,
            dialer,
            resolver,
            tls,
            ws,
            grpc,
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
    /// The server's addresses, from the `servers` resolver in the address
    /// family's order: what a dial tries, and where a protocol's own UDP
    /// socket sends (Shadowsocks).
    pub async fn server_addrs(&self) -> io::Result<Vec<SocketAddr>> {
        let ips = order(
            self.resolver
                .lookup_family(&self.server.host.name(), self.family)
                .await?,
            self.family,
        );
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, self.server.port))
            .collect())
    }

    pub async fn connect(&self) -> io::Result<Stream> {
        Ok(self.connect_sending(&[]).await?.0)
    }

    /// As [`Connector::connect`], sending what the transport allows of
    /// `first`, the stream's first bytes, as it connects: inside a
    /// WebSocket's upgrade (its early data), or on plain TCP at once,
    /// without a turn of the event loop ([`Stream::send_now`]); returns how
    /// many of them it sent.
    pub async fn connect_sending(&self, first: &[u8]) -> io::Result<(Stream, usize)> {
        if let Some(grpc) = &self.grpc {
            // A stream on a shared connection; a new connection only when
            // the pool has none with room.
            let grpc = grpc
                .open(|| async {
                    let stream = self.dial().await?;
                    self.within("grpc", grpc::handshake(stream)).await
                })
                .await?;
            return Ok((Stream::Grpc(Box::new(grpc)), 0));
        }
        let stream = self.dial().await?;
        match &self.ws {
            None => {
                let sent = stream.send_now(first)?;
                Ok((stream, sent))
            }
            Some(ws) => {
                let early = ws.early(first);
                let sent = early.map_or(0, |e| e.bytes.len());
                let ws = self.within("websocket", ws.upgrade(stream, early)).await?;
                Ok((Stream::Ws(Box::new(ws)), sent))
            }
        }
    }

    /// A TCP connection to the first address that answers, with keepalive
    /// and TLS when the spec asks for it.
    async fn dial(&self) -> io::Result<Stream> {
        let addrs = self.server_addrs().await?;
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "dial: destination did not resolve",
            ));
        }
        let tcp = self.dialer.connect_any(&addrs).await?;
        set_keepalive(SockRef::from(&tcp));
        match &self.tls {
            None => Ok(Stream::Tcp(tcp)),
            Some(tls) => Ok(Stream::Tls(Box::new(
                self.within("tls", tls.connect(tcp)).await?,
            ))),
        }
    }

    /// Runs a layer's handshake in the connect timeout: a server that takes
    /// the connection and never answers fails the dial as a silent address
    /// does.
    async fn within<T>(
        &self,
        what: &str,
        handshake: impl std::future::Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        let limit = self.dialer.connect_timeout();
        match tokio::time::timeout(limit, handshake).await {
            Ok(done) => done,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what} handshake with {} timed out", self.server.host),
            )),
        }
    }
}
