//! VLESS, client side: the request header a stream opens with, the
//! response header the server puts in front of its first bytes, and the
//! length-prefixed UDP packets of a UDP request.
//!
//! Request: version 0, the 16-byte user id, an addons length of 0 (no
//! addons), the command (1 TCP, 2 UDP), the port big-endian, then the
//! address (1 IPv4, 2 domain with a length byte, 3 IPv6). Response: the
//! version, an addons length and that many addons bytes, which the client
//! skips. VLESS has no refusal: a server that does not know the id closes
//! the connection, so a refused flow is one whose first read meets the end
//! of the stream before the response header.

mod request;
mod response;
mod udp;

pub use request::{Request, REQUEST_HEADER_MAX};
pub use response::ResponseHeader;
pub use udp::UdpFraming;

use crate::Address;

const VERSION: u8 = 0;

const COMMAND_TCP: u8 = 1;
const COMMAND_UDP: u8 = 2;

const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 2;
const ATYP_V6: u8 = 3;

/// Appends the port and the address, in VLESS's order (port first) and
/// with its address types. A name longer than 255 bytes is cut, as no
/// validated destination has one.
fn write_port_address(addr: &Address, out: &mut Vec<u8>) {
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
