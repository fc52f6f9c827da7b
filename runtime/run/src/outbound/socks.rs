//! socks: CONNECT and UDP ASSOCIATE through an upstream SOCKS5 server, over
//! the upstream's transport.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{Account, OutboundProtocol};
use etemenanki_proto::socks::client::{Command, Socks5};
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::{handshake, opened, Tunnel};
use super::protocol::{Build, Protocol};
use super::socks_udp::SocksUdp;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;

pub struct Socks {
    connector: Connector,
    account: Option<(String, String)>,
}

impl Socks {
    fn account(&self) -> Option<(&str, &str)> {
        self.account.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }
}

impl Protocol for Socks {
    type Stream = Tunnel;
    type Datagram = Box<SocksUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Socks>> {
        let OutboundProtocol::Socks { upstream, account } = protocol else {
            return None;
        };
        let account = account.as_ref().map(Account::pair);
        Some(
            with.connector(upstream)
                .map(|connector| Socks { connector, account }),
        )
    }

    /// Dials the server and completes the handshake: a refusal is an error
    /// here, never a stream that fails later.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Tunnel> {
        let mut stream = self.connector.connect().await?;
        let mut codec = Socks5::new(self.account(), Command::Connect(destination));
        let (_bound, ahead) = handshake(&mut stream, &mut codec).await?;
        Ok(opened(stream, ahead))
    }

    /// Opens a UDP association: a control stream to the server, then a UDP
    /// socket in the family of the relay the server names.
    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<SocksUdp>> {
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
        Ok(Box::new(SocksUdp::new(control, socket, relay)))
    }
}
