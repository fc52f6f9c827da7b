//! The domain strategy: whether a flow addressed by name is also matched by
//! the addresses the name resolves to, as Xray's `domainStrategy` does.
//!
//! Routing itself resolves nothing: the table says when a flow wants its
//! addresses ([`super::RouteTable::wants_addresses`]), the runtime resolves
//! with the DNS of the plan, and the table routes again by what came back
//! ([`super::RouteTable::route_resolved`]).

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DomainStrategy {
    /// A name is matched as a name only: a `cidr` or `geoip` rule never
    /// matches a flow addressed by name.
    #[default]
    AsIs,
    /// A name that no rule matches is resolved, and its addresses are
    /// matched again.
    IpIfNonMatch,
    /// A name is resolved as soon as a rule with `cidr` or `geoip` is
    /// reached before any rule matched it as a name.
    IpOnDemand,
}

impl DomainStrategy {
    /// Every strategy, in the order the reference lists them.
    pub const ALL: [DomainStrategy; 3] = [
        DomainStrategy::AsIs,
        DomainStrategy::IpIfNonMatch,
        DomainStrategy::IpOnDemand,
    ];

    /// The name a configuration writes.
    pub fn name(self) -> &'static str {
        match self {
            DomainStrategy::AsIs => "as_is",
            DomainStrategy::IpIfNonMatch => "ip_if_non_match",
            DomainStrategy::IpOnDemand => "ip_on_demand",
        }
    }

    pub fn parse(name: &str) -> Option<DomainStrategy> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Every name a configuration may write, for diagnostics.
    pub fn names() -> [&'static str; 3] {
        Self::ALL.map(DomainStrategy::name)
    }

    /// The strategy Xray spells `name` (`AsIs`, `IPIfNonMatch`,
    /// `IPOnDemand`, in any case), so a diagnostic can name ours.
    pub fn from_xray(name: &str) -> Option<DomainStrategy> {
        let xray = |s: DomainStrategy| match s {
            DomainStrategy::AsIs => "AsIs",
            DomainStrategy::IpIfNonMatch => "IPIfNonMatch",
            DomainStrategy::IpOnDemand => "IPOnDemand",
        };
        Self::ALL
            .into_iter()
            .find(|s| xray(*s).eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for DomainStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_parses_from_its_name_and_the_default_is_as_is() {
        for strategy in DomainStrategy::ALL {
            assert_eq!(DomainStrategy::parse(strategy.name()), Some(strategy));
        }
        assert_eq!(DomainStrategy::default(), DomainStrategy::AsIs);
        assert_eq!(DomainStrategy::parse("IPIfNonMatch"), None);
    }

    #[test]
    fn xray_spellings_are_recognised_for_diagnostics_only() {
        assert_eq!(
            DomainStrategy::from_xray("IPIfNonMatch"),
            Some(DomainStrategy::IpIfNonMatch)
        );
        assert_eq!(
            DomainStrategy::from_xray("ipondemand"),
            Some(DomainStrategy::IpOnDemand)
        );
        assert_eq!(DomainStrategy::from_xray("as_is"), None);
    }
}
