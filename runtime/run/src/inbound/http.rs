//! The HTTP proxy inbound: CONNECT tunnels and absolute-form requests.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use etemenanki_ir::spec::{Account, InboundProtocol};
use etemenanki_proto::http::Core;
use etemenanki_transport::Stream;

use super::admission::Handshaking;
use super::handshake::{open_and_relay, read_request};
use super::server::Server;
use super::Shared;

pub struct Http {
    /// (user, password) pairs; empty means no authentication.
    accounts: Vec<(String, String)>,
}

impl Server for Http {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Http>> {
        let InboundProtocol::Http { accounts, .. } = protocol else {
            return None;
        };
        Some(Ok(Http {
            accounts: accounts.iter().map(Account::pair).collect(),
        }))
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        mut client: Stream,
        peer: SocketAddr,
        handshake: Handshaking,
    ) -> io::Result<()> {
        let mut core = Core::new(&self.accounts);
        let (request, early) = read_request(shared, &mut client, &mut core).await?;
        drop(handshake);
        open_and_relay(shared, client, peer, &request, early).await
    }
}
