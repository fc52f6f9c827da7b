//! The route table: rules as written, and the lookup the runtime and
//! `etc route` share.
//!
//! First match in the order written; no match means the default. Within one
//! rule the destination matchers (domain, domain_suffix, domain_keyword, cidr,
//! geoip, geosite) are alternatives; every other condition present (port,
//! network, inbound_tag, source_cidr) must match as well. Domain matchers also
//! try the sniffed domain.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteTable {
    pub rules: Vec<Rule>,
    /// The tag of an outbound or balancer.
    pub default: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The tag of an outbound or balancer.
    pub target: String,
    /// The 1-based source line the rule was written on.
    pub line: u32,
    pub domain: Vec<String>,
    pub domain_suffix: Vec<String>,
    pub domain_keyword: Vec<String>,
    pub cidr: Vec<Cidr>,
    pub geoip: Vec<String>,
    pub geosite: Vec<String>,
    pub port: Vec<PortRange>,
    pub source_cidr: Vec<Cidr>,
    pub inbound_tag: Vec<String>,
    pub network: Option<Network>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Network {
    Tcp,
    Udp,
}

impl Network {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "tcp" => Some(Network::Tcp),
            "udp" => Some(Network::Udp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Network::Tcp => "tcp",
            Network::Udp => "udp",
        }
    }
}

/// An inclusive port range; a single port is `start == end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PortRange {
    pub start: u16,
    pub end: u16,
}

impl PortRange {
    pub fn contains(self, port: u16) -> bool {
        (self.start..=self.end).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

/// An IP network: an address and a prefix length, host bits cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `10.0.0.0/8`, `fd00::/8`, or a bare address (a host route).
    /// Host bits set under the mask are an error, so a typo is not silently
    /// widened.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{addr}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Err(format!("prefix length `{p}` is not between 0 and {max}")),
            },
        };
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(format!(
                "host bits are set: the network is {}/{prefix}",
                cidr.network()
            ));
        }
        Ok(cidr)
    }

    fn mask_bits(self) -> u128 {
        let width = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == 0 {
            0
        } else {
            (u128::MAX << (width - u32::from(self.prefix))) & (u128::MAX >> (128 - width))
        }
    }

    fn network(self) -> IpAddr {
        let mask = self.mask_bits();
        match self.addr {
            IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & mask as u32).into()),
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & mask).into()),
        }
    }

    pub fn contains(self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        let mask = self.mask_bits();
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => u32::from(net) == u32::from(ip) & mask as u32,
            (IpAddr::V6(net), IpAddr::V6(ip)) => u128::from(net) == u128::from(ip) & mask,
            _ => false,
        }
    }

    /// Whether every address of `other` is in `self`.
    pub fn covers(self, other: Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && self.prefix <= other.prefix
            && self.contains(other.addr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An IPv4-mapped IPv6 address is matched as the IPv4 address it carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
