//! Who a SOCKS UDP association hears.
//!
//! Only the control connection's client is heard: every datagram must come
//! from the control connection's IP, compared in canonical form so an
//! IPv4-mapped IPv6 address equals its IPv4 address. The first forwarded
//! datagram pins the port, and replies go only there. A request naming the
//! control connection's own IP and a non-zero port pins that port up front; a
//! request naming any other source is set aside, neither trusted nor refused.
//! Without a control peer (a Unix socket) the request must name an exact IP
//! and a non-zero port. A relay whose family cannot hear the client is
//! refused before any socket is bound.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::Address;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpectedSender {
    ip: IpAddr,
    port: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotAllowed {
    /// No control peer, and the request does not name an exact source.
    NoSource,
    /// The relay's address family cannot receive the client's datagrams.
    RelayCannotHear,
}

impl fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotAllowed::NoSource => {
                "socks udp: without a control peer the request must name its exact source address and port"
            }
            NotAllowed::RelayCannotHear => "socks udp: the relay cannot hear the client's address family",
        })
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it carries: the form
/// routing compares addresses in too.
pub use etemenanki_ir::route::canonical;

/// Whether a relay socket bound on `relay` receives datagrams from `client`.
fn hears(relay: IpAddr, client: IpAddr) -> bool {
    let client_v4 = canonical(client).is_ipv4();
    match relay {
        IpAddr::V4(_) => client_v4,
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => client_v4,
        IpAddr::V6(v6) if v6.is_unspecified() => true,
        IpAddr::V6(_) => !client_v4,
    }
}

impl ExpectedSender {
    /// `control` is the control connection's peer IP, `requested` the
    /// DST.ADDR/DST.PORT of the UDP ASSOCIATE, `relay` the IP the relay
    /// socket will bind.
    pub fn new(
        control: Option<IpAddr>,
        requested: &Address,
        relay: IpAddr,
    ) -> Result<Self, NotAllowed> {
        let named = match requested {
            Address::Ip(addr) if addr.port() != 0 && !addr.ip().is_unspecified() => Some(*addr),
            _ => None,
        };
        let expected = match control {
            Some(peer) => {
                let ip = canonical(peer);
                let port = named.filter(|n| canonical(n.ip()) == ip).map(|n| n.port());
                ExpectedSender { ip, port }
            }
            None => {
                let named = named.ok_or(NotAllowed::NoSource)?;
                ExpectedSender {
                    ip: canonical(named.ip()),
                    port: Some(named.port()),
                }
            }
        };
        if !hears(relay, expected.ip) {
            return Err(NotAllowed::RelayCannotHear);
        }
        Ok(expected)
    }

    /// Whether a datagram from `from` is the client's.
    pub fn admits(&self, from: SocketAddr) -> bool {
        canonical(from.ip()) == self.ip && self.port.is_none_or(|p| p == from.port())
    }

    /// Pins the port to the first forwarded datagram's, if not pinned yet.
    pub fn pin(&mut self, from: SocketAddr) {
        if self.port.is_none() && canonical(from.ip()) == self.ip {
            self.port = Some(from.port());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn sa(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn any() -> Address {
        Address::Ip(sa("0.0.0.0:0"))
    }

    #[test]
    fn only_the_control_peer_is_heard_and_its_first_datagram_pins_the_port() {
        let mut expected =
            ExpectedSender::new(Some(ip("127.0.0.1")), &any(), ip("127.0.0.1")).unwrap();
        assert!(!expected.admits(sa("127.0.0.2:4000")));
        assert!(expected.admits(sa("127.0.0.1:4000")));
        expected.pin(sa("127.0.0.1:4000"));
        assert!(expected.admits(sa("127.0.0.1:4000")));
        assert!(!expected.admits(sa("127.0.0.1:4001")));
    }

    #[test]
    fn an_ipv4_mapped_address_is_the_ipv4_one() {
        let expected = ExpectedSender::new(Some(ip("::ffff:127.0.0.1")), &any(), ip("::")).unwrap();
        assert!(expected.admits(sa("127.0.0.1:5000")));
        assert!(expected.admits(sa("[::ffff:127.0.0.1]:5000")));
    }

    #[test]
    fn a_request_naming_the_peer_pins_its_port_up_front() {
        let named = Address::Ip(sa("127.0.0.1:7000"));
        let expected = ExpectedSender::new(Some(ip("127.0.0.1")), &named, ip("127.0.0.1")).unwrap();
        assert!(!expected.admits(sa("127.0.0.1:7001")));
        assert!(expected.admits(sa("127.0.0.1:7000")));
    }

    #[test]
    fn a_request_naming_any_other_source_is_set_aside() {
        let named = Address::Ip(sa("10.9.9.9:7000"));
        let expected = ExpectedSender::new(Some(ip("127.0.0.1")), &named, ip("127.0.0.1")).unwrap();
        assert!(!expected.admits(sa("10.9.9.9:7000")));
        assert!(expected.admits(sa("127.0.0.1:7001")));
    }

    #[test]
    fn over_a_unix_socket_the_request_must_name_the_exact_source() {
        assert_eq!(
            ExpectedSender::new(None, &any(), ip("127.0.0.1")),
            Err(NotAllowed::NoSource)
        );
        let domain = Address::Domain("localhost".into(), 7000);
        assert_eq!(
            ExpectedSender::new(None, &domain, ip("127.0.0.1")),
            Err(NotAllowed::NoSource)
        );
        let named = Address::Ip(sa("127.0.0.1:7000"));
        let expected = ExpectedSender::new(None, &named, ip("127.0.0.1")).unwrap();
        assert!(expected.admits(sa("127.0.0.1:7000")));
        assert!(!expected.admits(sa("127.0.0.1:7001")));
    }

    #[test]
    fn a_relay_that_cannot_hear_the_client_is_refused() {
        assert_eq!(
            ExpectedSender::new(Some(ip("::1")), &any(), ip("127.0.0.1")),
            Err(NotAllowed::RelayCannotHear)
        );
        assert_eq!(
            ExpectedSender::new(Some(ip("127.0.0.1")), &any(), ip("::1")),
            Err(NotAllowed::RelayCannotHear)
        );
        assert!(ExpectedSender::new(Some(ip("127.0.0.1")), &any(), ip("::")).is_ok());
        assert!(ExpectedSender::new(Some(ip("::1")), &any(), ip("::")).is_ok());
    }
}
