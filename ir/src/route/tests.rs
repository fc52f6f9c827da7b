//! The compiled table against the semantics: behaviour by behaviour, then
//! against a naive first-match walk over pseudo-random tables and flows.

use std::net::IpAddr;

use super::*;

fn rule(target: &str, edit: impl FnOnce(&mut Rule)) -> Rule {
    let mut rule = Rule {
        target: target.into(),
        line: 1,
        ..Rule::default()
    };
    edit(&mut rule);
    rule
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn table(rules: Vec<Rule>) -> RouteTable {
    RouteTable::new(rules, "default".into()).unwrap()
}

fn to(host: &str, port: u16) -> FlowKey<'_> {
    let destination = match host.parse::<IpAddr>() {
        Ok(ip) => Host::Ip(ip),
        Err(_) => Host::Domain(host),
    };
    FlowKey {
        network: Network::Tcp,
        destination,
        port,
        source: None,
        inbound_tag: None,
        sniffed: None,
    }
}

fn target<'t>(table: &'t RouteTable, flow: &FlowKey<'_>) -> &'t str {
    table.route(flow).target
}

#[test]
fn no_rule_matching_means_the_default() {
    let table = table(vec![rule("a", |r| r.domain = strings(&["example.com"]))]);
    assert_eq!(
        table.route(&to("example.org", 443)),
        Decision {
            rule: None,
            target: "default"
        }
    );
}

#[test]
fn a_later_rule_never_wins_over_an_earlier_match() {
    let table = table(vec![
        rule("keyword", |r| r.domain_keyword = strings(&["example"])),
        rule("exact", |r| r.domain = strings(&["www.example.com"])),
        rule("suffix", |r| r.domain_suffix = strings(&["example.com"])),
    ]);
    assert_eq!(
        table.route(&to("www.example.com", 443)),
        Decision {
            rule: Some(0),
            target: "keyword"
        }
    );
}

#[test]
fn an_earlier_rule_wins_whatever_matcher_matched_the_later_one() {
    let table = table(vec![
        rule("suffix", |r| r.domain_suffix = strings(&["example.com"])),
        rule("exact", |r| r.domain = strings(&["www.example.com"])),
        rule("any", |_| {}),
    ]);
    assert_eq!(target(&table, &to("www.example.com", 1)), "suffix");
    assert_eq!(target(&table, &to("example.net", 1)), "any");
}

#[test]
fn destination_matchers_of_one_rule_are_alternatives() {
    let table = table(vec![rule("a", |r| {
        r.domain = strings(&["example.com"]);
        r.cidr = vec![Cidr::parse("10.0.0.0/8").unwrap()];
    })]);
    assert_eq!(target(&table, &to("example.com", 1)), "a");
    assert_eq!(target(&table, &to("10.9.9.9", 1)), "a");
    assert_eq!(target(&table, &to("11.0.0.1", 1)), "default");
}

#[test]
fn every_other_condition_must_match_as_well() {
    let table = table(vec![rule("a", |r| {
        r.domain_suffix = strings(&["example.com"]);
        r.port = vec![
            PortRange {
                start: 443,
                end: 443,
            },
            PortRange {
                start: 8000,
                end: 8999,
            },
        ];
        r.network = Some(Network::Tcp);
        r.inbound_tag = strings(&["socks-in"]);
        r.source_cidr = vec![Cidr::parse("127.0.0.0/8").unwrap()];
    })]);
    let flow = FlowKey {
        network: Network::Tcp,
        destination: Host::Domain("example.com"),
        port: 8443,
        source: Some("127.0.0.1".parse().unwrap()),
        inbound_tag: Some("socks-in"),
        sniffed: None,
    };
    assert_eq!(target(&table, &flow), "a");
    assert_eq!(target(&table, &FlowKey { port: 80, ..flow }), "default");
    assert_eq!(
        target(
            &table,
            &FlowKey {
                network: Network::Udp,
                ..flow
            }
        ),
        "default"
    );
    assert_eq!(
        target(
            &table,
            &FlowKey {
                inbound_tag: Some("http-in"),
                ..flow
            }
        ),
        "default"
    );
    assert_eq!(
        target(
            &table,
            &FlowKey {
                inbound_tag: None,
                ..flow
            }
        ),
        "default"
    );
    assert_eq!(
        target(
            &table,
            &FlowKey {
                source: Some("10.0.0.1".parse().unwrap()),
                ..flow
            }
        ),
        "default"
    );
    assert_eq!(
        target(
            &table,
            &FlowKey {
                source: None,
                ..flow
            }
        ),
        "default"
    );
}

#[test]
fn a_rule_failing_its_conditions_lets_a_later_rule_match() {
    let table = table(vec![
        rule("udp", |r| {
            r.domain_suffix = strings(&["example.com"]);
            r.network = Some(Network::Udp);
        }),
        rule("tcp", |r| r.domain_suffix = strings(&["example.com"])),
    ]);
    assert_eq!(
        table.route(&to("example.com", 53)),
        Decision {
            rule: Some(1),
            target: "tcp"
        }
    );
}

#[test]
fn a_rule_with_no_destination_matcher_matches_any_destination() {
    let table = table(vec![rule("block", |r| r.network = Some(Network::Udp))]);
    let udp = |host| FlowKey {
        network: Network::Udp,
        ..to(host, 53)
    };
    assert_eq!(target(&table, &udp("example.com")), "block");
    assert_eq!(target(&table, &udp("1.1.1.1")), "block");
    assert_eq!(target(&table, &to("1.1.1.1", 53)), "default");
}

#[test]
fn the_sniffed_domain_routes_an_ip_addressed_flow() {
    let table = table(vec![rule("a", |r| {
        r.domain_suffix = strings(&["example.com"])
    })]);
    let flow = FlowKey {
        sniffed: Some("www.example.com"),
        ..to("93.184.216.34", 443)
    };
    assert_eq!(target(&table, &flow), "a");
    assert_eq!(target(&table, &to("93.184.216.34", 443)), "default");
}

#[test]
fn the_sniffed_domain_is_tried_beside_the_requested_one() {
    let table = table(vec![
        rule("requested", |r| r.domain = strings(&["requested.example"])),
        rule("sniffed", |r| r.domain = strings(&["sniffed.example"])),
    ]);
    let flow = FlowKey {
        sniffed: Some("sniffed.example"),
        ..to("other.example", 443)
    };
    assert_eq!(target(&table, &flow), "sniffed");
    let flow = FlowKey {
        sniffed: Some("sniffed.example"),
        ..to("requested.example", 443)
    };
    assert_eq!(target(&table, &flow), "requested");
}

#[test]
fn a_cidr_rule_does_not_match_a_flow_addressed_by_name() {
    let table = table(vec![rule("a", |r| {
        r.cidr = vec![Cidr::parse("0.0.0.0/0").unwrap()]
    })]);
    assert_eq!(target(&table, &to("localhost", 80)), "default");
}

#[test]
fn an_ipv4_mapped_destination_matches_ipv4_networks() {
    let table = table(vec![rule("a", |r| {
        r.cidr = vec![Cidr::parse("192.168.0.0/16").unwrap()]
    })]);
    assert_eq!(target(&table, &to("::ffff:192.168.1.1", 80)), "a");
}

#[test]
fn geoip_private_routes_local_addresses() {
    let table = table(vec![rule("direct", |r| r.geoip = strings(&["private"]))]);
    assert_eq!(target(&table, &to("192.168.1.1", 80)), "direct");
    assert_eq!(target(&table, &to("fd12::1", 80)), "direct");
    assert_eq!(target(&table, &to("8.8.8.8", 80)), "default");
}

#[test]
fn an_unknown_category_is_refused_with_the_known_ones() {
    let geoip = RouteTable::new(vec![rule("a", |r| r.geoip = strings(&["cn"]))], "d".into());
    assert_eq!(
        geoip.unwrap_err(),
        "rule 1 (line 1): unknown geoip category `cn`; known categories: private"
    );
    let geosite = RouteTable::new(
        vec![rule("a", |r| r.geosite = strings(&["cn"]))],
        "d".into(),
    );
    assert_eq!(
        geosite.unwrap_err(),
        "rule 1 (line 1): unknown geosite category `cn`; this build carries no geosite data"
    );
}

#[test]
fn a_malformed_domain_is_refused_with_its_rule() {
    let err = RouteTable::new(
        vec![rule("a", |r| r.domain_suffix = strings(&["a..b"]))],
        "d".into(),
    );
    assert_eq!(
        err.unwrap_err(),
        "rule 1 (line 1): `a..b` has an empty label"
    );
}

#[test]
fn a_table_round_trips_through_postcard_and_rebuilds_its_matchers() {
    let original = table(vec![
        rule("a", |r| r.domain_suffix = strings(&["example.com"])),
        rule("b", |r| r.cidr = vec![Cidr::parse("10.0.0.0/8").unwrap()]),
    ]);
    let bytes = postcard::to_allocvec(&original).unwrap();
    let decoded: RouteTable = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(decoded, original);
    assert_eq!(target(&decoded, &to("www.example.com", 1)), "a");
    assert_eq!(target(&decoded, &to("10.0.0.1", 1)), "b");
}

#[test]
fn a_plan_naming_an_unknown_category_does_not_decode() {
    #[derive(serde::Serialize)]
    struct Raw {
        rules: Vec<Rule>,
        default: String,
        domain_strategy: DomainStrategy,
    }
    let raw = Raw {
        rules: vec![rule("a", |r| r.geoip = strings(&["mars"]))],
        default: "d".into(),
        domain_strategy: DomainStrategy::AsIs,
    };
    let bytes = postcard::to_allocvec(&raw).unwrap();
    assert!(postcard::from_bytes::<RouteTable>(&bytes).is_err());
}

#[test]
fn the_domain_strategy_round_trips_and_makes_tables_differ() {
    let rules = vec![rule("a", |r| r.geoip = strings(&["private"]))];
    let as_is = table(rules.clone());
    let resolving = table(rules).with_domain_strategy(DomainStrategy::IpIfNonMatch);
    assert_ne!(as_is, resolving);
    let bytes = postcard::to_allocvec(&resolving).unwrap();
    let decoded: RouteTable = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(decoded.domain_strategy(), DomainStrategy::IpIfNonMatch);
    assert_eq!(decoded, resolving);
}

/// Routes `flow` as a runtime does: the name first, then, when the
/// strategy wants them, the addresses it "resolved" to.
fn resolving(
    table: &RouteTable,
    flow: &FlowKey<'_>,
    addresses: &[&str],
) -> (Option<usize>, Option<IpAddr>) {
    let decision = table.route(flow);
    if !table.wants_addresses(flow, &decision) {
        return (decision.rule, None);
    }
    let addresses: Vec<IpAddr> = addresses.iter().map(|a| a.parse().unwrap()).collect();
    let (decision, by) = table.route_resolved(flow, decision, &addresses);
    (decision.rule, by)
}

fn private_block_then(strategy: DomainStrategy) -> RouteTable {
    table(vec![
        rule("web", |r| r.domain_suffix = strings(&["example.com"])),
        rule("block", |r| r.geoip = strings(&["private"])),
        rule("lan", |r| r.domain = strings(&["printer.lan"])),
    ])
    .with_domain_strategy(strategy)
}

#[test]
fn under_as_is_a_name_is_never_matched_by_its_addresses() {
    let table = private_block_then(DomainStrategy::AsIs);
    let flow = to("localhost", 80);
    assert!(!table.wants_addresses(&flow, &table.route(&flow)));
    assert_eq!(resolving(&table, &flow, &["127.0.0.1"]), (None, None));
}

#[test]
fn ip_if_non_match_matches_a_name_no_rule_matches_by_its_addresses() {
    let table = private_block_then(DomainStrategy::IpIfNonMatch);
    let loopback: IpAddr = "::1".parse().unwrap();
    assert_eq!(
        resolving(&table, &to("localhost", 80), &["8.8.8.8", "::1"]),
        (Some(1), Some(loopback)),
        "any one address matching is enough"
    );
    assert_eq!(
        resolving(&table, &to("public.test", 80), &["8.8.8.8"]),
        (None, None)
    );
    assert_eq!(
        resolving(&table, &to("nowhere.test", 80), &[]),
        (None, None)
    );
}

#[test]
fn ip_if_non_match_keeps_a_name_match_even_after_an_ip_rule() {
    let table = private_block_then(DomainStrategy::IpIfNonMatch);
    let flow = to("printer.lan", 80);
    assert!(!table.wants_addresses(&flow, &table.route(&flow)));
    assert_eq!(resolving(&table, &flow, &["192.168.1.9"]), (Some(2), None));
}

#[test]
fn ip_on_demand_resolves_once_an_ip_rule_comes_before_the_name_match() {
    let table = private_block_then(DomainStrategy::IpOnDemand);
    let printer = to("printer.lan", 80);
    let lan: IpAddr = "192.168.1.9".parse().unwrap();
    assert_eq!(
        resolving(&table, &printer, &["192.168.1.9"]),
        (Some(1), Some(lan))
    );
    assert_eq!(resolving(&table, &printer, &["8.8.8.8"]), (Some(2), None));
    let web = to("www.example.com", 443);
    assert!(
        !table.wants_addresses(&web, &table.route(&web)),
        "a name matched before any ip rule is not resolved"
    );
}

#[test]
fn a_table_without_ip_rules_never_wants_addresses() {
    let table = table(vec![rule("web", |r| r.domain = strings(&["example.com"]))])
        .with_domain_strategy(DomainStrategy::IpOnDemand);
    let flow = to("other.test", 80);
    assert!(!table.wants_addresses(&flow, &table.route(&flow)));
}

/// The semantics written down as plainly as possible: every rule in order,
/// every value compared directly.
fn naive<'t>(rules: &'t [Rule], default: &'t str, flow: &FlowKey<'_>) -> Decision<'t> {
    match rules.iter().position(|rule| rule.explain(flow).is_some()) {
        Some(index) => Decision {
            rule: Some(index),
            target: &rules[index].target,
        },
        None => Decision {
            rule: None,
            target: default,
        },
    }
}

/// A small deterministic xorshift generator: bounded and reproducible.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }

    fn chance(&mut self, in_four: usize) -> bool {
        self.below(4) < in_four
    }
}

const LABELS: &[&str] = &["a", "b", "ex", "com", "net", "Ex", "ample", "xam", "COM"];
const KEYWORDS: &[&str] = &["ex", "am", "b.c", "a", "om", "XA", "ple.n"];
const NETWORKS: &[&str] = &[
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3",
    "192.168.0.0/16",
    "0.0.0.0/0",
    "fd00::/8",
    "fd00:1::/32",
    "::/0",
    "::1",
    "::ffff:10.1.0.0/112",
];
const ADDRESSES: &[&str] = &[
    "10.1.2.3",
    "10.1.9.9",
    "10.9.9.9",
    "192.168.5.5",
    "8.8.8.8",
    "fd00:1::1",
    "fd99::1",
    "::1",
    "2001:db8::1",
    "::ffff:10.1.2.3",
    "127.0.0.1",
];

fn name(random: &mut Random) -> String {
    let labels = 1 + random.below(3);
    let mut name: Vec<&str> = (0..labels).map(|_| random.pick(LABELS)).collect();
    if random.chance(1) {
        name.push("");
    }
    name.join(".")
}

fn random_rule(random: &mut Random, index: usize) -> Rule {
    let mut rule = Rule {
        target: format!("out{index}"),
        line: index as u32 + 1,
        ..Rule::default()
    };
    for _ in 0..random.below(3) {
        match random.below(5) {
            0 => rule
                .domain
                .push(name(random).trim_end_matches('.').to_owned()),
            1 => rule
                .domain_suffix
                .push(name(random).trim_end_matches('.').to_owned()),
            2 => rule.domain_keyword.push(random.pick(KEYWORDS).to_owned()),
            3 => rule.cidr.push(Cidr::parse(random.pick(NETWORKS)).unwrap()),
            _ => rule.geoip.push("private".into()),
        }
    }
    if random.chance(1) {
        let start = [53u16, 80, 443, 1000][random.below(4)];
        rule.port.push(PortRange {
            start,
            end: start + random.below(2) as u16 * 500,
        });
    }
    if random.chance(1) {
        rule.network = Some([Network::Tcp, Network::Udp][random.below(2)]);
    }
    if random.chance(1) {
        rule.inbound_tag
            .push(random.pick(&["in1", "in2"]).to_owned());
    }
    if random.chance(1) {
        rule.source_cidr
            .push(Cidr::parse(random.pick(NETWORKS)).unwrap());
    }
    rule
}

#[test]
fn the_compiled_lookup_equals_a_naive_first_match_walk() {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200 {
        let rules: Vec<Rule> = (0..1 + random.below(12))
            .map(|i| random_rule(&mut random, i))
            .collect();
        let table = RouteTable::new(rules.clone(), "default".into()).unwrap();
        for _ in 0..100 {
            let host = if random.chance(2) {
                name(&mut random)
            } else {
                random.pick(ADDRESSES).to_owned()
            };
            let sniffed = random.chance(1).then(|| name(&mut random));
            let flow = FlowKey {
                network: [Network::Tcp, Network::Udp][random.below(2)],
                destination: match host.parse() {
                    Ok(ip) => Host::Ip(ip),
                    Err(_) => Host::Domain(&host),
                },
                port: [53u16, 80, 443, 700, 1200][random.below(5)],
                source: random
                    .chance(3)
                    .then(|| random.pick(ADDRESSES).parse().unwrap()),
                inbound_tag: random
                    .chance(3)
                    .then(|| random.pick(&["in1", "in2", "in3"])),
                sniffed: sniffed.as_deref(),
            };
            assert_eq!(
                table.route(&flow),
                naive(&rules, "default", &flow),
                "{flow:?} over {rules:#?}"
            );
        }
    }
}

#[test]
fn every_shadowed_rule_really_never_matches_in_random_tables() {
    let mut random = Random(0x2545_f491_4f6c_dd1d);
    for _ in 0..300 {
        let rules: Vec<Rule> = (0..1 + random.below(8))
            .map(|i| random_rule(&mut random, i))
            .collect();
        let table = RouteTable::new(rules.clone(), "default".into()).unwrap();
        let shadowed = shadowed(&rules);
        for _ in 0..200 {
            let host = if random.chance(2) {
                name(&mut random)
            } else {
                random.pick(ADDRESSES).to_owned()
            };
            let sniffed = random.chance(1).then(|| name(&mut random));
            let flow = FlowKey {
                network: [Network::Tcp, Network::Udp][random.below(2)],
                destination: match host.parse() {
                    Ok(ip) => Host::Ip(ip),
                    Err(_) => Host::Domain(&host),
                },
                port: [53u16, 80, 443, 700, 1200][random.below(5)],
                source: random
                    .chance(3)
                    .then(|| random.pick(ADDRESSES).parse().unwrap()),
                inbound_tag: random
                    .chance(3)
                    .then(|| random.pick(&["in1", "in2", "in3"])),
                sniffed: sniffed.as_deref(),
            };
            if let Some(matched) = table.route(&flow).rule {
                assert!(
                    shadowed.iter().all(|&(later, _)| later != matched),
                    "rule {matched} is reported shadowed but matched {flow:?} over {rules:#?}"
                );
            }
        }
    }
}
