//! The SOCKS 4/4a/5 inbound: the handshake core under the watchdog,
//! CONNECT, and UDP ASSOCIATE.

use std::io;
use std::net::SocketAddr;

use etemenanki_proto::socks::{status, Command, Handshake};
use etemenanki_transport::Stream;
use tokio::io::AsyncWriteExt;

use super::admission::Handshaking;
use super::handshake::{open_and_relay, read_request, unspecified};
use super::{udp, Shared};

pub async fn serve(
    shared: &Shared,
    mut client: Stream,
    peer: SocketAddr,
    handshake: Handshaking,
    udp_enabled: bool,
) -> io::Result<()> {
    let mut core = Handshake::new(&shared.accounts);
    let (request, early) = read_request(shared, &mut client, &mut core).await?;
    drop(handshake);
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
