//! socks: CONNECT and UDP ASSOCIATE through an upstream SOCKS5 server, over
//! the upstream's transport.

use std::io;

use etemenanki_proto::socks::client::{Command, Socks5};
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::handshake;
use super::socks_udp::SocksUdp;
use super::OutboundStream;

pub struct Socks {
    connector: Connector,
    account: Option<(String, String)>,
}

impl Socks {
    pub fn new(connector: Connector, account: Option<(String, String)>) -> Socks {
        Socks { connector, account }
    }

    fn account(&self) -> Option<(&str, &str)> {
        self.account.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// Dials the server and completes the handshake: a refusal is an error
    /// here, never a stream that fails later.
    pub async fn connect(&self, destination: &Address) -> io::Result<OutboundStream> {
        let mut stream = self.connector.connect().await?;
        let mut codec = Socks5::new(self.account(), Command::Connect(destination));
        let (_bound, ahead) = handshake(&mut stream, &mut codec).await?;
        Ok(OutboundStream::opened(stream, ahead))
    }

    /// Opens a UDP association: a control stream to the server, then a UDP
    /// socket in the family of the relay the server names.
    pub async fn associate(&self) -> io::Result<SocksUdp> {
        let mut control = self.connector.connect().await?;
        let mut codec = Socks5::new(self.account(), Command::Associate);
        // The control stream carries nothing after the reply.
        let (relay, _) = handshake(&mut control, &mut codec).await?;
        let mut relay = match relay {
            Address::Ip(relay) => relay,
            Address::Domain(..) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "socks: the relay address is a domain",
                ))
            }
        };
        // An unspecified relay means the address the control connection reached.
        if relay.ip().is_unspecified() {
            relay.set_ip(control.peer_addr()?.ip());
        }
        let socket = self.connector.dialer().bind_udp(relay.is_ipv6())?;
        Ok(SocksUdp::new(control, socket, relay))
    }
}
