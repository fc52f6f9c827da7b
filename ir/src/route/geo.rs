//! Built-in geoip and geosite categories. Only `geoip private` has data
//! here: the networks that never leave a site, so "keep local traffic
//! direct" (or "never let a client into the local network") needs no data
//! file. The compiler refuses any other category with
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

const fn v6(segments: [u16; 8], prefix: u8) -> Cidr {
    let [a, b, c, d, e, f, g, h] = segments;
    Cidr {
        addr: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)),
        prefix,
    }
}

/// The networks of `geoip private`: every block of the IANA IPv4 and IPv6
/// Special-Purpose Address Registries that is not globally reachable, and
/// the multicast, reserved and broadcast space besides. A flow to one of
/// them stays on this host or its site, or goes nowhere. IPv4-mapped IPv6
/// addresses (`::ffff:10.0.0.1`) match as the IPv4 address they carry.
///
/// Left out, as the registries mark them globally reachable: the AS112 and
/// AMT anycast blocks (192.31.196.0/24, 192.52.193.0/24, 192.175.48.0/24,
/// 2001:3::/32, 2001:4:112::/48), ORCHIDv2 (2001:20::/28), 6to4 (2002::/16)
/// and the NAT64 well-known prefix 64:ff9b::/96.
const PRIVATE: &[Cidr] = &[
    v4(0, 0, 0, 0, 8),                        // "this network", the unspecified address
    v4(10, 0, 0, 0, 8),                       // private use (RFC 1918)
    v4(100, 64, 0, 0, 10),                    // shared address space, CGNAT (RFC 6598)
    v4(127, 0, 0, 0, 8),                      // loopback
    v4(169, 254, 0, 0, 16),                   // link-local, cloud metadata services
    v4(172, 16, 0, 0, 12),                    // private use (RFC 1918)
    v4(192, 0, 0, 0, 24),                     // IETF protocol assignments, DS-Lite
    v4(192, 0, 2, 0, 24),                     // documentation, TEST-NET-1
    v4(192, 88, 99, 0, 24),                   // deprecated 6to4 relay anycast
    v4(192, 168, 0, 0, 16),                   // private use (RFC 1918)
    v4(198, 18, 0, 0, 15),                    // benchmarking
    v4(198, 51, 100, 0, 24),                  // documentation, TEST-NET-2
    v4(203, 0, 113, 0, 24),                   // documentation, TEST-NET-3
    v4(224, 0, 0, 0, 4),                      // multicast
    v4(240, 0, 0, 0, 4),                      // reserved, and 255.255.255.255 broadcast
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128),        // unspecified
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128),        // loopback
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96),         // deprecated IPv4-compatible
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), // local-use IPv4/IPv6 translation
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64),     // discard-only
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),    // Teredo
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48),    // benchmarking
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28), // deprecated ORCHID
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),    // documentation
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),    // segment routing SIDs
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),     // unique local
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),    // link-local
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),    // deprecated site-local
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),     // multicast
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
            "127.255.255.254",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.251",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::127.0.0.1",
            "64:ff9b:1::a00:1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "fc00::1",
            "fd00::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "::ffff:192.168.1.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
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
            "192.0.1.1",
            "192.31.196.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "64:ff9b::808:808",
            "::ffff:8.8.8.8",
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
