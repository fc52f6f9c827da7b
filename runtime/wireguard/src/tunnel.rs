//! One tunnel: boringtun's session with the peer, smoltcp's interface over
//! it, and the driver task that moves packets between them and the UDP
//! socket. Flows reach the sockets through the same lock the driver holds
//! while it polls; each flow's bytes wait in its own smoltcp socket
//! buffers, so a flow that stalls fills only those.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use boringtun::noise::Tunn;
use boringtun::x25519::{PublicKey, StaticSecret};
use etemenanki_ir::spec::WireguardSpec;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{tcp, udp};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint, IpListenEndpoint};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::link::{Link, Opened, DATAGRAM};
use crate::stream::WgStream;
use crate::udp::WgUdp;

/// Each TCP socket's receive and send buffers inside the tunnel. smoltcp's
/// window is its receive buffer (scaled past 64 KiB), and one flow on
/// loopback needs a window of a few round trips at the tunnel's rate.
/// Memory is touched only as bytes wait in it.
const TCP_BUF: usize = 512 * 1024;
/// A UDP link's buffers: the datagrams and their payload bytes.
const UDP_PACKETS: usize = 256;
const UDP_BYTES: usize = 256 * 1024;
/// The kernel buffers of the tunnel's socket, asked for (the kernel caps
/// them at its limits): a burst of sealed packets waits there rather than
/// being dropped.
const SOCKET_BUF: usize = 4 * 1024 * 1024;
/// How often boringtun's timers run; it keeps them to the second.
const TIMER_TICK: Duration = Duration::from_millis(250);
/// Datagrams read from the socket before smoltcp answers them.
const RECV_BATCH: usize = 64;
/// Rounds of smoltcp's egress (one segment per socket each) before the
/// driver lets other tasks run.
const EGRESS_ROUNDS: usize = 256;
/// A dropped flow's socket lingers until it has closed, at most this long.
const ORPHAN_TIMEOUT: Duration = Duration::from_secs(30);
/// Local ports of TCP flows and UDP links inside the tunnel.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 49_152..=65_535;

/// What flows and the driver share.
pub(crate) struct Stack {
    iface: Interface,
    pub(crate) sockets: SocketSet<'static>,
    link: Link,
    local: Vec<IpAddr>,
    ports: HashSet<u16>,
    next_port: u16,
    /// Sockets whose flows have gone, with the ports they hold.
    orphans: Vec<(SocketHandle, u16)>,
    epoch: Instant,
    /// Set when the driver has stopped: every flow fails from then on.
    pub(crate) down: bool,
}

/// A started tunnel. Flows hold it; the last one gone stops the driver.
pub struct Tunnel {
    stack: Arc<Mutex<Stack>>,
    wake: Arc<Notify>,
    driver: JoinHandle<()>,
    started: Instant,
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn lock(stack: &Mutex<Stack>) -> MutexGuard<'_, Stack> {
    stack.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tunnel {
    /// Starts the tunnel over `udp`, a socket already connected to the
    /// peer at `endpoint`. No handshake is sent until a flow sends a
    /// packet.
    pub fn start(spec: &WireguardSpec, udp: UdpSocket, endpoint: SocketAddr) -> io::Result<Tunnel> {
        if spec.addresses.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "wireguard: no tunnel-local addresses configured",
            ));
        }
        let sock = socket2::SockRef::from(&udp);
        // Best effort: the kernel's limits may be lower, and that is fine.
        let _ = sock.set_send_buffer_size(SOCKET_BUF);
        let _ = sock.set_recv_buffer_size(SOCKET_BUF);
        let tunn = Tunn::new(
            StaticSecret::from(*spec.private_key.expose()),
            PublicKey::from(spec.peer_public_key),
            spec.preshared_key.as_ref().map(|k| *k.expose()),
            spec.keepalive,
            random_u32()? >> 8,
            None,
        );
        let udp = Arc::new(udp);
        let mut link = Link::new(tunn, udp.clone(), spec.mtu, spec.reserved);
        let epoch = Instant::now();
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = u64::from(random_u32()?) << 32 | u64::from(random_u32()?);
        let mut iface = Interface::new(config, &mut link, smoltcp::time::Instant::ZERO);
        iface.update_ip_addrs(|addrs| {
            for ip in &spec.addresses {
                let prefix = if ip.is_ipv4() { 32 } else { 128 };
                if addrs
                    .push(IpCidr::new(IpAddress::from(*ip), prefix))
                    .is_err()
                {
                    tracing::warn!("wireguard: tunnel address {ip} ignored: too many addresses");
                }
            }
        });
        // Everything goes to the peer: a default route per family, through
        // our own address (there are no neighbours on an IP link).
        for ip in &spec.addresses {
            let routes = iface.routes_mut();
            let _ = match ip {
                IpAddr::V4(v4) => routes.add_default_ipv4_route(*v4),
                IpAddr::V6(v6) => routes.add_default_ipv6_route(*v6),
            };
        }
        let stack = Arc::new(Mutex::new(Stack {
            iface,
            sockets: SocketSet::new(Vec::new()),
            link,
            local: spec.addresses.clone(),
            ports: HashSet::new(),
            next_port: *EPHEMERAL.start(),
            orphans: Vec::new(),
            epoch,
            down: false,
        }));
        let wake = Arc::new(Notify::new());
        let driver = tokio::spawn(drive(stack.clone(), udp, endpoint.ip(), wake.clone()));
        Ok(Tunnel {
            stack,
            wake,
            driver,
            started: epoch,
        })
    }

    /// Whether the driver still runs.
    pub fn is_alive(&self) -> bool {
        !self.driver.is_finished()
    }

    /// When the tunnel started.
    pub fn started(&self) -> Instant {
        self.started
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Stack> {
        lock(&self.stack)
    }

    /// Asks the driver to poll: bytes were written or read, a socket
    /// opened or closed.
    pub(crate) fn poke(&self) {
        self.wake.notify_one();
    }

    /// Opens a TCP connection to `to` inside the tunnel; it resolves once
    /// the peer's side answered. Dropping the future abandons the attempt.
    pub async fn connect_tcp(self: &Arc<Self>, to: SocketAddr) -> io::Result<WgStream> {
        let (handle, port) = self.lock().open_tcp(to)?;
        self.poke();
        let mut stream = WgStream::new(self.clone(), handle, port);
        std::future::poll_fn(|cx| stream.poll_established(cx)).await?;
        Ok(stream)
    }

    /// Opens a UDP link inside the tunnel, on a port of its own.
    pub fn open_udp(self: &Arc<Self>) -> io::Result<WgUdp> {
        let (handle, port) = self.lock().open_udp()?;
        Ok(WgUdp::new(self.clone(), handle, port))
    }
}

fn random_u32() -> io::Result<u32> {
    let bytes: [u8; 4] = ring::rand::generate(&ring::rand::SystemRandom::new())
        .map_err(|_| io::Error::other("wireguard: the system random generator failed"))?
        .expose();
    Ok(u32::from_le_bytes(bytes))
}

impl Stack {
    fn now(&self) -> smoltcp::time::Instant {
        let micros = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_micros();
        smoltcp::time::Instant::from_micros(i64::try_from(micros).unwrap_or(i64::MAX))
    }

    fn local_for(&self, ip: IpAddr) -> io::Result<IpAddr> {
        self.local
            .iter()
            .copied()
            .find(|l| l.is_ipv4() == ip.is_ipv4())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!("wireguard: no tunnel-local address in the family of {ip}"),
                )
            })
    }

    fn take_port(&mut self) -> io::Result<u16> {
        let span = usize::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port == *EPHEMERAL.end() {
                *EPHEMERAL.start()
            } else {
                port + 1
            };
            if self.ports.insert(port) {
                return Ok(port);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "wireguard: every local port inside the tunnel is in use",
        ))
    }

    fn check_up(&self) -> io::Result<()> {
        if self.down {
            Err(tunnel_gone())
        } else {
            Ok(())
        }
    }

    fn open_tcp(&mut self, to: SocketAddr) -> io::Result<(SocketHandle, u16)> {
        self.check_up()?;
        let local = self.local_for(to.ip())?;
        let port = self.take_port()?;
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; TCP_BUF]),
            tcp::SocketBuffer::new(vec![0; TCP_BUF]),
        );
        // A relay forwards what it reads at once.
        socket.set_nagle_enabled(false);
        let remote = IpEndpoint::from(to);
        let local = IpListenEndpoint {
            addr: Some(IpAddress::from(local)),
            port,
        };
        if let Err(e) = socket.connect(self.iface.context(), remote, local) {
            self.ports.remove(&port);
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("wireguard: cannot connect to {to} inside the tunnel: {e}"),
            ));
        }
        Ok((self.sockets.add(socket), port))
    }

    fn open_udp(&mut self) -> io::Result<(SocketHandle, u16)> {
        self.check_up()?;
        let port = self.take_port()?;
        let buffer = || {
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; UDP_PACKETS],
                vec![0; UDP_BYTES],
            )
        };
        let mut socket = udp::Socket::new(buffer(), buffer());
        if let Err(e) = socket.bind(port) {
            self.ports.remove(&port);
            return Err(io::Error::other(format!(
                "wireguard: cannot bind a udp port inside the tunnel: {e}"
            )));
        }
        Ok((self.sockets.add(socket), port))
    }

    /// A TCP flow's socket after its stream is dropped: closed gracefully
    /// and removed once it has finished, or at once if it never opened.
    pub(crate) fn release_tcp(&mut self, handle: SocketHandle, port: u16) {
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        socket.close();
        if matches!(socket.state(), tcp::State::Closed | tcp::State::TimeWait) || self.down {
            self.sockets.remove(handle);
            self.ports.remove(&port);
        } else {
            socket.set_timeout(Some(smoltcp::time::Duration::from_secs(
                ORPHAN_TIMEOUT.as_secs(),
            )));
            self.orphans.push((handle, port));
        }
    }

    pub(crate) fn release_udp(&mut self, handle: SocketHandle, port: u16) {
        self.sockets.remove(handle);
        self.ports.remove(&port);
    }

    /// Sends what the sockets have to send; true when more remains after
    /// the bounded rounds.
    fn egress(&mut self) -> bool {
        let now = self.now();
        for _ in 0..EGRESS_ROUNDS {
            let Stack {
                iface,
                sockets,
                link,
                ..
            } = self;
            if iface.poll_egress(now, link, sockets) == PollResult::None || link.egress.is_blocked()
            {
                self.reap();
                return false;
            }
        }
        self.reap();
        true
    }

    fn reap(&mut self) {
        let Stack {
            sockets,
            orphans,
            ports,
            ..
        } = self;
        orphans.retain(|&(handle, port)| {
            let done = matches!(
                sockets.get::<tcp::Socket>(handle).state(),
                tcp::State::Closed | tcp::State::TimeWait
            );
            if done {
                sockets.remove(handle);
                ports.remove(&port);
            }
            !done
        });
    }

    /// Opens one datagram from the peer and hands its packet to smoltcp.
    fn ingest(&mut self, from: IpAddr, datagram: &mut [u8]) {
        if let Opened::Packet = self.link.open(from, datagram) {
            let now = self.now();
            let Stack {
                iface,
                sockets,
                link,
                ..
            } = self;
            iface.poll_ingress_single(now, link, sockets);
            // Not taken (the socket was full): dropped, as a wire would.
            link.inbox.len = None;
        }
    }

    /// When smoltcp next needs a poll (a retransmission, an ack delay).
    fn deadline(&mut self) -> Option<Instant> {
        let now = self.now();
        let at = self.iface.poll_at(now, &self.sockets)?;
        let micros = u64::try_from(at.total_micros()).unwrap_or(0);
        Some(self.epoch + Duration::from_micros(micros))
    }

    /// Fails every flow: the driver has stopped.
    fn shut(&mut self) {
        self.down = true;
        for (_, socket) in self.sockets.iter_mut() {
            match socket {
                smoltcp::socket::Socket::Tcp(tcp) => tcp.abort(),
                smoltcp::socket::Socket::Udp(udp) => udp.close(),
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
    }
}

pub(crate) fn tunnel_gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "wireguard: the tunnel this flow rode has stopped",
    )
}

/// The driver: reads the peer's datagrams, runs smoltcp and boringtun's
/// timers, and sends what smoltcp has to send. It ends when the socket
/// fails (the peer's port refuses) or the handshake expires.
async fn drive(stack: Arc<Mutex<Stack>>, udp: Arc<UdpSocket>, peer: IpAddr, wake: Arc<Notify>) {
    let error = run(&stack, &udp, peer, &wake).await;
    tracing::debug!("wireguard: tunnel driver ends: {error}");
    lock(&stack).shut();
}

async fn run(stack: &Mutex<Stack>, udp: &UdpSocket, peer: IpAddr, wake: &Notify) -> io::Error {
    let mut datagram = vec![0u8; DATAGRAM].into_boxed_slice();
    let mut tick = tokio::time::interval(TIMER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (more, blocked, deadline) = {
            let mut s = lock(stack);
            let more = s.egress();
            if let Some(e) = s.link.egress.failed.take() {
                return e;
            }
            (more, s.link.egress.is_blocked(), s.deadline())
        };
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ready = udp.readable() => {
                if let Err(e) = ready {
                    return e;
                }
                let mut s = lock(stack);
                for _ in 0..RECV_BATCH {
                    match udp.try_recv(&mut datagram) {
                        Ok(n) => s.ingest(peer, &mut datagram[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return e,
                    }
                }
            }
            ready = udp.writable(), if blocked => {
                if let Err(e) = ready {
                    return e;
                }
                lock(stack).link.egress.retry();
            }
            () = wake.notified() => {}
            _ = tick.tick() => {
                if let Err(e) = lock(stack).link.egress.timers() {
                    return e;
                }
            }
            () = sleep => {}
        }
    }
}
