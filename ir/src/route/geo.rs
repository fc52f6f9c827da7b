//! Built-in geoip and geosite categories. Only `geoip private` has data
//! here: the networks that never leave a site, so "keep local traffic
//! direct" needs no data file. The compiler refuses any other category with
//! the list of those that exist.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Cidr;

/// Every geoip category this build knows.
pub const GEOIP_CATEGORIES: &[&str] = &["private"];

/// Every geosite category this build knows: none, as no geosite data ships.
pub const GEOSITE_CATEGORIES: &[&str] = &[];

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Cidr {
    Cidr {
        addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        prefix,
    }
}

const fn v6(first: u16, prefix: u8) -> Cidr {
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::new(first, 0, 0, 0, 0, 0, 0, 0)),
        prefix,
    }
}

/// The networks of `geoip private`, the list v2ray's `geoip:private` holds:
/// this network, RFC 1918, shared address space (CGNAT), loopback,
/// link-local, IETF and documentation ranges, benchmarking, multicast,
/// reserved and broadcast; for IPv6 the unspecified and loopback addresses,
/// unique local, link-local, documentation and multicast.
const PRIVATE: &[Cidr] = &[
    v4(0, 0, 0, 0, 8),
    v4(10, 0, 0, 0, 8),
    v4(100, 64, 0, 0, 10),
    v4(127, 0, 0, 0, 8),
    v4(169, 254, 0, 0, 16),
    v4(172, 16, 0, 0, 12),
    v4(192, 0, 0, 0, 24),
    v4(192, 0, 2, 0, 24),
    v4(192, 88, 99, 0, 24),
    v4(192, 168, 0, 0, 16),
    v4(198, 18, 0, 0, 15),
    v4(198, 51, 100, 0, 24),
    v4(203, 0, 113, 0, 24),
    v4(224, 0, 0, 0, 4),
    v4(240, 0, 0, 0, 4),
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        prefix: 128,
    },
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::LOCALHOST),
        prefix: 128,
    },
    v6(0xfc00, 7),
    v6(0xfe80, 10),
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0x0db8, 0, 0, 0, 0, 0, 0)),
        prefix: 32,
    },
    v6(0xff00, 8),
];

/// The networks of a geoip category, by its name in any case.
pub fn geoip_category(name: &str) -> Option<&'static [Cidr]> {
    name.eq_ignore_ascii_case("private").then_some(PRIVATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(ip: &str) -> bool {
        let ip: IpAddr = ip.parse().unwrap();
        geoip_category("private")
            .unwrap()
            .iter()
            .any(|cidr| cidr.contains(ip))
    }

    #[test]
    fn private_holds_the_local_networks_of_both_families() {
        for ip in [
            "10.1.2.3",
            "172.31.255.255",
            "192.168.0.1",
            "127.0.0.1",
            "169.254.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:192.168.1.1",
        ] {
            assert!(private(ip), "{ip}");
        }
    }

    #[test]
    fn private_does_not_hold_public_addresses() {
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "1.1.1.1",
            "2606:4700::1111",
        ] {
            assert!(!private(ip), "{ip}");
        }
    }

    #[test]
    fn every_listed_network_is_well_formed() {
        for cidr in PRIVATE {
            assert_eq!(Cidr::parse(&cidr.to_string()), Ok(*cidr));
        }
    }

    #[test]
    fn category_names_are_case_insensitive_and_unknown_ones_are_none() {
        assert!(geoip_category("PRIVATE").is_some());
        assert!(geoip_category("cn").is_none());
        assert!(GEOIP_CATEGORIES
            .iter()
            .all(|name| geoip_category(name).is_some()));
    }
}
