//! The hysteria2 inbound: QUIC on one UDP socket instead of the TCP accept
//! loop. Each QUIC connection takes one admission permit (a full inbound
//! refuses the handshake; past half the handshake slots, an address not
//! validated yet is first sent a Retry), is authenticated once, and each
//! proxy stream it opens runs in a task of its own, routed and relayed like
//! any flow. Its UDP sessions share one runtime per connection: every datagram is routed on its own through a
//! fan-out per session, as a SOCKS association's are.

use etemenanki_proto::MAX_DATAGRAM;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use etemenanki_hysteria2::server::{Pending, Server, ServerConfig, ServerStream};
use etemenanki_hysteria2::udp::{self, Defragger, Message};
use etemenanki_hysteria2::{tls, Salamander};
use etemenanki_ir::spec::{InboundProtocol, InboundSpec, Obfs, Secret};
use etemenanki_proto::Address;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::admission::Handshaking;
use super::server::{Listens, Server as InboundServer};
use super::{Member, Serve, Shared};
use crate::connect::{open_stream, Flow};
use crate::fanout::FanOut;
use crate::relay::{relay, Ended, Relayed};

/// A bound QUIC server, not accepting yet.
pub struct Listener {
    server: Server,
}

/// What a hysteria2 server accepts: built again by a reload that changes
/// only its users (the inbound's `with_users`).
pub struct Hysteria2(Arc<ServerConfig>);

impl InboundServer for Hysteria2 {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Hysteria2>> {
        let InboundProtocol::Hysteria2 {
            passwords,
            masquerade,
            up_bps,
            down_bps,
            ..
        } = protocol
        else {
            return None;
        };
        let config = config(passwords, *masquerade, *up_bps, *down_bps);
        Some(Ok(Hysteria2(config)))
    }

    /// Served on QUIC by [`listen`]'s listener: its TCP side serves nothing.
    async fn serve(
        &self,
        _: &Arc<Shared>,
        _: etemenanki_transport::Stream,
        _: SocketAddr,
        _: Handshaking,
    ) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "hysteria2 accepts no tcp connection",
        ))
    }

    fn listens(&self) -> Listens {
        Listens::Quic
    }

    fn keeps(&self, member: &Member) -> bool {
        matches!(member, Member::Password(password) if self.0.passwords.contains(password))
    }
}

fn config(
    passwords: &[Secret],
    masquerade: Option<SocketAddr>,
    up_bps: u64,
    down_bps: u64,
) -> Arc<ServerConfig> {
    Arc::new(ServerConfig {
        passwords: passwords.iter().map(|p| p.expose().clone()).collect(),
        udp: true,
        up_bps,
        down_bps,
        masquerade,
    })
}

fn bind_udp(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false).ok();
    }
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    Ok(socket)
}

/// Binds `spec`'s UDP socket, or takes over `handed`, the datagram socket
/// of the inbound this one replaces, and builds its TLS and QUIC server. A
/// certificate or key that does not load fails the apply. Also returns the
/// socket, for the inbound that replaces this one.
pub(super) fn listen(spec: &InboundSpec, handed: Option<Socket>) -> io::Result<(Listener, Socket)> {
    let InboundProtocol::Hysteria2 {
        tls: server_tls,
        obfs,
        ..
    } = &spec.protocol
    else {
        return Err(io::Error::other("not a hysteria2 inbound"));
    };
    let alpn = if server_tls.alpn.is_empty() {
        vec!["h3".to_owned()]
    } else {
        server_tls.alpn.clone()
    };
    let tls = tls::server_config(&server_tls.cert_pem, server_tls.key_pem.expose(), &alpn)?;
    let obfs = obfs.as_ref().map(|obfs| match obfs {
        Obfs::Salamander { psk } => Salamander::new(psk.expose().as_bytes()),
    });
    let socket = match handed {
        Some(socket) => socket,
        None => bind_udp(spec.listen)?,
    };
    let server = Server::bind(std::net::UdpSocket::from(socket.try_clone()?), tls, obfs)?;
    Ok((Listener { server }, socket))
}

/// Accepts QUIC connections until the inbound is dropped.
pub(super) async fn serve(listener: Listener, shared: Arc<Shared>, stop: watch::Receiver<()>) {
    let listener = Arc::new(listener);
    tracing::info!(
        "inbound {} listening on {}",
        shared.tag,
        listener.server.local_addr().unwrap_or(shared.spec.listen)
    );
    while let Some(incoming) = listener.server.accept().await {
        let peer = incoming.remote_address();
        let limits = shared.limits.load();
        if !incoming.remote_address_validated()
            && must_validate(shared.admission.handshaking(), limits.max_handshakes)
        {
            tracing::debug!(
                "answering a hysteria2 handshake with a retry; half the handshake slots are taken (from {peer})"
            );
            if let Err(e) = incoming.retry() {
                e.into_incoming().ignore();
            }
            continue;
        }
        // One permit per QUIC connection, taken before the handshake.
        // What admission turns away is counted for the inbound's report.
        let Ok((session, handshake, shed)) = shared.admission.admit(peer.ip(), &limits) else {
            incoming.refuse();
            continue;
        };
        let (listener, shared, mut stop) = (listener.clone(), shared.clone(), stop.clone());
        tokio::spawn(async move {
            let limit = shared.limits.load().handshake_timeout;
            // The users current when the connection starts.
            let Serve::Hysteria2(Hysteria2(config)) = &**shared.serve.load() else {
                return;
            };
            let config = config.clone();
            let authenticated = tokio::select! {
                biased;
                _ = stop.changed() => return,
                () = shed => {
                    tracing::debug!("hysteria2 handshake from {peer} shed: its source was over its fair share of handshake slots");
                    return;
                }
                // On the heap: QUIC's and HTTP/3's handshakes are
                // kilobytes the connection's task need not keep.
                done = tokio::time::timeout(limit, Box::pin(listener.server.handshake(incoming, &config))) => done,
            };
            drop(handshake);
            let connection = match authenticated {
                Ok(Ok(connection)) => connection,
                Ok(Err(e)) => {
                    tracing::debug!("hysteria2 connection from {peer} ended: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(
                        "hysteria2 connection from {peer} ended: inbound handshake timed out after {}",
                        etemenanki_ir::format_duration(limit)
                    );
                    return;
                }
            };
            let rates = connection.rates();
            let sending = match rates.send {
                0 => "BBR".to_owned(),
                rate => format!("Brutal at {rate} bytes/s"),
            };
            let receiving = match rates.receive {
                0 => "no receive limit".to_owned(),
                rate => format!("a receive limit of {rate} bytes/s"),
            };
            tracing::debug!(
                "hysteria2 connection from {peer} authenticated: sending with {sending}, announcing {receiving}"
            );
            let udp = tokio::spawn(relay_udp(
                shared.clone(),
                connection.connection().clone(),
                peer,
            ));
            let _udp = AbortOnDrop(udp);
            let member = Member::Password(connection.password().to_owned());
            let mut removed = std::pin::pin!(shared.removed(&member));
            loop {
                let pending = tokio::select! {
                    biased;
                    _ = stop.changed() => return,
                    _ = &mut removed => {
                        tracing::debug!("hysteria2 connection from {peer} ended: its user was removed");
                        connection.connection().close(0u32.into(), b"");
                        return;
                    }
                    pending = connection.accept() => pending,
                };
                let Some(pending) = pending else { break };
                let (shared, mut stop) = (shared.clone(), stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        biased;
                        _ = stop.changed() => {}
                        served = proxy(&shared, pending, peer) => if let Err(e) = served {
                            tracing::debug!("hysteria2 stream from {peer} ended: {e}");
                        },
                    }
                });
            }
            drop(session);
        });
    }
}

/// Whether an Initial from an address not validated yet is answered with a
/// Retry instead of taking an admission and a handshake permit: once half
/// of `max_handshakes` are in their handshake. A client proves it receives
/// at its address by echoing the Retry's token, for one round trip more; an
/// Initial from a spoofed address holds nothing, so it cannot fill the
/// slots real clients need (without the Retry, 640 of them, 800 KB of UDP,
/// keep every client of `max_handshakes = 512` out for the handshake
/// timeout).
fn must_validate(handshaking: u32, max_handshakes: u32) -> bool {
    handshaking >= max_handshakes / 2
}

/// One proxy stream: its request, routed and dialed like any flow, the
/// answer, then the relay.
async fn proxy(shared: &Shared, pending: Pending, peer: SocketAddr) -> io::Result<()> {
    let limits = shared.limits.load();
    let (idle, handshake) = (limits.relay_idle_timeout, limits.handshake_timeout);
    let (address, mut stream) = tokio::time::timeout(handshake, pending.request())
        .await
        .map_err(|_| {
            io::Error::new(io::ErrorKind::TimedOut, "hysteria2: the request never came")
        })??;
    let destination = Address::parse_host_port(&address).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("hysteria2: the requested address {address:?} is not host:port"),
        )
    })?;
    let flow = Flow {
        destination,
        sniffed: None,
        source: Some(peer.ip()),
    };
    let mut opened = match open_stream(&shared.plane, &shared.tag, &flow).await {
        Ok(opened) => opened,
        Err(e) => {
            let _ = stream.respond(false, &e.to_string()).await;
            return Err(e);
        }
    };
    stream.respond(true, "").await?;
    let ended = relay(&mut stream, &mut opened.stream, idle, &mut opened.guard).await?;
    if ended == Ended::Idle {
        tracing::debug!(
            "connection via {} closed after {} idle",
            opened.outbound.id,
            etemenanki_ir::format_duration(idle)
        );
    }
    Ok(())
}

impl Relayed for ServerStream {
    fn plain_tcp(&mut self) -> Option<&mut tokio::net::TcpStream> {
        None
    }
}

/// UDP sessions one connection keeps at most; past them the one idle the
/// longest goes.
const MAX_SESSIONS: usize = 64;
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One UDP session of a connection: its packets routed by a fan-out of
/// its own, its fragments reassembled.
struct Session {
    fanout: FanOut,
    defragger: Defragger,
    packet_id: u16,
    used: Instant,
}

enum Event {
    Datagram(Result<Bytes, quinn::ConnectionError>),
    Reply(u32, Address, usize),
}

/// The UDP runtime of one authenticated connection: datagrams from the
/// client to their sessions' fan-outs, replies back with the session id,
/// in fragments when they exceed a datagram. It ends with the connection,
/// and is aborted when the connection's task ends.
async fn relay_udp(shared: Arc<Shared>, quic: quinn::Connection, peer: SocketAddr) {
    let mut sessions: HashMap<u32, Session> = HashMap::new();
    let mut reply = vec![0u8; MAX_DATAGRAM].into_boxed_slice();
    let mut out = BytesMut::with_capacity(1500);
    let mut authority = String::new();
    let mut read = Box::pin(quic.read_datagram());
    loop {
        let event = poll_fn(|cx| {
            if let Poll::Ready(datagram) = read.as_mut().poll(cx) {
                return Poll::Ready(Event::Datagram(datagram));
            }
            for (id, session) in sessions.iter_mut() {
                if let Poll::Ready((from, n)) = session.fanout.poll_recv_from(cx, &mut reply) {
                    return Poll::Ready(Event::Reply(*id, from, n));
                }
            }
            Poll::Pending
        })
        .await;
        match event {
            Event::Datagram(Err(_)) => return,
            Event::Datagram(Ok(datagram)) => {
                read = Box::pin(quic.read_datagram());
                let Some(message) = udp::parse(&datagram) else {
                    continue;
                };
                if !sessions.contains_key(&message.session_id) && sessions.len() >= MAX_SESSIONS {
                    let oldest = sessions
                        .iter()
                        .min_by_key(|(_, s)| s.used)
                        .map(|(id, _)| *id);
                    if let Some(oldest) = oldest {
                        sessions.remove(&oldest);
                    }
                }
                let limits = shared.limits.load();
                let session = sessions
                    .entry(message.session_id)
                    .or_insert_with(|| Session {
                        fanout: FanOut::new(
                            shared.plane.clone(),
                            shared.tag.clone(),
                            Some(peer.ip()),
                            limits.udp_max_sublinks as usize,
                        ),
                        defragger: Defragger::default(),
                        packet_id: 0,
                        used: Instant::now(),
                    });
                session.used = Instant::now();
                let Some((to, payload)) = session.defragger.push(&message) else {
                    continue;
                };
                let Some(to) = Address::parse_host_port(to) else {
                    continue;
                };
                poll_fn(|cx| session.fanout.poll_send_to(cx, payload, &to)).await;
            }
            Event::Reply(id, from, n) => {
                let (Some(session), Some(max)) = (sessions.get_mut(&id), quic.max_datagram_size())
                else {
                    continue;
                };
                authority.clear();
                let _ = write!(authority, "{from}");
                let payload = &reply[..n];
                let Some((chunk, count)) = udp::fragments(authority.len(), n, max) else {
                    continue;
                };
                session.packet_id = session.packet_id.wrapping_add(1);
                for i in 0..usize::from(count) {
                    let part = &payload[(i * chunk).min(n)..((i + 1) * chunk).min(n)];
                    udp::encode(
                        &Message {
                            session_id: id,
                            packet_id: if count == 1 { 0 } else { session.packet_id },
                            frag_id: i as u8,
                            frag_count: count,
                            address: &authority,
                            payload: part,
                        },
                        &mut out,
                    );
                    if quic.send_datagram(out.split().freeze()).is_err() {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_not_validated_is_retried_once_half_the_handshake_slots_are_taken() {
        assert!(!must_validate(0, 512));
        assert!(!must_validate(255, 512));
        assert!(must_validate(256, 512));
        assert!(must_validate(512, 512));
        // An inbound of one handshake slot validates every address.
        assert!(must_validate(0, 1));
    }
}
