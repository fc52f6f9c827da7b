//! The route context reaches the matchers: inbound tag, client address and
//! network.

#[allow(dead_code)]
mod support;

use etemenanki_ir::route::{Cidr, Network};
use etemenanki_proto::Address;
use support::*;

#[test]
fn inbound_tag_selects_the_route() {
    let echo = tcp_echo();
    let (open, closed) = (free_port(), free_port());
    let mut blocked = rule("block");
    blocked.inbound_tag = vec!["closed".into()];
    let _runtime = Runtime::start(&spec(
        vec![
            socks_inbound("open", open, false),
            socks_inbound("closed", closed, false),
        ],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    ));
    let mut through_open = socks5_connect(localhost(open), &Address::Ip(echo)).unwrap();
    assert_eq!(exchange(&mut through_open, b"ping"), b"ping");
    let mut through_closed = socks5_connect(localhost(closed), &Address::Ip(echo)).unwrap();
    assert_eq!(exchange(&mut through_closed, b"ping"), b"");
}

#[test]
fn source_cidr_matches_the_client_address() {
    let echo = tcp_echo();
    let port = free_port();
    let mut blocked = rule("block");
    blocked.source_cidr = vec![Cidr::parse("127.0.0.2/32").unwrap()];
    let mut listen_all = socks_inbound("in", port, false);
    listen_all.listen = format!("0.0.0.0:{port}").parse().unwrap();
    let _runtime = Runtime::start(&spec(
        vec![listen_all],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    ));
    let from = |ip: &str| {
        socks5_connect_from(
            Some(ip.parse().unwrap()),
            localhost(port),
            &Address::Ip(echo),
        )
        .unwrap()
    };
    assert_eq!(exchange(&mut from("127.0.0.1"), b"ping"), b"ping");
    assert_eq!(exchange(&mut from("127.0.0.2"), b"ping"), b"");
}

#[test]
fn network_separates_tcp_from_udp() {
    let echo = tcp_echo();
    let peer = udp_echo("peer");
    let port = free_port();
    let mut udp_blocked = rule("block");
    udp_blocked.network = Some(Network::Udp);
    let _runtime = Runtime::start(&spec(
        vec![socks_inbound("in", port, true)],
        vec![freedom("direct"), blackhole("block")],
        vec![udp_blocked],
        "direct",
    ));
    let mut tcp = socks5_connect(localhost(port), &Address::Ip(echo)).unwrap();
    assert_eq!(exchange(&mut tcp, b"tcp"), b"tcp");
    let association = Association::any(localhost(port));
    assert_eq!(ask(&association, peer, b"udp"), None);
}
