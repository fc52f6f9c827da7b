//! Inbounds: the accept loop, admission before reading, and one task per
//! connection that owns the client socket, the protocol core and the
//! outbound it opens.

pub(crate) mod admission;
mod datagrams;
pub(crate) mod dns;
mod handshake;
pub(crate) mod http;
pub(crate) mod hysteria2;
mod mux;
pub(crate) mod proxy;
mod refused;
pub(crate) mod server;
mod sniff;
pub(crate) mod socks;
pub(crate) mod ss_udp;
mod udp;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{InboundSpec, Limits};
use etemenanki_transport::grpc::GrpcConnection;
use etemenanki_transport::{listen, Accepted, Acceptor, Stream};
use socket2::Socket;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::connect::Opened;
use crate::dial::Dialer;
use crate::plane::Plane;
use crate::registry::Serve;
use crate::relay::{relay, Ended, Relayed};
use admission::{Admission, Handshaking, Shed};
use server::{Listens, Pump};

/// The sleep after an accept error that is not transient (for example when
/// file descriptors run out).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// The user a connection authenticated as, by the key its table knows the
/// user by: what a reload's new table is asked whether it still has.
pub enum Member {
    /// A 16-byte key: a VLESS id, a VMess command key, a Shadowsocks 2022
    /// identity hash.
    Id([u8; 16]),
    /// A Trojan password's hash.
    Hash([u8; 56]),
    /// A password as the client sent it (Hysteria 2).
    Password(String),
}

impl Shared {
    /// The keys of a Shadowsocks inbound's UDP socket, from the current
    /// users.
    fn udp_keys(&self) -> Option<ss_udp::Keys> {
        self.serve.load().udp_keys()
    }

    /// Resolves once a reload has removed `member`'s user.
    async fn removed(&self, member: &Member) {
        let mut changed = self.users_changed.subscribe();
        // A table published between the handshake and here counts too.
        while self.serve.load().keeps(member) {
            if changed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// What every connection of one inbound shares.
pub struct Shared {
    pub tag: Arc<str>,
    pub spec: InboundSpec,
    /// The limits of the current apply: a reload that changes them reaches
    /// the connections of a reused inbound too.
    pub limits: Arc<ArcSwap<Limits>>,
    pub plane: Arc<ArcSwap<Plane>>,
    /// Dials a refused client's fallback, under the socket policy.
    pub dialer: Dialer,
    /// Replaced whole by a reload that changes only the users; each
    /// connection takes the one current when it starts.
    serve: ArcSwap<Serve>,
    /// Told when `serve` is replaced, so connections of removed users end.
    users_changed: watch::Sender<()>,
    admission: Admission,
}

/// What an inbound listens on, each kind with exactly what it serves with.
enum Listener {
    /// TCP, under TLS, WebSocket or gRPC as the spec says.
    Stream {
        listener: TcpListener,
        acceptor: Acceptor,
    },
    /// QUIC on a UDP socket: a Hysteria 2 server.
    Quic(hysteria2::Listener),
    /// A UDP socket whose datagrams are served one by one.
    Datagram { socket: UdpSocket, pump: Pump },
}

/// A bound, listening inbound. Dropping it stops its listeners and ends
/// every connection it serves.
pub struct Inbound {
    listen: SocketAddr,
    /// The bound sockets, kept so a rebuilt inbound on the same address can
    /// take them over.
    sockets: Handoff,
    /// Bound and waiting for [`Inbound::start`], which takes them.
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    /// The listeners' tasks, and the one that logs what admission turned
    /// away.
    tasks: Vec<JoinHandle<()>>,
    /// Connections end when this sender is dropped.
    stop: watch::Sender<()>,
}

impl Inbound {
    /// Binds the listening sockets, or takes over `handoff`'s, those of the
    /// inbound this one replaces on the same address (so a rebuilt inbound
    /// never needs its address free, and no connection waiting in the
    /// backlog is lost). Nothing is accepted until [`Inbound::start`].
    pub fn bind(
        spec: &InboundSpec,
        limits: Arc<ArcSwap<Limits>>,
        plane: Arc<ArcSwap<Plane>>,
        dialer: Dialer,
        handoff: Option<Handoff>,
    ) -> io::Result<Inbound> {
        let (serve, shape, tls) = Serve::build(&spec.protocol)?;
        let handed = handoff.unwrap_or_default();
        let (sockets, listeners) = match serve.listens() {
            Listens::Quic => {
                let (listener, socket) = hysteria2::listen(spec, handed.datagram)?;
                let sockets = Handoff {
                    stream: None,
                    datagram: Some(socket),
                };
                (sockets, vec![Listener::Quic(listener)])
            }
            listens => {
                let socket = match handed.stream {
                    Some(socket) => socket,
                    None => listen(spec.listen)?,
                };
                let listener = TcpListener::from_std(socket.try_clone()?.into())?;
                let mut listeners = vec![Listener::Stream {
                    acceptor: Acceptor::build(shape, tls)?,
                    listener,
                }];
                let pump = match listens {
                    Listens::StreamAndDatagrams(pump) => Some(pump),
                    _ => None,
                };
                let datagram = match (pump, handed.datagram) {
                    (None, _) => None,
                    (Some(_), Some(udp)) => Some(udp),
                    (Some(_), None) => {
                        let bound = socket.local_addr()?.as_socket().unwrap_or(spec.listen);
                        Some(Socket::from(ss_udp::bind(bound)?))
                    }
                };
                if let (Some(pump), Some(udp)) = (pump, &datagram) {
                    let socket = UdpSocket::from_std(udp.try_clone()?.into())?;
                    listeners.push(Listener::Datagram { socket, pump });
                }
                let sockets = Handoff {
                    stream: Some(socket),
                    datagram,
                };
                (sockets, listeners)
            }
        };
        let shared = Arc::new(Shared {
            tag: spec.tag.as_str().into(),
            spec: spec.clone(),
            serve: ArcSwap::from_pointee(serve),
            users_changed: watch::channel(()).0,
            admission: Admission::new(&limits.load()),
            limits,
            plane,
            dialer,
        });
        Ok(Inbound {
            listen: spec.listen,
            sockets,
            listeners,
            shared,
            tasks: Vec::new(),
            stop: watch::channel(()).0,
        })
    }

    /// Handles on the bound sockets, for the inbound that replaces this
    /// one on `addr`; `None` when this one listens elsewhere.
    /// `addr` with port 0 asks for any port: only the inbound being
    /// replaced (`same_tag`) hands its sockets over, so it keeps its port,
    /// and a new inbound never takes another's.
    pub fn handoff(&self, addr: SocketAddr, same_tag: bool) -> Option<io::Result<Handoff>> {
        let any_port = addr.port() == 0;
        let clone = |socket: &Option<Socket>| socket.as_ref().map(Socket::try_clone).transpose();
        (self.listen == addr && (same_tag || !any_port)).then(|| {
            Ok(Handoff {
                stream: clone(&self.sockets.stream)?,
                datagram: clone(&self.sockets.datagram)?,
            })
        })
    }

    /// The address the listening socket is bound to: for port 0, the port
    /// the kernel chose.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        let socket = self
            .sockets
            .stream
            .as_ref()
            .or(self.sockets.datagram.as_ref())?;
        socket.local_addr().ok()?.as_socket()
    }

    /// Sizes admission to the limits of the current apply.
    pub fn resize(&self, limits: &Limits) {
        self.shared.admission.resize(limits);
    }

    /// Sets every listener serving; a second call does nothing.
    pub fn start(&mut self) {
        if self.listeners.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        self.tasks.push(tokio::spawn(async move {
            shared.admission.report(&shared.tag).await
        }));
        for listener in std::mem::take(&mut self.listeners) {
            let (shared, stop) = (self.shared.clone(), self.stop.subscribe());
            self.tasks.push(match listener {
                Listener::Stream { listener, acceptor } => {
                    tokio::spawn(accept_loop(listener, acceptor, shared, stop))
                }
                Listener::Quic(quic) => tokio::spawn(hysteria2::serve(quic, shared, stop)),
                Listener::Datagram { socket, pump } => match pump {
                    Pump::Dns => tokio::spawn(dns::serve_udp(shared, socket)),
                    Pump::Shadowsocks => tokio::spawn(ss_udp::serve(shared, socket)),
                },
            });
        }
    }

    /// The running inbound with the users of `spec`, which differs from
    /// its own in its users only: built here, where an error can still
    /// refuse the apply, and taken by [`Inbound::take_users`]. The replay
    /// filters carry over, so a request seen before the reload is still
    /// refused after it.
    pub fn with_users(&self, spec: &InboundSpec) -> io::Result<Users> {
        let (mut serve, ..) = Serve::build(&spec.protocol)?;
        serve.keep_filters(&self.shared.serve.load());
        Ok(Users(serve))
    }

    /// Serves new connections with `users`; connections of users it no
    /// longer has end, the others run on.
    pub fn take_users(&self, users: Users) {
        self.shared.serve.store(Arc::new(users.0));
        self.shared.users_changed.send_replace(());
    }
}

/// A running inbound's next user table, built by [`Inbound::with_users`].
pub struct Users(Serve);

/// The sockets an inbound hands over to the one that replaces it on the
/// same address: its TCP socket, and its UDP one (a QUIC server's, or the
/// datagram socket beside a TCP one).
#[derive(Default)]
pub struct Handoff {
    stream: Option<Socket>,
    datagram: Option<Socket>,
}

impl Drop for Inbound {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Acceptor,
    shared: Arc<Shared>,
    stop: watch::Receiver<()>,
) {
    let acceptor = Arc::new(acceptor);
    tracing::info!(
        "inbound {} listening on {}",
        shared.tag,
        listener.local_addr().unwrap_or(shared.spec.listen)
    );
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if !should_backoff(&e) => continue,
            Err(e) => {
                tracing::warn!("inbound {}: accept failed: {e}", shared.tag);
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        // Admission before reading, never waiting; what it turns away is
        // counted and reported once a second.
        let Ok((session, handshake, shed)) =
            shared.admission.admit(peer.ip(), &shared.limits.load())
        else {
            continue;
        };
        let (shared, acceptor) = (shared.clone(), acceptor.clone());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            // The stop first: once the inbound is gone, its connections
            // move no byte more, even one that is ready at the same time.
            let served = tokio::select! {
                biased;
                _ = stop.changed() => Ok(()),
                () = shed => Err(shed_error()),
                served = serve(&shared, &acceptor, socket, peer, handshake) => served,
            };
            if let Err(e) = served {
                tracing::debug!(
                    "{} connection from {} ended: {e}",
                    shared.spec.protocol.name(),
                    peer
                );
            }
            drop(session);
        });
    }
}

/// How a connection shed to make room for another source ends.
fn shed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "shed in its handshake: its source was over its fair share of handshake slots",
    )
}

/// A connection aborted before accept, or an interrupted call, is retried at
/// once; anything else (file descriptors exhausted, for one) is worth a
/// pause, or the loop would spin on it.
fn should_backoff(error: &io::Error) -> bool {
    !matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
    )
}

async fn serve(
    shared: &Arc<Shared>,
    acceptor: &Acceptor,
    socket: TcpStream,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()> {
    let limits = shared.limits.load_full();
    // Each phase's future is boxed while it runs, so the connection's
    // task holds the largest of them (a TLS accept, a dial, another
    // protocol's serving) only as long as that phase lasts, not for the
    // whole of an idle relay.
    match Box::pin(acceptor.accept(socket, &limits)).await? {
        Accepted::Stream(client) => serve_stream(shared, client, peer, handshake).await,
        Accepted::Grpc(connection) => {
            Box::pin(serve_grpc(shared, *connection, peer, handshake)).await
        }
    }
}

/// Serves each stream of a gRPC connection in a task of its own, all
/// under the connection's live-connection permit (held by the caller) and
/// each with a handshake permit of its own (the first takes the socket's).
/// The connection is driven here while they run; once it ends, or this
/// task is dropped, every stream on it ends.
async fn serve_grpc(
    shared: &Arc<Shared>,
    mut connection: GrpcConnection,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()> {
    let mut first = Some(handshake);
    let mut streams = JoinSet::new();
    loop {
        tokio::select! {
            next = connection.next() => {
                let stream = match next {
                    Some(stream) => stream?,
                    None => return Ok(()),
                };
                // The first stream's slot is the connection's, which is shed
                // with the whole connection.
                let (handshake, shed) = match first.take() {
                    Some(first) => (first, Shed::never()),
                    None => match shared.admission.handshake(peer.ip(), &shared.limits.load()) {
                        Ok(admitted) => admitted,
                        // Counted for the inbound's report.
                        Err(_) => continue,
                    },
                };
                let shared = shared.clone();
                streams.spawn(async move {
                    let served = tokio::select! {
                        () = shed => Err(shed_error()),
                        served = serve_stream(&shared, stream, peer, handshake) => served,
                    };
                    if let Err(e) = served {
                        tracing::debug!(
                            "{} stream from {} ended: {e}",
                            shared.spec.protocol.name(),
                            peer
                        );
                    }
                });
            }
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
}

/// Serves one client stream with the inbound's protocol core.
async fn serve_stream(
    shared: &Arc<Shared>,
    client: Stream,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()> {
    let serve = shared.serve.load_full();
    serve.serve(shared, client, peer, handshake).await
}

impl Shared {
    /// When a handshake starting now must be done.
    fn handshake_deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.limits.load().handshake_timeout
    }
}

/// The error a silent or slow client ends with at the handshake deadline.
fn handshake_timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "inbound handshake timed out after {}",
            etemenanki_ir::format_duration(limit)
        ),
    )
}

/// Writes `early` (bytes the client sent before the outbound existed) to
/// the outbound, then relays until the connection ends. Both ends are
/// borrowed from the caller, so an idle connection's task holds each once,
/// not once more inside this future; `early` is taken and freed once
/// written, so a sniffed prefix is not held for the whole relay.
async fn relay_opened<C: Relayed>(
    shared: &Shared,
    client: &mut C,
    opened: &mut Opened,
    early: impl AsRef<[u8]>,
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let idle = shared.limits.load().relay_idle_timeout;
    let bytes = early.as_ref();
    if !bytes.is_empty() {
        // A direct dial takes them at once, ahead of its socket's first
        // event.
        let sent = match opened.stream.plain_tcp() {
            Some(tcp) => etemenanki_transport::dial::send_now(tcp, bytes)?,
            None => 0,
        };
        opened.stream.write_all(&bytes[sent..]).await?;
    }
    drop(early);
    let ended = relay(client, &mut opened.stream, idle, &mut opened.guard).await?;
    if ended == Ended::Idle {
        tracing::debug!(
            "connection via {} closed after {} idle",
            opened.outbound.id,
            etemenanki_ir::format_duration(idle)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_error_backoff_classification() {
        let kind = |k: io::ErrorKind| should_backoff(&io::Error::from(k));
        assert!(!kind(io::ErrorKind::ConnectionAborted));
        assert!(!kind(io::ErrorKind::Interrupted));
        assert!(should_backoff(&io::Error::from_raw_os_error(24))); // EMFILE
        assert!(kind(io::ErrorKind::OutOfMemory));
    }
}
