//! The SOCKS5 UDP request header (RFC 1928 section 7):
//! `RSV(2) FRAG(1) ATYP DST.ADDR DST.PORT DATA`.

use std::fmt;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{read_address_into, write_address};
use crate::Address;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpError {
    Short,
    /// Fragmentation is optional in RFC 1928 and not implemented: a fragment
    /// is dropped.
    Fragment,
    Address(&'static str),
}

impl fmt::Display for UdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UdpError::Short => f.write_str("socks udp: datagram shorter than its header"),
            UdpError::Fragment => f.write_str("socks udp: fragments are not supported"),
            UdpError::Address(reason) => f.write_str(reason),
        }
    }
}

/// Splits a client datagram into its destination and payload.
pub fn parse_datagram(datagram: &[u8]) -> Result<(Address, &[u8]), UdpError> {
    let mut addr = Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    let start = parse_datagram_into(datagram, &mut addr)?;
    Ok((addr, &datagram[start..]))
}

/// As [`parse_datagram`], into `destination`, whose name buffer is reused
/// (an association keeps one, so a packet to a name allocates nothing);
/// returns where the payload starts.
pub fn parse_datagram_into(datagram: &[u8], destination: &mut Address) -> Result<usize, UdpError> {
    if datagram.len() < 4 {
        return Err(UdpError::Short);
    }
    if datagram[2] != 0 {
        return Err(UdpError::Fragment);
    }
    match read_address_into(&datagram[3..], destination) {
        Ok(Some(used)) => Ok(3 + used),
        Ok(None) => Err(UdpError::Short),
        Err(reason) => Err(UdpError::Address(reason)),
    }
}

/// Appends the header a reply from `from` carries back to the client.
pub fn write_datagram_header(from: &Address, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0, 0]);
    write_address(from, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_for_every_address_type() {
        for addr in [
            Address::Ip("192.0.2.1:53".parse().unwrap()),
            Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
            Address::Domain("dns.example".into(), 53),
        ] {
            let mut datagram = Vec::new();
            write_datagram_header(&addr, &mut datagram);
            datagram.extend_from_slice(b"payload");
            let (parsed, payload) = parse_datagram(&datagram).unwrap();
            assert_eq!(parsed, addr);
            assert_eq!(payload, b"payload");
        }
    }

    #[test]
    fn a_socks5_udp_datagram_to_a_domain_that_is_an_ip_literal_is_an_ip() {
        let (to, payload) = parse_datagram(b"\0\0\0\x03\x09127.0.0.1\x00\x35dns").unwrap();
        assert_eq!(to, Address::Ip("127.0.0.1:53".parse().unwrap()));
        assert_eq!(payload, b"dns");
        assert!(matches!(
            parse_datagram(b"\0\0\0\x03\x0a127.0.0.1\0\x00\x35dns"),
            Err(UdpError::Address(_))
        ));
    }

    #[test]
    fn fragments_and_short_datagrams_are_errors() {
        assert_eq!(
            parse_datagram(b"\0\0\x01\x01\x7f\0\0\x01\0\x35x"),
            Err(UdpError::Fragment)
        );
        assert_eq!(parse_datagram(b"\0\0\0\x01\x7f\0"), Err(UdpError::Short));
        assert_eq!(parse_datagram(b"\0\0"), Err(UdpError::Short));
        assert!(matches!(
            parse_datagram(b"\0\0\0\x09abc"),
            Err(UdpError::Address(_))
        ));
    }
}
