//! The HTTP proxy inbound: CONNECT tunnels and absolute-form requests.

use std::io;
use std::net::SocketAddr;

use etemenanki_proto::http::Core;
use etemenanki_transport::Stream;

use super::admission::Handshaking;
use super::handshake::{open_and_relay, read_request};
use super::Shared;

pub async fn serve(
    shared: &Shared,
    mut client: Stream,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()> {
    let mut core = Core::new(&shared.accounts);
    let (request, early) = read_request(shared, &mut client, &mut core).await?;
    drop(handshake);
    open_and_relay(shared, client, peer, &request, early).await
}
