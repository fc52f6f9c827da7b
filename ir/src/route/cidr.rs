//! IP networks, and the binary prefix trie that finds every rule whose
//! networks contain an address in one walk of at most 32 or 128 steps,
//! whatever the number of networks.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::canonical;

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
        // `::ffff:10.0.0.0/104` is the IPv4 network it carries: addresses are
        // matched canonicalised, so it must be stored that way to match at all.
        let (addr, prefix) = match addr {
            IpAddr::V6(v6) if prefix >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => (IpAddr::V4(v4), prefix - 96),
                None => (addr, prefix),
            },
            _ => (addr, prefix),
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

/// An address as the trie walks it: its family's width in bits and its bits
/// left-aligned in a `u128`, so one walk serves IPv4 and IPv6.
/// The address is canonicalised first (see [`canonical`]).
pub(super) fn left_aligned(ip: IpAddr) -> (u32, u128) {
    network_bits(canonical(ip))
}

/// A network's address in its own family, not canonicalised: like
/// `Cidr::contains`, an IPv6 network never contains an address that
/// canonicalises to IPv4 (`Cidr::parse` turns an IPv4-mapped network into
/// IPv4, so only a hand-built `Cidr` can be such a network).
pub(super) fn network_bits(addr: IpAddr) -> (u32, u128) {
    match addr {
        IpAddr::V4(v4) => (32, u128::from(u32::from(v4)) << 96),
        IpAddr::V6(v6) => (128, u128::from(v6)),
    }
}

/// A binary trie over address bits, one per family. A node at depth `d`
/// stands for a `/d` network and holds the (ascending) indices of the rules
/// that name it; a lookup visits every node on the address's path, that is
/// every network containing the address, most general first.
#[derive(Clone, Debug, Default)]
pub(super) struct CidrTrie {
    v4: BitTrie,
    v6: BitTrie,
}

#[derive(Clone, Debug)]
struct BitTrie {
    nodes: Vec<BitNode>,
}

#[derive(Clone, Debug, Default)]
struct BitNode {
    /// Children for a 0 and a 1 bit; 0 means none (the root is never a child).
    child: [u32; 2],
    rules: Vec<u32>,
}

impl Default for BitTrie {
    fn default() -> Self {
        BitTrie {
            nodes: vec![BitNode::default()],
        }
    }
}

impl CidrTrie {
    /// Adds `rule` under `cidr`. Rules must be added in ascending order so
    /// every node's list stays sorted; a repeat of the same rule is dropped.
    pub(super) fn insert(&mut self, cidr: Cidr, rule: u32) {
        let (width, bits) = network_bits(cidr.addr);
        let trie = if width == 32 {
            &mut self.v4
        } else {
            &mut self.v6
        };
        trie.insert(bits, cidr.prefix, rule);
    }

    /// Calls `visit` with the rule list of every network containing `ip`.
    pub(super) fn lookup(&self, ip: IpAddr, visit: &mut impl FnMut(&[u32])) {
        let (width, bits) = left_aligned(ip);
        let trie = if width == 32 { &self.v4 } else { &self.v6 };
        trie.lookup(bits, width, visit);
    }

    /// Calls `visit` with the rule list of every network covering `cidr`.
    pub(super) fn lookup_covering(&self, cidr: Cidr, visit: &mut impl FnMut(&[u32])) {
        let (width, bits) = network_bits(cidr.addr);
        let trie = if width == 32 { &self.v4 } else { &self.v6 };
        trie.lookup(bits, u32::from(cidr.prefix), visit);
    }
}

impl BitTrie {
    fn insert(&mut self, bits: u128, prefix: u8, rule: u32) {
        let mut node = 0usize;
        for depth in 0..u32::from(prefix) {
            let bit = ((bits >> (127 - depth)) & 1) as usize;
            let next = self.nodes[node].child[bit];
            node = if next == 0 {
                let id = self.nodes.len();
                self.nodes.push(BitNode::default());
                self.nodes[node].child[bit] = id as u32;
                id
            } else {
                next as usize
            };
        }
        let rules = &mut self.nodes[node].rules;
        if rules.last() != Some(&rule) {
            rules.push(rule);
        }
    }

    /// Visits the nodes on the path of `bits` down to depth `depth`.
    fn lookup(&self, bits: u128, depth: u32, visit: &mut impl FnMut(&[u32])) {
        let mut node = 0usize;
        for depth in 0..depth {
            let here = &self.nodes[node];
            if !here.rules.is_empty() {
                visit(&here.rules);
            }
            let next = here.child[((bits >> (127 - depth)) & 1) as usize];
            if next == 0 {
                return;
            }
            node = next as usize;
        }
        let here = &self.nodes[node];
        if !here.rules.is_empty() {
            visit(&here.rules);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    fn hits(trie: &CidrTrie, ip: &str) -> Vec<u32> {
        let mut out = Vec::new();
        trie.lookup(ip.parse().unwrap(), &mut |rules: &[u32]| {
            out.extend_from_slice(rules)
        });
        out
    }

    #[test]
    fn every_network_containing_the_address_is_visited_most_general_first() {
        let mut trie = CidrTrie::default();
        trie.insert(cidr("10.1.0.0/16"), 0);
        trie.insert(cidr("10.0.0.0/8"), 1);
        trie.insert(cidr("10.1.2.3"), 2);
        trie.insert(cidr("0.0.0.0/0"), 3);
        assert_eq!(hits(&trie, "10.1.2.3"), vec![3, 1, 0, 2]);
        assert_eq!(hits(&trie, "10.2.0.1"), vec![3, 1]);
        assert_eq!(hits(&trie, "11.0.0.1"), vec![3]);
    }

    #[test]
    fn families_do_not_mix() {
        let mut trie = CidrTrie::default();
        trie.insert(cidr("0.0.0.0/0"), 0);
        trie.insert(cidr("::/0"), 1);
        assert_eq!(hits(&trie, "192.0.2.1"), vec![0]);
        assert_eq!(hits(&trie, "2001:db8::1"), vec![1]);
    }

    #[test]
    fn an_ipv4_mapped_address_matches_as_ipv4() {
        let mut trie = CidrTrie::default();
        trie.insert(cidr("192.168.0.0/16"), 0);
        assert_eq!(hits(&trie, "::ffff:192.168.1.1"), vec![0]);
    }

    #[test]
    fn an_ipv4_mapped_network_parses_as_the_ipv4_network() {
        assert_eq!(cidr("::ffff:10.0.0.0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("::ffff:0:0/96"), cidr("0.0.0.0/0"));
    }

    #[test]
    fn a_network_names_a_rule_once_however_often_it_is_written() {
        let mut trie = CidrTrie::default();
        trie.insert(cidr("10.0.0.0/8"), 4);
        trie.insert(cidr("10.0.0.0/8"), 4);
        assert_eq!(hits(&trie, "10.0.0.1"), vec![4]);
    }

    #[test]
    fn covers_compares_networks_not_addresses() {
        assert!(cidr("10.0.0.0/8").covers(cidr("10.1.0.0/16")));
        assert!(!cidr("10.1.0.0/16").covers(cidr("10.0.0.0/8")));
        assert!(!cidr("10.0.0.0/8").covers(cidr("::/0")));
    }
}
