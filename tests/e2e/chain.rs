//! Proxy outbounds: one runtime relaying through another over SOCKS5 and
//! HTTP CONNECT.

use etemenanki_ir::spec::{Account, InboundProtocol, OutboundProtocol, Secret};

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{exchange, socks5_connect, Association};
use crate::support::servers::{tcp_echo, udp_named};

#[test]
fn flows_chain_through_upstream_socks_and_http_proxies() {
    let echo = tcp_echo();
    let upstream = Runtime::start(&spec(
        vec![socks_inbound("socks", false), http_inbound("http")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    for outbound in [
        socks_outbound("next", upstream.addr("socks")),
        http_outbound("next", upstream.addr("http")),
    ] {
        let front = Runtime::start(&spec(
            vec![socks_inbound("in", false)],
            vec![outbound],
            vec![],
            "next",
        ));
        let mut stream = socks5_connect(front.addr("in"), echo, None).unwrap();
        assert_eq!(exchange(&mut stream, b"two hops"), b"two hops");
    }
}

#[test]
fn an_upstream_that_refuses_is_a_failed_dial_not_a_stream() {
    let echo = tcp_echo();
    let mut guarded = http_inbound("http");
    guarded.protocol = InboundProtocol::Http {
        accounts: vec![Account {
            user: "u".into(),
            pass: Secret("p".into()),
        }],
        tls: None,
    };
    let upstream = Runtime::start(&spec(
        vec![guarded],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let up_http = upstream.addr("http");
    let front = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![http_outbound("next", up_http)],
        vec![],
        "next",
    ));
    let err = socks5_connect(front.addr("in"), echo, None).unwrap_err();
    assert_eq!(err.to_string(), "socks reply 5");
    front.wait_for_log("http: the proxy answered CONNECT with 407");

    // With the account the same upstream opens the tunnel.
    let mut with_account = http_outbound("next", up_http);
    if let OutboundProtocol::Http { account, .. } = &mut with_account.protocol {
        *account = Some(Account {
            user: "u".into(),
            pass: Secret("p".into()),
        });
    }
    let front = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![with_account],
        vec![],
        "next",
    ));
    let mut stream = socks5_connect(front.addr("in"), echo, None).unwrap();
    assert_eq!(exchange(&mut stream, b"authorized"), b"authorized");
}

#[test]
fn udp_chains_through_an_upstream_socks_association() {
    let peers = [udp_named("a"), udp_named("b")];
    let upstream = Runtime::start(&spec(
        vec![socks_inbound("up", true)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let front = Runtime::start(&spec(
        vec![socks_inbound("in", true)],
        vec![socks_outbound("next", upstream.addr("up"))],
        vec![],
        "next",
    ));
    let association = Association::any(front.addr("in"));
    for (peer, name) in peers.iter().zip(["a", "b"]) {
        let expected = format!("{name}:hop").into_bytes();
        assert_eq!(association.ask(*peer, b"hop"), Some((*peer, expected)));
    }
}
