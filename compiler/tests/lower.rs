//! Lowering fills in every default, so the runtime never meets a gap.

use std::time::Duration;

use etemenanki_compiler::{compile, Source};
use etemenanki_ir::spec::*;

fn spec(text: &str) -> Spec {
    match compile(&Source::new("test.toml", text)) {
        Ok(compiled) => compiled.spec,
        Err(diags) => panic!("does not compile: {diags:#?}"),
    }
}

fn upstream(spec: &Spec, tag: &str) -> Upstream {
    spec.outbound(tag)
        .unwrap()
        .protocol
        .upstream()
        .unwrap()
        .clone()
}

#[test]
fn sni_defaults_to_the_servers_name() {
    let s = spec(
        r#"
[[outbound]]
tag = "proxy"
protocol = "trojan"
server = "proxy1.example.com"
port = 443
[outbound.stream]
network = "tls"
[outbound.settings]
password = "pw"
"#,
    );
    let up = upstream(&s, "proxy");
    assert_eq!(up.transport.shape, StreamShape::Tls);
    let tls = up.transport.tls.unwrap();
    assert_eq!(tls.server_name, "proxy1.example.com");
    assert_eq!(tls.verify, Verify::System);
}

#[test]
fn websocket_host_and_path_default_from_the_server() {
    let s = spec(
        r#"
[[outbound]]
tag = "edge"
protocol = "vless"
server = "proxy1.example.com"
port = 443
[outbound.stream]
network = "ws"
security = "tls"
[outbound.settings]
id = "11111111-2222-3333-4444-555555555555"
"#,
    );
    let up = upstream(&s, "edge");
    assert_eq!(
        up.transport.shape,
        StreamShape::Ws {
            path: "/".into(),
            host: "proxy1.example.com".into()
        }
    );
    assert_eq!(up.transport.tls.unwrap().server_name, "proxy1.example.com");
}

#[test]
fn grpc_authority_and_service_default() {
    let s = spec(
        r#"
[[outbound]]
tag = "g"
protocol = "vmess"
server = "g.example.com"
port = 443
[outbound.stream]
network = "grpc"
[outbound.settings]
id = "11111111-2222-3333-4444-555555555555"
"#,
    );
    let up = upstream(&s, "g");
    assert_eq!(
        up.transport.shape,
        StreamShape::Grpc {
            service_name: "GunService".into(),
            authority: "g.example.com".into()
        }
    );
    assert!(up.transport.tls.is_none());
    let OutboundProtocol::Vmess { security, .. } = s.outbound("g").unwrap().protocol else {
        panic!()
    };
    assert_eq!(security, VmessSecurity::Auto);
}

#[test]
fn balancer_defaults_are_failover_30s_and_5s() {
    let s = spec(
        r#"
[[outbound]]
tag = "a"
protocol = "socks"
server = "127.0.0.1"
port = 1080
[[balancer]]
tag = "proxy"
outbounds = ["a"]
"#,
    );
    let b = s.balancer("proxy").unwrap();
    assert_eq!(b.strategy, Strategy::Failover);
    assert_eq!(b.probe_interval, Duration::from_secs(30));
    assert_eq!(b.probe_timeout, Duration::from_secs(5));
}

#[test]
fn the_default_route_is_the_first_outbound_never_a_balancer() {
    let s = spec(
        r#"
[[outbound]]
tag = "direct"
protocol = "freedom"
[[outbound]]
tag = "a"
protocol = "socks"
server = "127.0.0.1"
port = 1080
[[balancer]]
tag = "proxy"
outbounds = ["a"]
[[route.rule]]
outbound = "proxy"
domain_suffix = ["Example.COM."]
"#,
    );
    assert_eq!(s.route.default(), "direct");
    assert_eq!(s.route.rules()[0].domain_suffix, vec!["example.com"]);
    assert_eq!(
        s.route.rules()[0].line,
        13,
        "the line of its [[route.rule]] header"
    );
}

#[test]
fn inbounds_listen_on_loopback_and_socks_relays_udp_by_default() {
    let s = spec(
        r#"
[[inbound]]
tag = "socks-in"
protocol = "socks"
port = 1080
[[inbound]]
tag = "socks-tcp"
protocol = "socks"
port = 1081
[inbound.settings]
udp = false
[[outbound]]
tag = "direct"
protocol = "freedom"
"#,
    );
    assert_eq!(s.inbounds[0].listen, "127.0.0.1:1080".parse().unwrap());
    assert!(matches!(
        s.inbounds[0].protocol,
        InboundProtocol::Socks { udp: true, .. }
    ));
    assert!(matches!(
        s.inbounds[1].protocol,
        InboundProtocol::Socks { udp: false, .. }
    ));
    assert!(!s.inbounds[0].sniff);
}

#[test]
fn drain_policy_is_per_outbound_else_the_top_level_else_keep() {
    let s = spec(
        r#"
drain = "close after 30s"
[[outbound]]
tag = "a"
protocol = "freedom"
[[outbound]]
tag = "b"
protocol = "freedom"
drain = "close"
"#,
    );
    assert_eq!(
        s.outbound("a").unwrap().drain,
        DrainPolicy::CloseAfter(Duration::from_secs(30))
    );
    assert_eq!(s.outbound("b").unwrap().drain, DrainPolicy::Close);
    let plain = spec("[[outbound]]\ntag = \"a\"\nprotocol = \"freedom\"\n");
    assert_eq!(plain.outbound("a").unwrap().drain, DrainPolicy::Keep);
}

#[test]
fn split_dns_defaults_the_port_to_53() {
    let s = spec(
        r#"
[[outbound]]
tag = "direct"
protocol = "freedom"
[dns]
pre_proxy = ["1.1.1.1"]
through_proxy = ["8.8.8.8:5353", "[2001:4860:4860::8888]:53"]
"#,
    );
    assert_eq!(
        s.dns,
        DnsSpec::Split {
            pre_proxy: vec!["1.1.1.1:53".parse().unwrap()],
            through_proxy: vec![
                "8.8.8.8:5353".parse().unwrap(),
                "[2001:4860:4860::8888]:53".parse().unwrap()
            ],
        }
    );
}

#[test]
fn secrets_are_read_from_files_relative_to_the_config() {
    let dir = std::env::temp_dir().join(format!("etc-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pw.txt"), "from-a-file\n").unwrap();
    let text = r#"
[[outbound]]
tag = "t"
protocol = "trojan"
server = "t.example.com"
port = 443
[outbound.settings]
password = { file = "pw.txt" }
"#;
    let source = Source::new(dir.join("c.toml").display().to_string(), text);
    let s = compile(&source).unwrap().spec;
    let OutboundProtocol::Trojan { password, .. } = &s.outbound("t").unwrap().protocol else {
        panic!()
    };
    assert_eq!(password.expose(), "from-a-file");
    assert_eq!(format!("{password:?}"), "<secret>");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn all_problems_are_reported_not_only_the_first() {
    let text = r#"
[[outbound]]
tag = "a"
protocol = "vless"
server = "a.example.com"
port = 443
[outbound.settings]
id = "not-a-uuid"
[[outbound]]
tag = "a"
protocol = "shadowsocks"
server = "b.example.com"
port = 0
[outbound.settings]
method = "rc4"
password = "x"
[route]
default = "nowhere"
"#;
    let diags = compile(&Source::new("t.toml", text)).unwrap_err();
    let codes: Vec<&str> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect();
    for code in ["E0304", "E0102", "E0308", "E0305", "E0103"] {
        assert!(codes.contains(&code), "{code} missing from {codes:?}");
    }
}
