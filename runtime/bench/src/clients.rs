//! Blocking clients that do each piece of work directly or through a SOCKS5
//! proxy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use etemenanki_proto::socks::{client, parse_datagram, write_datagram_header};
use etemenanki_proto::Address;

pub struct Dialer {
    pub proxy: Option<SocketAddr>,
}

impl Dialer {
    /// A connection to `to`, through the proxy when there is one.
    pub fn connect(&self, to: SocketAddr) -> TcpStream {
        let Some(proxy) = self.proxy else {
            let stream = TcpStream::connect(to).expect("connecting directly");
            stream.set_nodelay(true).ok();
            return stream;
        };
        let mut stream = TcpStream::connect(proxy).expect("connecting to the proxy");
        stream.set_nodelay(true).ok();
        stream
            .write_all(&client::greeting(false))
            .expect("writing the SOCKS greeting");
        let mut method = [0u8; 2];
        stream
            .read_exact(&mut method)
            .expect("reading the method choice");
        stream
            .write_all(&client::connect_request(&Address::Ip(to)))
            .expect("writing the SOCKS request");
        let mut reply = [0u8; 10];
        stream
            .read_exact(&mut reply)
            .expect("reading the SOCKS reply");
        assert_eq!(reply[1], 0, "the proxy refused the request");
        stream
    }

    /// Sends `bytes` to the sink and waits for its acknowledgement.
    pub fn bulk(&self, sink: SocketAddr, bytes: u64) -> u64 {
        let mut stream = self.connect(sink);
        let chunk = vec![0x5au8; 128 * 1024];
        let total = bytes.div_ceil(chunk.len() as u64) * chunk.len() as u64;
        stream
            .write_all(&total.to_be_bytes())
            .expect("writing the length");
        let mut sent = 0;
        while sent < total {
            stream.write_all(&chunk).expect("writing bulk data");
            sent += chunk.len() as u64;
        }
        let mut ack = [0u8; 1];
        stream
            .read_exact(&mut ack)
            .expect("reading the sink's acknowledgement");
        sent
    }

    /// Connect, one byte there and back, close.
    pub fn ping(&self, echo: SocketAddr) {
        let mut stream = self.connect(echo);
        stream.write_all(b"p").expect("writing a ping");
        let mut pong = [0u8; 1];
        stream.read_exact(&mut pong).expect("reading the pong");
    }

    /// A proxied connection that has moved a byte each way and then idles.
    pub fn hold(&self, echo: SocketAddr) -> TcpStream {
        let mut stream = self.connect(echo);
        stream.write_all(b"h").expect("writing");
        let mut back = [0u8; 1];
        stream.read_exact(&mut back).expect("reading");
        stream
    }

    /// Sequential UDP round trips to the echo server; `None` when the proxy
    /// does not answer UDP ASSOCIATE.
    pub fn udp_round_trips(&self, echo: SocketAddr, count: u32) -> Option<Duration> {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("binding UDP");
        socket.set_read_timeout(Some(Duration::from_secs(2))).ok();
        let mut control = None;
        let relay = match self.proxy {
            None => None,
            Some(proxy) => {
                let mut stream = TcpStream::connect(proxy).ok()?;
                stream.set_read_timeout(Some(Duration::from_secs(2))).ok();
                stream.write_all(&client::greeting(false)).ok()?;
                let mut method = [0u8; 2];
                stream.read_exact(&mut method).ok()?;
                stream.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).ok()?;
                let mut answer = [0u8; 10];
                stream.read_exact(&mut answer).ok()?;
                if answer[1] != 0 || answer[3] != 1 {
                    return None;
                }
                let ip = [answer[4], answer[5], answer[6], answer[7]];
                let mut relay = SocketAddr::from((ip, u16::from_be_bytes([answer[8], answer[9]])));
                if relay.ip().is_unspecified() {
                    relay.set_ip(proxy.ip());
                }
                control = Some(stream);
                Some(relay)
            }
        };
        let mut datagram = Vec::new();
        if relay.is_some() {
            write_datagram_header(&Address::Ip(echo), &mut datagram);
        }
        datagram.extend_from_slice(b"ping");
        let mut buf = [0u8; 2048];
        let started = Instant::now();
        for _ in 0..count {
            socket.send_to(&datagram, relay.unwrap_or(echo)).ok()?;
            let (n, _) = socket.recv_from(&mut buf).ok()?;
            if relay.is_some() {
                parse_datagram(&buf[..n]).ok()?;
            }
        }
        let elapsed = started.elapsed();
        drop(control);
        Some(elapsed)
    }
}
