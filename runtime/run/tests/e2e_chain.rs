//! Proxy outbounds: one runtime relaying through another over SOCKS5 and
//! HTTP CONNECT.

#[allow(dead_code)]
mod support;

use etemenanki_ir::spec::{Account, InboundProtocol, OutboundProtocol, Secret};
use etemenanki_proto::Address;
use support::*;

#[test]
fn flows_chain_through_upstream_socks_and_http_proxies() {
    let echo = tcp_echo();
    let (up_socks, up_http) = (free_port(), free_port());
    let _upstream = Runtime::start(&spec(
        vec![
            socks_inbound("socks", up_socks, false),
            http_inbound("http", up_http),
        ],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    for outbound in [
        socks_outbound("next", localhost(up_socks)),
        http_outbound("next", localhost(up_http)),
    ] {
        let port = free_port();
        let _front = Runtime::start(&spec(
            vec![socks_inbound("in", port, false)],
            vec![outbound],
            vec![],
            "next",
        ));
        let mut stream = socks5_connect(localhost(port), &Address::Ip(echo)).unwrap();
        assert_eq!(exchange(&mut stream, b"two hops"), b"two hops");
    }
}

#[test]
fn an_upstream_that_refuses_is_a_failed_dial_not_a_stream() {
    let echo = tcp_echo();
    let up_http = free_port();
    let mut guarded = http_inbound("http", up_http);
    guarded.protocol = InboundProtocol::Http {
        accounts: vec![Account {
            user: "u".into(),
            pass: Secret("p".into()),
        }],
        tls: None,
    };
    let _upstream = Runtime::start(&spec(
        vec![guarded],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let port = free_port();
    let front = Runtime::start(&spec(
        vec![socks_inbound("in", port, false)],
        vec![http_outbound("next", localhost(up_http))],
        vec![],
        "next",
    ));
    let err = socks5_connect(localhost(port), &Address::Ip(echo)).unwrap_err();
    assert_eq!(err.to_string(), "socks reply 5");
    front.wait_for_log("http: the proxy answered CONNECT with 407");

    // With the account the same upstream opens the tunnel.
    let mut with_account = http_outbound("next", localhost(up_http));
    if let OutboundProtocol::Http { account, .. } = &mut with_account.protocol {
        *account = Some(Account {
            user: "u".into(),
            pass: Secret("p".into()),
        });
    }
    let port = free_port();
    let _front = Runtime::start(&spec(
        vec![socks_inbound("in", port, false)],
        vec![with_account],
        vec![],
        "next",
    ));
    let mut stream = socks5_connect(localhost(port), &Address::Ip(echo)).unwrap();
    assert_eq!(exchange(&mut stream, b"authorized"), b"authorized");
}

#[test]
fn udp_chains_through_an_upstream_socks_association() {
    let peers = [udp_echo("a"), udp_echo("b")];
    let up = free_port();
    let _upstream = Runtime::start(&spec(
        vec![socks_inbound("up", up, true)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let port = free_port();
    let _front = Runtime::start(&spec(
        vec![socks_inbound("in", port, true)],
        vec![socks_outbound("next", localhost(up))],
        vec![],
        "next",
    ));
    let association = Association::any(localhost(port));
    for (peer, name) in peers.iter().zip(["a", "b"]) {
        let expected = format!("{name}:hop").into_bytes();
        assert_eq!(ask(&association, *peer, b"hop"), Some((*peer, expected)));
    }
}
