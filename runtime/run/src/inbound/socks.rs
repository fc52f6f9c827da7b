//! The SOCKS 4/4a/5 inbound: the handshake under the watchdog, CONNECT, and
//! UDP ASSOCIATE.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use etemenanki_proto::socks::{status, Command, Handshake, Progress, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::sniff::reply_sniff_and_relay;
use super::{handshake_timed_out, relay_opened, udp, Shared};
use crate::connect::{open_stream, Flow};
use crate::outbound::OutboundStream;

/// The longest handshake accepted: greeting, auth and a request with a
/// 255-byte domain all fit well within it.
const MAX_HANDSHAKE: usize = 1024;

pub async fn serve(
    shared: &Shared,
    mut client: TcpStream,
    peer: SocketAddr,
    handshake: OwnedSemaphorePermit,
    udp_enabled: bool,
) -> io::Result<()> {
    let limit = shared.limits.load().handshake_timeout;
    let (request, early) = tokio::time::timeout(limit, read_request(shared, &mut client))
        .await
        .map_err(|_| handshake_timed_out(limit))??;
    drop(handshake);
    match request.command {
        Command::Connect => connect(shared, client, peer, request, early).await,
        Command::UdpAssociate if udp_enabled => udp::associate(shared, client, peer, request).await,
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

/// Runs the handshake up to a whole request; returns it and any bytes the
/// client sent after it.
async fn read_request(shared: &Shared, client: &mut TcpStream) -> io::Result<(Request, Vec<u8>)> {
    let mut core = Handshake::new(&shared.accounts);
    let mut buf = Vec::with_capacity(256);
    let mut out = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "socks: client closed during the handshake",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        let progress = core.advance(&buf, &mut out);
        if !out.is_empty() || progress.is_err() {
            let reply = match &progress {
                Err(refusal) => &refusal.reply,
                Ok(_) => &out,
            };
            client.write_all(reply).await?;
            out.clear();
        }
        match progress {
            Ok(Progress::NeedMore { consumed }) => {
                buf.drain(..consumed);
                if buf.len() >= MAX_HANDSHAKE {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "socks: handshake too long",
                    ));
                }
            }
            Ok(Progress::Request { consumed, request }) => {
                return Ok((request, buf.split_off(consumed)))
            }
            Err(refusal) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    refusal.reason,
                ))
            }
        }
    }
}

async fn connect(
    shared: &Shared,
    mut client: TcpStream,
    peer: SocketAddr,
    request: Request,
    early: Vec<u8>,
) -> io::Result<()> {
    let flow = Flow {
        destination: request.destination.clone(),
        sniffed: None,
        source: Some(peer.ip()),
    };
    if shared.spec.sniff && flow.destination.ip().is_some() {
        let reply = request.reply(status::SUCCEEDED, unspecified());
        return reply_sniff_and_relay(shared, client, flow, early, &reply).await;
    }
    match open_stream(&shared.plane, &shared.tag, &flow).await {
        Ok(opened) => {
            let bound = match &opened.stream {
                OutboundStream::Tcp(stream) => {
                    stream.local_addr().unwrap_or_else(|_| unspecified())
                }
                OutboundStream::Blackhole => unspecified(),
            };
            client
                .write_all(&request.reply(status::SUCCEEDED, bound))
                .await?;
            relay_opened(shared, client, opened, &early).await
        }
        Err(e) => {
            client
                .write_all(&request.reply(status_of(&e), unspecified()))
                .await
                .ok();
            Err(e)
        }
    }
}

/// The SOCKS5 reply code for a failed dial.
fn status_of(error: &io::Error) -> u8 {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => status::CONNECTION_REFUSED,
        io::ErrorKind::NetworkUnreachable => status::NETWORK_UNREACHABLE,
        io::ErrorKind::HostUnreachable | io::ErrorKind::TimedOut | io::ErrorKind::NotFound => {
            status::HOST_UNREACHABLE
        }
        io::ErrorKind::PermissionDenied => status::NOT_ALLOWED,
        _ => status::GENERAL_FAILURE,
    }
}

pub fn unspecified() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
}
