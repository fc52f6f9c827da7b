//! `etc route` through the real binary: the rule that matched with its line,
//! the default, and the exit codes for an invalid config and a bad flow.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

fn etc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_etc"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("etc runs")
}

/// Writes a config to a file of its own: tests run in parallel.
fn write(text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("etc-route-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.toml", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, text).unwrap();
    path
}

const CONFIG: &str = r#"[[inbound]]
tag = "socks-in"
protocol = "socks"
port = 1080

[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "block"
protocol = "blackhole"

[[outbound]]
tag = "proxy"
protocol = "freedom"

[route]
default = "proxy"

[[route.rule]]
outbound = "block"
network = "udp"
port = [443]

[[route.rule]]
outbound = "direct"
geoip = ["private"]
domain_suffix = ["lan.example"]

[[route.rule]]
outbound = "block"
domain_keyword = ["ads"]
inbound_tag = ["socks-in"]

[[route.rule]]
outbound = "direct"
source_cidr = ["192.168.0.0/16"]
"#;

/// Runs `etc route` on the fixture and returns its stdout line.
fn route(args: &[&str]) -> String {
    let config = write(CONFIG);
    let mut all = vec!["route", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = etc(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_matching_rule_is_named_by_number_and_line() {
    assert_eq!(
        route(&["tcp", "192.168.1.1:80"]),
        "rule 2 (line 26) -> direct: geoip private\n"
    );
    assert_eq!(
        route(&["tcp", "nas.LAN.example:445"]),
        "rule 2 (line 26) -> direct: domain_suffix lan.example\n"
    );
    assert_eq!(
        route(&["udp", "[::1]:443"]),
        "rule 1 (line 21) -> block: network udp, port 443\n"
    );
}

#[test]
fn no_matching_rule_means_the_default() {
    assert_eq!(
        route(&["tcp", "example.com:443"]),
        "default -> proxy: no rule matches\n"
    );
    assert_eq!(
        route(&["tcp", "8.8.8.8:53"]),
        "default -> proxy: no rule matches\n"
    );
}

#[test]
fn the_flow_options_reach_the_rules_conditions() {
    assert_eq!(
        route(&["tcp", "ads.example.com:443"]),
        "default -> proxy: no rule matches\n"
    );
    assert_eq!(
        route(&["tcp", "ads.example.com:443", "--inbound", "socks-in"]),
        "rule 3 (line 31) -> block: domain_keyword ads, inbound_tag socks-in\n"
    );
    assert_eq!(
        route(&["tcp", "example.com:443", "--source", "192.168.7.7"]),
        "rule 4 (line 36) -> direct: source_cidr 192.168.0.0/16\n"
    );
    assert_eq!(
        route(&["tcp", "93.184.216.34:443", "--sniffed", "x.lan.example"]),
        "rule 2 (line 26) -> direct: domain_suffix lan.example (sniffed)\n"
    );
}

#[test]
fn an_invalid_config_prints_its_diagnostics_and_exits_1() {
    let config = write(&CONFIG.replace(r#"geoip = ["private"]"#, r#"geoip = ["mars"]"#));
    let out = etc(&["route", config.to_str().unwrap(), "tcp", "example.com:443"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("unknown geoip category `mars`"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_malformed_flow_is_a_usage_error() {
    let config = write(CONFIG);
    let config = config.to_str().unwrap();
    for args in [
        ["route", config, "tcp", "example.com"],
        ["route", config, "tcp", "::1:53"],
        ["route", config, "sctp", "example.com:443"],
        ["route", config, "tcp", "example.com:99999"],
    ] {
        let out = etc(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = etc(&[
        "route",
        config,
        "tcp",
        "example.com:443",
        "--source",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

const STRATEGY: &str = r#"[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "block"
protocol = "blackhole"

[[outbound]]
tag = "lan"
protocol = "freedom"

[route]
default = "direct"
domain_strategy = "STRATEGY"

[[route.rule]]
outbound = "block"
geoip = ["private"]

[[route.rule]]
outbound = "lan"
domain = ["printer.lan"]
"#;

fn route_under(strategy: &str, args: &[&str]) -> String {
    let config = write(&STRATEGY.replace("STRATEGY", strategy));
    let mut all = vec!["route", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = etc(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_destination_written_as_any_ip_form_routes_as_an_ip() {
    for destination in ["[::ffff:127.0.0.1]:80", "[::1]:80", "127.0.0.1:80"] {
        assert_eq!(
            route(&["tcp", destination]),
            "rule 2 (line 26) -> direct: geoip private\n",
            "{destination}"
        );
    }
}

#[test]
fn as_is_shows_nothing_more_and_ignores_resolved_addresses() {
    assert_eq!(
        route_under("as_is", &["tcp", "localhost:80"]),
        "default -> direct: no rule matches\n"
    );
    assert_eq!(
        route_under("as_is", &["tcp", "localhost:80", "--resolved", "127.0.0.1"]),
        "default -> direct: no rule matches\n\
         domain strategy as_is: names are not resolved for routing, so --resolved is ignored\n"
    );
}

#[test]
fn ip_if_non_match_says_the_runtime_resolves_and_routes_by_the_resolved_addresses() {
    assert_eq!(
        route_under("ip_if_non_match", &["tcp", "localhost:80"]),
        "default -> direct: no rule matches\n\
         domain strategy ip_if_non_match: the runtime resolves localhost and routes again by its addresses; pass --resolved IP to see where they go\n"
    );
    assert_eq!(
        route_under(
            "ip_if_non_match",
            &[
                "tcp",
                "localhost:80",
                "--resolved",
                "8.8.8.8",
                "--resolved",
                "::1"
            ]
        ),
        "rule 1 (line 17) -> block: geoip private (resolved ::1)\n\
         domain strategy ip_if_non_match: localhost resolved to 8.8.8.8, ::1\n"
    );
    assert_eq!(
        route_under("ip_if_non_match", &["tcp", "example.com:80", "--resolved", "8.8.8.8"]),
        "default -> direct: no rule matches\n\
         domain strategy ip_if_non_match: example.com resolved to 8.8.8.8; no rule matches its addresses either\n"
    );
    assert_eq!(
        route_under(
            "ip_if_non_match",
            &["tcp", "printer.lan:80", "--resolved", "10.0.0.9"]
        ),
        "rule 2 (line 21) -> lan: domain printer.lan\n\
         domain strategy ip_if_non_match: a rule matches the name, so it is not resolved\n"
    );
}

#[test]
fn ip_on_demand_routes_a_name_by_its_addresses_at_the_first_ip_rule() {
    assert_eq!(
        route_under(
            "ip_on_demand",
            &["tcp", "printer.lan:80", "--resolved", "10.0.0.9"]
        ),
        "rule 1 (line 17) -> block: geoip private (resolved 10.0.0.9)\n\
         domain strategy ip_on_demand: printer.lan resolved to 10.0.0.9\n"
    );
    assert_eq!(
        route_under("ip_on_demand", &["tcp", "printer.lan:80", "--resolved", "1.1.1.1"]),
        "rule 2 (line 21) -> lan: domain printer.lan\n\
         domain strategy ip_on_demand: printer.lan resolved to 1.1.1.1; no address matches an earlier rule\n"
    );
}

#[test]
fn a_udp_packet_addressed_by_name_is_routed_by_its_addresses_as_a_tcp_flow_is() {
    let udp = route_under(
        "ip_if_non_match",
        &["udp", "localhost:53", "--resolved", "127.0.0.1"],
    );
    assert!(udp.starts_with("rule 1 "), "{udp}");
    assert!(
        udp.contains("-> block: geoip private (resolved 127.0.0.1)"),
        "{udp}"
    );
}

#[test]
fn the_quickstart_keeps_clients_out_of_the_local_network() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for file in ["quickstart.et", "quickstart.toml"] {
        let config = examples.join(file);
        let config = config.to_str().unwrap();
        for destination in [
            "169.254.169.254:80",
            "127.0.0.1:80",
            "[::1]:80",
            "0.0.0.0:80",
            "[fe80::1]:80",
            "100.64.0.1:80",
            "[fc00::1]:80",
            "10.1.2.3:22",
            "[::ffff:192.168.1.1]:80",
        ] {
            let out = etc(&["route", config, "tcp", destination]);
            let shown = String::from_utf8_lossy(&out.stdout);
            assert!(
                shown.contains("-> block: geoip private"),
                "{file} {destination}: {shown}"
            );
        }
        let out = etc(&[
            "route",
            config,
            "tcp",
            "localhost:80",
            "--resolved",
            "127.0.0.1",
        ]);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            shown.starts_with("rule 1 (line ")
                && shown.contains("-> block: geoip private (resolved 127.0.0.1)"),
            "{file}: {shown}"
        );
        let out = etc(&[
            "route",
            config,
            "tcp",
            "example.com:443",
            "--resolved",
            "93.184.215.14",
        ]);
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("default -> direct"));
    }
}
