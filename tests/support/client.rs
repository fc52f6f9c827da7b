//! Minimal blocking clients for SOCKS5 (RFC 1928, RFC 1929) and HTTP
//! CONNECT, and the byte-exact checks every test ends with. Written here
//! rather than borrowed from Etemenanki's protocol crate, so that a bug
//! there cannot hide on both sides of a test.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::thread;
use std::time::Duration;

use super::servers::{tcp_greeter, GREETING};
use super::WAIT;

/// A username and password, for RFC 1929 or HTTP Basic.
#[derive(Clone, Copy)]
pub struct Login<'a> {
    pub user: &'a str,
    pub pass: &'a str,
}

fn connect(proxy: SocketAddr) -> io::Result<TcpStream> {
    with_timeouts(TcpStream::connect_timeout(&proxy, WAIT)?)
}

/// Connects to `proxy` from the local IP `from` (a loopback address other
/// than 127.0.0.1, say), on an ephemeral port.
pub fn connect_from(from: IpAddr, proxy: SocketAddr) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(proxy),
        socket2::Type::STREAM,
        None,
    )?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect_timeout(&proxy.into(), WAIT)?;
    with_timeouts(socket.into())
}

fn with_timeouts(stream: TcpStream) -> io::Result<TcpStream> {
    stream.set_read_timeout(Some(WAIT))?;
    stream.set_write_timeout(Some(WAIT))?;
    Ok(stream)
}

/// Greets a SOCKS5 server and authenticates with `login` when given.
fn socks5_greet(stream: &mut TcpStream, login: Option<Login>) -> io::Result<()> {
    let method = if login.is_some() { 2 } else { 0 };
    stream.write_all(&[5, 1, method])?;
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice)?;
    if choice != [5, method] {
        return Err(io::Error::other(format!(
            "socks server chose {choice:?}, asked for method {method}"
        )));
    }
    if let Some(login) = login {
        let mut request = vec![1, login.user.len() as u8];
        request.extend_from_slice(login.user.as_bytes());
        request.push(login.pass.len() as u8);
        request.extend_from_slice(login.pass.as_bytes());
        stream.write_all(&request)?;
        let mut status = [0u8; 2];
        stream.read_exact(&mut status)?;
        if status[1] != 0 {
            return Err(io::Error::other(format!(
                "socks authentication refused ({})",
                status[1]
            )));
        }
    }
    Ok(())
}

/// Sends a SOCKS5 request for an IPv4 `addr` and reads the reply's bound
/// address; a non-zero reply is an error naming it.
fn socks5_request(stream: &mut TcpStream, command: u8, addr: SocketAddr) -> io::Result<SocketAddr> {
    let IpAddr::V4(ip) = addr.ip() else {
        panic!("the tests use IPv4 loopback only")
    };
    let mut request = vec![5, command, 0, 1];
    request.extend_from_slice(&ip.octets());
    request.extend_from_slice(&addr.port().to_be_bytes());
    stream.write_all(&request)?;
    read_reply(stream)
}

/// Reads a SOCKS5 reply's bound address; a non-zero reply is an error
/// naming it.
fn read_reply(stream: &mut TcpStream) -> io::Result<SocketAddr> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    if head[1] != 0 {
        return Err(io::Error::other(format!("socks reply {}", head[1])));
    }
    match head[3] {
        1 => {
            let mut rest = [0u8; 6];
            stream.read_exact(&mut rest)?;
            Ok(SocketAddr::from((
                [rest[0], rest[1], rest[2], rest[3]],
                u16::from_be_bytes([rest[4], rest[5]]),
            )))
        }
        4 => {
            let mut rest = [0u8; 18];
            stream.read_exact(&mut rest)?;
            let ip: [u8; 16] = rest[..16].try_into().expect("sixteen bytes");
            Ok(SocketAddr::from((
                ip,
                u16::from_be_bytes([rest[16], rest[17]]),
            )))
        }
        other => Err(io::Error::other(format!(
            "socks reply address type {other}"
        ))),
    }
}

/// A SOCKS5 CONNECT through `proxy` to `target`.
pub fn socks5_connect(
    proxy: SocketAddr,
    target: SocketAddr,
    login: Option<Login>,
) -> io::Result<TcpStream> {
    let mut stream = connect(proxy)?;
    socks5_greet(&mut stream, login)?;
    socks5_request(&mut stream, 1, target)?;
    Ok(stream)
}

/// Where a SOCKS5 request goes: an address of either family, or a name as
/// the client wrote it (address type 3), whatever its text.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    Ip(SocketAddr),
    Name(&'a str, u16),
}

/// A SOCKS5 CONNECT through `proxy` to `target`, written as `target` says;
/// a non-zero reply is an error naming it (`socks reply 2`).
pub fn socks5_connect_to(proxy: SocketAddr, target: Target) -> io::Result<TcpStream> {
    let mut stream = connect(proxy)?;
    socks5_greet(&mut stream, None)?;
    let mut request = vec![5, 1, 0];
    match target {
        Target::Ip(SocketAddr::V4(addr)) => {
            request.push(1);
            request.extend_from_slice(&addr.ip().octets());
        }
        Target::Ip(SocketAddr::V6(addr)) => {
            request.push(4);
            request.extend_from_slice(&addr.ip().octets());
        }
        Target::Name(name, _) => {
            request.extend_from_slice(&[3, name.len() as u8]);
            request.extend_from_slice(name.as_bytes());
        }
    }
    let port = match target {
        Target::Ip(addr) => addr.port(),
        Target::Name(_, port) => port,
    };
    request.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&request)?;
    read_reply(&mut stream)?;
    Ok(stream)
}

/// As [`socks5_connect`], from the local IP `from`.
pub fn socks5_connect_from(
    from: IpAddr,
    proxy: SocketAddr,
    target: SocketAddr,
    login: Option<Login>,
) -> io::Result<TcpStream> {
    let mut stream = connect_from(from, proxy)?;
    socks5_greet(&mut stream, login)?;
    socks5_request(&mut stream, 1, target)?;
    Ok(stream)
}

/// A SOCKS5 UDP association: the control connection must stay open while
/// the socket is used.
pub struct Association {
    _control: TcpStream,
    relay: SocketAddr,
    socket: UdpSocket,
}

impl Association {
    /// Opens an association through `proxy`, announcing the local socket's
    /// address up front.
    pub fn open(proxy: SocketAddr) -> io::Result<Association> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        let named = socket.local_addr()?;
        Association::open_on(proxy, socket, named)
    }

    /// Opens an association from a UDP socket bound to `local` (its IP is
    /// the control connection's too), naming `requested` as the client's
    /// address in the request, whatever it is (`0.0.0.0:0`: none).
    pub fn open_from(
        proxy: SocketAddr,
        local: SocketAddr,
        requested: SocketAddr,
    ) -> io::Result<Association> {
        Association::open_on(proxy, UdpSocket::bind(local)?, requested)
    }

    /// An association from 127.0.0.1 that names no address
    /// (`0.0.0.0:0`) in its request.
    pub fn any(proxy: SocketAddr) -> Association {
        let none = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
        Association::open_from(proxy, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), none)
            .expect("opening a udp association")
    }

    fn open_on(
        proxy: SocketAddr,
        socket: UdpSocket,
        requested: SocketAddr,
    ) -> io::Result<Association> {
        socket.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut control = connect_from(socket.local_addr()?.ip(), proxy)?;
        socks5_greet(&mut control, None)?;
        let mut relay = socks5_request(&mut control, 3, requested)?;
        if relay.ip().is_unspecified() {
            relay.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        Ok(Association {
            _control: control,
            relay,
            socket,
        })
    }

    /// The association's own socket and the relay it sends to, for a test
    /// that writes its datagrams byte by byte.
    pub fn parts(&self) -> (&UdpSocket, SocketAddr) {
        (&self.socket, self.relay)
    }

    /// Where the proxy relays this association's datagrams.
    pub fn relay(&self) -> SocketAddr {
        self.relay
    }

    /// Sends one datagram for `target` through the relay.
    pub fn send(&self, target: SocketAddr, payload: &[u8]) {
        send_via(&self.socket, self.relay, target, payload);
    }

    /// The next reply's source and payload, or `None` within the socket's
    /// read timeout (500 ms).
    pub fn recv(&self) -> Option<(SocketAddr, Vec<u8>)> {
        recv_via(&self.socket)
    }

    /// Sends `payload` to `target` until a reply comes back (datagrams may
    /// be lost), at most five times; returns the reply's source and payload.
    pub fn ask(&self, target: SocketAddr, payload: &[u8]) -> Option<(SocketAddr, Vec<u8>)> {
        for _ in 0..5 {
            self.send(target, payload);
            if let Some(reply) = self.recv() {
                return Some(reply);
            }
        }
        None
    }
}

/// Sends `payload` for `target` to a SOCKS5 UDP `relay` from any `socket`
/// (one that belongs to no association, to test that it is not heard).
pub fn send_via(socket: &UdpSocket, relay: SocketAddr, target: SocketAddr, payload: &[u8]) {
    let IpAddr::V4(ip) = target.ip() else {
        panic!("the tests use IPv4 loopback only")
    };
    let mut datagram = vec![0, 0, 0, 1];
    datagram.extend_from_slice(&ip.octets());
    datagram.extend_from_slice(&target.port().to_be_bytes());
    datagram.extend_from_slice(payload);
    socket
        .send_to(&datagram, relay)
        .expect("sending to the udp relay");
}

/// The next SOCKS5 UDP reply on `socket`, as its source and payload, or
/// `None` within the socket's read timeout.
pub fn recv_via(socket: &UdpSocket) -> Option<(SocketAddr, Vec<u8>)> {
    let mut buf = vec![0u8; 65536];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    let reply = &buf[..n];
    assert!(
        n >= 10 && reply[3] == 1,
        "an unexpected udp reply header {:?}",
        &reply[..n.min(10)]
    );
    let from = SocketAddr::from((
        [reply[4], reply[5], reply[6], reply[7]],
        u16::from_be_bytes([reply[8], reply[9]]),
    ));
    Some((from, reply[10..].to_vec()))
}

/// An HTTP CONNECT through `proxy` to `target`, with Basic proxy
/// authentication when `login` is given.
pub fn http_connect(
    proxy: SocketAddr,
    target: SocketAddr,
    login: Option<Login>,
) -> io::Result<TcpStream> {
    let mut stream = connect(proxy)?;
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(login) = login {
        let credentials = base64(format!("{}:{}", login.user, login.pass).as_bytes());
        request.push_str(&format!("Proxy-Authorization: Basic {credentials}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    // Byte by byte, so that nothing after the head is consumed.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte)?;
        head.push(byte[0]);
        if head.len() > 8192 {
            return Err(io::Error::other("an http response head over 8 KiB"));
        }
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(io::Error::other(format!("http proxy answered {status:?}")));
    }
    Ok(stream)
}

/// Standard base64 with padding, for a Basic credential.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One round trip on an open flow; empty when the flow was closed.
pub fn echo_once(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    if stream.write_all(payload).is_err() {
        return Vec::new();
    }
    let mut got = vec![0u8; payload.len()];
    match stream.read_exact(&mut got) {
        Ok(()) => got,
        Err(_) => Vec::new(),
    }
}

/// Sends `payload`, half-closes, and reads until the peer closes (bounded
/// by the read timeout); returns what came back.
pub fn exchange(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    stream.write_all(payload).expect("writing the payload");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-closing");
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

/// `len` bytes that differ from one position to the next, so that a lost,
/// repeated or reordered chunk shows.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9u32;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// Through the SOCKS5 proxy at `proxy`, reaches a server that speaks first
/// ([`tcp_greeter`]) and reads its greeting before sending a byte: whatever
/// a proxy holds for the client's first bytes must go without them. Then
/// one round trip.
pub fn check_greeting(proxy: SocketAddr, what: &str) {
    let mut stream =
        socks5_connect(proxy, tcp_greeter(), None).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut got = vec![0u8; GREETING.len()];
    stream
        .read_exact(&mut got)
        .unwrap_or_else(|e| panic!("{what}: reading the server's greeting: {e}"));
    assert_eq!(got, GREETING, "{what}: the server's greeting");
    assert_eq!(
        echo_once(&mut stream, b"ping"),
        b"ping",
        "{what}: after the greeting"
    );
}

/// Sends `payload` through `stream` to an echo server and checks that the
/// very same bytes come back. Writing runs on its own thread, so a payload
/// larger than the socket buffers cannot deadlock; the read stops at the
/// payload's length instead of waiting for an end of stream, which some
/// peers turn into a full close.
pub fn check_echo(stream: TcpStream, payload: &[u8]) {
    let mut writer = stream.try_clone().expect("cloning a stream");
    let sent = payload.to_vec();
    let sender = thread::spawn(move || writer.write_all(&sent));
    let mut got = vec![0u8; payload.len()];
    let mut reader = stream;
    reader
        .read_exact(&mut got)
        .unwrap_or_else(|e| panic!("reading the echo of {} bytes: {e}", payload.len()));
    sender
        .join()
        .expect("the writer thread")
        .expect("writing the payload");
    if let Some(at) = got.iter().zip(payload).position(|(a, b)| a != b) {
        panic!(
            "the echo differs from what was sent at byte {at} of {}",
            payload.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }
}
