//! Route lookup on the compiled table, with the semantics of
//! `ir::route::Rule`: first match in the order written, no match means the
//! default. Within a rule the destination matchers (domain, domain_suffix,
//! domain_keyword, cidr) are alternatives; every other condition present
//! (port, network, inbound_tag, source_cidr) must match as well. Domain
//! matchers try the requested domain and the sniffed one.
//!
//! This is the one function the runtime routes through; it walks the rules.
//! geoip and geosite categories are expanded into cidr and domain lists by
//! the compiler, so a category name left in a rule matches nothing here.

use std::net::IpAddr;

use etemenanki_ir::route::{Network, RouteTable, Rule};
use etemenanki_proto::Address;

/// What a flow or packet is routed by.
pub struct RouteInput<'a> {
    pub destination: &'a Address,
    pub sniffed: Option<&'a str>,
    pub inbound_tag: &'a str,
    pub source: Option<IpAddr>,
    pub network: Network,
}

/// The chosen target tag and the index of the rule that chose it (`None`
/// for the default).
pub fn pick<'t>(table: &'t RouteTable, input: &RouteInput<'_>) -> (&'t str, Option<usize>) {
    for (i, rule) in table.rules.iter().enumerate() {
        if matches(rule, input) {
            return (&rule.target, Some(i));
        }
    }
    (&table.default, None)
}

fn matches(rule: &Rule, input: &RouteInput<'_>) -> bool {
    if rule.network.is_some_and(|n| n != input.network) {
        return false;
    }
    if !rule.port.is_empty()
        && !rule
            .port
            .iter()
            .any(|r| r.contains(input.destination.port()))
    {
        return false;
    }
    if !rule.inbound_tag.is_empty() && !rule.inbound_tag.iter().any(|t| t == input.inbound_tag) {
        return false;
    }
    if !rule.source_cidr.is_empty() {
        let Some(source) = input.source else {
            return false;
        };
        if !rule.source_cidr.iter().any(|c| c.contains(source)) {
            return false;
        }
    }
    let has_destination = !rule.domain.is_empty()
        || !rule.domain_suffix.is_empty()
        || !rule.domain_keyword.is_empty()
        || !rule.cidr.is_empty()
        || !rule.geoip.is_empty()
        || !rule.geosite.is_empty();
    if !has_destination {
        return true;
    }
    if let Some(ip) = input.destination.ip() {
        if rule.cidr.iter().any(|c| c.contains(ip)) {
            return true;
        }
    }
    let names = input.destination.domain().into_iter().chain(input.sniffed);
    for name in names {
        let name = name.trim_end_matches('.');
        if rule.domain.iter().any(|d| d.eq_ignore_ascii_case(name))
            || rule.domain_suffix.iter().any(|s| suffix_matches(s, name))
            || rule
                .domain_keyword
                .iter()
                .any(|k| contains_ignore_case(name, k))
        {
            return true;
        }
    }
    false
}

/// `example.com` matches `example.com` and `a.example.com`, not `badexample.com`.
fn suffix_matches(suffix: &str, name: &str) -> bool {
    let suffix = suffix.trim_start_matches('.');
    if name.len() < suffix.len() || !name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    {
        return false;
    }
    name.len() == suffix.len() || name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

fn contains_ignore_case(name: &str, keyword: &str) -> bool {
    name.to_ascii_lowercase()
        .contains(&keyword.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etemenanki_ir::route::{Cidr, PortRange};

    fn table() -> RouteTable {
        RouteTable {
            rules: vec![
                Rule {
                    target: "lan".into(),
                    cidr: vec![Cidr::parse("10.0.0.0/8").unwrap()],
                    ..Rule::default()
                },
                Rule {
                    target: "web".into(),
                    domain_suffix: vec!["example.com".into()],
                    port: vec![PortRange {
                        start: 443,
                        end: 443,
                    }],
                    ..Rule::default()
                },
                Rule {
                    target: "udp".into(),
                    network: Some(Network::Udp),
                    ..Rule::default()
                },
                Rule {
                    target: "tagged".into(),
                    inbound_tag: vec!["special".into()],
                    ..Rule::default()
                },
                Rule {
                    target: "office".into(),
                    source_cidr: vec![Cidr::parse("192.168.0.0/16").unwrap()],
                    ..Rule::default()
                },
            ],
            default: "direct".into(),
        }
    }

    fn pick_for(
        dest: &str,
        sniffed: Option<&str>,
        tag: &str,
        source: Option<&str>,
        network: Network,
    ) -> &'static str {
        let table = Box::leak(Box::new(table()));
        let destination = Address::parse_host_port(dest).unwrap();
        let input = RouteInput {
            destination: &destination,
            sniffed,
            inbound_tag: tag,
            source: source.map(|s| s.parse().unwrap()),
            network,
        };
        pick(table, &input).0
    }

    #[test]
    fn first_match_wins_and_no_match_is_the_default() {
        assert_eq!(
            pick_for("10.1.2.3:443", None, "in", None, Network::Udp),
            "lan"
        );
        assert_eq!(
            pick_for("1.1.1.1:80", None, "in", None, Network::Tcp),
            "direct"
        );
    }

    #[test]
    fn every_non_destination_condition_must_hold() {
        assert_eq!(
            pick_for("www.example.com:443", None, "in", None, Network::Tcp),
            "web"
        );
        assert_eq!(
            pick_for("www.example.com:80", None, "in", None, Network::Tcp),
            "direct"
        );
        assert_eq!(
            pick_for("badexample.com:443", None, "in", None, Network::Tcp),
            "direct"
        );
    }

    #[test]
    fn the_sniffed_domain_routes_an_ip_addressed_flow() {
        assert_eq!(
            pick_for("1.1.1.1:443", Some("EXAMPLE.com"), "in", None, Network::Tcp),
            "web"
        );
    }

    #[test]
    fn network_inbound_tag_and_source_are_conditions() {
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", None, Network::Udp),
            "udp"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "special", None, Network::Tcp),
            "tagged"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", Some("192.168.1.1"), Network::Tcp),
            "office"
        );
        assert_eq!(
            pick_for(
                "1.1.1.1:53",
                None,
                "in",
                Some("::ffff:192.168.1.1"),
                Network::Tcp
            ),
            "office"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", Some("172.16.0.1"), Network::Tcp),
            "direct"
        );
    }
}
