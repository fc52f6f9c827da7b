//! Shadowsocks UDP on a server: one socket on the inbound's port, shared
//! by every client, as shadowsocks-rust serves it. Each client (an AEAD
//! client's address; a Shadowsocks 2022 client's session id, so a client
//! whose address changes keeps its session) has an association of its
//! own: a fan-out that routes each of its packets, and its replies sealed
//! back to where it last sent from.
//!
//! One task polls the socket and every association: a packet that cannot
//! be sent at once is dropped, as UDP drops it, so no buffer is held per
//! client. Associations idle for the relay idle timeout are forgotten, and
//! at most `MAX_CLIENTS` live at once (the least recently active makes
//! room).

use etemenanki_proto::MAX_DATAGRAM;
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use etemenanki_proto::aead::MasterKey;
use etemenanki_proto::ss2022::server::{UdpClientSession, UdpHead, Users};
use etemenanki_proto::{shadowsocks, ss2022};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::{Instant, Interval};

use super::Shared;
use crate::fanout::FanOut;

/// Clients served at once by one socket.
const MAX_CLIENTS: usize = 4_096;
/// How often idle associations are looked for.
const SWEEP: Duration = Duration::from_secs(10);

/// The keys a Shadowsocks UDP server opens and seals with.
pub enum Keys {
    Aead(MasterKey),
    Ss2022(Arc<Users>),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    Address(SocketAddr),
    Session([u8; 8]),
}

struct Client {
    /// Where replies go: where the client last sent from.
    address: SocketAddr,
    fanout: FanOut,
    /// Shadowsocks 2022: the session's keys, packet window and counter.
    session: Option<UdpClientSession>,
    active: Instant,
}

pub async fn serve(shared: Arc<Shared>, socket: UdpSocket) {
    let Some(keys) = shared.udp_keys() else {
        return;
    };
    let mut server = Server {
        users: shared.users_changed.subscribe(),
        shared,
        socket,
        keys,
        clients: HashMap::new(),
        recv: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
        send: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
        sweep: tokio::time::interval(SWEEP),
    };
    poll_fn(|cx| server.poll(cx)).await
}

struct Server {
    shared: Arc<Shared>,
    /// Told when a reload replaces the users: the keys are taken again and
    /// every 2022 session forgotten (its client starts a new one with its
    /// next packet; a removed user's packets no longer open).
    users: watch::Receiver<()>,
    socket: UdpSocket,
    keys: Keys,
    clients: HashMap<ClientKey, Client>,
    recv: Box<[u8]>,
    send: Box<[u8]>,
    sweep: Interval,
}

impl Server {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.users.has_changed().unwrap_or(false) {
            self.users.mark_unchanged();
            if let Some(keys) = self.shared.udp_keys() {
                self.keys = keys;
            }
            if matches!(self.keys, Keys::Ss2022(_)) {
                self.clients.clear();
            }
        }
        if self.sweep.poll_tick(cx).is_ready() {
            let idle = self.shared.limits.load().relay_idle_timeout;
            self.clients
                .retain(|_, client| client.active.elapsed() < idle);
        }
        // Bounded rounds, so a flood on one side never starves the other
        // nor the runtime.
        for _ in 0..64 {
            let mut moved = false;
            let mut read = ReadBuf::new(&mut self.recv);
            match self.socket.poll_recv_from(cx, &mut read) {
                Poll::Ready(Ok(from)) => {
                    let n = read.filled().len();
                    self.route_packet(cx, from, n);
                    moved = true;
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!("{}: udp receive failed: {e}", self.shared.tag)
                }
                Poll::Pending => {}
            }
            moved |= self.replies(cx);
            if !moved {
                return Poll::Pending;
            }
        }
        etemenanki_transport::yield_task(cx)
    }

    /// Opens the client's packet of `n` bytes and routes it; one that does
    /// not open is dropped without a word, as the real servers drop it.
    fn route_packet(&mut self, cx: &mut Context<'_>, from: SocketAddr, n: usize) {
        let now = SystemTime::now();
        let buf = &mut self.recv[..n];
        let (key, packet, session) = match &self.keys {
            Keys::Aead(master) => match shadowsocks::server::open_packet(master, buf) {
                Ok(packet) => (ClientKey::Address(from), packet, None),
                Err(_) => return,
            },
            Keys::Ss2022(users) => {
                let Ok(head) = UdpHead::open(users, buf) else {
                    return;
                };
                let key = ClientKey::Session(head.session_id());
                match self.clients.get_mut(&key) {
                    Some(client) => {
                        let Some(session) = &mut client.session else {
                            return;
                        };
                        match session.open(&head, buf, now) {
                            Ok(packet) => (key, packet, None),
                            Err(_) => return,
                        }
                    }
                    None => {
                        let Ok(mut session) = UdpClientSession::new(users, &head) else {
                            return;
                        };
                        match session.open(&head, buf, now) {
                            Ok(packet) => (key, packet, Some(session)),
                            Err(_) => return,
                        }
                    }
                }
            }
        };
        if !self.clients.contains_key(&key) && self.clients.len() >= MAX_CLIENTS {
            self.evict_least_active();
        }
        let shared = &self.shared;
        let client = self.clients.entry(key).or_insert_with(|| Client {
            address: from,
            fanout: FanOut::new(
                shared.plane.clone(),
                shared.tag.clone(),
                Some(from.ip()),
                shared.limits.load().udp_max_sublinks as usize,
            ),
            session,
            active: Instant::now(),
        });
        client.address = from;
        client.active = Instant::now();
        // A packet its sub-link cannot take now is dropped: lossy, never
        // held per client.
        let _ = client
            .fanout
            .poll_send_to(cx, &self.recv[packet.payload], &packet.peer);
    }

    fn evict_least_active(&mut self) {
        if let Some(oldest) = self
            .clients
            .iter()
            .min_by_key(|(_, client)| client.active)
            .map(|(key, _)| *key)
        {
            self.clients.remove(&oldest);
        }
    }

    /// Seals and sends every reply ready now; whether any moved.
    fn replies(&mut self, cx: &mut Context<'_>) -> bool {
        let (headroom, tailroom) = match &self.keys {
            Keys::Aead(_) => (
                shadowsocks::server::UDP_HEADROOM,
                shadowsocks::server::UDP_TAILROOM,
            ),
            Keys::Ss2022(_) => (ss2022::server::UDP_HEADROOM, ss2022::server::UDP_TAILROOM),
        };
        let room = MAX_DATAGRAM - headroom - tailroom;
        let mut moved = false;
        for client in self.clients.values_mut() {
            let payload = &mut self.send[headroom..headroom + room];
            let Poll::Ready((source, n)) = client.fanout.poll_recv_from(cx, payload) else {
                continue;
            };
            moved = true;
            client.active = Instant::now();
            let buf = &mut self.send[..headroom + n + tailroom];
            let sealed = match (&self.keys, &mut client.session) {
                (Keys::Aead(master), _) => {
                    shadowsocks::server::seal_packet(master, buf, n, &source)
                }
                (Keys::Ss2022(users), Some(session)) => {
                    session.seal_reply(users, buf, n, &source, SystemTime::now())
                }
                (Keys::Ss2022(_), None) => continue,
            };
            match sealed {
                // A reply the socket cannot take now is dropped.
                Ok(range) => {
                    let _ = self.socket.poll_send_to(cx, &buf[range], client.address);
                }
                Err(e) => tracing::debug!("{}: sealing a udp reply failed: {e}", self.shared.tag),
            }
        }
        moved
    }
}

/// The UDP socket of a Shadowsocks inbound, on the port its TCP listener
/// has.
pub fn bind(tcp: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(tcp)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}
