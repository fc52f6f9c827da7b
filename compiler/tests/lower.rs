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
            host: "proxy1.example.com".into(),
            early_data: None,
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
            pre_proxy: vec![DnsServer::Plain("1.1.1.1:53".parse().unwrap())],
            through_proxy: vec![
                DnsServer::Plain("8.8.8.8:5353".parse().unwrap()),
                DnsServer::Plain("[2001:4860:4860::8888]:53".parse().unwrap())
            ],
        }
    );
}

#[test]
fn dns_over_tls_and_https_check_the_urls_host_against_the_ca_file() {
    let text = r#"
[[outbound]]
tag = "direct"
protocol = "freedom"
[dns]
servers = ["tls://1.1.1.1", "https://dns.example/dns-query", "https://[::1]:8443/q", "9.9.9.9"]
ca_file = "tls/cert.pem"
[route]
default = "direct"
[[route.rule]]
outbound = "dns"
port = [53]
"#;
    let s = compile(&beside_examples(text)).unwrap().spec;
    let verify = Verify::CustomCa {
        path: "tls/cert.pem".into(),
        pem: example_file("tls/cert.pem"),
    };
    let tls = |name: &str, alpn: &[&str]| TlsSpec {
        server_name: name.into(),
        verify: verify.clone(),
        alpn: alpn.iter().map(|a| a.to_string()).collect(),
    };
    let hp = |host: Host, port| HostPort { host, port };
    assert_eq!(
        s.dns,
        DnsSpec::Single {
            servers: vec![
                DnsServer::Tls {
                    server: hp(Host::Ip("1.1.1.1".parse().unwrap()), 853),
                    tls: tls("1.1.1.1", &[]),
                },
                DnsServer::Https {
                    server: hp(Host::Domain("dns.example".into()), 443),
                    path: "/dns-query".into(),
                    tls: tls("dns.example", &["h2"]),
                },
                DnsServer::Https {
                    server: hp(Host::Ip("::1".parse().unwrap()), 8443),
                    path: "/q".into(),
                    tls: tls("::1", &["h2"]),
                },
                DnsServer::Plain("9.9.9.9:53".parse().unwrap()),
            ],
        }
    );
    assert_eq!(s.route.rules()[0].target, DNS_TARGET);
}

#[test]
fn the_dns_tag_is_reserved_for_the_dns_service() {
    let text = r#"
[[outbound]]
tag = "dns"
protocol = "freedom"
[[outbound]]
tag = "direct"
protocol = "freedom"
[[balancer]]
tag = "dns"
outbounds = ["direct"]
"#;
    let diags = compile(&Source::new("test.toml", text)).unwrap_err();
    let reserved: Vec<_> = diags.iter().filter(|d| d.code == "E0105").collect();
    assert_eq!(reserved.len(), 2, "{diags:#?}");
    assert_eq!(
        reserved[0].message,
        "the tag `dns` is reserved for the internal DNS service"
    );
}

#[test]
fn a_dns_inbound_takes_no_settings() {
    let s = spec(
        r#"
[[inbound]]
tag = "local-dns"
protocol = "dns"
port = 5353
[[outbound]]
tag = "direct"
protocol = "freedom"
"#,
    );
    let inbound = s.inbound("local-dns").unwrap();
    assert_eq!(inbound.protocol, InboundProtocol::Dns);
    assert_eq!(inbound.listen, "127.0.0.1:5353".parse().unwrap());
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

/// A source beside examples/, where `tls/cert.pem` and `tls/key.pem` are.
fn beside_examples(text: &str) -> Source {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/test.toml");
    Source::new(path.display().to_string(), text)
}

fn example_file(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name),
    )
    .unwrap()
}

#[test]
fn socks_and_http_inbounds_serve_tls_read_when_compiled() {
    let text = r#"
[[inbound]]
tag = "socks-tls"
protocol = "socks"
port = 1443
[inbound.stream]
security = "tls"
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"

[[inbound]]
tag = "https"
protocol = "http"
port = 8443
[inbound.stream]
network = "tcp"
security = "tls"
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
alpn = ["http/1.1"]

[[inbound]]
tag = "plain"
protocol = "socks"
port = 1080
[inbound.stream]
network = "tcp"
security = "none"

[[outbound]]
tag = "direct"
protocol = "freedom"
"#;
    let s = compile(&beside_examples(text)).unwrap().spec;
    let tls_of = |tag: &str| match &s.inbounds.iter().find(|i| i.tag == tag).unwrap().protocol {
        InboundProtocol::Socks { tls, .. } | InboundProtocol::Http { tls, .. } => tls.clone(),
        other => panic!("{other:?}"),
    };
    let socks = tls_of("socks-tls").unwrap();
    assert_eq!(socks.cert_path, "tls/cert.pem");
    assert_eq!(socks.cert_pem, example_file("tls/cert.pem"));
    assert_eq!(socks.key_pem.expose(), &example_file("tls/key.pem"));
    assert!(socks.alpn.is_empty());
    assert_eq!(tls_of("https").unwrap().alpn, ["http/1.1"]);
    assert_eq!(tls_of("plain"), None);
}

#[test]
fn socks_and_http_inbounds_refuse_a_transport_tls_on_tcp_cannot_be() {
    let cases = [
        (
            "network = \"ws\"\nsecurity = \"tls\"\n[inbound.stream.ws]\npath = \"/ws\"\n\
             [inbound.stream.tls]\ncert_file = \"tls/cert.pem\"\nkey_file = \"tls/key.pem\"",
            "E0302",
            "a socks inbound serves over tcp, not network \"ws\"",
        ),
        (
            "[inbound.stream.grpc]\nservice_name = \"tunnel\"",
            "E0302",
            "`stream.grpc` does not apply to a socks inbound",
        ),
        (
            "security = \"tls\"",
            "E0401",
            "security \"tls\" without a certificate",
        ),
        (
            "[inbound.stream.tls]\ncert_file = \"tls/cert.pem\"\nkey_file = \"tls/key.pem\"",
            "E0401",
            "tls settings on a transport without TLS",
        ),
        (
            "security = \"tls\"\n[inbound.stream.tls]\ncert_file = \"tls/cert.pem\"",
            "E0004",
            "missing field `key_file`",
        ),
        (
            "security = \"tls\"\n[inbound.stream.tls]\ncert_file = \"tls/cert.pem\"\n\
             key_file = \"tls/no-such-key.pem\"",
            "E0403",
            "cannot read private key file `tls/no-such-key.pem`: no such file",
        ),
        (
            "security = \"tls\"\n[inbound.stream.tls]\ncert_file = \"tls/cert.pem\"\n\
             key_file = \"tls/cert.pem\"",
            "E0403",
            "no private key in PEM file `tls/cert.pem`",
        ),
    ];
    for (stream, code, message) in cases {
        let text = format!(
            "[[inbound]]\ntag = \"s\"\nprotocol = \"socks\"\nport = 1443\n\
             [inbound.stream]\n{stream}\n\
             [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n"
        );
        let diags = compile(&beside_examples(&text)).unwrap_err();
        let got: Vec<(&str, &str)> = diags.iter().map(|d| (d.code, d.message.as_str())).collect();
        assert_eq!(got, [(code, message)], "{stream}");
    }
}

#[test]
fn a_tls_block_on_a_socks_or_http_inbound_in_et_is_the_stream_table() {
    let et = r#"
inbound socks-tls socks {
  port = 1443
  tls { cert_file = "tls/cert.pem"  key_file = "tls/key.pem" }
}
inbound https http {
  port = 8443
  tls { cert_file = "tls/cert.pem"  key_file = "tls/key.pem"  alpn = ["http/1.1"] }
}
outbound direct freedom {}
"#;
    let toml = r#"
[[inbound]]
tag = "socks-tls"
protocol = "socks"
port = 1443
[inbound.stream]
security = "tls"
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
[[inbound]]
tag = "https"
protocol = "http"
port = 8443
[inbound.stream]
security = "tls"
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
alpn = ["http/1.1"]
[[outbound]]
tag = "direct"
protocol = "freedom"
"#;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/test.et");
    let from_et = compile(&Source::new(path.display().to_string(), et))
        .unwrap()
        .spec;
    let from_toml = compile(&beside_examples(toml)).unwrap().spec;
    assert_eq!(from_et.inbounds, from_toml.inbounds);

    let ws = "inbound s socks { port = 1443  ws { path = \"/ws\" } }\noutbound direct freedom {}\n";
    let diags = compile(&Source::new("t.et", ws)).unwrap_err();
    let got: Vec<(&str, &str, &str)> = diags
        .iter()
        .map(|d| (d.code, d.message.as_str(), &ws[d.span.clone()]))
        .collect();
    assert_eq!(
        got,
        [(
            "E0302",
            "a socks inbound serves over tcp, not network \"ws\"",
            "ws"
        )]
    );
}

const WS_VLESS: &str = r#"
[[outbound]]
tag = "edge"
protocol = "vless"
server = "proxy1.example.com"
port = 443
[outbound.stream]
network = "ws"
[outbound.stream.ws]
path = "/ws"
"#;

const VLESS_ID: &str = "[outbound.settings]\nid = \"11111111-2222-3333-4444-555555555555\"\n";

#[test]
fn websocket_early_data_defaults_to_xrays_header_in_both_front_ends() {
    let toml = spec(&format!("{WS_VLESS}max_early_data = 2048\n{VLESS_ID}"));
    let early = WsEarlyData {
        max: 2048,
        header: "Sec-WebSocket-Protocol".into(),
    };
    let StreamShape::Ws { early_data, .. } = upstream(&toml, "edge").transport.shape else {
        panic!("a ws shape")
    };
    assert_eq!(early_data, Some(early.clone()));
    let et = compile(&Source::new(
        "t.et",
        "outbound edge vless {\n  server = proxy1.example.com:443\n  \
         id = \"11111111-2222-3333-4444-555555555555\"\n  \
         ws { path = \"/ws\"  max_early_data = 2048 }\n}\n",
    ))
    .unwrap()
    .spec;
    assert_eq!(
        upstream(&et, "edge").transport,
        upstream(&toml, "edge").transport
    );

    let custom = spec(&format!(
        "{WS_VLESS}max_early_data = 100\nearly_data_header_name = \"X-Early\"\n{VLESS_ID}"
    ));
    let StreamShape::Ws { early_data, .. } = upstream(&custom, "edge").transport.shape else {
        panic!("a ws shape")
    };
    assert_eq!(early_data.unwrap().header, "X-Early");
    let none = spec(&format!("{WS_VLESS}max_early_data = 0\n{VLESS_ID}"));
    let StreamShape::Ws { early_data, .. } = upstream(&none, "edge").transport.shape else {
        panic!("a ws shape")
    };
    assert_eq!(early_data, None, "0 sends none, as in sing-box");
}

#[test]
fn websocket_early_data_refuses_a_header_without_an_allowance_and_bad_values() {
    for (keys, code, text) in [
        (
            "early_data_header_name = \"Sec-WebSocket-Protocol\"\n",
            "E0303",
            "early_data_header_name without max_early_data",
        ),
        (
            "max_early_data = 9000\n",
            "E0309",
            "max_early_data 9000 is above 8192",
        ),
        (
            "max_early_data = 10\nearly_data_header_name = \"\"\n",
            "E0309",
            "early_data_header_name \"\" is not an HTTP header name",
        ),
    ] {
        let text_in = format!("{WS_VLESS}{keys}{VLESS_ID}");
        let diags = compile(&Source::new("t.toml", &text_in)).unwrap_err();
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!((d.code, d.message.as_str()), (code, text), "{keys}");
    }
}

#[test]
fn identity_psks_with_the_chacha_method_are_refused_where_they_are_written() {
    let text = r#"
[[outbound]]
tag = "ss"
protocol = "shadowsocks-2022"
server = "ss.example.com"
port = 8388
[outbound.settings]
method = "2022-blake3-chacha20-poly1305"
psk = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
identity_psks = ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
"#;
    let diags = compile(&Source::new("t.toml", text)).unwrap_err();
    let d = diags.iter().find(|d| d.is_error()).expect("an error");
    assert_eq!(
        (d.code, d.message.as_str()),
        (
            "E0309",
            "`identity_psks` need an aes method: 2022-blake3-chacha20-poly1305 has no identity headers"
        )
    );
    // The span is the identity key's, not the method's.
    let at = text.find("[\"AAAA").unwrap() + 1;
    assert_eq!(d.span.start, at);
}

fn errors(name: &str, text: &str) -> Vec<(String, String)> {
    match compile(&Source::new(name, text)) {
        Ok(_) => panic!("compiles: {text}"),
        Err(diags) => diags
            .into_iter()
            .map(|d| (d.code.to_owned(), d.message.clone()))
            .collect(),
    }
}

#[test]
fn trojan_and_vless_inbounds_take_a_fallback_address_in_both_front_ends() {
    let toml = spec(
        r#"
[[inbound]]
tag = "t"
protocol = "trojan"
port = 8443
[inbound.settings]
password = "pw"
fallback = "127.0.0.1:80"

[[inbound]]
tag = "v"
protocol = "vless"
port = 8444
[inbound.settings]
id = "11111111-2222-3333-4444-555555555555"

[[outbound]]
tag = "direct"
protocol = "freedom"
"#,
    );
    let et = match compile(&Source::new(
        "test.et",
        r#"
inbound t trojan { listen = 127.0.0.1:8443  password = "pw"  fallback = 127.0.0.1:80 }
inbound v vless { listen = 127.0.0.1:8444  id = "11111111-2222-3333-4444-555555555555"  fallback = [::1]:8080 }
outbound direct freedom {}
"#,
    )) {
        Ok(compiled) => compiled.spec,
        Err(diags) => panic!("does not compile: {diags:#?}"),
    };
    let fallback = |spec: &Spec, tag: &str| match &spec.inbound(tag).unwrap().protocol {
        InboundProtocol::Trojan { fallback, .. } | InboundProtocol::Vless { fallback, .. } => {
            *fallback
        }
        other => panic!("not trojan or vless: {other:?}"),
    };
    assert_eq!(fallback(&toml, "t"), Some("127.0.0.1:80".parse().unwrap()));
    assert_eq!(fallback(&toml, "v"), None);
    assert_eq!(fallback(&et, "t"), Some("127.0.0.1:80".parse().unwrap()));
    assert_eq!(fallback(&et, "v"), Some("[::1]:8080".parse().unwrap()));
}

#[test]
fn a_fallback_is_an_ip_address_and_port_and_only_for_trojan_and_vless() {
    let by_name = errors(
        "test.et",
        r#"
inbound t trojan { listen = 127.0.0.1:8443  password = "pw"  fallback = web.example.com:80 }
outbound direct freedom {}
"#,
    );
    assert!(
        by_name.iter().any(|(code, message)| code == "E0307"
            && message.contains("`web.example.com:80` is not a fallback address")),
        "{by_name:?}"
    );
    let vmess = errors(
        "test.toml",
        r#"
[[inbound]]
tag = "m"
protocol = "vmess"
port = 8445
[inbound.settings]
id = "11111111-2222-3333-4444-555555555555"
fallback = "127.0.0.1:80"

[[outbound]]
tag = "direct"
protocol = "freedom"
"#,
    );
    assert!(
        vmess.iter().any(|(code, message)| code == "E0302"
            && message == "`settings.fallback` does not apply to a vmess inbound"),
        "{vmess:?}"
    );
}

const WS_VLESS_IN: &str = r#"
[[inbound]]
tag = "edge-in"
protocol = "vless"
port = 8444
[inbound.stream]
network = "ws"
[inbound.stream.ws]
path = "/ws"
"#;

const VLESS_IN_ID: &str = "[inbound.settings]\nid = \"11111111-2222-3333-4444-555555555555\"\n\
[[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n";

fn inbound_shape(spec: &Spec, tag: &str) -> ServerShape {
    match &spec
        .inbounds
        .iter()
        .find(|i| i.tag == tag)
        .unwrap()
        .protocol
    {
        InboundProtocol::Vless { transport, .. } => transport.shape.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_ws_inbound_checks_the_host_it_names_in_both_front_ends_and_any_without() {
    let toml = spec(&format!(
        "{WS_VLESS_IN}host = \"cdn.example\"\n{VLESS_IN_ID}"
    ));
    assert_eq!(
        inbound_shape(&toml, "edge-in"),
        ServerShape::Ws {
            path: "/ws".into(),
            host: Some("cdn.example".into()),
        }
    );
    let et = compile(&Source::new(
        "t.et",
        "inbound edge-in vless {\n  port = 8444\n  \
         id = \"11111111-2222-3333-4444-555555555555\"\n  \
         ws { path = \"/ws\"  host = \"cdn.example\" }\n}\noutbound direct freedom {}\n",
    ))
    .unwrap()
    .spec;
    assert_eq!(
        inbound_shape(&et, "edge-in"),
        inbound_shape(&toml, "edge-in")
    );
    let any = spec(&format!("{WS_VLESS_IN}{VLESS_IN_ID}"));
    assert_eq!(
        inbound_shape(&any, "edge-in"),
        ServerShape::Ws {
            path: "/ws".into(),
            host: None,
        }
    );
    // An IPv6 address, bracketed or not, is compared unbracketed.
    let v6 = spec(&format!(
        "{WS_VLESS_IN}host = \"[2001:db8::1]\"\n{VLESS_IN_ID}"
    ));
    assert_eq!(
        inbound_shape(&v6, "edge-in"),
        ServerShape::Ws {
            path: "/ws".into(),
            host: Some("2001:db8::1".into()),
        }
    );
}

#[test]
fn a_ws_inbound_refuses_a_host_no_request_could_match_and_client_only_keys() {
    for (keys, code, text, help) in [
        (
            "host = \"cdn.example:443\"\n",
            "E0309",
            "a WebSocket host takes no port, found \"cdn.example:443\"",
            "the port in a request's Host is not compared: set host = \"cdn.example\"",
        ),
        (
            "host = \"\"\n",
            "E0309",
            "a WebSocket host is empty",
            "remove `host` to accept any Host",
        ),
        (
            "host = \"bücher.example\"\n",
            "E0309",
            "\"bücher.example\" is not a host name",
            "a WebSocket host is a DNS name in its ASCII form (xn-- for other scripts) or an IP address",
        ),
        (
            "max_early_data = 2048\n",
            "E0302",
            "`max_early_data` does not apply to a ws inbound",
            "the server takes early data in Sec-WebSocket-Protocol whenever a client sends it; \
             remove `max_early_data`",
        ),
    ] {
        let text_in = format!("{WS_VLESS_IN}{keys}{VLESS_IN_ID}");
        let diags = compile(&Source::new("t.toml", &text_in)).unwrap_err();
        let d = diags.iter().find(|d| d.is_error()).expect("an error");
        assert_eq!((d.code, d.message.as_str()), (code, text), "{keys}");
        assert_eq!(d.help.as_deref(), Some(help), "{keys}");
        assert_eq!(&text_in[d.span.clone()], keys.split_once(" = ").unwrap().1.trim());
    }
}

#[test]
fn a_grpc_inbound_refuses_the_client_only_authority() {
    let text = "[[inbound]]\ntag = \"edge-in\"\nprotocol = \"vless\"\nport = 8444\n\
                [inbound.stream]\nnetwork = \"grpc\"\n[inbound.stream.grpc]\n\
                service_name = \"tun\"\nauthority = \"cdn.example\"\n";
    let text = format!("{text}{VLESS_IN_ID}");
    let diags = compile(&Source::new("t.toml", &text)).unwrap_err();
    let d = diags.iter().find(|d| d.is_error()).expect("an error");
    assert_eq!(
        (d.code, d.message.as_str()),
        ("E0302", "`authority` does not apply to a grpc inbound")
    );
    assert_eq!(
        d.help.as_deref(),
        Some("the server answers calls for any authority; remove `authority`")
    );
    assert_eq!(&text[d.span.clone()], "\"cdn.example\"");
}

#[test]
fn a_ws_inbound_host_with_a_port_is_refused_at_the_value_in_et_too() {
    let text = "inbound edge-in vless {\n  port = 8444\n  \
                id = \"11111111-2222-3333-4444-555555555555\"\n  \
                ws { path = \"/ws\"  host = \"cdn.example:443\" }\n}\noutbound direct freedom {}\n";
    let diags = compile(&Source::new("t.et", text)).unwrap_err();
    let d = diags.iter().find(|d| d.is_error()).expect("an error");
    assert_eq!(
        (d.code, d.message.as_str()),
        (
            "E0309",
            "a WebSocket host takes no port, found \"cdn.example:443\""
        )
    );
    assert_eq!(&text[d.span.clone()], "\"cdn.example:443\"");
}
#[test]
fn a_hysteria2_inbound_takes_passwords_a_masquerade_and_limits_in_both_front_ends() {
    let toml = r#"
[[inbound]]
tag = "hy2"
protocol = "hysteria2"
port = 8446
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
[inbound.settings]
password = "a"
passwords = ["b", "c"]
masquerade = "127.0.0.1:8080"
up_mbps = 200
down_mbps = 100

[[outbound]]
tag = "direct"
protocol = "freedom"
"#;
    let et = r#"
inbound hy2 hysteria2 {
  port = 8446
  password = "a"
  passwords = ["b", "c"]
  masquerade = 127.0.0.1:8080
  up_mbps = 200
  down_mbps = 100
  tls { cert_file = "tls/cert.pem"  key_file = "tls/key.pem" }
}
outbound direct freedom {}
"#;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/test.et");
    let from_et = compile(&Source::new(path.display().to_string(), et))
        .unwrap()
        .spec;
    let from_toml = compile(&beside_examples(toml)).unwrap().spec;
    assert_eq!(from_et.inbounds, from_toml.inbounds);
    let InboundProtocol::Hysteria2 {
        passwords,
        masquerade,
        up_bps,
        down_bps,
        ..
    } = &from_toml.inbound("hy2").unwrap().protocol
    else {
        panic!("not hysteria2");
    };
    let passwords: Vec<&str> = passwords.iter().map(|p| p.expose().as_str()).collect();
    assert_eq!(passwords, ["a", "b", "c"]);
    assert_eq!(*masquerade, Some("127.0.0.1:8080".parse().unwrap()));
    assert_eq!((*up_bps, *down_bps), (200_000_000, 100_000_000));
}

#[test]
fn a_hysteria2_inbound_needs_a_password_and_its_masquerade_is_an_ip_address_and_port() {
    let diags = compile(&beside_examples(
        r#"
[[inbound]]
tag = "hy2"
protocol = "hysteria2"
port = 8446
[inbound.stream.tls]
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
[inbound.settings]
masquerade = "web.example.com:80"

[[inbound]]
tag = "t"
protocol = "trojan"
port = 8443
[inbound.settings]
password = "pw"
masquerade = "127.0.0.1:80"
up_mbps = 1

[[outbound]]
tag = "direct"
protocol = "freedom"
"#,
    ))
    .unwrap_err();
    let got: Vec<(&str, &str)> = diags.iter().map(|d| (d.code, d.message.as_str())).collect();
    for expected in [
        (
            "E0303",
            "a hysteria2 inbound needs `settings.password` or `settings.passwords`",
        ),
        (
            "E0307",
            "`web.example.com:80` is not a masquerade address: write an IP address and port such as `127.0.0.1:80`",
        ),
        (
            "E0302",
            "`settings.masquerade` does not apply to a trojan inbound",
        ),
        ("E0302", "`settings.up_mbps` does not apply to a trojan inbound"),
    ] {
        assert!(got.contains(&expected), "{expected:?} missing from {got:?}");
    }
}
