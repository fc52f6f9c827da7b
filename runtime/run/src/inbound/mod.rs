//! Inbounds: the accept loop, admission before reading, and one task per
//! connection that owns the client socket, the protocol core and the
//! outbound it opens.

mod admission;
mod handshake;
mod http;
mod hysteria2;
mod sniff;
mod socks;
mod udp;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{InboundProtocol, InboundSpec, Limits};
use etemenanki_transport::{listen, Acceptor, Stream};
use socket2::Socket;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::connect::Opened;
use crate::plane::Plane;
use crate::relay::{relay, Ended};
use admission::{Admission, Handshaking};

/// The sleep after an accept error that is not transient (for example when
/// file descriptors run out).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// The protocol core an inbound serves each connection with.
#[derive(Clone, Copy)]
enum Serve {
    Socks {
        udp: bool,
    },
    Http,
    /// QUIC on a UDP socket: served by hysteria2.rs, never by the TCP loop.
    Hysteria2,
}

/// What every connection of one inbound shares.
pub struct Shared {
    pub tag: Arc<str>,
    pub spec: InboundSpec,
    /// (user, password) pairs; empty means no authentication.
    pub accounts: Vec<(String, String)>,
    /// The limits of the current apply: a reload that changes them reaches
    /// the connections of a reused inbound too.
    pub limits: Arc<ArcSwap<Limits>>,
    pub plane: Arc<ArcSwap<Plane>>,
    serve: Serve,
    acceptor: Acceptor,
    admission: Admission,
}

/// A bound, listening inbound. Dropping it stops the accept loop and ends
/// every connection it serves.
pub struct Inbound {
    /// The listening socket, kept so a rebuilt inbound on the same address
    /// can take it over.
    socket: Socket,
    listen: SocketAddr,
    listener: Option<TcpListener>,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    /// A hysteria2 inbound's QUIC server, in place of the TCP listener.
    quic: Option<hysteria2::Listener>,
    /// Connections end when this sender is dropped.
    stop: watch::Sender<()>,
}

impl Inbound {
    /// Binds the listening socket, or takes over `handoff`, the socket of
    /// the inbound this one replaces on the same address (so a rebuilt
    /// inbound never needs its address free, and no connection waiting in the
    /// backlog is lost). Nothing is accepted until [`Inbound::start`].
    pub fn bind(
        spec: &InboundSpec,
        limits: Arc<ArcSwap<Limits>>,
        plane: Arc<ArcSwap<Plane>>,
        handoff: Option<Socket>,
    ) -> io::Result<Inbound> {
        if let InboundProtocol::Hysteria2 { .. } = spec.protocol {
            return hysteria2::bind(spec, limits, plane, handoff);
        }
        let (serve, accounts, tls) = match &spec.protocol {
            InboundProtocol::Socks { accounts, udp, tls } => {
                (Serve::Socks { udp: *udp }, accounts, tls)
            }
            InboundProtocol::Http { accounts, tls } => (Serve::Http, accounts, tls),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the {} inbound is not supported by this runtime yet",
                        other.name()
                    ),
                ))
            }
        };
        let accounts = accounts
            .iter()
            .map(|a| (a.user.clone(), a.pass.expose().clone()))
            .collect();
        let acceptor = Acceptor::build(tls.as_ref())?;
        let socket = match handoff {
            Some(socket) => socket,
            None => listen(spec.listen)?,
        };
        let listener = TcpListener::from_std(std::net::TcpListener::from(socket.try_clone()?))?;
        let shared = Arc::new(Shared {
            tag: spec.tag.as_str().into(),
            spec: spec.clone(),
            accounts,
            serve,
            acceptor,
            admission: Admission::new(&limits.load()),
            limits,
            plane,
        });
        Ok(Inbound {
            socket,
            listen: spec.listen,
            listener: Some(listener),
            quic: None,
            shared,
            accept: None,
            stop: watch::channel(()).0,
        })
    }

    /// A handle on the listening socket, for the inbound that replaces this
    /// one on `addr`; `None` when this one listens elsewhere.
    /// `addr` with port 0 asks for any port: only the inbound being
    /// replaced (`same_tag`) hands its socket over, so it keeps its port,
    /// and a new inbound never takes another's.
    pub fn handoff(&self, addr: SocketAddr, same_tag: bool) -> Option<io::Result<Socket>> {
        let any_port = addr.port() == 0;
        (self.listen == addr && (same_tag || !any_port)).then(|| self.socket.try_clone())
    }

    /// The address the listening socket is bound to: for port 0, the port
    /// the kernel chose.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()?.as_socket()
    }

    /// Sizes admission to the limits of the current apply.
    pub fn resize(&self, limits: &Limits) {
        self.shared.admission.resize(limits);
    }

    pub fn start(&mut self) {
        if let Some(listener) = self.listener.take() {
            let shared = self.shared.clone();
            let stop = self.stop.subscribe();
            self.accept = Some(tokio::spawn(accept_loop(listener, shared, stop)));
        }
        if let Some(quic) = self.quic.take() {
            let shared = self.shared.clone();
            let stop = self.stop.subscribe();
            self.accept = Some(tokio::spawn(hysteria2::serve(quic, shared, stop)));
        }
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        if let Some(accept) = &self.accept {
            accept.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: watch::Receiver<()>) {
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
        // Admission before reading, never waiting.
        let (session, handshake) = match shared.admission.admit(peer.ip(), &shared.limits.load()) {
            Ok(admitted) => admitted,
            Err(reason) => {
                tracing::debug!("dropping inbound connection; {reason} (from {peer})");
                continue;
            }
        };
        let shared = shared.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            // The stop first: once the inbound is gone, its connections
            // move no byte more, even one that is ready at the same time.
            let served = tokio::select! {
                biased;
                _ = stop.changed() => Ok(()),
                served = serve(&shared, socket, peer, handshake) => served,
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
    shared: &Shared,
    socket: TcpStream,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()> {
    let limit = shared.limits.load().handshake_timeout;
    let client = shared.acceptor.accept(socket, limit).await?;
    match shared.serve {
        Serve::Socks { udp } => socks::serve(shared, client, peer, handshake, udp).await,
        Serve::Http => http::serve(shared, client, peer, handshake).await,
        Serve::Hysteria2 => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "hysteria2 accepts no tcp connection",
        )),
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
/// the outbound, then relays until the connection ends.
async fn relay_opened(
    shared: &Shared,
    mut client: Stream,
    mut opened: Opened,
    early: &[u8],
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let idle = shared.limits.load().relay_idle_timeout;
    if !early.is_empty() {
        opened.stream.write_all(early).await?;
    }
    let ended = relay(&mut client, &mut opened.stream, idle, &mut opened.guard).await?;
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
