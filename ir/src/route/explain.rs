//! Why a rule matches a flow, in the words of its conditions. A plain walk
//! over one rule as written: `etc route` explains a decision with it, and
//! the tests check the compiled table against a first-match walk built on it.

use super::host::Host;
use super::table::FlowKey;
use super::{geoip_category, Rule};

fn normal(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

impl Rule {
    /// The conditions that make this rule match `flow`, such as
    /// `domain_suffix example.com (sniffed), port 443`, or `None` when it
    /// does not match.
    pub fn explain(&self, flow: &FlowKey<'_>) -> Option<String> {
        let mut why = Vec::new();
        if self.has_destination_matcher() {
            why.push(self.destination_match(flow)?);
        }
        if let Some(network) = self.network {
            (network == flow.network).then_some(())?;
            why.push(format!("network {}", network.name()));
        }
        if !self.port.is_empty() {
            let range = self.port.iter().find(|p| p.contains(flow.port))?;
            why.push(format!("port {range}"));
        }
        if !self.inbound_tag.is_empty() {
            let tag = flow
                .inbound_tag
                .filter(|t| self.inbound_tag.iter().any(|r| r == t))?;
            why.push(format!("inbound_tag {tag}"));
        }
        if !self.source_cidr.is_empty() {
            let source = flow.source?;
            let cidr = self.source_cidr.iter().find(|c| c.contains(source))?;
            why.push(format!("source_cidr {cidr}"));
        }
        if why.is_empty() {
            why.push("a rule without conditions".to_owned());
        }
        Some(why.join(", "))
    }

    fn has_destination_matcher(&self) -> bool {
        !(self.domain.is_empty()
            && self.domain_suffix.is_empty()
            && self.domain_keyword.is_empty()
            && self.cidr.is_empty()
            && self.geoip.is_empty()
            && self.geosite.is_empty())
    }

    /// The first destination alternative that matches: the requested domain
    /// first, then the sniffed one; an IP against cidr and geoip.
    fn destination_match(&self, flow: &FlowKey<'_>) -> Option<String> {
        let requested = match flow.destination {
            Host::Domain(name) => Some((normal(name), "")),
            Host::Ip(_) => None,
        };
        let sniffed = flow.sniffed.map(|name| (normal(name), " (sniffed)"));
        for (name, via) in requested.into_iter().chain(sniffed) {
            if let Some(d) = self.domain.iter().find(|d| normal(d) == name) {
                return Some(format!("domain {d}{via}"));
            }
            let suffix = |s: &&String| {
                let s = normal(s);
                name == s || name.ends_with(&format!(".{s}"))
            };
            if let Some(s) = self.domain_suffix.iter().find(suffix) {
                return Some(format!("domain_suffix {s}{via}"));
            }
            if let Some(k) = self
                .domain_keyword
                .iter()
                .find(|k| name.contains(&normal(k)))
            {
                return Some(format!("domain_keyword {k}{via}"));
            }
        }
        let Host::Ip(ip) = flow.destination else {
            return None;
        };
        if let Some(c) = self.cidr.iter().find(|c| c.contains(ip)) {
            return Some(format!("cidr {c}"));
        }
        let in_category =
            |g: &&String| geoip_category(g).is_some_and(|cs| cs.iter().any(|c| c.contains(ip)));
        self.geoip
            .iter()
            .find(in_category)
            .map(|g| format!("geoip {g}"))
    }
}
