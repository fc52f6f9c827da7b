//! SOCKS 4, 4a and 5: the server handshake, replies, the UDP datagram header
//! and the rules for who a UDP association hears.

pub mod client;
mod expected;
mod server;
mod udp;

pub use expected::{canonical, ExpectedSender, NotAllowed};
pub use server::{status_of, Command, Handshake, Request, Version};
pub use udp::{parse_datagram, parse_datagram_into, write_datagram_header, UdpError};

/// SOCKS5 reply codes (RFC 1928 section 6).
pub mod status {
    pub const SUCCEEDED: u8 = 0x00;
    pub const GENERAL_FAILURE: u8 = 0x01;
    pub const NOT_ALLOWED: u8 = 0x02;
    pub const NETWORK_UNREACHABLE: u8 = 0x03;
    pub const HOST_UNREACHABLE: u8 = 0x04;
    pub const CONNECTION_REFUSED: u8 = 0x05;
    pub const TTL_EXPIRED: u8 = 0x06;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x07;
    pub const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;
}

const ATYP_V4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_V6: u8 = 0x04;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::Address;

/// Reads a SOCKS5 address (ATYP, address, port) from the start of `buf`.
/// `Ok(None)` means more bytes are needed. Trojan names addresses the same
/// way.
pub(crate) fn read_address(buf: &[u8]) -> Result<Option<(Address, usize)>, &'static str> {
    let mut addr = Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    Ok(read_address_into(buf, &mut addr)?.map(|used| (addr, used)))
}

/// As [`read_address`], into `addr`, whose name buffer is reused; returns
/// the bytes used.
fn read_address_into(buf: &[u8], addr: &mut Address) -> Result<Option<usize>, &'static str> {
    let Some(&atyp) = buf.first() else {
        return Ok(None);
    };
    let (ip, at) = match atyp {
        ATYP_V4 => {
            if buf.len() < 1 + 4 + 2 {
                return Ok(None);
            }
            let ip = Ipv4Addr::new(buf[1], buf[2], buf[3], buf[4]);
            (IpAddr::V4(ip), 5)
        }
        ATYP_V6 => {
            if buf.len() < 1 + 16 + 2 {
                return Ok(None);
            }
            let octets: [u8; 16] = buf[1..17].try_into().expect("16 bytes");
            (IpAddr::V6(Ipv6Addr::from(octets)), 17)
        }
        ATYP_DOMAIN => {
            let Some(&len) = buf.get(1) else {
                return Ok(None);
            };
            let len = usize::from(len);
            if buf.len() < 2 + len + 2 {
                return Ok(None);
            }
            let port = u16::from_be_bytes([buf[2 + len], buf[3 + len]]);
            set_domain(addr, &buf[2..2 + len], port)?;
            return Ok(Some(2 + len + 2));
        }
        _ => return Err("socks: unknown address type"),
    };
    let port = u16::from_be_bytes([buf[at], buf[at + 1]]);
    *addr = Address::Ip(SocketAddr::new(ip, port));
    Ok(Some(at + 2))
}

/// The address a SOCKS5 or SOCKS4a domain field names: an IP when the text
/// is an IP literal, so it routes as one.
fn domain_address(name: &[u8], port: u16) -> Result<Address, &'static str> {
    let mut addr = Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    set_domain(&mut addr, name, port)?;
    Ok(addr)
}

fn set_domain(addr: &mut Address, name: &[u8], port: u16) -> Result<(), &'static str> {
    let name = std::str::from_utf8(name).map_err(|_| "socks: the domain is not UTF-8")?;
    if name.is_empty() {
        return Err("socks: the domain is empty");
    }
    addr.set_host(name, port)
        .ok_or("socks: the domain is not a valid host name")
}

/// Appends a SOCKS5 address for an IP socket address.
fn write_socket_addr(addr: SocketAddr, out: &mut Vec<u8>) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(ATYP_V4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(ATYP_V6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// The bytes [`put_address`] writes for `addr`: at most 259 (type, length,
/// a 255-byte name, port).
pub(crate) fn address_len(addr: &Address) -> usize {
    match addr {
        Address::Ip(SocketAddr::V4(_)) => 1 + 4 + 2,
        Address::Ip(SocketAddr::V6(_)) => 1 + 16 + 2,
        Address::Domain(name, _) => 1 + 1 + name.len().min(255) + 2,
    }
}

/// Writes a SOCKS5 address into `out`, which is [`address_len`] bytes long:
/// for a header sealed in place in front of a payload.
pub(crate) fn put_address(addr: &Address, out: &mut [u8]) {
    let port = match addr {
        Address::Ip(SocketAddr::V4(v4)) => {
            out[0] = ATYP_V4;
            out[1..5].copy_from_slice(&v4.ip().octets());
            v4.port()
        }
        Address::Ip(SocketAddr::V6(v6)) => {
            out[0] = ATYP_V6;
            out[1..17].copy_from_slice(&v6.ip().octets());
            v6.port()
        }
        Address::Domain(name, port) => {
            let name = &name.as_bytes()[..name.len().min(255)];
            out[0] = ATYP_DOMAIN;
            out[1] = name.len() as u8;
            out[2..2 + name.len()].copy_from_slice(name);
            *port
        }
    };
    let at = out.len() - 2;
    out[at..].copy_from_slice(&port.to_be_bytes());
}

/// Appends a SOCKS5 address.
pub(crate) fn write_address(addr: &Address, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + address_len(addr), 0);
    put_address(addr, &mut out[start..]);
}
