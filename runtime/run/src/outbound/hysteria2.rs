//! hysteria2: every flow of one outbound version rides one authenticated
//! QUIC connection, kept in a slot shared by all of them: a TCP flow as a
//! proxy stream, a UDP flow as a session over QUIC datagrams. The slot
//! brings the connection up on the first flow and back after it dies, with
//! a backoff.

use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use arc_swap::ArcSwap;
use etemenanki_hysteria2::client::{self, ClientConfig, Connection, UdpSession};
use etemenanki_hysteria2::{tls, Salamander};
use etemenanki_ir::spec::{AddressFamily, HostPort, Hysteria2Spec, Obfs, OutboundProtocol, Verify};
use etemenanki_proto::backoff::Backoff;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;
use tokio::sync::watch;

use super::link::DatagramLink;
use super::protocol::{Build, Protocol};
use crate::dial::Dialer;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::Relayed;
use crate::resolve::{order, Resolver};

pub use client::TcpStream as Hy2Stream;

/// What every attempt needs: the server, TLS, and the connection's own
/// settings.
struct Dial {
    server: HostPort,
    family: AddressFamily,
    verify: tls::Verify,
    alpn: Vec<String>,
    config: ClientConfig,
    resolver: Resolver,
    dialer: Dialer,
}

/// The outcome of one attempt, as every dial waiting on it sees it.
type Outcome = Option<Result<Arc<Connection>, (io::ErrorKind, String)>>;

enum State {
    Idle,
    Connecting(watch::Receiver<Outcome>),
    Ready(Arc<Connection>, Instant),
}

struct Slot {
    state: State,
    backoff: Backoff,
}

pub struct Hysteria2 {
    dial: Arc<Dial>,
    slot: Arc<Mutex<Slot>>,
    /// Set once the UDP refusal has been logged: once per version.
    udp_warned: AtomicBool,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hysteria2 {
    /// Builds the outbound; nothing is dialed until the first flow.
    pub fn new(spec: &Hysteria2Spec, dialer: Dialer, resolver: Resolver) -> Hysteria2 {
        let verify = match &spec.verify {
            Verify::System => tls::Verify::System,
            Verify::CustomCa { pem, .. } => tls::Verify::CustomCa(pem.clone()),
            Verify::Insecure => tls::Verify::Insecure,
        };
        let obfs = spec.obfs.as_ref().map(|obfs| match obfs {
            Obfs::Salamander { psk } => Salamander::new(psk.expose().as_bytes()),
        });
        Hysteria2 {
            dial: Arc::new(Dial {
                server: spec.server.clone(),
                family: spec.address_family,
                verify,
                alpn: spec.alpn.clone(),
                config: ClientConfig {
                    server_name: spec.server_name.clone(),
                    password: spec.password.expose().clone(),
                    obfs,
                    up_bps: spec.up_bps,
                    down_bps: spec.down_bps,
                    max_concurrent_streams: spec.max_concurrent_streams,
                },
                resolver,
                dialer,
            }),
            slot: Arc::new(Mutex::new(Slot {
                state: State::Idle,
                backoff: Backoff::default(),
            })),
            udp_warned: AtomicBool::new(false),
        }
    }

    /// Opens a TCP flow to `destination` as a proxy stream.
    async fn open_tcp(&self, destination: &Address) -> io::Result<Hy2Stream> {
        let connection = self.connection().await?;
        let stream = connection.open_tcp(&destination.to_string()).await?;
        Ok(stream)
    }

    /// Opens a UDP session; a refusal is logged once per version, since an
    /// operator routing UDP here would otherwise see nothing.
    async fn open_udp(&self) -> io::Result<Hy2DatagramLink> {
        let connection = self.connection().await?;
        match connection.open_udp() {
            Ok(session) => Ok(Hy2DatagramLink {
                session,
                authority: String::new(),
            }),
            Err(e) => {
                if e.kind() == io::ErrorKind::Unsupported
                    && !self.udp_warned.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!("{e}; datagrams routed to this outbound are dropped");
                }
                Err(e)
            }
        }
    }

    /// The slot's connection: the live one, the attempt under way, or a
    /// new attempt unless the backoff says to wait.
    async fn connection(&self) -> io::Result<Arc<Connection>> {
        let mut outcome = {
            let mut slot = lock(&self.slot);
            let now = Instant::now();
            if let State::Ready(connection, since) = &slot.state {
                if connection.is_alive() {
                    return Ok(connection.clone());
                }
                tracing::warn!("hysteria2: connection closed, reconnecting");
                let since = *since;
                slot.backoff.lost(now, since);
                slot.state = State::Idle;
            }
            match &slot.state {
                State::Connecting(outcome) => outcome.clone(),
                _ if slot.backoff.waiting(now) => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "hysteria2: connection is down, waiting before the next attempt",
                    ))
                }
                _ => {
                    let (send, outcome) = watch::channel(None);
                    slot.state = State::Connecting(outcome.clone());
                    // Detached: a dropped dial does not cancel the attempt,
                    // whose connection stays in the slot for the next flow.
                    tokio::spawn(attempt(self.dial.clone(), self.slot.clone(), send));
                    outcome
                }
            }
        };
        let result = match outcome.wait_for(Option::is_some).await {
            Ok(result) => result.clone(),
            Err(_) => None,
        };
        match result {
            Some(Ok(connection)) => Ok(connection),
            Some(Err((kind, text))) => Err(io::Error::new(kind, text)),
            None => {
                let mut slot = lock(&self.slot);
                if matches!(&slot.state, State::Connecting(o) if o.same_channel(&outcome)) {
                    slot.state = State::Idle;
                }
                Err(io::Error::other("hysteria2: the connect task disappeared"))
            }
        }
    }
}

/// One attempt, run in a task of its own: its outcome goes into the slot
/// and to every dial waiting on it.
async fn attempt(dial: Arc<Dial>, slot: Arc<Mutex<Slot>>, send: watch::Sender<Outcome>) {
    let result = dial.connect().await;
    let mut slot = lock(&slot);
    let now = Instant::now();
    let outcome = match result {
        Ok(connection) => {
            let connection = Arc::new(connection);
            slot.state = State::Ready(connection.clone(), now);
            Ok(connection)
        }
        Err(e) => {
            tracing::warn!("hysteria2: connect failed: {e}");
            slot.backoff.failed(now);
            slot.state = State::Idle;
            Err((e.kind(), e.to_string()))
        }
    };
    drop(slot);
    send.send_replace(Some(outcome));
}

impl Dial {
    /// Resolves the server and tries each address in order, each on a UDP
    /// socket of its own under the socket policy.
    async fn connect(&self) -> io::Result<Connection> {
        // The CA bundle is parsed at each dial, not when the outbound is
        // built: a bundle that does not parse fails the dial with its error.
        let tls = tls::client_config(&self.verify, &self.alpn)?;
        let ips = order(
            self.resolver.lookup(&self.server.host.to_string()).await?,
            self.family,
        );
        if ips.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "hysteria2: the server name resolved to no usable address",
            ));
        }
        let mut failures = String::new();
        for ip in ips {
            let addr = SocketAddr::new(ip, self.server.port);
            let once = async {
                let socket = self.dialer.bind_udp(ip.is_ipv6())?.into_std()?;
                client::connect(socket, addr, &self.config, tls.clone()).await
            };
            let error = match tokio::time::timeout(self.dialer.connect_timeout(), once).await {
                Ok(Ok(connection)) => return Ok(connection),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "timed out".to_owned(),
            };
            if !failures.is_empty() {
                failures.push_str("; ");
            }
            let _ = write!(failures, "{addr}: {error}");
        }
        Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("hysteria2: no address answered ({failures})"),
        ))
    }
}

/// A UDP flow's link: each datagram carries its target as an authority;
/// replies are reassembled from their fragments.
pub struct Hy2DatagramLink {
    session: UdpSession,
    /// The target being written, reused by every send.
    authority: String,
}

impl DatagramLink for Hy2DatagramLink {
    fn poll_send_to(
        &mut self,
        _cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        self.authority.clear();
        let _ = write!(self.authority, "{to}");
        Poll::Ready(self.session.send(&self.authority, payload))
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        // A reply whose address does not parse or whose port is 0 is
        // skipped.
        self.session.poll_recv(cx, |source, payload| {
            let source = Address::parse_host_port(source).filter(|a| a.port() != 0)?;
            let n = payload.len().min(buf.remaining());
            buf.put_slice(&payload[..n]);
            Some(source)
        })
    }
}

impl Protocol for Hysteria2 {
    type Stream = Hy2Stream;
    type Datagram = Box<Hy2DatagramLink>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Hysteria2>> {
        let OutboundProtocol::Hysteria2(spec) = protocol else {
            return None;
        };
        Some(Ok(Hysteria2::new(
            spec,
            with.dialer.clone(),
            with.dns.servers.clone(),
        )))
    }

    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Hy2Stream> {
        self.open_tcp(destination).await
    }

    async fn associate(
        &self,
        _: &Address,
        _: Arc<ArcSwap<Plane>>,
    ) -> io::Result<Box<Hy2DatagramLink>> {
        self.open_udp().await.map(Box::new)
    }
}

/// A QUIC stream: bytes move through the connection.
impl Relayed for Hy2Stream {
    fn plain_tcp(&mut self) -> Option<&mut tokio::net::TcpStream> {
        None
    }
}
