//! Loopback servers at the far end of every path: what they receive is
//! what the client sent through the proxies.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use super::WAIT;

/// A port nothing listens on right now, for TCP and UDP alike (bound,
/// then released): for a peer whose configuration must name its port, and
/// for a destination that must refuse. Our runtime needs none: it listens
/// on port 0 and logs the address it bound (see `Process::listening`).
///
/// The ports come from below the kernel's ephemeral range (32768 and up
/// here), each at most once per test process: a socket bound to port 0
/// elsewhere in the run is never given one of them, so a peer that also
/// binds UDP on its TCP port (v2ray's and sing-box's socks inbounds) does
/// not find it taken.
pub fn free_port() -> u16 {
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Another test process (e2e, interop) starts elsewhere in the span.
    let start = std::process::id().wrapping_mul(7_919);
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + start.wrapping_add(n) % SPAN) as u16;
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, port));
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no port below the ephemeral range is free for tcp and udp")
}

/// 127.0.0.1 on a port nothing listens on right now.
pub fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// A TCP echo server: echoes until end of stream, then half-closes.
pub fn tcp_echo() -> SocketAddr {
    serve_tcp(|mut stream| {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = stream.shutdown(Shutdown::Write);
    })
}

/// What a server that speaks first ([`tcp_greeter`]) says.
pub const GREETING: &[u8] = b"220 loopback greeter ready\r\n";

/// A server that speaks first, as SSH and SMTP do: sends [`GREETING`] once
/// accepted, then echoes until end of stream.
pub fn tcp_greeter() -> SocketAddr {
    serve_tcp(|mut stream| {
        if stream.write_all(GREETING).is_err() {
            return;
        }
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            if stream.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    })
}

/// An HTTP/1.1 origin that answers every request with `body` and closes.
pub fn http_origin(body: &'static [u8]) -> SocketAddr {
    serve_tcp(move |mut stream| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(body);
        let _ = stream.write_all(&response);
    })
}

/// Accepts on a fresh loopback port, one thread per connection, each
/// bounded by the read timeout so that an abandoned connection ends.
fn serve_tcp(handle: impl Fn(TcpStream) + Send + Sync + Copy + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback server");
    let addr = listener.local_addr().expect("a bound address");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(WAIT));
            thread::spawn(move || handle(stream));
        }
    });
    addr
}

/// A UDP echo server on `ip` (a loopback address): sends every datagram
/// back to where it came from.
pub fn udp_echo(ip: Ipv4Addr) -> SocketAddr {
    let socket = UdpSocket::bind((ip, 0)).expect("binding a loopback udp server");
    let addr = socket.local_addr().expect("a bound address");
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    });
    addr
}

/// A UDP server on 127.0.0.1 that answers every datagram with
/// `<name>:<payload>`, so that a reply says which server it came from.
pub fn udp_named(name: &'static str) -> SocketAddr {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("binding a loopback udp server");
    let addr = socket.local_addr().expect("a bound address");
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let mut reply = format!("{name}:").into_bytes();
            reply.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&reply, from);
        }
    });
    addr
}
