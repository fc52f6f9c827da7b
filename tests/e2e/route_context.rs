//! The route context reaches the matchers: inbound tag, client address and
//! network.

use etemenanki_ir::route::{Cidr, Network};

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{exchange, socks5_connect, socks5_connect_from, Association};
use crate::support::servers::{tcp_echo, udp_named};

#[test]
fn inbound_tag_selects_the_route() {
    let echo = tcp_echo();
    let mut blocked = rule("block");
    blocked.inbound_tag = vec!["closed".into()];
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("open", false), socks_inbound("closed", false)],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    ));
    let mut through_open = socks5_connect(runtime.addr("open"), echo, None).unwrap();
    assert_eq!(exchange(&mut through_open, b"ping"), b"ping");
    let mut through_closed = socks5_connect(runtime.addr("closed"), echo, None).unwrap();
    assert_eq!(exchange(&mut through_closed, b"ping"), b"");
}

#[test]
fn source_cidr_matches_the_client_address() {
    let echo = tcp_echo();
    let mut blocked = rule("block");
    blocked.source_cidr = vec![Cidr::parse("127.0.0.2/32").unwrap()];
    let mut listen_all = socks_inbound("in", false);
    listen_all.listen = "0.0.0.0:0".parse().unwrap();
    let runtime = Runtime::start(&spec(
        vec![listen_all],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    ));
    let proxy = runtime.addr("in");
    let from = |ip: &str| socks5_connect_from(ip.parse().unwrap(), proxy, echo, None).unwrap();
    assert_eq!(exchange(&mut from("127.0.0.1"), b"ping"), b"ping");
    assert_eq!(exchange(&mut from("127.0.0.2"), b"ping"), b"");
}

#[test]
fn network_separates_tcp_from_udp() {
    let echo = tcp_echo();
    let peer = udp_named("peer");
    let mut udp_blocked = rule("block");
    udp_blocked.network = Some(Network::Udp);
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", true)],
        vec![freedom("direct"), blackhole("block")],
        vec![udp_blocked],
        "direct",
    ));
    let mut tcp = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(exchange(&mut tcp, b"tcp"), b"tcp");
    let association = Association::any(runtime.addr("in"));
    assert_eq!(association.ask(peer, b"udp"), None);
}
