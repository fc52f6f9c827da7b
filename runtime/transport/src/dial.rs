//! Sockets opened under the spec's socket policy: TCP connects with a
//! per-attempt timeout, and UDP sockets per address family.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{Limits, SocketPolicy};
use socket2::{Domain, Protocol, SockAddr, Socket, TcpKeepalive, Type};
use tokio::net::{TcpStream, UdpSocket};

#[derive(Clone)]
pub struct Dialer {
    policy: Arc<SocketPolicy>,
    /// The limits of the current apply, for the connect timeout.
    limits: Arc<ArcSwap<Limits>>,
}

impl Dialer {
    pub fn new(policy: SocketPolicy, limits: Arc<ArcSwap<Limits>>) -> Self {
        Dialer {
            policy: Arc::new(policy),
            limits,
        }
    }

    /// A socket of `addr`'s family with the policy's interface, mark and bind
    /// address applied, before any connect or bind of ours.
    fn socket(&self, ty: Type, protocol: Protocol, v6: bool) -> io::Result<Socket> {
        let domain = if v6 { Domain::IPV6 } else { Domain::IPV4 };
        let socket = Socket::new(domain, nonblocking(ty), Some(protocol))?;
        if v6 && ty == Type::DGRAM {
            socket.set_only_v6(true)?;
        }
        if let Some(interface) = &self.policy.interface {
            socket.bind_device(Some(interface.as_bytes()))?;
        }
        if let Some(mark) = self.policy.mark {
            socket.set_mark(mark)?;
        }
        #[cfg(not(target_os = "linux"))]
        socket.set_nonblocking(true)?;
        Ok(socket)
    }

    fn bind_ip(&self, v6: bool) -> Option<IpAddr> {
        if v6 {
            self.policy.bind_v6.map(IpAddr::V6)
        } else {
            self.policy.bind_v4.map(IpAddr::V4)
        }
    }

    /// The bound on one connect attempt, from the current apply's limits.
    pub fn connect_timeout(&self) -> std::time::Duration {
        self.limits.load().connect_timeout
    }

    /// One TCP connect, bounded by the connect timeout.
    pub async fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let v6 = addr.is_ipv6();
        let socket = self.socket(Type::STREAM, Protocol::TCP, v6)?;
        if let Some(idle) = self.policy.tcp_keepalive {
            socket.set_tcp_keepalive(&TcpKeepalive::new().with_time(idle))?;
        }
        if let Some(ip) = self.bind_ip(v6) {
            socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        }
        let limit = self.connect_timeout();
        // A relay forwards what it reads at once; Nagle would only add delay.
        socket.set_tcp_nodelay(true)?;
        match tokio::time::timeout(limit, connect_now_or_later(socket, addr)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect to {addr} timed out"),
            )),
        }
    }

    /// Tries `addrs` in order, one at a time (not Happy Eyeballs: each
    /// failure is kept so the cause is not lost).
    pub async fn connect_any(&self, addrs: &[SocketAddr]) -> io::Result<TcpStream> {
        let mut failures = Vec::new();
        for &addr in addrs {
            match self.connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => failures.push(format!("{addr}: {e}")),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("failed to connect to any address ({})", failures.join("; ")),
        ))
    }

    /// A UDP socket of one family on an ephemeral port.
    pub fn bind_udp(&self, v6: bool) -> io::Result<UdpSocket> {
        let socket = self.socket(Type::DGRAM, Protocol::UDP, v6)?;
        let ip = self.bind_ip(v6).unwrap_or(if v6 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        });
        socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        UdpSocket::from_std(std::net::UdpSocket::from(socket))
    }
}

/// Connects a non-blocking `socket` to `addr`. The kernel often finishes
/// the handshake before connect(2) returns EINPROGRESS (always on
/// loopback), so the peer is checked at once: a connected socket is
/// returned without the round through the event loop that waiting for
/// writability costs; otherwise it is awaited as tokio's own connect does.
async fn connect_now_or_later(socket: Socket, addr: SocketAddr) -> io::Result<TcpStream> {
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INPROGRESS.raw_os_error()) => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(socket))?;
    if stream.peer_addr().is_err() {
        stream.writable().await?;
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    Ok(stream)
}

/// Sends what the socket takes of `buf` at once, without waiting on the
/// event loop: how many bytes went, 0 when the socket would block (or
/// `buf` is empty). For a connection's first bytes: a socket
/// [`connect_now_or_later`] found connected is writable, but tokio learns
/// that only from the socket's first event (it assumes accepted sockets
/// ready, not connected ones), so a write through it would wait a turn of
/// the event loop. The rest of `buf` goes through `AsyncWrite` as usual.
pub fn send_now(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    #[cfg(unix)]
    return send_with(tcp, buf, rustix::net::SendFlags::NOSIGNAL);
    #[cfg(not(unix))]
    {
        let _ = (tcp, buf);
        Ok(0)
    }
}

/// Sends what the socket takes of `buf` at once, as [`send_now`] does, and
/// tells the kernel more follows (MSG_MORE, Linux): the bytes wait in the
/// socket for the next send and leave with it in one segment, or alone
/// once TCP's cork ceiling (200 ms) passes. For a request that should lead
/// the first payload without a timer of the caller's. 0 where the kernel
/// has no such flag: the caller holds the bytes itself.
pub fn send_ahead(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    return send_with(
        tcp,
        buf,
        rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::MORE,
    );
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tcp, buf);
        Ok(0)
    }
}

#[cfg(unix)]
fn send_with(tcp: &TcpStream, buf: &[u8], flags: rustix::net::SendFlags) -> io::Result<usize> {
    use rustix::io::Errno;
    if buf.is_empty() {
        return Ok(0);
    }
    match rustix::net::send(tcp, buf, flags) {
        Ok(sent) => Ok(sent),
        Err(Errno::WOULDBLOCK | Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// `ty` created non-blocking: on Linux in the socket call itself
/// (SOCK_NONBLOCK), which spares every dial the fcntl pair that
/// `set_nonblocking` costs; elsewhere [`Dialer::socket`] sets it after.
fn nonblocking(ty: Type) -> Type {
    #[cfg(target_os = "linux")]
    return ty.nonblocking();
    #[cfg(not(target_os = "linux"))]
    ty
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[tokio::test]
    async fn send_now_sends_on_a_socket_just_dialed_before_tokio_sees_it_writable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dialed = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        dialed.set_nonblocking(true).unwrap();
        let tcp = TcpStream::from_std(dialed).unwrap();
        // No event has reached the registration yet: a write through tokio
        // would wait for the loop to turn.
        assert_eq!(
            tcp.try_write(b"x").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert_eq!(send_now(&tcp, b"hello").unwrap(), 5);
        assert_eq!(send_now(&tcp, b"").unwrap(), 0);
        let (mut peer, _) = listener.accept().unwrap();
        let mut got = [0; 5];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
    }

    #[tokio::test]
    async fn send_now_is_a_would_block_not_an_error_when_the_socket_is_full() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dialed = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        dialed.set_nonblocking(true).unwrap();
        let _peer = listener.accept().unwrap();
        let tcp = TcpStream::from_std(dialed).unwrap();
        // The peer reads nothing: both buffers fill, then nothing more goes.
        let chunk = vec![0; 1 << 16];
        let mut rounds = 0;
        while send_now(&tcp, &chunk).unwrap() > 0 {
            rounds += 1;
            assert!(rounds < 10_000, "the socket never filled");
        }
        assert_eq!(send_now(&tcp, &chunk).unwrap(), 0);
    }

    /// Bytes sent ahead wait for the next send and arrive before it; with
    /// no next send they arrive alone, once the kernel's cork ceiling
    /// passes.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn bytes_sent_ahead_arrive_with_the_next_send_or_alone() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        for then in [&b"tail"[..], b""] {
            let dialed = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            dialed.set_nonblocking(true).unwrap();
            let tcp = TcpStream::from_std(dialed).unwrap();
            let (mut peer, _) = listener.accept().unwrap();
            peer.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            assert_eq!(send_ahead(&tcp, b"head").unwrap(), 4);
            assert_eq!(send_now(&tcp, then).unwrap(), then.len());
            let mut got = vec![0; 4 + then.len()];
            peer.read_exact(&mut got).unwrap();
            assert_eq!(got, [&b"head"[..], then].concat());
        }
    }
}
