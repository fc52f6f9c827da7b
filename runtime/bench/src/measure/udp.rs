//! UDP round trips: one datagram at a time to the echo server and back,
//! through a SOCKS5 UDP association when there is a proxy.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::Rate;
use crate::socks5::client;
use crate::socks5::codec::{self, Addr};

/// The payload size: a small request, as DNS or a game would send.
const PAYLOAD: usize = 64;
/// A datagram not answered within this long counts as lost.
const WAIT: Duration = Duration::from_secs(1);
/// More losses than this end the measurement with an error.
const MAX_LOST: u64 = 10;

pub struct Udp {
    pub rate: Rate,
    pub lost: u64,
}

/// Where datagrams go and how they are wrapped.
struct Path {
    socket: UdpSocket,
    /// The echo server's address for the SOCKS5 header; `None` when direct.
    header_for: Option<SocketAddr>,
    /// Keeps the association alive while the measurement runs.
    _control: Option<std::net::TcpStream>,
}

impl Path {
    fn open(via: Option<SocketAddr>, echo: SocketAddr) -> io::Result<Path> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(WAIT))?;
        let Some(proxy) = via else {
            socket.connect(echo)?;
            return Ok(Path {
                socket,
                header_for: None,
                _control: None,
            });
        };
        let (control, relay) = client::udp_associate(proxy, socket.local_addr()?)?;
        socket.connect(relay)?;
        Ok(Path {
            socket,
            header_for: Some(echo),
            _control: Some(control),
        })
    }

    /// The payload of a received datagram, checked to come from the echo
    /// server when it went through the proxy.
    fn payload<'a>(&self, datagram: &'a [u8]) -> io::Result<&'a [u8]> {
        let Some(echo) = self.header_for else {
            return Ok(datagram);
        };
        let (source, payload) = codec::decode_udp(datagram)?;
        if source != Addr::Ip(echo) {
            return Err(io::Error::other(format!(
                "relayed datagram names source {source:?}, expected {echo}"
            )));
        }
        Ok(payload)
    }
}

/// An association through `proxy` after one round trip to `echo`, held
/// open and idle until dropped: what the idle-association figure counts.
pub struct Association {
    _path: Path,
}

impl Association {
    pub fn open(proxy: SocketAddr, echo: SocketAddr) -> io::Result<Association> {
        let path = Path::open(Some(proxy), echo)?;
        let mut out = Vec::with_capacity(PAYLOAD + 32);
        codec::encode_udp_header(echo, &mut out);
        let header_len = out.len();
        out.resize(header_len + PAYLOAD, 0x5a);
        path.socket.send(&out)?;
        let mut inbound = vec![0u8; 2048];
        let n = path.socket.recv(&mut inbound)?;
        if path.payload(&inbound[..n])? != &out[header_len..] {
            return Err(io::Error::other("the echo came back changed"));
        }
        Ok(Association { _path: path })
    }
}

pub fn run(via: Option<SocketAddr>, echo: SocketAddr, max: u64, time: Duration) -> io::Result<Udp> {
    let path = Path::open(via, echo)?;
    let mut out = Vec::with_capacity(PAYLOAD + 32);
    if let Some(echo) = path.header_for {
        codec::encode_udp_header(echo, &mut out);
    }
    let header_len = out.len();
    out.resize(header_len + PAYLOAD, 0x5a);
    let mut inbound = vec![0u8; 64 * 1024];
    let mut lost = 0;
    let mut count = 0;
    let start = Instant::now();
    while count < max && start.elapsed() < time {
        let seq = count + lost;
        out[header_len..header_len + 8].copy_from_slice(&seq.to_be_bytes());
        path.socket.send(&out)?;
        // Read until this datagram's echo comes back; a late echo of an
        // earlier one is skipped.
        let answered = loop {
            match path.socket.recv(&mut inbound) {
                Ok(n) => {
                    let payload = path.payload(&inbound[..n])?;
                    if payload.len() == PAYLOAD && payload[..8] == seq.to_be_bytes() {
                        break true;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break false
                }
                Err(e) => return Err(e),
            }
        };
        if answered {
            count += 1;
        } else {
            lost += 1;
            if lost > MAX_LOST {
                return Err(io::Error::other(format!(
                    "{lost} datagrams unanswered after {count} round trips"
                )));
            }
        }
    }
    Ok(Udp {
        rate: Rate {
            count,
            elapsed: start.elapsed(),
        },
        lost,
    })
}
