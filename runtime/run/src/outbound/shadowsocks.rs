//! shadowsocks (AEAD): a TCP flow is a framed stream over the upstream's
//! transport; a UDP flow is one socket toward the server's UDP port, every
//! packet sealed with its own salt and destination. The master key is
//! derived once, when the outbound is built.

use std::io;

use etemenanki_ir::spec::SsMethod;
use etemenanki_proto::aead::{Algorithm, MasterKey};
use etemenanki_proto::shadowsocks::{SsDatagram, SsStream};
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};

use super::handshake::{first_bytes, framed_with_request};
use super::shadowsocks_udp::SsUdp;
use super::OutboundStream;
use crate::framed::Framed;

/// The client runtime's buffer each way (seed 000: 20,480 bytes).
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

    /// Dials the server; the salt and the destination leave with the
    /// first payload ([`framed_with_request`]). The server answers
    /// nothing, so a wrong password shows as a stream the server closes.
    pub async fn connect(&self, destination: &Address) -> io::Result<OutboundStream> {
        let stream = self.connector.connect().await?;
        let mut codec = SsStream::new(&self.master, destination)?;
        let request = first_bytes(&mut codec)?;
        Ok(OutboundStream::Shadowsocks(Box::new(framed_with_request(
            stream, codec, &request,
        )?)))
    }

    /// Resolves the server once and binds one UDP socket of its family.
    pub async fn open_udp(&self) -> io::Result<SsUdp> {
        let Some(&server) = self.connector.server_addrs().await?.first() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "shadowsocks: the server did not resolve",
            ));
        };
        let socket = self.connector.dialer().bind_udp(server.is_ipv6())?;
        Ok(SsUdp::new(
            socket,
            server,
            SsDatagram::new(self.master.clone()),
        ))
    }
}
