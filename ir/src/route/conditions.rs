//! The conditions of a rule besides its destination: network, port, inbound
//! tag and source network. They filter a candidate rule that a destination
//! index proposed, so each is a direct test on one rule, and each costs one
//! comparison or one binary search however long the rule's lists are.

use super::cidr::{left_aligned, network_bits};
use super::intervals::Intervals;
use super::table::FlowKey;
use super::{Network, Rule};

#[derive(Clone, Debug)]
pub(super) struct Conditions {
    network: Option<Network>,
    ports: Intervals<u16>,
    /// Sorted; tags compare exactly, as everywhere else in a config.
    inbound_tags: Box<[Box<str>]>,
    source_v4: Intervals<u32>,
    source_v6: Intervals<u128>,
    has_source: bool,
}

impl Conditions {
    pub(super) fn new(rule: &Rule) -> Self {
        let mut inbound_tags: Vec<Box<str>> = rule
            .inbound_tag
            .iter()
            .map(|tag| tag.as_str().into())
            .collect();
        inbound_tags.sort_unstable();
        inbound_tags.dedup();
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for cidr in &rule.source_cidr {
            let (width, start) = network_bits(cidr.addr);
            let host_bits = width - u32::from(cidr.prefix);
            // Host bits as ones; `checked_shl` covers the /0 network.
            let span = 1u128.checked_shl(host_bits).map_or(u128::MAX, |n| n - 1);
            if width == 32 {
                let start = (start >> 96) as u32;
                v4.push((start, start | span as u32));
            } else {
                v6.push((start, start | span));
            }
        }
        Conditions {
            network: rule.network,
            ports: Intervals::new(rule.port.iter().map(|p| (p.start, p.end)).collect()),
            inbound_tags: inbound_tags.into_boxed_slice(),
            source_v4: Intervals::new(v4),
            source_v6: Intervals::new(v6),
            has_source: !rule.source_cidr.is_empty(),
        }
    }

    pub(super) fn admit(&self, flow: &FlowKey<'_>) -> bool {
        if self.network.is_some_and(|network| network != flow.network) {
            return false;
        }
        if !self.ports.is_empty() && !self.ports.contains(flow.port) {
            return false;
        }
        if !self.inbound_tags.is_empty() {
            let Some(tag) = flow.inbound_tag else {
                return false;
            };
            if self
                .inbound_tags
                .binary_search_by(|t| (**t).cmp(tag))
                .is_err()
            {
                return false;
            }
        }
        if self.has_source {
            let Some(source) = flow.source else {
                return false;
            };
            let (width, bits) = left_aligned(source);
            let inside = match width {
                32 => self.source_v4.contains((bits >> 96) as u32),
                _ => self.source_v6.contains(bits),
            };
            if !inside {
                return false;
            }
        }
        true
    }
}
