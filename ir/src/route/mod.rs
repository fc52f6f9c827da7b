//! The route table: rules as written, and the lookup the runtime and
//! `etc route` share.
//!
//! First match in the order written; no match means the default. Within one
//! rule the destination matchers (domain, domain_suffix, domain_keyword, cidr,
//! geoip, geosite) are alternatives; every other condition present (port,
//! network, inbound_tag, source_cidr) must match as well. Domain matchers also
//! try the sniffed domain.
//!
//! The rules as written live in [`Rule`]; [`RouteTable`] compiles them into
//! matchers whose lookup cost does not grow with the number of rules or
//! domains (see `table.rs`). A table's [`DomainStrategy`] says when a flow
//! addressed by name is matched again by the addresses it resolves to.

mod cidr;
mod conditions;
mod domain;
mod explain;
mod geo;
mod hash;
mod host;
mod intervals;
mod shadow;
mod strategy;
mod table;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

pub use cidr::Cidr;
pub use domain::{normalize_domain, normalize_keyword};
pub use geo::{geoip_category, GEOIP_CATEGORIES, GEOSITE_CATEGORIES};
pub use host::Host;
pub use shadow::shadowed;
pub use strategy::DomainStrategy;
pub use table::{Decision, FlowKey, RouteTable};

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

/// An IPv4-mapped IPv6 address is matched as the IPv4 address it carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
