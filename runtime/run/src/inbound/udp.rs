//! SOCKS5 UDP ASSOCIATE: a relay socket that hears only the control
//! connection's client, and a fan-out that routes every packet.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;

use etemenanki_proto::socks::{
    parse_datagram, status, write_datagram_header, ExpectedSender, Request,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use etemenanki_transport::Stream;
use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::handshake::unspecified;
use super::Shared;
use crate::fanout::FanOut;

/// The largest UDP payload.
const MAX_DATAGRAM: usize = 65_535;
/// Room for the longest SOCKS5 UDP header (a 255-byte domain) before a reply.
const HEADROOM: usize = 3 + 1 + 1 + 255 + 2;

pub async fn associate(
    shared: &Shared,
    mut control: Stream,
    peer: SocketAddr,
    request: Request,
) -> io::Result<()> {
    let relay_ip = control.socket().local_addr()?.ip();
    let mut expected = match ExpectedSender::new(Some(peer.ip()), &request.destination, relay_ip) {
        Ok(expected) => expected,
        Err(not_allowed) => {
            control
                .write_all(&request.reply(status::NOT_ALLOWED, unspecified()))
                .await?;
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                not_allowed.to_string(),
            ));
        }
    };
    let hub = UdpSocket::bind(SocketAddr::new(relay_ip, 0)).await?;
    control
        .write_all(&request.reply(status::SUCCEEDED, hub.local_addr()?))
        .await?;
    control.flush().await?;

    let limits = shared.limits.load_full();
    let mut fanout = FanOut::new(
        shared.plane.clone(),
        shared.tag.clone(),
        Some(peer.ip()),
        limits.udp_max_sublinks as usize,
    );
    let mut from_client = vec![0u8; MAX_DATAGRAM];
    let mut to_client = vec![0u8; HEADROOM + MAX_DATAGRAM];
    let mut header = Vec::with_capacity(HEADROOM);
    let mut client: Option<SocketAddr> = None;
    let idle = limits.relay_idle_timeout;
    let mut deadline = Instant::now() + idle;
    let mut control_byte = [0u8; 1];
    loop {
        tokio::select! {
            read = control.read(&mut control_byte) => match read {
                // The association lives as long as its control connection.
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => {}
            },
            received = hub.recv_from(&mut from_client) => {
                let (n, from) = received?;
                // Anyone but the client is dropped before parsing, and does
                // not keep the association alive.
                if !expected.admits(from) {
                    continue;
                }
                let Ok((destination, payload)) = parse_datagram(&from_client[..n]) else { continue };
                expected.pin(from);
                client = Some(from);
                deadline = Instant::now() + idle;
                fanout.send_to(payload, &destination).await;
            }
            (source, n) = poll_fn(|cx| fanout.poll_recv_from(cx, &mut to_client[HEADROOM..])) => {
                let Some(client) = client else { continue };
                header.clear();
                write_datagram_header(&source, &mut header);
                let start = HEADROOM - header.len();
                to_client[start..HEADROOM].copy_from_slice(&header);
                deadline = Instant::now() + idle;
                if let Err(e) = hub.send_to(&to_client[start..HEADROOM + n], client).await {
                    tracing::debug!("socks udp: reply to {client} failed: {e}");
                }
            }
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
        }
    }
}
