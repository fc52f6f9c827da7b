//! The listening addresses of this process's own inbounds, so that a flow
//! addressed to one of them is refused instead of entering the proxy again
//! (a CONNECT to ourselves nests a connection per request, without end).
//!
//! An inbound on a wildcard address (`0.0.0.0:P`, `[::]:P`) covers every
//! address of this host with port P: loopback and the unspecified address
//! always, and, where the caller can afford a probe, any other local
//! address. A destination of `0.0.0.0` or `[::]` is where a connect lands on
//! Linux: the loopback address of its family. IPv4-mapped IPv6 addresses
//! compare as the IPv4 address they carry.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use etemenanki_ir::route::canonical;

#[derive(Clone, Debug, Default)]
pub struct OwnInbounds {
    listen: Box<[SocketAddr]>,
}

/// A flow to one of our own inbounds. Copy, and formatted only when it is
/// logged or becomes an error, so refusing a packet allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The listening address of the inbound the flow would reach.
    pub inbound: SocketAddr,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refusing a flow to this proxy's own inbound {}",
            self.inbound
        )
    }
}

impl From<Refused> for io::Error {
    fn from(refused: Refused) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, refused.to_string())
    }
}

impl OwnInbounds {
    pub fn new(listen: impl IntoIterator<Item = SocketAddr>) -> OwnInbounds {
        OwnInbounds {
            listen: listen.into_iter().collect(),
        }
    }

    /// The inbound `destination` would reach, judged without a system call:
    /// an exact address, or loopback and the unspecified address under a
    /// wildcard. For every UDP packet.
    pub fn check(&self, destination: SocketAddr) -> Result<(), Refused> {
        self.check_with(destination, |_| false)
    }

    /// As [`OwnInbounds::check`], and under a wildcard also any other
    /// address of this host, found by binding a socket to it; the probe runs
    /// only for a destination whose port a wildcard inbound listens on. For
    /// a TCP flow, once per connection.
    pub fn check_local(&self, destination: SocketAddr) -> Result<(), Refused> {
        self.check_with(destination, |ip| {
            std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
        })
    }

    fn check_with(
        &self,
        destination: SocketAddr,
        is_local: impl Fn(IpAddr) -> bool,
    ) -> Result<(), Refused> {
        let ip = landing(destination.ip());
        let reaches = |listen: &&SocketAddr| {
            if listen.port() != destination.port() {
                return false;
            }
            let own = canonical(listen.ip());
            if !own.is_unspecified() {
                return own == ip;
            }
            // Our IPv6 wildcard listeners are dual-stack; an IPv4 one hears
            // IPv4 only.
            let family = listen.is_ipv6() || ip.is_ipv4();
            family && (ip.is_loopback() || is_local(ip))
        };
        match self.listen.iter().find(reaches) {
            Some(listen) => Err(Refused { inbound: *listen }),
            None => Ok(()),
        }
    }
}

/// Where a connect to `ip` lands: the unspecified address is the loopback
/// address of its family.
fn landing(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(listen: &[&str]) -> OwnInbounds {
        OwnInbounds::new(listen.iter().map(|a| a.parse().unwrap()))
    }

    fn refused(own: &OwnInbounds, to: &str) -> Option<SocketAddr> {
        own.check(to.parse().unwrap()).err().map(|r| r.inbound)
    }

    #[test]
    fn an_inbound_on_one_address_covers_that_address_and_its_mapped_form() {
        let own = own(&["127.0.0.1:1080"]);
        let inbound = Some("127.0.0.1:1080".parse().unwrap());
        assert_eq!(refused(&own, "127.0.0.1:1080"), inbound);
        assert_eq!(refused(&own, "[::ffff:127.0.0.1]:1080"), inbound);
        assert_eq!(refused(&own, "0.0.0.0:1080"), inbound);
        assert_eq!(refused(&own, "127.0.0.1:1081"), None);
        assert_eq!(refused(&own, "127.0.0.2:1080"), None);
        assert_eq!(refused(&own, "[::1]:1080"), None);
    }

    #[test]
    fn a_wildcard_inbound_covers_loopback_and_the_unspecified_address() {
        let v4 = own(&["0.0.0.0:8080"]);
        for to in ["127.0.0.1:8080", "127.9.9.9:8080", "0.0.0.0:8080"] {
            assert!(refused(&v4, to).is_some(), "{to}");
        }
        assert_eq!(
            refused(&v4, "[::1]:8080"),
            None,
            "an IPv4 wildcard hears no IPv6"
        );
        let dual = own(&["[::]:8080"]);
        for to in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "[::]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(refused(&dual, to).is_some(), "{to}");
        }
        assert_eq!(refused(&dual, "8.8.8.8:8080"), None);
    }

    #[test]
    fn a_wildcard_inbound_covers_every_address_the_probe_finds_local() {
        let own = own(&["0.0.0.0:8080"]);
        let local = |ip: IpAddr| ip == IpAddr::from([192, 0, 2, 7]);
        assert!(own
            .check_with("192.0.2.7:8080".parse().unwrap(), local)
            .is_err());
        assert!(own
            .check_with("192.0.2.8:8080".parse().unwrap(), local)
            .is_ok());
        assert!(own
            .check_with("192.0.2.7:8081".parse().unwrap(), local)
            .is_ok());
    }

    #[test]
    fn the_refusal_is_permission_denied_and_names_the_inbound() {
        let error = io::Error::from(Refused {
            inbound: "127.0.0.1:1080".parse().unwrap(),
        });
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            error.to_string(),
            "refusing a flow to this proxy's own inbound 127.0.0.1:1080"
        );
    }
}
