//! shadowsocks (AEAD): a TCP flow is a framed stream over the upstream's
//! transport; a UDP flow is one socket toward the server's UDP port, every
//! packet sealed with its own salt and destination. The master key is
//! derived once, when the outbound is built.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_ir::spec::SsMethod;
use etemenanki_proto::aead::{Algorithm, MasterKey};
use etemenanki_proto::shadowsocks::{SsDatagram, SsStream};
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};

use super::handshake::{first_bytes, framed_with_request};
use super::protocol::{Build, Protocol};
use super::shadowsocks_udp::SsUdp;
use crate::framed::Framed;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;

/// The client's buffer each way: 20,480 bytes.
pub const SS_BUF: usize = SsStream::BUF_SIZE;

/// A shadowsocks TCP flow as the relay sees it.
pub type SsFramed = Framed<Stream, SsStream, SS_BUF>;

pub struct Shadowsocks {
    connector: Connector,
    master: MasterKey,
}

impl Shadowsocks {
    pub fn new(connector: Connector, method: SsMethod, password: &str) -> Shadowsocks {
        Shadowsocks {
            connector,
            master: MasterKey::from_password(Algorithm::from(method), password.as_bytes()),
        }
    }
}

impl Protocol for Shadowsocks {
    type Stream = Box<SsFramed>;
    type Datagram = Box<SsUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Shadowsocks>> {
        let OutboundProtocol::Shadowsocks {
            upstream,
            method,
            password,
        } = protocol
        else {
            return None;
        };
        let built = with.connector(upstream);
        Some(built.map(|connector| Shadowsocks::new(connector, *method, password.expose())))
    }

    /// Dials the server; the salt and the destination leave with the
    /// first payload ([`framed_with_request`]). The server answers
    /// nothing, so a wrong password shows as a stream the server closes.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Box<SsFramed>> {
        let stream = self.connector.connect().await?;
        let mut codec = SsStream::new(&self.master, destination)?;
        let request = first_bytes(&mut codec)?;
        Ok(Box::new(framed_with_request(stream, codec, &request)?))
    }

    /// Resolves the server once and binds one UDP socket of its family.
    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<SsUdp>> {
        let Some(&server) = self.connector.server_addrs().await?.first() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "shadowsocks: the server did not resolve",
            ));
        };
        let socket = self.connector.dialer().bind_udp(server.is_ipv6())?;
        Ok(Box::new(SsUdp::new(
            socket,
            server,
            SsDatagram::new(self.master.clone()),
        )))
    }
}
