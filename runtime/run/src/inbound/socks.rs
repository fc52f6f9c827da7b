//! The SOCKS 4/4a/5 inbound: the handshake core under the watchdog,
//! CONNECT, and UDP ASSOCIATE.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use etemenanki_ir::spec::{Account, InboundProtocol};
use etemenanki_proto::socks::{status, Command, Handshake, Request};
use etemenanki_transport::Stream;
use tokio::io::AsyncWriteExt;

use super::admission::Handshaking;
use super::handshake::{open_and_relay, read_request, unspecified};
use super::server::Server;
use super::{udp, Shared};

pub struct Socks {
    udp: bool,
    /// (user, password) pairs; empty means no authentication.
    accounts: Vec<(String, String)>,
}

impl Server for Socks {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Socks>> {
        match protocol {
            InboundProtocol::Socks { udp, accounts, .. } => Some(Ok(Socks {
                udp: *udp,
                accounts: accounts.iter().map(Account::pair).collect(),
            })),
            _ => None,
        }
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        mut client: Stream,
        peer: SocketAddr,
        handshake: Handshaking,
    ) -> io::Result<()> {
        let mut core = Handshake::new(&self.accounts);
        let (request, early) = read_request(shared, &mut client, &mut core).await?;
        drop(handshake);
        serve(shared, client, peer, request, early, self.udp).await
    }
}

/// Carries out a request whose handshake is done.
async fn serve(
    shared: &Shared,
    mut client: Stream,
    peer: SocketAddr,
    request: Request,
    early: Vec<u8>,
    udp_enabled: bool,
) -> io::Result<()> {
    match request.command {
        Command::Connect => open_and_relay(shared, client, peer, &request, early).await,
        Command::UdpAssociate if udp_enabled => {
            Box::pin(udp::associate(shared, client, peer, request)).await
        }
        Command::UdpAssociate => {
            client
                .write_all(&request.reply(status::COMMAND_NOT_SUPPORTED, unspecified()))
                .await?;
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "socks: udp is not enabled on this inbound",
            ))
        }
    }
}
