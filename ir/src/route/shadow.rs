//! Shadowed rules: a rule that can never match because an earlier rule
//! matches every flow it would. The compiler warns about them.
//!
//! The analysis is conservative: it reports a pair only when the earlier
//! rule alone covers the later one, condition by condition (a later rule
//! covered only by several earlier rules together is not reported). The
//! candidates for the earlier rule come from the same indices the route
//! table uses, looked up with one of the later rule's destinations, so the
//! analysis does not compare every pair of rules; and a rule is compared
//! with at most the [`MAX_CANDIDATES`] earliest rules of each index entry,
//! so thousands of rules naming one domain (or thousands of catch-alls) stay
//! linear too. A later rule covered only by a rule past that many candidates
//! is not reported.

use super::cidr::{Cidr, CidrTrie};
use super::domain::{normalize_domain, normalize_keyword, DomainIndex};
use super::geo::geoip_category;
use super::intervals::Intervals;
use super::table::has_destination;
use super::{Network, Rule};

/// The earliest rules of one index entry a later rule is compared with.
const MAX_CANDIDATES: usize = 64;

/// Every rule that an earlier rule covers, as `(later, earlier)` 0-based
/// indices, with the earliest covering rule; ascending by the later rule.
/// Rules holding a value that does not normalise (which validation reports)
/// are left out.
pub fn shadowed(rules: &[Rule]) -> Vec<(usize, usize)> {
    let normal: Vec<Option<Normal>> = rules.iter().map(Normal::new).collect();
    let mut domains = DomainIndex::default();
    let mut cidrs = CidrTrie::default();
    let mut catch_all = Vec::new();
    for (index, rule) in normal.iter().enumerate() {
        let Some(rule) = rule else { continue };
        let at = index as u32;
        rule.domain.iter().for_each(|d| domains.add_exact(d, at));
        rule.suffix.iter().for_each(|s| domains.add_suffix(s, at));
        rule.keyword.iter().for_each(|k| domains.add_keyword(k, at));
        for cidr in rule.cidr.iter().copied().chain(rule.geoip_cidrs()) {
            cidrs.insert(cidr, at);
        }
        if !rule.has_destination {
            catch_all.push(at);
        }
    }
    if domains.finish().is_err() {
        return Vec::new();
    }

    let mut found = Vec::new();
    let mut candidates: Vec<u32> = Vec::new();
    for (later, rule) in normal.iter().enumerate() {
        let Some(rule) = rule else { continue };
        candidates.clear();
        // Every index entry lists its rules in ascending order: take the
        // earliest ones before this rule.
        let mut collect = |rules: &[u32]| {
            let before = rules.partition_point(|&r| (r as usize) < later);
            candidates.extend_from_slice(&rules[..before.min(MAX_CANDIDATES)]);
        };
        collect(&catch_all);
        if let Some(domain) = rule
            .domain
            .first()
            .or(rule.suffix.first())
            .or(rule.keyword.first())
        {
            domains.lookup(domain, &mut collect);
        } else if let Some(cidr) = rule.cidr.first().copied().or(rule.geoip_cidrs().next()) {
            cidrs.lookup_covering(cidr, &mut collect);
        } else if rule.has_destination {
            // A geosite or unknown geoip rule: only the same name covers it.
            candidates.extend(0..later.min(MAX_CANDIDATES) as u32);
        }
        candidates.retain(|&c| (c as usize) < later);
        candidates.sort_unstable();
        candidates.dedup();
        let covering = candidates.iter().map(|&c| c as usize).find(|&earlier| {
            normal[earlier]
                .as_ref()
                .is_some_and(|earlier| earlier.covers(rule))
        });
        if let Some(earlier) = covering {
            found.push((later, earlier));
        }
    }
    found
}

/// A rule with its values in the form they are matched in.
struct Normal {
    /// Sorted, for binary search.
    domain: Vec<String>,
    suffix: Vec<String>,
    keyword: Vec<String>,
    cidr: Vec<Cidr>,
    /// Lower case.
    geoip: Vec<String>,
    geosite: Vec<String>,
    has_destination: bool,
    network: Option<Network>,
    ports: Intervals<u16>,
    port_list: Vec<(u16, u16)>,
    inbound_tag: Vec<String>,
    source_cidr: Vec<Cidr>,
}

impl Normal {
    fn new(rule: &Rule) -> Option<Normal> {
        let sorted = |list: &[String], normalize: fn(&str) -> Result<String, String>| {
            let mut out = list
                .iter()
                .map(|v| normalize(v).ok())
                .collect::<Option<Vec<_>>>()?;
            out.sort_unstable();
            out.dedup();
            Some(out)
        };
        let port_list: Vec<(u16, u16)> = rule.port.iter().map(|p| (p.start, p.end)).collect();
        Some(Normal {
            domain: sorted(&rule.domain, normalize_domain)?,
            suffix: sorted(&rule.domain_suffix, normalize_domain)?,
            keyword: sorted(&rule.domain_keyword, normalize_keyword)?,
            cidr: rule.cidr.clone(),
            geoip: rule.geoip.iter().map(|g| g.to_ascii_lowercase()).collect(),
            geosite: rule.geosite.clone(),
            has_destination: has_destination(rule),
            network: rule.network,
            ports: Intervals::new(port_list.clone()),
            port_list,
            inbound_tag: rule.inbound_tag.clone(),
            source_cidr: rule.source_cidr.clone(),
        })
    }

    fn geoip_cidrs(&self) -> impl Iterator<Item = Cidr> + '_ {
        self.geoip
            .iter()
            .filter_map(|name| geoip_category(name))
            .flatten()
            .copied()
    }

    /// Whether every flow `later` matches, `self` matches too.
    fn covers(&self, later: &Normal) -> bool {
        let network = self.network.is_none() || self.network == later.network;
        let ports = self.port_list.is_empty()
            || (!later.port_list.is_empty()
                && later
                    .port_list
                    .iter()
                    .all(|&(start, end)| self.ports.covers(start, end)));
        let inbound = self.inbound_tag.is_empty()
            || (!later.inbound_tag.is_empty()
                && later
                    .inbound_tag
                    .iter()
                    .all(|tag| self.inbound_tag.contains(tag)));
        let source = self.source_cidr.is_empty()
            || (!later.source_cidr.is_empty()
                && later
                    .source_cidr
                    .iter()
                    .all(|c| self.source_cidr.iter().any(|e| e.covers(*c))));
        network && ports && inbound && source && self.covers_destinations(later)
    }

    fn covers_destinations(&self, later: &Normal) -> bool {
        if !self.has_destination {
            return true;
        }
        if !later.has_destination {
            return false;
        }
        later.domain.iter().all(|d| self.covers_domain(d))
            && later.suffix.iter().all(|s| self.covers_suffix(s))
            && later
                .keyword
                .iter()
                .all(|k| self.keyword.iter().any(|j| k.contains(j.as_str())))
            && later.cidr.iter().all(|c| self.covers_cidr(*c))
            && later.geoip.iter().all(|g| {
                self.geoip.contains(g)
                    || geoip_category(g)
                        .is_some_and(|cidrs| cidrs.iter().all(|c| self.covers_cidr(*c)))
            })
            && later.geosite.iter().all(|g| self.geosite.contains(g))
    }

    fn covers_domain(&self, domain: &str) -> bool {
        self.domain
            .binary_search_by(|d| d.as_str().cmp(domain))
            .is_ok()
            || self.covers_suffix(domain)
    }

    /// Whether every name ending in `suffix` (at a label boundary) matches.
    fn covers_suffix(&self, suffix: &str) -> bool {
        let mut rest = suffix;
        loop {
            if self
                .suffix
                .binary_search_by(|s| s.as_str().cmp(rest))
                .is_ok()
            {
                return true;
            }
            match rest.split_once('.') {
                Some((_, shorter)) => rest = shorter,
                None => break,
            }
        }
        self.keyword.iter().any(|k| suffix.contains(k.as_str()))
    }

    fn covers_cidr(&self, cidr: Cidr) -> bool {
        self.cidr
            .iter()
            .copied()
            .chain(self.geoip_cidrs())
            .any(|c| c.covers(cidr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::PortRange;

    fn rule(edit: impl FnOnce(&mut Rule)) -> Rule {
        let mut rule = Rule {
            target: "out".into(),
            line: 1,
            ..Rule::default()
        };
        edit(&mut rule);
        rule
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|s| Cidr::parse(s).unwrap()).collect()
    }

    #[test]
    fn an_equal_domain_or_a_covering_suffix_shadows_a_domain() {
        let rules = [
            rule(|r| r.domain_suffix = strings(&["example.com"])),
            rule(|r| r.domain = strings(&["WWW.example.com."])),
            rule(|r| r.domain_suffix = strings(&["a.example.com", "example.com"])),
            rule(|r| r.domain = strings(&["badexample.com"])),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0), (2, 0)]);
    }

    #[test]
    fn thousands_of_rules_on_one_domain_are_each_checked_against_the_earliest_only() {
        // Rule 0 covers every later rule; rules 1.. each name one port, so
        // none covers another. Comparing each with every earlier one would
        // be quadratic; the earliest candidates are enough to find rule 0.
        let mut rules = vec![rule(|r| r.domain = strings(&["example.com"]))];
        for port in 1..5_000u16 {
            rules.push(rule(|r| {
                r.domain = strings(&["example.com"]);
                r.port = vec![PortRange {
                    start: port,
                    end: port,
                }];
            }));
        }
        let found = shadowed(&rules);
        assert_eq!(found.len(), 4_999);
        assert!(found.iter().all(|&(_, earlier)| earlier == 0));
        // A later rule covered only by a rule past the first candidates is
        // not reported (the analysis is conservative).
        let mut ports: Vec<Rule> = (1..200u16)
            .map(|port| {
                rule(|r| {
                    r.domain = strings(&["example.com"]);
                    r.port = vec![PortRange {
                        start: port,
                        end: port,
                    }];
                })
            })
            .collect();
        ports.push(rule(|r| {
            r.domain = strings(&["example.com"]);
            r.port = vec![PortRange {
                start: 150,
                end: 150,
            }];
        }));
        assert_eq!(shadowed(&ports), vec![]);
    }

    #[test]
    fn a_longer_suffix_does_not_shadow_a_shorter_one() {
        let rules = [
            rule(|r| r.domain_suffix = strings(&["a.example.com"])),
            rule(|r| r.domain_suffix = strings(&["example.com"])),
        ];
        assert_eq!(shadowed(&rules), vec![]);
    }

    #[test]
    fn a_keyword_is_shadowed_only_by_a_keyword_it_contains() {
        let rules = [
            rule(|r| r.domain_keyword = strings(&["goog"])),
            rule(|r| r.domain_keyword = strings(&["google"])),
            rule(|r| r.domain_keyword = strings(&["oogl", "xyz"])),
            rule(|r| r.domain = strings(&["www.google.com"])),
            rule(|r| r.domain_suffix = strings(&["googleapis.com"])),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0), (3, 0), (4, 0)]);
        let rules = [
            rule(|r| r.domain_suffix = strings(&["google.com"])),
            rule(|r| r.domain_keyword = strings(&["google.com"])),
        ];
        assert_eq!(
            shadowed(&rules),
            vec![],
            "a keyword also matches google.com.evil.net"
        );
    }

    #[test]
    fn a_covering_network_shadows_a_narrower_one() {
        let rules = [
            rule(|r| r.cidr = cidrs(&["10.0.0.0/8"])),
            rule(|r| r.cidr = cidrs(&["10.1.0.0/16", "10.2.0.0/16"])),
            rule(|r| r.cidr = cidrs(&["10.1.0.0/16", "11.0.0.0/8"])),
            rule(|r| r.geoip = strings(&["private"])),
            rule(|r| r.cidr = cidrs(&["192.168.1.0/24", "fd00::/8"])),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0), (4, 3)]);
    }

    #[test]
    fn a_rule_without_destination_shadows_every_later_rule_it_is_as_permissive_as() {
        let rules = [
            rule(|r| r.network = Some(Network::Udp)),
            rule(|r| {
                r.network = Some(Network::Udp);
                r.domain = strings(&["example.com"]);
            }),
            rule(|r| r.domain = strings(&["example.com"])),
            rule(|_| {}),
            rule(|r| {
                r.port = vec![PortRange {
                    start: 443,
                    end: 443,
                }]
            }),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0), (4, 3)]);
    }

    #[test]
    fn an_extra_condition_on_the_earlier_rule_prevents_shadowing() {
        let base = |r: &mut Rule| r.domain_suffix = strings(&["example.com"]);
        let port = |start, end| vec![PortRange { start, end }];
        let earlier = [
            rule(|r| {
                base(r);
                r.port = port(443, 443);
            }),
            rule(|r| {
                base(r);
                r.inbound_tag = strings(&["socks-in"]);
            }),
            rule(|r| {
                base(r);
                r.source_cidr = cidrs(&["10.0.0.0/8"]);
            }),
            rule(|r| {
                base(r);
                r.network = Some(Network::Tcp);
            }),
        ];
        for earlier in earlier {
            assert_eq!(
                shadowed(&[earlier.clone(), rule(base)]),
                vec![],
                "{earlier:?}"
            );
        }
    }

    #[test]
    fn conditions_at_least_as_permissive_still_shadow() {
        let rules = [
            rule(|r| {
                r.domain_suffix = strings(&["example.com"]);
                r.port = vec![
                    PortRange {
                        start: 1,
                        end: 1000,
                    },
                    PortRange {
                        start: 1001,
                        end: 2000,
                    },
                ];
                r.inbound_tag = strings(&["a", "b"]);
                r.source_cidr = cidrs(&["10.0.0.0/8"]);
            }),
            rule(|r| {
                r.domain = strings(&["example.com"]);
                r.port = vec![
                    PortRange { start: 80, end: 80 },
                    PortRange {
                        start: 900,
                        end: 1100,
                    },
                ];
                r.inbound_tag = strings(&["b"]);
                r.source_cidr = cidrs(&["10.1.0.0/16"]);
                r.network = Some(Network::Tcp);
            }),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0)]);
    }

    #[test]
    fn every_destination_of_the_later_rule_must_be_covered() {
        let rules = [
            rule(|r| r.domain_suffix = strings(&["example.com"])),
            rule(|r| {
                r.domain = strings(&["example.com"]);
                r.cidr = cidrs(&["10.0.0.0/8"]);
            }),
            rule(|r| r.geosite = strings(&["cn"])),
            rule(|r| r.geosite = strings(&["cn"])),
        ];
        assert_eq!(shadowed(&rules), vec![(3, 2)]);
    }

    #[test]
    fn the_earliest_covering_rule_is_named() {
        let rules = [
            rule(|r| r.domain_suffix = strings(&["com"])),
            rule(|r| r.domain_suffix = strings(&["example.com"])),
            rule(|r| r.domain = strings(&["www.example.com"])),
        ];
        assert_eq!(shadowed(&rules), vec![(1, 0), (2, 0)]);
    }
}
