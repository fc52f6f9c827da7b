//! http: CONNECT through an upstream HTTP proxy, over the upstream's
//! transport.

use std::convert::Infallible;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{Account, OutboundProtocol};
use etemenanki_proto::http::client::Connect;
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::{handshake, opened, Tunnel};
use super::protocol::{Build, Protocol};
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;

pub struct Http {
    connector: Connector,
    account: Option<(String, String)>,
}

impl Protocol for Http {
    type Stream = Tunnel;
    type Datagram = Infallible;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Http>> {
        let OutboundProtocol::Http { upstream, account } = protocol else {
            return None;
        };
        let account = account.as_ref().map(Account::pair);
        Some(
            with.connector(upstream)
                .map(|connector| Http { connector, account }),
        )
    }

    /// Dials the proxy and opens the tunnel; a refusal is an error here.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Tunnel> {
        let mut stream = self.connector.connect().await?;
        let account = self.account.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        let mut codec = Connect::new(destination, account);
        let ((), ahead) = handshake(&mut stream, &mut codec).await?;
        Ok(opened(stream, ahead))
    }

    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Infallible> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "http carries no datagrams",
        ))
    }
}
