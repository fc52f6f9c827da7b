//! The SOCKS5 address (ATYP, address, port) of SIP022's headers, written
//! into a slice so a packet's header can be built in place in front of its
//! payload, and read with the SOCKS decoder every inbound uses.

use std::net::{IpAddr, SocketAddr};

use super::Ss2022Error;
use crate::Address;

const ATYP_V4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_V6: u8 = 0x04;

/// The most bytes an address takes: type, length, a 255-byte name, port.
pub const MAX_LEN: usize = 1 + 1 + 255 + 2;

/// A name is cut at 255 bytes, the most its length byte can say.
fn name_bytes(name: &str) -> &[u8] {
    &name.as_bytes()[..name.len().min(255)]
}

pub fn encoded_len(addr: &Address) -> usize {
    match addr {
        Address::Ip(SocketAddr::V4(_)) => 1 + 4 + 2,
        Address::Ip(SocketAddr::V6(_)) => 1 + 16 + 2,
        Address::Domain(name, _) => 1 + 1 + name_bytes(name).len() + 2,
    }
}

/// Writes `addr` at the start of `out`, which holds at least
/// `encoded_len(addr)` bytes; returns that length.
pub fn write(addr: &Address, out: &mut [u8]) -> usize {
    let len = encoded_len(addr);
    let (head, port) = match addr {
        Address::Ip(socket) => {
            match socket.ip() {
                IpAddr::V4(ip) => {
                    out[0] = ATYP_V4;
                    out[1..5].copy_from_slice(&ip.octets());
                }
                IpAddr::V6(ip) => {
                    out[0] = ATYP_V6;
                    out[1..17].copy_from_slice(&ip.octets());
                }
            }
            (len - 2, socket.port())
        }
        Address::Domain(name, port) => {
            let name = name_bytes(name);
            out[0] = ATYP_DOMAIN;
            out[1] = name.len() as u8;
            out[2..2 + name.len()].copy_from_slice(name);
            (len - 2, *port)
        }
    };
    out[head..len].copy_from_slice(&port.to_be_bytes());
    len
}

/// Reads the address at the start of `buf`, which must hold all of it.
pub fn read(buf: &[u8]) -> Result<(Address, usize), Ss2022Error> {
    match crate::socks::read_address(buf) {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(Ss2022Error::Short),
        Err(_) => Err(Ss2022Error::Address),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_type_round_trips_at_its_encoded_length() {
        for addr in [
            Address::Ip("192.0.2.1:53".parse().unwrap()),
            Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
            Address::Domain("dns.example".into(), 853),
        ] {
            let mut buf = [0xaa; MAX_LEN];
            let len = write(&addr, &mut buf);
            assert_eq!(len, encoded_len(&addr));
            assert_eq!(read(&buf[..len]), Ok((addr, len)));
            assert_eq!(read(&buf[..len - 1]), Err(Ss2022Error::Short));
        }
        assert_eq!(read(&[0x09, 0, 0]), Err(Ss2022Error::Address));
    }
}
