//! Drives a server core over the accepted stream under the handshake
//! watchdog, and what every core's request does next: route, dial, stage
//! the core's reply for the outcome, then relay.

use std::borrow::Cow;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::SystemTime;

use etemenanki_proto::codec::{ServerCore, ServerRequest, ServerStep};
use etemenanki_proto::sniff::{sniff, Sniffed};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::sniff::sniff_prefix;
use super::{handshake_timed_out, relay_opened, Shared};
use crate::connect::{open_stream, Flow};
use crate::relay::Relayed;
use crate::route::refuse_own_inbound;

/// What the first read of a handshake takes at most: a Shadowsocks 2022
/// request with its padding (up to about 1.2 KiB), a VMess or Trojan header
/// and the client's first bytes arrive in one read, not in pieces of 512
/// bytes with a system call each. Held only while the handshake runs; the
/// bytes it read past the request are then all a framed stream keeps of
/// it until its first read (see `Framed::new`).
const FIRST_READ: usize = 2048;

/// How a handshake ended.
pub enum Handshake<R> {
    /// The request is whole; `early` is what the client sent after it.
    Open { request: R, early: Vec<u8> },
    /// The core refused the client, after sending its refusal reply, if it
    /// has one; `read` is every byte the client sent.
    Refused { reason: &'static str, read: Vec<u8> },
    /// The handshake limit passed before the request was whole (`error`
    /// says so); `read` is every byte the client sent.
    TimedOut { error: io::Error, read: Vec<u8> },
}

/// Runs `core` over `client` until its request is whole, within the
/// handshake limit. A core's refusal is an error, after its reply is sent:
/// what socks and http do.
pub async fn read_request<S, C>(
    shared: &Shared,
    client: &mut S,
    core: &mut C,
) -> io::Result<(C::Request, Vec<u8>)>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: ServerCore,
{
    match handshake(shared, client, core).await? {
        Handshake::Open { request, early } => Ok((request, early)),
        Handshake::Refused { reason, .. } => {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, reason))
        }
        Handshake::TimedOut { error, .. } => Err(error),
    }
}

/// Runs `core` over `client` until its request is whole or refused, within
/// the handshake limit.
pub async fn handshake<S, C>(
    shared: &Shared,
    client: &mut S,
    core: &mut C,
) -> io::Result<Handshake<C::Request>>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: ServerCore,
{
    let limit = shared.limits.load().handshake_timeout;
    let name = shared.spec.protocol.name();
    // Every byte read is kept, consumed or not, so a refused or late
    // client's bytes can go to a fallback whole.
    let mut buf = Vec::with_capacity(FIRST_READ);
    match tokio::time::timeout(limit, advance(client, core, name, &mut buf)).await {
        Ok(done) => done,
        Err(_) => Ok(Handshake::TimedOut {
            error: handshake_timed_out(limit),
            read: buf,
        }),
    }
}

async fn advance<S, C>(
    client: &mut S,
    core: &mut C,
    name: &str,
    buf: &mut Vec<u8>,
) -> io::Result<Handshake<C::Request>>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: ServerCore,
{
    // `at` is where the core's input starts.
    let mut at = 0;
    let mut out = Vec::new();
    loop {
        buf.reserve(512);
        if client.read_buf(buf).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{name}: client closed during the handshake"),
            ));
        }
        let step = core.advance(&buf[at..], SystemTime::now(), &mut out);
        if !out.is_empty() {
            client.write_all(&out).await?;
            client.flush().await?;
            out.clear();
        }
        match step {
            Ok(ServerStep::NeedMore { consumed }) => {
                at += consumed;
                if buf.len() - at >= C::MAX_HANDSHAKE {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{name}: handshake too long"),
                    ));
                }
            }
            Ok(ServerStep::Open { consumed, request }) => {
                let early = buf.split_off(at + consumed);
                return Ok(Handshake::Open { request, early });
            }
            Err(refusal) => {
                if !refusal.reply.is_empty() {
                    client.write_all(&refusal.reply).await?;
                    client.flush().await?;
                }
                return Ok(Handshake::Refused {
                    reason: refusal.reason,
                    read: std::mem::take(buf),
                });
            }
        }
    }
}

/// Routes and dials the flow `request` asks for, stages the request's reply
/// for the outcome, then relays. `early` is what the client sent after its
/// request.
pub async fn open_and_relay<C: Relayed, R: ServerRequest>(
    shared: &Shared,
    mut client: C,
    peer: SocketAddr,
    request: &R,
    mut early: Vec<u8>,
) -> io::Result<()> {
    let mut flow = Flow {
        destination: request.destination().clone(),
        sniffed: None,
        source: Some(peer.ip()),
    };
    let mut reply = Vec::new();
    let sniff_ip = shared.spec.sniff && flow.destination.ip().is_some();
    if sniff_ip && request.first_bytes().is_empty() {
        // The client sends its first bytes only once it has the success
        // reply, so the reply goes first and the prefix is collected after;
        // a dial that then fails just closes the connection. A destination
        // this proxy refuses is refused before that reply.
        if let Err(e) = refuse_own_inbound(&shared.plane, &flow.destination) {
            return refuse(&mut client, request, e).await;
        }
        request.on_connected(unspecified(), &mut reply);
        client.write_all(&reply).await?;
        client.flush().await?;
        let mut prefix = early;
        let limits = shared.limits.load();
        flow.sniffed = sniff_prefix(
            &mut client,
            &mut prefix,
            limits.sniff_timeout,
            limits.sniff_max_bytes as usize,
        )
        .await;
        let mut opened = open_stream(&shared.plane, &shared.tag, &flow).await?;
        return relay_opened(shared, &mut client, &mut opened, prefix).await;
    }
    if sniff_ip {
        if let Sniffed::Domain(name) = sniff(request.first_bytes()) {
            flow.sniffed = Some(name);
        }
    }
    match open_stream(&shared.plane, &shared.tag, &flow).await {
        Ok(mut opened) => {
            let bound = if request.reports_bound() {
                opened.stream.local_addr().unwrap_or_else(unspecified)
            } else {
                unspecified()
            };
            request.on_connected(bound, &mut reply);
            if !reply.is_empty() {
                client.write_all(&reply).await?;
                client.flush().await?;
            }
            // Joined only when there are both: mostly one is empty.
            let first = match (request.first_bytes(), early.as_slice()) {
                (head, []) => Cow::Borrowed(head),
                ([], _) => Cow::Owned(std::mem::take(&mut early)),
                (head, rest) => Cow::Owned([head, rest].concat()),
            };
            // Nothing of the handshake's bytes outlives their writing.
            drop(early);
            relay_opened(shared, &mut client, &mut opened, first).await
        }
        Err(e) => refuse(&mut client, request, e).await,
    }
}

/// Tells the client its request failed with `error`, in the words of its
/// protocol, and returns the error.
async fn refuse<C: Relayed, R: ServerRequest>(
    client: &mut C,
    request: &R,
    error: io::Error,
) -> io::Result<()> {
    let mut reply = Vec::new();
    request.on_connect_failed(error.kind(), &mut reply);
    if client.write_all(&reply).await.is_ok() {
        client.flush().await.ok();
    }
    Err(error)
}

pub fn unspecified() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
}
