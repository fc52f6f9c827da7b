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
use super::host::Host;
use super::strategy::DomainStrategy;
use super::{Network, Rule};

/// The rules as written, the default, the domain strategy, and the matchers
/// compiled from the rules.
#[derive(Clone)]
pub struct RouteTable {
    rules: Vec<Rule>,
    default: String,
    domain_strategy: DomainStrategy,
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
    /// The first rule with a `cidr` or `geoip` matcher: the first one a
    /// resolved name could match where its name did not.
    first_ip_rule: Option<u32>,
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
            if matcher.first_ip_rule.is_none() && !(rule.cidr.is_empty() && rule.geoip.is_empty()) {
                matcher.first_ip_rule = Some(at);
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
            domain_strategy: DomainStrategy::AsIs,
            matcher,
        })
    }

    /// This table under `strategy` (a new table is [`DomainStrategy::AsIs`]).
    pub fn with_domain_strategy(mut self, strategy: DomainStrategy) -> RouteTable {
        self.domain_strategy = strategy;
        self
    }

    pub fn domain_strategy(&self) -> DomainStrategy {
        self.domain_strategy
    }

    /// The 0-based index of the first rule with a `cidr` or `geoip`
    /// matcher: the first rule a resolved name can match by an address.
    pub fn first_ip_rule(&self) -> Option<usize> {
        self.matcher.first_ip_rule.map(|r| r as usize)
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
        self.decision(best)
    }

    fn decision(&self, rule: u32) -> Decision<'_> {
        match self.rules.get(rule as usize) {
            Some(found) => Decision {
                rule: Some(rule as usize),
                target: &found.target,
            },
            None => Decision {
                rule: None,
                target: &self.default,
            },
        }
    }

    /// Whether the domain strategy wants the addresses of `flow`, which
    /// [`RouteTable::route`] sent to `decision`: a flow addressed by name,
    /// in a table with a `cidr` or `geoip` rule, that no rule matched
    /// (`ip_if_non_match`) or that no rule matched before the first such
    /// rule (`ip_on_demand`). The caller resolves the name and calls
    /// [`RouteTable::route_resolved`].
    pub fn wants_addresses(&self, flow: &FlowKey<'_>, decision: &Decision<'_>) -> bool {
        let (Host::Domain(_), Some(first_ip)) = (flow.destination, self.matcher.first_ip_rule)
        else {
            return false;
        };
        match self.domain_strategy {
            DomainStrategy::AsIs => false,
            DomainStrategy::IpIfNonMatch => decision.rule.is_none(),
            DomainStrategy::IpOnDemand => decision.rule.is_none_or(|r| r > first_ip as usize),
        }
    }

    /// Routes `flow` again by the addresses its name resolved to: the
    /// earliest rule, in the order written, that the name matched (its
    /// first lookup, `decision`) or that any one of `addresses` matches.
    /// Also says which address decided, `None` when the name's own decision
    /// stands. Allocates nothing.
    pub fn route_resolved(
        &self,
        flow: &FlowKey<'_>,
        decision: Decision<'_>,
        addresses: &[IpAddr],
    ) -> (Decision<'_>, Option<IpAddr>) {
        let mut best = decision.rule.map_or(u32::MAX, |r| r as u32);
        let mut by = None;
        for &ip in addresses {
            let again = self.route(&FlowKey {
                destination: Host::Ip(ip),
                ..*flow
            });
            if let Some(rule) = again.rule.map(|r| r as u32).filter(|r| *r < best) {
                best = rule;
                by = Some(ip);
            }
        }
        (self.decision(best), by)
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

/// Two tables are equal when their rules, default and strategy are: the
/// matchers are a function of the rules.
impl PartialEq for RouteTable {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules
            && self.default == other.default
            && self.domain_strategy == other.domain_strategy
    }
}

impl Eq for RouteTable {}

impl fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteTable")
            .field("rules", &self.rules)
            .field("default", &self.default)
            .field("domain_strategy", &self.domain_strategy)
            .finish_non_exhaustive()
    }
}

/// The serialized form: the rules, the default and the strategy, nothing
/// compiled.
#[derive(Serialize)]
struct Written<'a> {
    rules: &'a [Rule],
    default: &'a str,
    domain_strategy: DomainStrategy,
}

#[derive(Deserialize)]
struct Decoded {
    rules: Vec<Rule>,
    default: String,
    domain_strategy: DomainStrategy,
}

impl Serialize for RouteTable {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Written {
            rules: &self.rules,
            default: &self.default,
            domain_strategy: self.domain_strategy,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RouteTable {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Decoded {
            rules,
            default,
            domain_strategy,
        } = Decoded::deserialize(deserializer)?;
        RouteTable::new(rules, default)
            .map(|table| table.with_domain_strategy(domain_strategy))
            .map_err(serde::de::Error::custom)
    }
}
