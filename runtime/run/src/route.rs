//! Routing a flow or packet on the compiled route table
//! (`ir::route::RouteTable`, whose lookup cost does not grow with the number
//! of rules or domains): first match in the order written, no match means
//! the default; domain matchers also try the sniffed domain.

use std::borrow::Cow;
use std::net::IpAddr;

use etemenanki_ir::route::{FlowKey, Host, Network, RouteTable};
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
    // The table holds names in lowercase; a client may send any case.
    let name = input.destination.domain().map(lowercase);
    let destination = match (&name, input.destination) {
        (Some(name), _) => Host::Domain(name),
        (None, Address::Ip(addr)) => Host::Ip(addr.ip()),
        (None, Address::Domain(..)) => unreachable!("a domain address has a name"),
    };
    let sniffed = input.sniffed.map(lowercase);
    let decision = table.route(&FlowKey {
        network: input.network,
        destination,
        port: input.destination.port(),
        source: input.source,
        inbound_tag: Some(input.inbound_tag),
        sniffed: sniffed.as_deref(),
    });
    (decision.target, decision.rule)
}

fn lowercase(name: &str) -> Cow<'_, str> {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etemenanki_ir::route::{Cidr, PortRange, Rule};

    fn table() -> RouteTable {
        RouteTable::new(
            vec![
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
            "direct".into(),
        )
        .unwrap()
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
