//! http: CONNECT through an upstream HTTP proxy, over the upstream's
//! transport.

use std::io;

use etemenanki_proto::http::client::Connect;
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::handshake;
use super::OutboundStream;

pub struct Http {
    connector: Connector,
    account: Option<(String, String)>,
}

impl Http {
    pub fn new(connector: Connector, account: Option<(String, String)>) -> Http {
        Http { connector, account }
    }

    /// Dials the proxy and opens the tunnel; a refusal is an error here.
    pub async fn connect(&self, destination: &Address) -> io::Result<OutboundStream> {
        let mut stream = self.connector.connect().await?;
        let account = self.account.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        let mut codec = Connect::new(destination, account);
        let ((), ahead) = handshake(&mut stream, &mut codec).await?;
        Ok(OutboundStream::opened(stream, ahead))
    }
}
