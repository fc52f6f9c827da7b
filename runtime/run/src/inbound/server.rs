//! What every inbound protocol is: a server core built from its spec, that
//! serves each client stream accepted under the transport the spec names
//! (`InboundProtocol::transport`).
//! Each protocol implements [`Server`] in its module and is listed once in
//! the registry (registry.rs), which generates the closed enum of them
//! ([`super::Serve`]) and its dispatch: a match, never a `Box<dyn>`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use etemenanki_ir::spec::InboundProtocol;
use etemenanki_transport::Stream;

use super::admission::Handshaking;
use super::{ss_udp, Member, Shared};

/// What an inbound of a protocol listens on.
pub enum Listens {
    /// A TCP socket, under the protocol's transport.
    Stream,
    /// A TCP socket and a UDP socket on the same port, whose datagrams
    /// `Pump` serves.
    StreamAndDatagrams(Pump),
    /// QUIC on a UDP socket.
    Quic,
}

/// Who serves a UDP socket's packets, one by one.
#[derive(Clone, Copy)]
pub enum Pump {
    /// The DNS service, a query a datagram.
    Dns,
    /// Shadowsocks' or Shadowsocks 2022's shared UDP socket.
    Shadowsocks,
}

pub trait Server: Sized + Send + Sync + 'static {
    /// The server `protocol` describes when it is this protocol's: its
    /// user tables with their keys derived once, its replay filters. A
    /// reload that changes only the users builds it again.
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Self>>;

    /// What its inbound listens on.
    fn listens(&self) -> Listens {
        Listens::Stream
    }

    /// Serves one client stream, in its handshake under `handshake` until
    /// its request is parsed, then to its end.
    fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        handshake: Handshaking,
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// Takes `old`'s replay filters, so what it saw stays refused.
    fn keep_filters(&mut self, old: &Self) {
        let _ = old;
    }

    /// Whether this table still has `member`'s user.
    fn keeps(&self, member: &Member) -> bool {
        let _ = member;
        false
    }

    /// The keys of the inbound's shared UDP socket, for a protocol that
    /// serves one.
    fn udp_keys(&self) -> Option<ss_udp::Keys> {
        None
    }
}

/// The registry's machinery: from one list of servers, the enum of them
/// and the matches that dispatch to them.
macro_rules! inbounds {
    ($($(#[$doc:meta])* $name:ident($server:ty),)*) => {
        /// The protocol core an inbound serves each connection with, and
        /// what its connections share.
        pub(crate) enum Serve {
            $($(#[$doc])* $name($server),)*
        }

        impl Serve {
            /// The core of `protocol`, and the transport it is served under.
            pub(crate) fn build(
                protocol: &InboundProtocol,
            ) -> io::Result<(Serve, &ServerShape, Option<&ServerTls>)> {
                $(
                    if let Some(built) = <$server as Server>::build(protocol) {
                        let (shape, tls) = protocol.transport();
                        return Ok((Serve::$name(built?), shape, tls));
                    }
                )*
                Err(io::Error::other(format!(
                    "inbound protocol {} is not registered",
                    protocol.name()
                )))
            }

            pub(crate) async fn serve(
                &self,
                shared: &Arc<Shared>,
                client: Stream,
                peer: SocketAddr,
                handshake: Handshaking,
            ) -> io::Result<()> {
                // Each protocol's future on the heap: a connection's task
                // is as large as its own protocol's path, not the largest
                // of them all.
                match self {
                    $(Serve::$name(server) => {
                        Box::pin(server.serve(shared, client, peer, handshake)).await
                    })*
                }
            }

            pub(crate) fn keep_filters(&mut self, old: &Serve) {
                match (self, old) {
                    $((Serve::$name(new), Serve::$name(old)) => new.keep_filters(old),)*
                    #[allow(unreachable_patterns)]
                    _ => {}
                }
            }

            pub(crate) fn keeps(&self, member: &Member) -> bool {
                match self {
                    $(Serve::$name(server) => server.keeps(member),)*
                }
            }

            pub(crate) fn listens(&self) -> Listens {
                match self {
                    $(Serve::$name(server) => server.listens(),)*
                }
            }

            pub(crate) fn udp_keys(&self) -> Option<ss_udp::Keys> {
                match self {
                    $(Serve::$name(server) => server.udp_keys(),)*
                }
            }
        }
    };
}

pub(crate) use inbounds;
