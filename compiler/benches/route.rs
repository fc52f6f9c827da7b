//! The route table at scale: compile time, plan.bin size and lookup time
//! per flow for tables of 10, 1,000 and 10,000 rules, the largest holding
//! 100,000 domains. Prints figures; asserts nothing about speed. "etc ms"
//! is the whole compiler on the table written as TOML; "compile ms" is
//! `RouteTable::new` alone; "decode ms" reads plan.bin back, which
//! rebuilds the matchers.
//!
//! Lookups are timed for flows that match a rule ("hit") and flows that
//! match none ("miss"), over a few popular destinations ("hot") and over
//! destinations spread across the whole table ("cold"). The work a lookup
//! does does not depend on the number of rules; a cold lookup in a large
//! table pays for cache misses, as the indices no longer fit the CPU cache.
//!
//! A second table times `etc check` as a whole (compile, then render every
//! warning for a human and as JSON) on two large configurations: 16,000
//! outbounds nothing routes to, and 16,000 rules an earlier rule shadows,
//! each written as TOML and as `.et`. Each of those is one warning a line
//! of input, so a cost per warning that grows with the file shows here.
//!
//! `cargo bench -p etemenanki-compiler --bench route`

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use etemenanki_compiler::render::{self, Style};
use etemenanki_compiler::{compile, Source};
use etemenanki_ir::encode::{decode, encode};
use etemenanki_ir::route::{shadowed, Cidr, FlowKey, Host, Network, PortRange, RouteTable, Rule};
use etemenanki_ir::spec::{
    AddressFamily, DnsSpec, DrainPolicy, Limits, OutboundProtocol, OutboundSpec, SocketPolicy, Spec,
};

/// Domains per rule on average, so 10,000 rules hold 100,000 domains.
const DOMAINS_PER_RULE: usize = 10;
/// Lookups timed per figure: bounded, and enough to average out noise.
const LOOKUPS: usize = 1_000_000;
/// Each figure is the best of this many runs, as the machine is shared.
const RUNS: usize = 3;
/// Flows a "hot" figure cycles through: popular destinations whose index
/// entries stay in the CPU cache, as in real traffic.
const HOT: usize = 64;
/// Flows a "cold" figure cycles through, spread over the whole table: most
/// lookups miss the CPU cache once the table outgrows it.
const COLD: usize = 4_096;
const TLDS: &[&str] = &["com", "net", "org", "io", "cn", "de"];

/// A small deterministic xorshift generator: the same tables every run.
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
}

/// The `n`-th registrable name of the generated tables.
fn site(rule: usize, entry: usize) -> String {
    format!("site{rule}x{entry}.{}", TLDS[(rule + entry) % TLDS.len()])
}

/// A table of `count` rules: four in ten list exact domains, three in ten
/// suffixes, one in ten keywords, two in ten networks; one in eight also
/// has a port condition and one in twenty a network condition.
fn rules(count: usize) -> Vec<Rule> {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    (0..count)
        .map(|i| {
            let mut rule = Rule {
                target: format!("out{}", i % 4),
                line: i as u32 + 1,
                ..Rule::default()
            };
            let entries = 1 + random.below(2 * DOMAINS_PER_RULE - 1);
            match i % 10 {
                0..=3 => {
                    rule.domain = (0..entries)
                        .map(|e| format!("www.{}", site(i, e)))
                        .collect()
                }
                4..=6 => rule.domain_suffix = (0..entries).map(|e| site(i, e)).collect(),
                7 => rule.domain_keyword = (0..entries).map(|e| format!("kw{i}k{e}")).collect(),
                _ => {
                    rule.domain_suffix = (0..entries).map(|e| site(i, e)).collect();
                    rule.cidr = (0..4)
                        .map(|e| {
                            let addr = Ipv4Addr::from(0x0a00_0000 | ((i as u32 * 4 + e) << 8));
                            Cidr {
                                addr: IpAddr::V4(addr),
                                prefix: 24,
                            }
                        })
                        .collect();
                }
            }
            if i % 8 == 0 {
                rule.port = vec![
                    PortRange {
                        start: 443,
                        end: 443,
                    },
                    PortRange {
                        start: 8000,
                        end: 8999,
                    },
                ];
            }
            if i % 20 == 0 {
                rule.network = Some(Network::Tcp);
            }
            rule
        })
        .collect()
}

/// Destinations to look up: half hit a rule anywhere in the table (by
/// exact name, subdomain, keyword or address), half hit nothing.
fn destinations(rules: &[Rule], count: usize) -> Vec<(String, Option<IpAddr>)> {
    let mut random = Random(0x2545_f491_4f6c_dd1d);
    (0..count)
        .map(|n| {
            let rule = &rules[random.below(rules.len())];
            let pick =
                |list: &[String], random: &mut Random| list[random.below(list.len())].clone();
            if n % 2 == 1 {
                return match n % 3 {
                    0 => (format!("nowhere{n}.example.{}", TLDS[n % TLDS.len()]), None),
                    1 => (format!("sub.www.unknown{n}.com"), None),
                    _ => (
                        String::new(),
                        Some(IpAddr::V4(Ipv4Addr::new(172, 20, (n >> 8) as u8, n as u8))),
                    ),
                };
            }
            if !rule.cidr.is_empty() && n % 4 == 0 {
                let net = rule.cidr[random.below(rule.cidr.len())];
                let IpAddr::V4(v4) = net.addr else {
                    unreachable!("the generator writes IPv4")
                };
                return (
                    String::new(),
                    Some(IpAddr::V4(Ipv4Addr::from(u32::from(v4) | 7))),
                );
            }
            if !rule.domain.is_empty() {
                (pick(&rule.domain, &mut random), None)
            } else if !rule.domain_suffix.is_empty() {
                (
                    format!("cdn.{}", pick(&rule.domain_suffix, &mut random)),
                    None,
                )
            } else {
                (
                    format!("a{}.b.com", pick(&rule.domain_keyword, &mut random)),
                    None,
                )
            }
        })
        .collect()
}

fn spec(route: RouteTable) -> Spec {
    Spec {
        inbounds: vec![],
        outbounds: (0..4)
            .map(|i| OutboundSpec {
                tag: format!("out{i}"),
                protocol: OutboundProtocol::Freedom {
                    address_family: AddressFamily::Auto,
                },
                drain: DrainPolicy::Keep,
            })
            .collect(),
        balancers: vec![],
        route,
        dns: DnsSpec::System,
        socket: SocketPolicy::default(),
        limits: Limits::default(),
    }
}

/// The table as the TOML an operator would write, so the whole compiler
/// (parse, lower, validate with the shadow analysis, compile) is timed too.
fn toml(rules: &[Rule]) -> String {
    let list = |items: Vec<String>| {
        let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut out = String::new();
    for i in 0..4 {
        out.push_str(&format!(
            "[[outbound]]\ntag = \"out{i}\"\nprotocol = \"freedom\"\n\n"
        ));
    }
    out.push_str("[route]\ndefault = \"out0\"\n\n");
    for rule in rules {
        out.push_str(&format!("[[route.rule]]\noutbound = {:?}\n", rule.target));
        let keys = [
            ("domain", rule.domain.clone()),
            ("domain_suffix", rule.domain_suffix.clone()),
            ("domain_keyword", rule.domain_keyword.clone()),
            ("cidr", rule.cidr.iter().map(ToString::to_string).collect()),
            ("port", rule.port.iter().map(ToString::to_string).collect()),
        ];
        for (key, values) in keys {
            if !values.is_empty() {
                out.push_str(&format!("{key} = {}\n", list(values)));
            }
        }
        if let Some(network) = rule.network {
            out.push_str(&format!("network = {:?}\n", network.name()));
        }
        out.push('\n');
    }
    out
}

/// `count` outbounds that nothing routes to, after the one the default
/// goes to.
fn unused_outbounds(count: usize, et: bool) -> String {
    (0..=count)
        .map(|i| match (et, i) {
            (true, 0) => "outbound direct freedom {}\n".to_owned(),
            (true, _) => format!("outbound o{i} freedom {{}}\n"),
            (false, 0) => "[[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n".to_owned(),
            (false, _) => format!("[[outbound]]\ntag = \"o{i}\"\nprotocol = \"freedom\"\n\n"),
        })
        .collect()
}

/// A rule for 10.0.0.0/8 and `count` rules for the /24s inside it, which
/// it shadows.
fn shadowed_rules(count: usize, et: bool) -> String {
    let cidrs = std::iter::once("10.0.0.0/8".to_owned())
        .chain((0..count).map(|i| format!("10.{}.{}.0/24", (i >> 8) & 0xff, i & 0xff)));
    if et {
        let rules: String = cidrs.map(|c| format!("  cidr {c} -> block\n")).collect();
        format!("outbound direct freedom {{}}\noutbound block blackhole {{}}\nroute {{\n{rules}  default -> direct\n}}\n")
    } else {
        let rules: String = cidrs
            .map(|c| format!("[[route.rule]]\noutbound = \"block\"\ncidr = [\"{c}\"]\n\n"))
            .collect();
        format!("[[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n[[outbound]]\ntag = \"block\"\nprotocol = \"blackhole\"\n\n[route]\ndefault = \"direct\"\n\n{rules}")
    }
}

/// The second table: `etc check` on 16,000 unused outbounds and on 16,000
/// shadowed rules.
fn check_figures() {
    println!(
        "\n{:<32} {:>8} {:>10} {:>8} {:>8}",
        "etc check", "warnings", "compile ms", "human ms", "json ms"
    );
    type Generate = fn(usize, bool) -> String;
    let cases: [(&str, Generate); 2] = [
        ("unused outbounds", unused_outbounds),
        ("shadowed rules", shadowed_rules),
    ];
    for (what, generate) in cases {
        for (et, ext) in [(false, "toml"), (true, "et")] {
            let count = 16_000;
            let source = Source::new(format!("generated.{ext}"), generate(count, et));
            let (compiled, compile_time) =
                time(|| compile(&source).expect("the generated config compiles"));
            let warnings = compiled.warnings;
            assert_eq!(warnings.len(), count, "{what}: one warning each");
            let (human, human_time) = time(|| render::human(&source, &warnings, Style::plain()));
            let (json, json_time) = time(|| render::json(&[(&source, &warnings[..])]));
            black_box((human, json));
            println!(
                "{:<32} {:>8} {:>10.0} {:>8.0} {:>8.0}",
                format!("{count} {what} ({ext})"),
                warnings.len(),
                compile_time.as_secs_f64() * 1e3,
                human_time.as_secs_f64() * 1e3,
                json_time.as_secs_f64() * 1e3,
            );
        }
    }
}

fn time<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = work();
    (out, start.elapsed())
}

fn main() {
    println!(
        "{:>6} {:>7} {:>8} {:>10} {:>9} {:>8} {:>9} {:>10} {:>9} {:>10} {:>10}",
        "rules",
        "domains",
        "etc ms",
        "compile ms",
        "shadow ms",
        "plan KiB",
        "decode ms",
        "hit hot ns",
        "miss hot",
        "hit cold",
        "miss cold"
    );
    for count in [10, 1_000, 10_000] {
        let generated = rules(count);
        let domains: usize = generated
            .iter()
            .map(|r| r.domain.len() + r.domain_suffix.len() + r.domain_keyword.len())
            .sum();
        let source = Source::new("generated.toml", toml(&generated));
        let (compiled, etc) = time(|| compile(&source).expect("the generated config compiles"));
        // The compiled rules carry their source lines; otherwise the same.
        let rules = compiled.spec.route.rules().to_vec();
        assert!(rules.iter().zip(&generated).all(|(c, g)| Rule {
            line: g.line,
            ..c.clone()
        } == *g));
        let (table, compile) =
            time(|| RouteTable::new(rules.clone(), "out0".into()).expect("the table compiles"));
        let (shadows, shadow) = time(|| shadowed(&rules));
        black_box(shadows);
        let plan = encode(
            &spec(table.clone()),
            b"generated",
            env!("CARGO_PKG_VERSION"),
        );
        let (decoded, decode_time) = time(|| decode(&plan).expect("the plan decodes"));
        assert!(decoded.spec.route == table);

        let destinations = destinations(&rules, 2 * COLD);
        let flows: Vec<FlowKey<'_>> = destinations
            .iter()
            .map(|(name, ip)| FlowKey {
                network: Network::Tcp,
                destination: ip.map_or(Host::Domain(name), Host::Ip),
                port: 443,
                source: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                inbound_tag: Some("socks-in"),
                sniffed: None,
            })
            .collect();
        let (hits, misses): (Vec<_>, Vec<_>) = flows
            .iter()
            .copied()
            .partition(|flow| table.route(flow).rule.is_some());
        let per_lookup = |flows: &[FlowKey<'_>]| {
            (0..RUNS)
                .map(|_| {
                    let ((), elapsed) = time(|| {
                        for flow in flows.iter().cycle().take(LOOKUPS) {
                            black_box(table.route(black_box(flow)));
                        }
                    });
                    elapsed.as_nanos() as f64 / LOOKUPS as f64
                })
                .fold(f64::INFINITY, f64::min)
        };
        println!(
            "{count:>6} {domains:>7} {:>8.0} {:>10.1} {:>9.1} {:>8.1} {:>9.1} {:>10.0} {:>9.0} {:>10.0} {:>10.0}",
            etc.as_secs_f64() * 1e3,
            compile.as_secs_f64() * 1e3,
            shadow.as_secs_f64() * 1e3,
            plan.len() as f64 / 1024.0,
            decode_time.as_secs_f64() * 1e3,
            per_lookup(&hits[..HOT]),
            per_lookup(&misses[..HOT]),
            per_lookup(&hits[..COLD.min(hits.len())]),
            per_lookup(&misses[..COLD.min(misses.len())]),
        );
    }
    check_figures();
}
