//! SOCKS 4, 4a and 5: the server handshake, replies, the UDP datagram header
//! and the rules for who a UDP association hears.

pub mod client;
mod expected;
mod server;
mod udp;

pub use expected::{canonical, ExpectedSender, NotAllowed};
pub use server::{status_of, Command, Handshake, Request, Version};
pub use udp::{parse_datagram, write_datagram_header, UdpError};

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
/// `Ok(None)` means more bytes are needed.
pub(crate) fn read_address(buf: &[u8]) -> Result<Option<(Address, usize)>, &'static str> {
    let Some(&atyp) = buf.first() else {
        return Ok(None);
    };
    let (addr, at) = match atyp {
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
            let addr = domain_address(&buf[2..2 + len], port)?;
            return Ok(Some((addr, 2 + len + 2)));
        }
        _ => return Err("socks: unknown address type"),
    };
    let port = u16::from_be_bytes([buf[at], buf[at + 1]]);
    Ok(Some((Address::Ip(SocketAddr::new(addr, port)), at + 2)))
}

/// The address a SOCKS5 or SOCKS4a domain field names: an IP when the text
/// is an IP literal, so it routes as one.
fn domain_address(name: &[u8], port: u16) -> Result<Address, &'static str> {
    let name = std::str::from_utf8(name).map_err(|_| "socks: the domain is not UTF-8")?;
    if name.is_empty() {
        return Err("socks: the domain is empty");
    }
    Address::from_host(name, port).ok_or("socks: the domain is not a valid host name")
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

/// Appends a SOCKS5 address.
fn write_address(addr: &Address, out: &mut Vec<u8>) {
    match addr {
        Address::Ip(addr) => write_socket_addr(*addr, out),
        Address::Domain(name, port) => {
            let name = &name.as_bytes()[..name.len().min(255)];
            out.push(ATYP_DOMAIN);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
            out.extend_from_slice(&port.to_be_bytes());
        }
    }
}
