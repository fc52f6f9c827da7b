//! The bytes of a SOCKS5 client (RFC 1928): the greeting, requests, replies
//! and the UDP request header. Pure functions over buffers, so the client's
//! wire format is tested without sockets.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const VERSION: u8 = 5;
/// Method "no authentication required".
pub const NO_AUTH: u8 = 0;
pub const CMD_CONNECT: u8 = 1;
pub const CMD_UDP_ASSOCIATE: u8 = 3;

const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_V6: u8 = 4;

/// The greeting: version 5, one method, "no authentication".
pub const GREETING: [u8; 3] = [VERSION, 1, NO_AUTH];

/// An address as SOCKS5 carries it: an IP socket address or a domain name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    Ip(SocketAddr),
    Domain(String, u16),
}

/// A server's reply to a request: the code and the bound address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: u8,
    pub bound: Addr,
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Checks the server's method selection (`05 00`).
pub fn check_method(selection: [u8; 2]) -> io::Result<()> {
    match selection {
        [VERSION, NO_AUTH] => Ok(()),
        [VERSION, 0xff] => Err(invalid(
            "socks5 server accepts none of the offered methods".to_owned(),
        )),
        [VERSION, method] => Err(invalid(format!(
            "socks5 server chose method {method}, which was not offered"
        ))),
        [version, _] => Err(invalid(format!(
            "socks5 server answered with version {version}"
        ))),
    }
}

/// Appends `ATYP ADDR PORT` for an IP socket address.
pub fn encode_addr(addr: SocketAddr, out: &mut Vec<u8>) {
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

/// Decodes `ATYP ADDR PORT` at the start of `buf`; returns the address and
/// the bytes it took.
pub fn decode_addr(buf: &[u8]) -> io::Result<(Addr, usize)> {
    let short = || invalid(format!("socks5 address truncated at {} bytes", buf.len()));
    let (&atyp, rest) = buf.split_first().ok_or_else(short)?;
    let (addr, len) = match atyp {
        ATYP_V4 => {
            let raw: [u8; 6] = rest
                .get(..6)
                .ok_or_else(short)?
                .try_into()
                .expect("6 bytes");
            let ip = Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]);
            let port = u16::from_be_bytes([raw[4], raw[5]]);
            (Addr::Ip(SocketAddr::new(ip.into(), port)), 1 + 6)
        }
        ATYP_V6 => {
            let raw: [u8; 18] = rest
                .get(..18)
                .ok_or_else(short)?
                .try_into()
                .expect("18 bytes");
            let octets: [u8; 16] = raw[..16].try_into().expect("16 bytes");
            let port = u16::from_be_bytes([raw[16], raw[17]]);
            let ip = Ipv6Addr::from(octets);
            (Addr::Ip(SocketAddr::new(ip.into(), port)), 1 + 18)
        }
        ATYP_DOMAIN => {
            let len = usize::from(*rest.first().ok_or_else(short)?);
            let raw = rest.get(1..1 + len + 2).ok_or_else(short)?;
            let name = std::str::from_utf8(&raw[..len])
                .map_err(|_| invalid("socks5 domain name is not utf-8".to_owned()))?;
            let port = u16::from_be_bytes([raw[len], raw[len + 1]]);
            (Addr::Domain(name.to_owned(), port), 1 + 1 + len + 2)
        }
        other => return Err(invalid(format!("socks5 address type {other} is unknown"))),
    };
    Ok((addr, len))
}

/// Appends a request: `VER CMD RSV ATYP ADDR PORT`.
pub fn encode_request(cmd: u8, dst: SocketAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(&[VERSION, cmd, 0]);
    encode_addr(dst, out);
}

/// The full length of a reply, from its first five bytes (the fifth is the
/// first byte of the address: a domain's length).
pub fn reply_len(head: [u8; 5]) -> io::Result<usize> {
    match head[3] {
        ATYP_V4 => Ok(4 + 4 + 2),
        ATYP_V6 => Ok(4 + 16 + 2),
        ATYP_DOMAIN => Ok(4 + 1 + usize::from(head[4]) + 2),
        other => Err(invalid(format!("socks5 address type {other} is unknown"))),
    }
}

/// Decodes a whole reply: `VER REP RSV ATYP ADDR PORT`.
pub fn decode_reply(buf: &[u8]) -> io::Result<Reply> {
    match buf {
        [VERSION, code, _, rest @ ..] => {
            let (bound, _) = decode_addr(rest)?;
            Ok(Reply { code: *code, bound })
        }
        [version, ..] => Err(invalid(format!(
            "socks5 server answered with version {version}"
        ))),
        [] => Err(invalid("socks5 reply is empty".to_owned())),
    }
}

/// What a reply code means (RFC 1928 section 6).
pub fn reply_text(code: u8) -> &'static str {
    match code {
        0 => "succeeded",
        1 => "general socks server failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "ttl expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unassigned reply code",
    }
}

/// Appends the UDP request header `RSV RSV FRAG ATYP ADDR PORT` for a
/// datagram to `dst`; the payload follows it.
pub fn encode_udp_header(dst: SocketAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0, 0]);
    encode_addr(dst, out);
}

/// Splits a relayed datagram into its source address and payload. A
/// fragment (FRAG not 0) is refused: nothing in this benchmark sends one.
pub fn decode_udp(datagram: &[u8]) -> io::Result<(Addr, &[u8])> {
    let [_, _, frag, rest @ ..] = datagram else {
        return Err(invalid(format!(
            "socks5 udp datagram of {} bytes has no header",
            datagram.len()
        )));
    };
    if *frag != 0 {
        return Err(invalid(format!(
            "socks5 udp fragment {frag} is not supported"
        )));
    }
    let (addr, len) = decode_addr(rest)?;
    Ok((addr, &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn connect_request_to_an_ipv4_target_is_ten_bytes() {
        let mut out = Vec::new();
        encode_request(CMD_CONNECT, v4("127.0.0.1:8080"), &mut out);
        assert_eq!(out, [5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90]);
    }

    #[test]
    fn udp_associate_request_to_an_ipv6_address_carries_sixteen_octets() {
        let mut out = Vec::new();
        encode_request(CMD_UDP_ASSOCIATE, v4("[::1]:53"), &mut out);
        let mut expected = vec![5, 3, 0, 4];
        expected.extend_from_slice(&[0; 15]);
        expected.extend_from_slice(&[1, 0, 53]);
        assert_eq!(out, expected);
    }

    #[test]
    fn method_selection_other_than_no_auth_is_refused_with_its_reason() {
        assert!(check_method([5, 0]).is_ok());
        let none = check_method([5, 0xff]).unwrap_err();
        assert_eq!(
            none.to_string(),
            "socks5 server accepts none of the offered methods"
        );
        let socks4 = check_method([4, 0]).unwrap_err();
        assert_eq!(socks4.to_string(), "socks5 server answered with version 4");
    }

    #[test]
    fn reply_length_follows_the_address_type() {
        assert_eq!(reply_len([5, 0, 0, 1, 127]).unwrap(), 10);
        assert_eq!(reply_len([5, 0, 0, 4, 0]).unwrap(), 22);
        assert_eq!(reply_len([5, 0, 0, 3, 9]).unwrap(), 16);
        assert!(reply_len([5, 0, 0, 2, 0]).is_err());
    }

    #[test]
    fn reply_decodes_code_and_bound_address() {
        let reply = decode_reply(&[5, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x38]).unwrap();
        assert_eq!(
            reply,
            Reply {
                code: 0,
                bound: Addr::Ip(v4("127.0.0.1:1080"))
            }
        );
        let refused = decode_reply(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(reply_text(refused.code), "connection refused");
    }

    #[test]
    fn reply_with_a_domain_bound_address_decodes_the_name() {
        let mut raw = vec![5, 0, 0, 3, 9];
        raw.extend_from_slice(b"localhost");
        raw.extend_from_slice(&[0, 80]);
        let reply = decode_reply(&raw).unwrap();
        assert_eq!(reply.bound, Addr::Domain("localhost".to_owned(), 80));
    }

    #[test]
    fn truncated_reply_is_an_error_not_a_panic() {
        let err = decode_reply(&[5, 0, 0, 1, 127, 0]).unwrap_err();
        assert_eq!(err.to_string(), "socks5 address truncated at 3 bytes");
        assert!(decode_reply(&[]).is_err());
        assert!(decode_reply(&[5, 0, 0, 4, 0, 0]).is_err());
    }

    #[test]
    fn udp_header_round_trips_with_its_payload() {
        let mut datagram = Vec::new();
        encode_udp_header(v4("127.0.0.1:7"), &mut datagram);
        assert_eq!(datagram, [0, 0, 0, 1, 127, 0, 0, 1, 0, 7]);
        datagram.extend_from_slice(b"ping");
        let (source, payload) = decode_udp(&datagram).unwrap();
        assert_eq!(source, Addr::Ip(v4("127.0.0.1:7")));
        assert_eq!(payload, b"ping");
    }

    #[test]
    fn udp_header_for_ipv6_round_trips() {
        let mut datagram = Vec::new();
        encode_udp_header(v4("[::1]:5353"), &mut datagram);
        assert_eq!(datagram.len(), 3 + 1 + 16 + 2);
        let (source, payload) = decode_udp(&datagram).unwrap();
        assert_eq!(source, Addr::Ip(v4("[::1]:5353")));
        assert!(payload.is_empty());
    }

    #[test]
    fn udp_fragment_and_short_datagram_are_refused() {
        let fragment = [0, 0, 1, 1, 127, 0, 0, 1, 0, 7, b'x'];
        assert_eq!(
            decode_udp(&fragment).unwrap_err().to_string(),
            "socks5 udp fragment 1 is not supported"
        );
        assert_eq!(
            decode_udp(&[0, 0]).unwrap_err().to_string(),
            "socks5 udp datagram of 2 bytes has no header"
        );
        assert!(decode_udp(&[0, 0, 0, 1, 127]).is_err());
    }
}
