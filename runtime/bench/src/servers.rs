//! The far ends the benchmark talks to: a TCP sink, a TCP echo and a UDP echo.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::thread;

/// Reads an 8-byte big-endian length, then that many bytes, then answers
/// one byte. No half-close is needed, which not every proxy relays.
pub fn tcp_sink() -> SocketAddr {
    serve_tcp(|mut stream| {
        let mut len = [0u8; 8];
        if stream.read_exact(&mut len).is_err() {
            return;
        }
        let mut left = u64::from_be_bytes(len);
        let mut buf = vec![0u8; 256 * 1024];
        while left > 0 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n as u64),
            }
        }
        let _ = stream.write_all(b"k");
    })
}

pub fn tcp_echo() -> SocketAddr {
    serve_tcp(|mut stream| {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
    })
}

fn serve_tcp(handler: fn(std::net::TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            stream.set_nodelay(true).ok();
            thread::spawn(move || handler(stream));
        }
    });
    addr
}

pub fn udp_echo() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("binding a loopback port");
    let addr = socket.local_addr().expect("a bound address");
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    });
    addr
}
