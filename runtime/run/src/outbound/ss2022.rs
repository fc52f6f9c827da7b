//! shadowsocks-2022: TCP flows framed over the upstream's transport, UDP
//! flows as sessions over one socket toward the server. The keys are
//! checked and expanded once, when the outbound is built.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_proto::ss2022::{Keys, Ss2022Stream, UdpSession};
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::{first_bytes, framed_with_request};
use super::protocol::{Build, Protocol};
use super::ss2022_udp::Ss2022Udp;
use crate::framed::Framed;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;

/// The 2022 client's buffer: one chunk of 0xFFFF bytes with its overhead,
/// the largest frame ss-rust and sing-box send; two per moving flow.
pub const SS2022_BUF: usize = Ss2022Stream::BUF_SIZE;

/// A TCP flow: the framed stream over the upstream's transport.
pub type Ss2022Framed = Framed<etemenanki_transport::Stream, Ss2022Stream, SS2022_BUF>;

pub struct Ss2022 {
    connector: Connector,
    keys: Arc<Keys>,
}

impl Ss2022 {
    /// A UDP session resolves the server once, when it opens, as the
    /// connector's dial does.
    pub fn new(connector: Connector, keys: Keys) -> Ss2022 {
        Ss2022 {
            connector,
            keys: Arc::new(keys),
        }
    }
}

impl Protocol for Ss2022 {
    type Stream = Box<Ss2022Framed>;
    type Datagram = Box<Ss2022Udp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Ss2022>> {
        let OutboundProtocol::Ss2022 {
            upstream,
            method,
            psk,
            identity_psks,
        } = protocol
        else {
            return None;
        };
        let identities: Vec<&[u8]> = identity_psks
            .iter()
            .map(|k| k.expose().as_slice())
            .collect();
        Some((|| {
            let keys = Keys::new(*method, psk.expose(), &identities)?;
            Ok(Ss2022::new(with.connector(upstream)?, keys))
        })())
    }

    /// Dials the server (an unreachable one is a failed dial); the request
    /// leaves with the first payload ([`framed_with_request`]). The server
    /// answers only with its first payload, whose header the stream checks
    /// when it arrives.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Box<Ss2022Framed>> {
        let stream = self.connector.connect().await?;
        let mut codec =
            Ss2022Stream::new(&self.keys, destination, SystemTime::now(), SystemTime::now)?;
        let request = first_bytes(&mut codec)?;
        Ok(Box::new(framed_with_request(stream, codec, &request)?))
    }

    /// Opens a UDP session: the server resolved once, one socket of its
    /// family under the socket policy, a fresh session id.
    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<Ss2022Udp>> {
        let server = self
            .connector
            .server_addrs()
            .await?
            .first()
            .copied()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "shadowsocks-2022: the server did not resolve",
                )
            })?;
        let socket = self.connector.dialer().bind_udp(server.is_ipv6())?;
        let session = UdpSession::new(self.keys.clone())?;
        Ok(Box::new(Ss2022Udp::new(socket, server, session)))
    }
}
