//! The destination a client asks for: an IP socket address or a domain and port.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use etemenanki_ir::route::Host;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    Ip(SocketAddr),
    Domain(String, u16),
}

impl Address {
    pub fn port(&self) -> u16 {
        match self {
            Address::Ip(addr) => addr.port(),
            Address::Domain(_, port) => *port,
        }
    }

    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Address::Ip(addr) => Some(addr.ip()),
            Address::Domain(..) => None,
        }
    }

    pub fn domain(&self) -> Option<&str> {
        match self {
            Address::Ip(_) => None,
            Address::Domain(name, _) => Some(name),
        }
    }

    /// Parses `host:port`, `[v6]:port` or `v4:port`; a name that is an IP
    /// literal becomes an IP address.
    pub fn parse_host_port(text: &str) -> Option<Address> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Some(Address::Ip(addr));
        }
        let (host, port) = text.rsplit_once(':')?;
        let port = port.parse().ok()?;
        Address::from_host(host, port)
    }

    /// An address from a host as written (a name, an IPv4 literal, an IPv6
    /// literal bare or in brackets) and a port: the one constructor every
    /// decoder uses, so a host that parses as an IP is an IP before routing
    /// (see `etemenanki_ir::route::Host::parse`). `None` for a host that is
    /// neither, control characters and NULs among it.
    pub fn from_host(host: &str, port: u16) -> Option<Address> {
        let mut addr = Address::Ip(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0));
        addr.set_host(host, port)?;
        Some(addr)
    }

    /// Makes this the address of `host` and `port` as [`Address::from_host`]
    /// reads them, reusing this address's name buffer: a decoder that keeps
    /// one address per association allocates nothing per packet. `None`
    /// (and this address unchanged) for a host that is neither IP nor name.
    pub fn set_host(&mut self, host: &str, port: u16) -> Option<()> {
        match Host::parse(host)? {
            Host::Ip(ip) => *self = Address::Ip(SocketAddr::new(ip, port)),
            Host::Domain(name) => match self {
                Address::Domain(held, held_port) => {
                    held.clear();
                    held.push_str(name);
                    *held_port = port;
                }
                Address::Ip(_) => *self = Address::Domain(name.to_owned(), port),
            },
        }
        Some(())
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(addr) => write!(f, "{addr}"),
            Address::Domain(name, port) => write!(f, "{name}:{port}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms_parse() {
        assert_eq!(
            Address::parse_host_port("example.com:443"),
            Some(Address::Domain("example.com".into(), 443))
        );
        assert_eq!(
            Address::parse_host_port("[::1]:80"),
            Some(Address::Ip("[::1]:80".parse().unwrap()))
        );
        assert_eq!(
            Address::parse_host_port("10.0.0.1:8080"),
            Some(Address::Ip("10.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!(Address::parse_host_port("example.com"), None);
        assert_eq!(Address::parse_host_port("example.com:99999"), None);
    }

    #[test]
    fn a_host_that_is_an_ip_literal_is_an_ip_address() {
        for (host, ip) in [
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ] {
            assert_eq!(
                Address::from_host(host, 80),
                Some(Address::Ip(SocketAddr::new(ip.parse().unwrap(), 80))),
                "{host}"
            );
        }
    }

    #[test]
    fn a_host_with_control_characters_is_no_address() {
        assert_eq!(Address::from_host("127.0.0.1\0", 80), None);
        assert_eq!(Address::parse_host_port("127.0.0.1\0:80"), None);
        assert_eq!(Address::from_host("example.com\r\n", 80), None);
    }

    #[test]
    fn setting_a_host_reuses_the_name_buffer_and_refuses_what_is_not_a_host() {
        let mut addr = Address::from_host("a.example", 53).unwrap();
        let Address::Domain(name, _) = &addr else {
            panic!("a name")
        };
        let buffer = name.as_ptr();
        addr.set_host("b.example", 5353).unwrap();
        assert_eq!(addr, Address::Domain("b.example".into(), 5353));
        let Address::Domain(name, _) = &addr else {
            panic!("a name")
        };
        assert_eq!(name.as_ptr(), buffer, "no new allocation for a name");
        addr.set_host("127.0.0.1", 1).unwrap();
        assert_eq!(addr, Address::Ip("127.0.0.1:1".parse().unwrap()));
        assert!(addr.set_host("bad\0name", 2).is_none());
        assert_eq!(
            addr,
            Address::Ip("127.0.0.1:1".parse().unwrap()),
            "unchanged"
        );
    }
}
