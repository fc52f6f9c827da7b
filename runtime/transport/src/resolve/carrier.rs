//! How a resolver's queries reach its servers: directly, from this host
//! under the socket policy, or (in the runtime) as flows through the route
//! table. The resolver speaks DNS; a carrier only moves its bytes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use etemenanki_ir::spec::{Host, HostPort};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::dial::Dialer;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A byte stream to a DNS server, whatever carries it.
pub trait DnsStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> DnsStream for T {}

/// The largest DNS message.
pub const MAX_MESSAGE: usize = 65_535;

pub trait Carrier: Send + Sync {
    /// Sends `query` to `server` over UDP and returns the first datagram
    /// from it that carries the query's id.
    fn exchange_udp<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a [u8],
    ) -> BoxFuture<'a, io::Result<Vec<u8>>>;

    /// A TCP byte stream to `server`.
    fn connect<'a>(&'a self, server: &'a HostPort)
        -> BoxFuture<'a, io::Result<Box<dyn DnsStream>>>;
}

/// Whether `answer` is the reply to `query`: the same id.
pub fn answers(query: &[u8], answer: &[u8]) -> bool {
    answer.len() >= 12 && query.len() >= 2 && answer[..2] == query[..2]
}

/// Queries sent from this host, under the socket policy.
pub struct Direct {
    dialer: Dialer,
}

impl Direct {
    pub fn new(dialer: Dialer) -> Direct {
        Direct { dialer }
    }
}

impl Carrier for Direct {
    fn exchange_udp<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a [u8],
    ) -> BoxFuture<'a, io::Result<Vec<u8>>> {
        Box::pin(async move {
            let socket = self.dialer.bind_udp(server.is_ipv6())?;
            // Connected: the kernel drops datagrams from anyone else, and a
            // closed port is an error at once rather than a timeout.
            socket.connect(server).await?;
            socket.send(query).await?;
            let mut buf = vec![0u8; MAX_MESSAGE];
            loop {
                let n = socket.recv(&mut buf).await?;
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
            let addrs: Vec<SocketAddr> = match &server.host {
                Host::Ip(ip) => vec![SocketAddr::new(*ip, server.port)],
                // A DNS server named by a name: the host's resolver finds it,
                // as nothing else can resolve the resolver's own server.
                Host::Domain(name) => tokio::net::lookup_host((name.as_str(), server.port))
                    .await?
                    .collect(),
            };
            let stream = self.dialer.connect_any(&addrs).await?;
            Ok(Box::new(stream) as Box<dyn DnsStream>)
        })
    }
}
