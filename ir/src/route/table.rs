//! The compiled route table.
//!
//! Each destination matcher kind has an index from a destination to the
//! ascending indices of the rules that name it: a trie over reversed labels
//! for `domain` and `domain_suffix`, an Aho-Corasick automaton for
//! `domain_keyword`, a binary prefix trie for `cidr` and `geoip`. A lookup
//! asks the indices for candidate lists and keeps the lowest rule whose other
//! conditions (network, port, inbound tag, source) also hold; a list is read
//! only up to the best rule found so far. Rules with no destination matcher
//! are candidates for every flow.
//!
//! The compiled form is not serialized: plan.bin carries the rules and the
//! default, and decoding rebuilds the matchers from them. The matchers are a
//! pure function of the rules, so the plan cannot carry indices that disagree
//! with its rules, it stays small, and `Spec: PartialEq` compares what the
//! operator wrote.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::cidr::CidrTrie;
use super::conditions::Conditions;
use super::domain::{normalize_domain, normalize_keyword, DomainIndex};
use super::geo::{geoip_category, GEOIP_CATEGORIES};
use super::{Network, Rule};

/// The rules as written, the default, and the matchers compiled from them.
#[derive(Clone)]
pub struct RouteTable {
    rules: Vec<Rule>,
    default: String,
    matcher: Matcher,
}

/// What a lookup needs to know about a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey<'a> {
    pub network: Network,
    pub destination: Host<'a>,
    pub port: u16,
    /// The client's address; a rule with `source_cidr` never matches a flow
    /// without one.
    pub source: Option<IpAddr>,
    /// A rule with `inbound_tag` never matches a flow without one.
    pub inbound_tag: Option<&'a str>,
    /// The domain sniffed from TLS SNI or an HTTP Host header.
    pub sniffed: Option<&'a str>,
}

/// A destination as the client addressed it. Routing resolves nothing: a
/// `cidr` or `geoip` rule matches only a flow addressed by IP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host<'a> {
    Domain(&'a str),
    Ip(IpAddr),
}

/// The outcome of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<'t> {
    /// The 0-based index of the rule that matched; `None` when the default
    /// applied.
    pub rule: Option<usize>,
    /// The tag of an outbound or balancer.
    pub target: &'t str,
}

#[derive(Clone, Debug, Default)]
struct Matcher {
    domains: DomainIndex,
    cidrs: CidrTrie,
    /// Rules with no destination matcher, ascending.
    catch_all: Vec<u32>,
    conditions: Vec<Conditions>,
}

impl RouteTable {
    /// Compiles `rules`. Fails on a value no flow could match (an empty or
    /// malformed domain, an unknown geoip or geosite category); validation
    /// reports those with spans first, so here they only guard a plan built
    /// by another tool or a newer compiler.
    pub fn new(rules: Vec<Rule>, default: String) -> Result<RouteTable, String> {
        if rules.len() >= u32::MAX as usize {
            return Err(format!(
                "{} rules are more than a route table holds",
                rules.len()
            ));
        }
        let mut matcher = Matcher::default();
        for (index, rule) in rules.iter().enumerate() {
            let at = index as u32;
            let fail = |err: String| format!("rule {} (line {}): {err}", index + 1, rule.line);
            for domain in &rule.domain {
                matcher
                    .domains
                    .add_exact(&normalize_domain(domain).map_err(fail)?, at);
            }
            for suffix in &rule.domain_suffix {
                matcher
                    .domains
                    .add_suffix(&normalize_domain(suffix).map_err(fail)?, at);
            }
            for keyword in &rule.domain_keyword {
                matcher
                    .domains
                    .add_keyword(&normalize_keyword(keyword).map_err(fail)?, at);
            }
            for cidr in &rule.cidr {
                matcher.cidrs.insert(*cidr, at);
            }
            for name in &rule.geoip {
                let cidrs = geoip_category(name).ok_or_else(|| {
                    fail(format!(
                        "unknown geoip category `{name}`; known categories: {}",
                        GEOIP_CATEGORIES.join(", ")
                    ))
                })?;
                for cidr in cidrs {
                    matcher.cidrs.insert(*cidr, at);
                }
            }
            if let Some(name) = rule.geosite.first() {
                return Err(fail(format!(
                    "unknown geosite category `{name}`; this build carries no geosite data"
                )));
            }
            if !has_destination(rule) {
                matcher.catch_all.push(at);
            }
            matcher.conditions.push(Conditions::new(rule));
        }
        matcher.domains.finish()?;
        Ok(RouteTable {
            rules,
            default,
            matcher,
        })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The tag of an outbound or balancer.
    pub fn default(&self) -> &str {
        &self.default
    }

    /// The first rule, in the order written, that `flow` matches, or the
    /// default. Allocates nothing.
    pub fn route(&self, flow: &FlowKey<'_>) -> Decision<'_> {
        let matcher = &self.matcher;
        let mut best = u32::MAX;
        let mut consider = |candidates: &[u32]| {
            for &rule in candidates {
                if rule >= best {
                    return;
                }
                if matcher.conditions[rule as usize].admit(flow) {
                    best = rule;
                    return;
                }
            }
        };
        consider(&matcher.catch_all);
        match flow.destination {
            Host::Domain(name) => matcher.domains.lookup(name, &mut consider),
            Host::Ip(ip) => matcher.cidrs.lookup(ip, &mut consider),
        }
        if let Some(sniffed) = flow.sniffed {
            matcher.domains.lookup(sniffed, &mut consider);
        }
        match self.rules.get(best as usize) {
            Some(rule) => Decision {
                rule: Some(best as usize),
                target: &rule.target,
            },
            None => Decision {
                rule: None,
                target: &self.default,
            },
        }
    }
}

/// Whether a rule names a destination; one that does not matches any.
pub(super) fn has_destination(rule: &Rule) -> bool {
    !(rule.domain.is_empty()
        && rule.domain_suffix.is_empty()
        && rule.domain_keyword.is_empty()
        && rule.cidr.is_empty()
        && rule.geoip.is_empty()
        && rule.geosite.is_empty())
}

/// Two tables are equal when their rules and default are: the matchers are
/// a function of those.
impl PartialEq for RouteTable {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules && self.default == other.default
    }
}

impl Eq for RouteTable {}

impl fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteTable")
            .field("rules", &self.rules)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// The serialized form: the rules and the default, nothing compiled.
#[derive(Serialize)]
struct Written<'a> {
    rules: &'a [Rule],
    default: &'a str,
}

#[derive(Deserialize)]
struct Decoded {
    rules: Vec<Rule>,
    default: String,
}

impl Serialize for RouteTable {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Written {
            rules: &self.rules,
            default: &self.default,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RouteTable {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Decoded { rules, default } = Decoded::deserialize(deserializer)?;
        RouteTable::new(rules, default).map_err(serde::de::Error::custom)
    }
}
