//! VLESS: the request header a stream opens with, the response header the
//! server puts in front of its first bytes, the length-prefixed UDP
//! packets of a UDP request, and the server core ([`server`]), which also
//! takes the mux command: a Mux.Cool stream ([`crate::mux`]), as sing-box
//! and Xray clients send UDP, and v2ray and Xray clients with mux enabled
//! send every flow.
//!
//! Request: version 0, the 16-byte user id, an addons length of 0 (no
//! addons), the command (1 TCP, 2 UDP, 3 mux), the port big-endian, then
//! the address (1 IPv4, 2 domain with a length byte, 3 IPv6); neither
//! follows the mux command. Response: the version, an addons length and
//! that many addons bytes, which the client skips. VLESS has no refusal: a
//! server that does not know the id closes the connection, so a refused
//! flow is one whose first read meets the end of the stream before the
//! response header.

mod request;
mod response;
pub mod server;
mod udp;

pub use request::{Request, REQUEST_HEADER_MAX};
pub use response::ResponseHeader;
pub use udp::UdpFraming;

use crate::Address;

const VERSION: u8 = 0;

const COMMAND_TCP: u8 = 1;
const COMMAND_UDP: u8 = 2;
/// Mux.Cool ([`crate::mux`]): no address follows the command.
const COMMAND_MUX: u8 = 3;

const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 2;
const ATYP_V6: u8 = 3;

/// Appends the port and the address, in VLESS's order (port first) and
/// with its address types. A name longer than 255 bytes is cut, as no
/// validated destination has one.
pub(crate) fn write_port_address(addr: &Address, out: &mut Vec<u8>) {
    out.extend_from_slice(&addr.port().to_be_bytes());
    match addr {
        Address::Ip(addr) => match addr.ip() {
            std::net::IpAddr::V4(ip) => {
                out.push(ATYP_V4);
                out.extend_from_slice(&ip.octets());
            }
            std::net::IpAddr::V6(ip) => {
                out.push(ATYP_V6);
                out.extend_from_slice(&ip.octets());
            }
        },
        Address::Domain(name, _) => {
            let name = &name.as_bytes()[..name.len().min(255)];
            out.push(ATYP_DOMAIN);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
        }
    }
}

/// Reads the port and the address [`write_port_address`] writes (VMess's
/// request header names its target the same way) from the start of `buf`.
/// `Ok(None)` means more bytes are needed; `Err` an unknown address type
/// or a name that is no host name.
pub(crate) fn read_port_address(buf: &[u8]) -> Result<Option<(Address, usize)>, ()> {
    let (Some(port), Some(&atyp)) = (buf.first_chunk::<2>(), buf.get(2)) else {
        return Ok(None);
    };
    let port = u16::from_be_bytes(*port);
    let rest = &buf[3..];
    let (address, used) = match atyp {
        ATYP_V4 => match rest.first_chunk::<4>() {
            Some(ip) => (Address::Ip((*ip, port).into()), 4),
            None => return Ok(None),
        },
        ATYP_V6 => match rest.first_chunk::<16>() {
            Some(ip) => (Address::Ip((*ip, port).into()), 16),
            None => return Ok(None),
        },
        ATYP_DOMAIN => {
            let Some(&len) = rest.first() else {
                return Ok(None);
            };
            let len = usize::from(len);
            let Some(name) = rest.get(1..1 + len) else {
                return Ok(None);
            };
            let name = std::str::from_utf8(name).map_err(|_| ())?;
            let address = Address::from_host(name, port).ok_or(())?;
            (address, 1 + len)
        }
        _ => return Err(()),
    };
    Ok(Some((address, 3 + used)))
}
