//! The `.et` front end: every literal kind, every construct, and the exact
//! text and span of each kind of error.

use std::time::Duration;

use etemenanki_ir::route::PortRange;
use etemenanki_ir::spec::DrainPolicy;

use super::*;
use crate::codes;
use crate::config::{Port, SecretValue, Spanned};

fn ok(text: &str) -> Config {
    match parse(text) {
        Ok(config) => config,
        Err(diags) => panic!("does not parse: {diags:#?}"),
    }
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text) {
        Ok(config) => panic!("parses: {config:#?}"),
        Err(diags) => diags,
    }
}

fn error(text: &str) -> Diagnostic {
    let mut diags = errors(text);
    assert_eq!(diags.len(), 1, "expected one diagnostic: {diags:#?}");
    diags.remove(0)
}

/// The text a span covers.
fn at<'t>(text: &'t str, d: &Diagnostic) -> &'t str {
    &text[d.span.clone()]
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

// ---------------------------------------------------------------- literals

#[test]
fn durations_take_every_unit() {
    let c = ok(
        "limits { handshake_timeout = 250ms  relay_idle_timeout = 5m  connect_timeout = 30s }\n\
                socket { tcp_keepalive = 1h }",
    );
    let limits = c.limits.unwrap().into_inner();
    assert_eq!(
        limits.handshake_timeout.unwrap().get_ref().0,
        Duration::from_millis(250)
    );
    assert_eq!(limits.relay_idle_timeout.unwrap().get_ref().0, secs(300));
    assert_eq!(limits.connect_timeout.unwrap().get_ref().0, secs(30));
    assert_eq!(
        c.socket
            .unwrap()
            .get_ref()
            .tcp_keepalive
            .as_ref()
            .unwrap()
            .get_ref()
            .0,
        secs(3600)
    );
}

#[test]
fn a_socket_address_sets_server_and_port_with_their_own_spans() {
    let text = "outbound a socks { server = proxy.example.com:443 }\n\
                outbound b socks { server = 192.0.2.1:1080 }\n\
                outbound c socks { server = [2001:db8::1]:8443 }";
    let c = ok(text);
    let got: Vec<(String, u16)> = c
        .outbounds
        .iter()
        .map(|o| {
            let o = o.get_ref();
            (
                o.server.clone().unwrap().into_inner(),
                *o.port.as_ref().unwrap().get_ref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("proxy.example.com".to_owned(), 443),
            ("192.0.2.1".to_owned(), 1080),
            ("2001:db8::1".to_owned(), 8443)
        ]
    );
    let c0 = c.outbounds[0].get_ref();
    assert_eq!(
        &text[c0.server.as_ref().unwrap().span()],
        "proxy.example.com"
    );
    assert_eq!(&text[c0.port.as_ref().unwrap().span()], "443");
}

#[test]
fn cidrs_ports_and_ranges_in_rules() {
    let c = ok("route { cidr 10.0.0.0/8, fd00::/8 and port 53, 1000-2000 -> direct }");
    let rule = c.route.unwrap().rules.remove(0).into_inner();
    let cidrs: Vec<String> = rule
        .cidr
        .unwrap()
        .into_iter()
        .map(|c| c.into_inner())
        .collect();
    assert_eq!(cidrs, ["10.0.0.0/8", "fd00::/8"]);
    let ports: Vec<Port> = rule
        .port
        .unwrap()
        .into_iter()
        .map(|p| p.into_inner())
        .collect();
    assert_eq!(
        ports,
        [
            Port(PortRange { start: 53, end: 53 }),
            Port(PortRange {
                start: 1000,
                end: 2000
            })
        ]
    );
}

#[test]
fn strings_unescape() {
    let c = ok(r#"outbound "my proxy" trojan { password = "a\"b\\c\n\t\u{e9}" }"#);
    let o = c.outbounds[0].get_ref();
    assert_eq!(o.tag.get_ref(), "my proxy");
    let password = o
        .settings
        .as_ref()
        .unwrap()
        .password
        .clone()
        .unwrap()
        .into_inner();
    assert_eq!(password, SecretValue::Plain("a\"b\\c\n\t\u{e9}".to_owned()));
}

#[test]
fn integers_fit_their_fields() {
    let c = ok("outbound w wireguard { mtu = 1420  reserved = [0, 255, 7]  keepalive = 25s }\n\
                outbound h hysteria2 { up_mbps = 10000000000  max_concurrent_streams = 4000000000 }\n\
                socket { mark = 4294967295 }");
    let w = c.outbounds[0].get_ref().settings.as_ref().unwrap();
    assert_eq!(*w.mtu.as_ref().unwrap().get_ref(), 1420);
    let reserved: Vec<u8> = w
        .reserved
        .clone()
        .unwrap()
        .into_iter()
        .map(|r| r.into_inner())
        .collect();
    assert_eq!(reserved, [0, 255, 7]);
    assert_eq!(*w.keepalive.as_ref().unwrap().get_ref(), 25);
    let h = c.outbounds[1].get_ref().settings.as_ref().unwrap();
    assert_eq!(*h.up_mbps.as_ref().unwrap().get_ref(), 10_000_000_000);
    assert_eq!(
        *h.max_concurrent_streams.as_ref().unwrap().get_ref(),
        4_000_000_000
    );
    assert_eq!(
        *c.socket.unwrap().get_ref().mark.as_ref().unwrap().get_ref(),
        u32::MAX
    );
}

#[test]
fn booleans_lists_and_comments() {
    let c = ok("# a comment line\n\
                inbound s socks {   # after a brace\n\
                  port = 1080       # after a value\n\
                  udp = false\n\
                  sniff = true\n\
                }\n\
                dns { servers = [\n  1.1.1.1,  # first\n  [::1]:53,\n] }\n\
                socket { bind_address = [] }");
    let s = c.inbounds[0].get_ref();
    assert_eq!(s.sniff.as_ref().map(|b| *b.get_ref()), Some(true));
    assert_eq!(
        s.settings
            .as_ref()
            .unwrap()
            .udp
            .as_ref()
            .map(|b| *b.get_ref()),
        Some(false)
    );
    let servers: Vec<String> = c
        .dns
        .unwrap()
        .into_inner()
        .servers
        .unwrap()
        .into_iter()
        .map(|s| s.into_inner())
        .collect();
    assert_eq!(servers, ["1.1.1.1", "[::1]:53"]);
    assert_eq!(
        c.socket.unwrap().into_inner().bind_address.unwrap().len(),
        0
    );
}

#[test]
fn secrets_are_inline_env_or_file() {
    let c = ok(
        r#"inbound t trojan { port = 443  passwords = ["inline", env("TROJAN_PW"), file("pw.txt")] }"#,
    );
    let passwords: Vec<SecretValue> = c.inbounds[0]
        .get_ref()
        .settings
        .as_ref()
        .unwrap()
        .passwords
        .clone()
        .unwrap()
        .into_iter()
        .map(|p| p.into_inner())
        .collect();
    assert_eq!(
        passwords,
        [
            SecretValue::Plain("inline".into()),
            SecretValue::Env("TROJAN_PW".into()),
            SecretValue::File("pw.txt".into())
        ]
    );
}

// ---------------------------------------------------------------- constructs

#[test]
fn drain_policies_top_level_and_per_outbound() {
    let c = ok("drain = close after 30s\n\
                outbound a freedom { drain = keep }\n\
                outbound b freedom { drain = close }\n\
                outbound c freedom { drain = close after 250ms }");
    assert_eq!(
        c.drain.unwrap().get_ref().0,
        DrainPolicy::CloseAfter(secs(30))
    );
    let drains: Vec<DrainPolicy> = c
        .outbounds
        .iter()
        .map(|o| o.get_ref().drain.as_ref().unwrap().get_ref().0)
        .collect();
    assert_eq!(
        drains,
        [
            DrainPolicy::Keep,
            DrainPolicy::Close,
            DrainPolicy::CloseAfter(Duration::from_millis(250))
        ]
    );
}

#[test]
fn inbound_listen_forms() {
    let c = ok("inbound a socks { listen = 127.0.0.1:1080 }\n\
                inbound b socks { listen = 0.0.0.0  port = 1081 }\n\
                inbound c socks { port = 1082 }\n\
                inbound d socks { listen = [::1]:1083 }");
    let got: Vec<(Option<String>, u16)> = c
        .inbounds
        .iter()
        .map(|i| {
            let i = i.get_ref();
            (i.listen.clone().map(|l| l.into_inner()), *i.port.get_ref())
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("127.0.0.1".into()), 1080),
            (Some("0.0.0.0".into()), 1081),
            (None, 1082),
            (Some("::1".into()), 1083)
        ]
    );
    // No protocol settings and no transport: both tables absent, as in TOML.
    assert!(c.inbounds[2].get_ref().settings.is_none());
    assert!(c.inbounds[2].get_ref().stream.is_none());
}

#[test]
fn inbound_settings_accounts_obfs_and_transports() {
    let c = ok(r#"
inbound h http {
  port = 8080
  account { user = "alice"  pass = env("ALICE") }
  account { user = "bob"  pass = "pw" }
}
inbound v vless {
  port = 443
  ids = ["11111111-2222-3333-4444-555555555555"]
  ws { path = "/ws" }
  tls { cert_file = "cert.pem"  key_file = "key.pem"  alpn = ["http/1.1"] }
}
inbound g vmess { port = 444  id = "x"  grpc { service_name = "svc" } }
inbound y hysteria2 { port = 445  password = "p"  obfs { type = salamander  password = "o" } }
inbound s shadowsocks-2022 { port = 446  method = 2022-blake3-aes-128-gcm  psk = "k"  users = ["u"] }
"#);
    let h = c.inbounds[0].get_ref().settings.as_ref().unwrap();
    let users: Vec<String> = h
        .accounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| a.get_ref().user.get_ref().clone())
        .collect();
    assert_eq!(users, ["alice", "bob"]);

    let v = c.inbounds[1].get_ref().stream.as_ref().unwrap();
    assert_eq!(v.network.as_ref().unwrap().get_ref(), "ws");
    assert_eq!(v.security.as_ref().unwrap().get_ref(), "tls");
    assert_eq!(
        v.tls.as_ref().unwrap().get_ref().key_file.get_ref(),
        "key.pem"
    );
    assert_eq!(
        v.ws.as_ref()
            .unwrap()
            .get_ref()
            .path
            .as_ref()
            .unwrap()
            .get_ref(),
        "/ws"
    );

    let g = c.inbounds[2].get_ref().stream.as_ref().unwrap();
    assert_eq!(g.network.as_ref().unwrap().get_ref(), "grpc");
    assert!(g.security.is_none());

    let y = c.inbounds[3].get_ref().settings.as_ref().unwrap();
    assert_eq!(
        y.obfs.as_ref().unwrap().get_ref().kind.get_ref(),
        "salamander"
    );

    let s = c.inbounds[4].get_ref().settings.as_ref().unwrap();
    assert_eq!(
        s.method.as_ref().unwrap().get_ref(),
        "2022-blake3-aes-128-gcm"
    );
}

#[test]
fn outbound_transports_map_onto_the_stream_table() {
    let c = ok(r#"
outbound plain trojan { server = a.example:443 }
outbound tls trojan { server = a.example:443  tls { server_name = "sni"  ca_file = "ca.pem"  alpn = ["h2"] } }
outbound wstls vless { server = a.example:443  ws { path = "/ws"  host = "h" }  tls { insecure = true } }
outbound grpc vmess { server = a.example:443  grpc { service_name = "s"  authority = "a" } }
outbound hy2 hysteria2 { server = a.example:443  tls { server_name = "sni" } }
"#);
    let stream = |i: usize| c.outbounds[i].get_ref().stream.as_ref();
    let network = |i: usize| {
        stream(i)
            .and_then(|s| s.network.as_ref())
            .map(|n| n.get_ref().as_str())
    };
    let security = |i: usize| {
        stream(i)
            .and_then(|s| s.security.as_ref())
            .map(|n| n.get_ref().as_str())
    };
    assert!(stream(0).is_none());
    assert_eq!((network(1), security(1)), (Some("tls"), None));
    assert_eq!(
        stream(1)
            .unwrap()
            .tls
            .as_ref()
            .unwrap()
            .get_ref()
            .ca_file
            .as_ref()
            .unwrap()
            .get_ref(),
        "ca.pem"
    );
    assert_eq!((network(2), security(2)), (Some("ws"), Some("tls")));
    assert_eq!(
        stream(2)
            .unwrap()
            .ws
            .as_ref()
            .unwrap()
            .get_ref()
            .host
            .as_ref()
            .unwrap()
            .get_ref(),
        "h"
    );
    assert_eq!((network(3), security(3)), (Some("grpc"), None));
    // hysteria2 runs TLS inside QUIC: only the tls table is set.
    assert_eq!((network(4), security(4)), (None, None));
    assert!(stream(4).unwrap().tls.is_some());
}

#[test]
fn address_family_belongs_to_the_transport_of_a_proxy_client() {
    let c = ok("outbound d freedom { address_family = ipv4_only }\n\
                outbound t trojan { server = a.example:443  address_family = prefer_ipv6 }");
    let d = c.outbounds[0].get_ref();
    assert_eq!(d.address_family.as_ref().unwrap().get_ref(), "ipv4_only");
    assert!(d.stream.is_none());
    let t = c.outbounds[1].get_ref();
    assert!(t.address_family.is_none());
    assert_eq!(
        t.stream
            .as_ref()
            .unwrap()
            .address_family
            .as_ref()
            .unwrap()
            .get_ref(),
        "prefer_ipv6"
    );
}

#[test]
fn outbound_protocol_settings() {
    let c = ok(r#"
outbound s socks { server = a.example:1080  user = "u"  pass = file("p") }
outbound v vmess { server = a.example:443  id = "x"  security = aes-128-gcm }
outbound ss shadowsocks-2022 { server = a.example:8388  method = 2022-blake3-aes-256-gcm  psk = "k"  identity_psks = ["i"] }
outbound w wireguard {
  private_key = "k"  peer_public_key = "p"  preshared_key = env("PSK")
  endpoint = wg.example:51820  endpoint_address_family = ipv4_only
  addresses = [10.0.0.2, fd00::2]
}
"#);
    let settings = |i: usize| c.outbounds[i].get_ref().settings.as_ref().unwrap();
    assert_eq!(
        settings(0).pass.as_ref().unwrap().get_ref(),
        &SecretValue::File("p".into())
    );
    assert_eq!(
        settings(1).security.as_ref().unwrap().get_ref(),
        "aes-128-gcm"
    );
    assert_eq!(settings(2).identity_psks.as_ref().unwrap().len(), 1);
    assert_eq!(
        settings(3).endpoint.as_ref().unwrap().get_ref(),
        "wg.example:51820"
    );
    let addresses: Vec<&str> = settings(3)
        .addresses
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| a.get_ref().as_str())
        .collect();
    assert_eq!(addresses, ["10.0.0.2", "fd00::2"]);
}

#[test]
fn balancers_with_and_without_strategy_and_body() {
    let c = ok("balancer a [x, y]\n\
                balancer b round_robin [x] { probe_interval = 10s  probe_timeout = 3s }\n\
                balancer \"c d\" failover [\"x y\"] {}");
    let b: Vec<_> = c.balancers.iter().map(|b| b.get_ref()).collect();
    assert!(b[0].strategy.is_none() && b[0].probe_interval.is_none());
    let members: Vec<&str> = b[0]
        .outbounds
        .iter()
        .map(|m| m.get_ref().as_str())
        .collect();
    assert_eq!(members, ["x", "y"]);
    assert_eq!(b[1].strategy.as_ref().unwrap().get_ref(), "round_robin");
    assert_eq!(b[1].probe_interval.as_ref().unwrap().get_ref().0, secs(10));
    assert_eq!(b[1].probe_timeout.as_ref().unwrap().get_ref().0, secs(3));
    assert_eq!(b[2].tag.get_ref(), "c d");
    assert_eq!(b[2].outbounds[0].get_ref(), "x y");
}

#[test]
fn every_route_condition() {
    let text = "route {\n\
  domain example.com, \"exact.example\" -> a\n\
  domain_suffix example.org -> a\n\
  domain_keyword google -> a\n\
  cidr 10.0.0.0/8 -> a\n\
  geoip private -> a\n\
  geosite category-ads -> a\n\
  port 443 -> a\n\
  source_cidr 192.168.1.0/24 -> a\n\
  inbound_tag socks-in, http-in -> a\n\
  network udp and port 53 -> dns-out\n\
  default -> b\n\
}";
    let route = ok(text).route.unwrap();
    assert_eq!(route.default.as_ref().unwrap().get_ref(), "b");
    let r: Vec<_> = route.rules.iter().map(|r| r.get_ref()).collect();
    assert_eq!(r.len(), 10);
    let first = |l: &Option<Vec<Spanned<String>>>| l.as_ref().unwrap()[0].get_ref().clone();
    assert_eq!(first(&r[0].domain), "example.com");
    assert_eq!(r[0].domain.as_ref().unwrap()[1].get_ref(), "exact.example");
    assert_eq!(first(&r[1].domain_suffix), "example.org");
    assert_eq!(first(&r[2].domain_keyword), "google");
    assert_eq!(first(&r[3].cidr), "10.0.0.0/8");
    assert_eq!(first(&r[4].geoip), "private");
    assert_eq!(first(&r[5].geosite), "category-ads");
    assert_eq!(
        r[6].port.as_ref().unwrap()[0].get_ref().0,
        PortRange {
            start: 443,
            end: 443
        }
    );
    assert_eq!(first(&r[7].source_cidr), "192.168.1.0/24");
    assert_eq!(r[8].inbound_tag.as_ref().unwrap().len(), 2);
    assert_eq!(r[9].network.as_ref().unwrap().get_ref(), "udp");
    assert_eq!(r[9].outbound.get_ref(), "dns-out");
    // A rule's span starts on its line, which lowering reports.
    assert!(text[route.rules[3].span()].starts_with("cidr 10.0.0.0/8 -> a"));
}

#[test]
fn an_arrow_may_touch_its_neighbours() {
    let c = ok("route { domain_suffix example.com->proxy  port 53->dns }");
    let r = c.route.unwrap().rules;
    assert_eq!(
        r[0].get_ref().domain_suffix.as_ref().unwrap()[0].get_ref(),
        "example.com"
    );
    assert_eq!(r[0].get_ref().outbound.get_ref(), "proxy");
    assert_eq!(r[1].get_ref().outbound.get_ref(), "dns");
}

#[test]
fn dns_split_socket_and_limits() {
    let c = ok(
        "dns { pre_proxy = [1.1.1.1]  through_proxy = [8.8.8.8:53, 2001:4860:4860::8888] }\n\
                socket { mark = 255  interface = eth0  bind_address = [192.0.2.1, 2001:db8::1] }\n\
                limits { max_connections = 1024  max_handshakes = 64  max_handshakes_per_source = 8 }",
    );
    let dns = c.dns.unwrap().into_inner();
    assert_eq!(dns.pre_proxy.unwrap()[0].get_ref(), "1.1.1.1");
    assert_eq!(
        dns.through_proxy.unwrap()[1].get_ref(),
        "2001:4860:4860::8888"
    );
    let socket = c.socket.unwrap().into_inner();
    assert_eq!(socket.interface.unwrap().get_ref(), "eth0");
    assert_eq!(socket.bind_address.unwrap().len(), 2);
    let limits = c.limits.unwrap().into_inner();
    assert_eq!(*limits.max_connections.unwrap().get_ref(), 1024);
    assert_eq!(*limits.max_handshakes_per_source.unwrap().get_ref(), 8);
}

#[test]
fn an_empty_file_is_an_empty_config() {
    let c = ok("  # nothing but a comment\n");
    assert!(c.inbounds.is_empty() && c.outbounds.is_empty() && c.route.is_none());
}

// ---------------------------------------------------------------- errors

#[test]
fn a_missing_equals_is_a_syntax_error_at_the_token() {
    let text = "inbound a socks { port 1080 }";
    let d = error(text);
    assert_eq!(d.code, codes::SYNTAX);
    assert_eq!(d.message, "expected `=` or `{`, found `1080`");
    assert_eq!(at(text, &d), "1080");
}

#[test]
fn a_colon_for_an_equals_gets_a_hint() {
    let d = error("inbound a socks { port: 1080 }");
    assert_eq!(d.message, "expected `=` or `{`, found `:`");
    assert_eq!(
        d.help.as_deref(),
        Some("keys are set with `=`, as in `port = 1080`")
    );
}

#[test]
fn a_stray_token_at_the_top_level() {
    let text = "outbound a freedom {}\n}";
    let d = error(text);
    assert_eq!(d.message, "expected a statement or end of file, found `}`");
    assert_eq!(d.span, 22..23);
}

#[test]
fn an_unclosed_block_points_at_the_end_of_the_file() {
    let text = "outbound a freedom {";
    let d = error(text);
    assert_eq!(d.message, "expected a key or `}`, found end of file");
    assert_eq!(d.span, 20..20);
}

#[test]
fn an_unclosed_string_gets_a_hint() {
    let d = error("outbound a trojan { password = \"abc }\n");
    assert_eq!(d.code, codes::SYNTAX);
    assert_eq!(
        d.help.as_deref(),
        Some("a string ends with `\"` on the line it starts")
    );
}

#[test]
fn a_rule_without_an_arrow() {
    let text = "route { cidr 10.0.0.0/8 direct }";
    let d = error(text);
    assert_eq!(d.message, "expected `->`, `,` or `and`, found `direct`");
    assert_eq!(at(text, &d), "direct");
}

#[test]
fn a_list_without_commas() {
    let d = error("balancer p [a b]");
    assert_eq!(d.message, "expected `,` or `]`, found `b`");
    assert_eq!(d.span, 14..15);
}

#[test]
fn an_unknown_key_gets_serdes_text_and_a_suggestion() {
    let text = "balancer proxy [a] { probe_intervall = 10s }";
    let d = error(text);
    assert_eq!(d.code, codes::UNKNOWN_KEY);
    assert_eq!(
        d.message,
        "unknown field `probe_intervall`, expected `probe_interval` or `probe_timeout`"
    );
    assert_eq!(d.help.as_deref(), Some("did you mean `probe_interval`?"));
    assert_eq!(at(text, &d), "probe_intervall");
}

#[test]
fn a_misspelt_statement_is_an_unknown_key() {
    let text = "outbond direct freedom {}";
    let d = error(text);
    assert_eq!(d.code, codes::UNKNOWN_KEY);
    assert_eq!(
        d.message,
        "unknown field `outbond`, expected one of `drain`, `inbound`, `outbound`, `balancer`, `route`, `dns`, `socket`, `limits`"
    );
    assert_eq!(d.help.as_deref(), Some("did you mean `outbound`?"));
    assert_eq!(d.span, 0..7);
}

#[test]
fn an_unknown_route_condition() {
    let text = "route { domains example.com -> proxy }";
    let d = error(text);
    assert_eq!(d.code, codes::UNKNOWN_KEY);
    assert!(d
        .message
        .starts_with("unknown field `domains`, expected one of `domain`, `domain_suffix`"));
    assert_eq!(d.help.as_deref(), Some("did you mean `domain`?"));
    assert_eq!(at(text, &d), "domains");
}

#[test]
fn a_quoted_duration_is_a_type_error_with_a_hint() {
    let text = "balancer proxy [a] { probe_interval = \"30s\" }";
    let d = error(text);
    assert_eq!(d.code, codes::WRONG_TYPE);
    assert_eq!(
        d.message,
        "invalid type: string \"30s\", expected a duration such as `30s`"
    );
    assert_eq!(d.help.as_deref(), Some("write it without quotes: `30s`"));
    assert_eq!(at(text, &d), "\"30s\"");
}

#[test]
fn a_bare_integer_is_not_a_duration() {
    let d = error("limits { connect_timeout = 10 }");
    assert_eq!(
        d.message,
        "invalid type: integer `10`, expected a duration such as `30s`"
    );
    assert_eq!(d.help, None);
}

#[test]
fn a_server_without_a_port() {
    let text = "outbound p trojan { server = proxy.example.com }";
    let d = error(text);
    assert_eq!(d.code, codes::WRONG_TYPE);
    assert_eq!(
        d.message,
        "invalid type: name `proxy.example.com`, expected a socket address such as `proxy.example.com:443`"
    );
    assert_eq!(at(text, &d), "proxy.example.com");
}

#[test]
fn a_quoted_socket_address_gets_a_hint() {
    let d = error("outbound p trojan { server = \"a.example:443\" }");
    assert_eq!(
        d.help.as_deref(),
        Some("write it without quotes: `a.example:443`")
    );
}

#[test]
fn out_of_range_integers_are_invalid_values() {
    let text =
        "inbound a socks { port = 70000 }\noutbound w wireguard { mtu = -1  reserved = [256] }";
    let d = errors(text);
    let got: Vec<(&str, &str)> = d
        .iter()
        .map(|d| (d.message.as_str(), at(text, d)))
        .collect();
    assert_eq!(
        got,
        [
            (
                "invalid value: integer `70000`, expected an integer from 0 to 65535",
                "70000"
            ),
            (
                "invalid value: integer `-1`, expected an integer from 0 to 65535",
                "-1"
            ),
            (
                "invalid value: integer `256`, expected an integer from 0 to 255",
                "256"
            ),
        ]
    );
    assert!(d.iter().all(|d| d.code == codes::WRONG_TYPE));
}

#[test]
fn a_port_above_65535_in_a_socket_address() {
    let text = "outbound p socks { server = a.example:65536 }";
    let d = error(text);
    assert_eq!(
        d.message,
        "invalid value: port `65536`, expected an integer from 0 to 65535"
    );
    assert_eq!(at(text, &d), "65536");
}

#[test]
fn a_reversed_port_range() {
    let text = "route { port 2000-1000 -> a }";
    let d = error(text);
    assert_eq!(d.code, codes::WRONG_TYPE);
    assert_eq!(
        d.message,
        "invalid value: port range `2000-1000`, expected a port or a port range such as `1000-2000`"
    );
    assert_eq!(at(text, &d), "2000-1000");
}

#[test]
fn a_drain_policy_of_the_wrong_kind() {
    let text = "drain = \"close after 30s\"\noutbound a freedom { drain = closed }";
    let d = errors(text);
    assert_eq!(
        d[0].message,
        "invalid type: string \"close after 30s\", expected `keep`, `close` or `close after <duration>`"
    );
    assert_eq!(
        d[0].help.as_deref(),
        Some("write it without quotes: `close after 30s`")
    );
    assert_eq!(
        d[1].message,
        "invalid value: name `closed`, expected `keep`, `close` or `close after <duration>`"
    );
    assert_eq!(at(text, &d[1]), "closed");
}

#[test]
fn dns_servers_are_written_as_urls_and_the_dns_inbound_has_no_settings() {
    let c = ok("inbound local-dns dns { listen = 127.0.0.1:5353 }\n\
                dns { servers = [tls://1.1.1.1:853, https://dns.example/dns-query, \"https://q.example\", 8.8.8.8]  ca_file = \"ca.pem\" }");
    let dns = c.dns.unwrap().into_inner();
    let servers: Vec<_> = dns
        .servers
        .unwrap()
        .iter()
        .map(|s| s.get_ref().clone())
        .collect();
    assert_eq!(
        servers,
        [
            "tls://1.1.1.1:853",
            "https://dns.example/dns-query",
            "https://q.example",
            "8.8.8.8"
        ]
    );
    assert_eq!(dns.ca_file.unwrap().get_ref(), "ca.pem");
    let inbound = c.inbounds[0].get_ref();
    assert_eq!(inbound.protocol.get_ref(), "dns");
}

#[test]
fn a_list_where_one_value_is_expected_and_the_reverse() {
    let d = errors("dns { servers = 1.1.1.1 }\noutbound a trojan { password = [\"x\"] }");
    assert_eq!(
        d[0].message,
        "invalid type: IP address `1.1.1.1`, expected a list of IP addresses, socket addresses or URLs"
    );
    assert_eq!(
        d[1].message,
        "invalid type: a list, expected a string, `env(\"NAME\")` or `file(\"path\")`"
    );
}

#[test]
fn a_missing_port_is_a_missing_field_on_the_header() {
    let text = "inbound socks-in socks { udp = true }";
    let d = error(text);
    assert_eq!(d.code, codes::MISSING_FIELD);
    assert_eq!(d.message, "missing field `port`");
    assert_eq!(at(text, &d), "inbound socks-in socks");
}

#[test]
fn missing_fields_of_nested_blocks() {
    let text = "inbound t trojan { port = 443  tls { cert_file = \"c.pem\" }  }\n\
                outbound h hysteria2 { obfs { type = salamander } }\n\
                inbound h http { port = 8080  account { user = \"u\" } }";
    let d = errors(text);
    let got: Vec<(&str, &str)> = d
        .iter()
        .map(|d| (d.message.as_str(), at(text, d)))
        .collect();
    assert_eq!(
        got,
        [
            ("missing field `key_file`", "tls"),
            ("missing field `password`", "obfs"),
            ("missing field `pass`", "account")
        ]
    );
}

#[test]
fn duplicates_label_both_places() {
    let text = "outbound a freedom { drain = keep  drain = close }";
    let d = error(text);
    assert_eq!(d.code, codes::DUPLICATE_KEY);
    assert_eq!(d.message, "duplicate key `drain`");
    assert_eq!(d.span, 35..40);
    assert_eq!(d.labels[0].span, 21..26);
}

#[test]
fn duplicate_sections_defaults_and_conditions() {
    let text = "route { default -> a  default -> b }\nroute {}\n\
                dns {}\ndns {}\nroute { cidr 10.0.0.0/8 and cidr 10.0.0.0/16 -> a }";
    let d = errors(text);
    let got: Vec<(&str, &str)> = d
        .iter()
        .map(|d| (d.message.as_str(), at(text, d)))
        .collect();
    assert_eq!(
        got,
        [
            ("duplicate key `default`", "default"),
            ("duplicate key `route`", "route"),
            ("duplicate key `dns`", "dns"),
            ("duplicate key `cidr`", "cidr"),
            ("duplicate key `route`", "route"),
        ]
    );
}

#[test]
fn a_port_set_by_listen_and_by_port() {
    let text = "inbound a socks { listen = 127.0.0.1:1080  port = 1081 }";
    let d = error(text);
    assert_eq!(d.code, codes::DUPLICATE_KEY);
    assert_eq!(d.message, "duplicate key `port`");
    assert_eq!(at(text, &d), "port");
    assert_eq!(&text[d.labels[0].span.clone()], "1080");
}

#[test]
fn a_setting_written_as_a_block_and_the_reverse() {
    let text = "outbound a trojan { tls = true  password { } }";
    let d = errors(text);
    assert_eq!(
        d[0].message,
        "invalid type: setting, expected a block `tls { ... }`"
    );
    assert_eq!(
        d[1].message,
        "invalid type: block, expected a setting `password = ...`"
    );
    assert!(d.iter().all(|d| d.code == codes::WRONG_TYPE));
}

#[test]
fn two_transports_at_once() {
    let text = "outbound a vless { ws {}  grpc {} }";
    let d = error(text);
    assert_eq!(d.code, codes::TRANSPORT_MISMATCH);
    assert_eq!(d.message, "a transport is either `ws` or `grpc`, not both");
    assert_eq!(at(text, &d), "grpc");
}

#[test]
fn network_takes_one_value() {
    let text = "route { network tcp, udp -> a }";
    let d = error(text);
    assert_eq!(d.message, "invalid length: `network` takes one value");
    assert_eq!(at(text, &d), "network tcp, udp");
}

#[test]
fn an_invalid_unicode_escape() {
    let text = r#"outbound a trojan { password = "\u{d800}" }"#;
    let d = error(text);
    assert_eq!(d.code, codes::SYNTAX);
    assert_eq!(d.message, "invalid unicode escape `\\u{d800}`");
    assert_eq!(at(text, &d), "\\u{d800}");
}

#[test]
fn every_problem_is_reported_in_one_pass() {
    let text = "inbound a socks { prot = 1 }\n\
                outbound b trojan { server = x  passwrd = \"p\" }\n\
                balancer c [1] { probe_timeout = \"5s\" }\n\
                limits { max_connections = true }";
    let d = errors(text);
    let codes: Vec<&str> = d.iter().map(|d| d.code).collect();
    assert_eq!(
        codes,
        [
            codes::UNKNOWN_KEY,   // prot
            codes::MISSING_FIELD, // port
            codes::UNKNOWN_KEY,   // passwrd
            codes::WRONG_TYPE,    // server = x
            codes::WRONG_TYPE,    // [1]
            codes::WRONG_TYPE,    // "5s"
            codes::WRONG_TYPE,    // true
        ]
    );
}

// ---------------------------------------------------------------- robustness

/// A small deterministic generator (xorshift64*), so the test is
/// reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every diagnostic of a parse lies inside the text, on character
/// boundaries, and never panics on the way.
fn check_no_panic(text: &str) {
    if let Err(diags) = parse(text) {
        assert!(!diags.is_empty());
        for d in diags {
            assert!(
                d.span.start <= d.span.end && d.span.end <= text.len(),
                "{d:?} in {text:?}"
            );
            assert!(text.is_char_boundary(d.span.start) && text.is_char_boundary(d.span.end));
            assert!(!d.message.is_empty());
        }
    }
}

#[test]
fn random_and_mutated_text_never_panics() {
    const PIECES: &[&str] = &[
        "inbound ",
        "outbound ",
        "balancer ",
        "route ",
        "dns ",
        "socket ",
        "limits ",
        "drain ",
        "= ",
        "{ ",
        "} ",
        "[ ",
        "] ",
        ", ",
        "-> ",
        "and ",
        "default ",
        "close after ",
        "keep ",
        "30s ",
        "250ms ",
        "1h ",
        "10.0.0.0/8 ",
        "fd00::/8 ",
        "1000-2000 ",
        "127.0.0.1:1080 ",
        "[::1]:53 ",
        "a.example:443 ",
        "\"str\" ",
        "\"\\u{",
        "\"",
        "env(\"X\") ",
        "file(\"p\") ",
        "true ",
        "-1 ",
        "70000 ",
        "99999999999999999999999999999999999999999 ",
        "tls ",
        "ws ",
        "server ",
        "port ",
        "cidr ",
        "network ",
        "# c\n",
        "\n",
        "é",
        "名",
        "\u{0}",
        ":",
        "/",
        "\\",
    ];
    let examples = [
        include_str!("../../../../examples/outbounds.et"),
        include_str!("../../../../examples/balancer-failover.et"),
        include_str!("../../../../examples/drains.et"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Random sequences of tokens.
    for _ in 0..1500 {
        let n = rng.below(24);
        let text: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        check_no_panic(&text);
    }
    // Examples with pieces deleted, inserted or swapped.
    for round in 0..1500 {
        let mut text = examples[round % examples.len()].to_owned();
        for _ in 0..1 + rng.below(4) {
            let mut at = rng.below(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(3) {
                0 => {
                    let mut end = (at + 1 + rng.below(8)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.replace_range(at..end, "");
                }
                1 => text.insert_str(at, PIECES[rng.below(PIECES.len())]),
                _ => {
                    let mut end = (at + 1).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(at..end, PIECES[rng.below(PIECES.len())]);
                }
            }
        }
        check_no_panic(&text);
    }
}

#[test]
fn every_example_in_the_language_reference_parses() {
    let reference = include_str!("../../../../grammar/README.md");
    let mut blocks = 0;
    let mut rest = reference;
    while let Some(start) = rest.find("```et\n") {
        let body = &rest[start + 6..];
        let end = body.find("```").expect("a closed code block");
        ok(&body[..end]);
        blocks += 1;
        rest = &body[end + 3..];
    }
    assert!(blocks >= 10, "found only {blocks} et blocks");
}

#[test]
fn deep_nesting_is_refused_before_it_reaches_the_parser() {
    let text = format!("dns {{ servers = {} }}", "[".repeat(100_000));
    let d = error(&text);
    assert_eq!(d.code, codes::SYNTAX);
    assert_eq!(d.message, "blocks and lists nest more than 32 deep");
    assert_eq!(d.span, 47..48);
    // Brackets inside strings and comments do not count.
    ok(&format!(
        "outbound a trojan {{ password = \"{}\" }} # {}",
        "[".repeat(100),
        "{".repeat(100)
    ));
    // Nor inside a string that is checked for a hint.
    let d = error(&format!(
        "limits {{ connect_timeout = \"{}\" }}",
        "[".repeat(100_000)
    ));
    assert_eq!(d.code, codes::WRONG_TYPE);
    assert_eq!(d.help, None);
    // Chained drain policies cannot nest either.
    let d = errors("drain = close after close after 30s");
    assert_eq!(
        d[0].message,
        "invalid type: name `close`, expected a duration such as `30s`"
    );
}

#[test]
fn a_secret_slot_of_the_wrong_kind_never_quotes_its_value() {
    let text = "outbound a trojan { password = hunter2x }\n\
                inbound b trojan { port = 1 passwords = s3cr3t-w0rd }\n\
                inbound c trojan { port = 2 passwords = [\"ok\", 24681357] }";
    let d = errors(text);
    let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "invalid type: name, expected a string, `env(\"NAME\")` or `file(\"path\")`",
            "invalid type: name, expected a list of secrets",
            "invalid type: integer, expected a string, `env(\"NAME\")` or `file(\"path\")`",
        ]
    );
    assert_eq!(at(text, &d[0]), "hunter2x");
    assert_eq!(at(text, &d[2]), "24681357");
}
