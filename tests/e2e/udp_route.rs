//! UDP through SOCKS5 ASSOCIATE: per-packet routing, replies attributed to
//! their source, and the single-client rules: only the control connection's
//! IP is heard, and the first datagram forwarded pins its port.

use std::net::{SocketAddr, UdpSocket};

use etemenanki_ir::route::PortRange;

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{recv_via, send_via, Association};
use crate::support::servers::udp_named;

fn udp_runtime(rules: Vec<etemenanki_ir::route::Rule>) -> Runtime {
    let mut inbound = socks_inbound("in", true);
    inbound.listen = "0.0.0.0:0".parse().unwrap();
    Runtime::start(&spec(
        vec![inbound],
        vec![freedom("direct"), blackhole("block")],
        rules,
        "direct",
    ))
}

#[test]
fn one_association_routes_each_peer_separately() {
    let allowed = udp_named("allowed");
    let blocked = udp_named("blocked");
    let mut block = rule("block");
    block.port = vec![PortRange {
        start: blocked.port(),
        end: blocked.port(),
    }];
    let runtime = udp_runtime(vec![block]);
    let association = Association::any(runtime.addr("in"));
    assert_eq!(
        association.ask(allowed, b"1"),
        Some((allowed, b"allowed:1".to_vec()))
    );
    assert_eq!(association.ask(blocked, b"2"), None);
    // The blocked peer did not harm the rest of the association.
    assert_eq!(
        association.ask(allowed, b"3"),
        Some((allowed, b"allowed:3".to_vec()))
    );
}

#[test]
fn replies_from_several_peers_merge_back_correctly() {
    let peers = [udp_named("a"), udp_named("b"), udp_named("c")];
    let runtime = udp_runtime(vec![]);
    let association = Association::any(runtime.addr("in"));
    for round in 0..2 {
        for (peer, name) in peers.iter().zip(["a", "b", "c"]) {
            let payload = format!("{round}");
            let expected = format!("{name}:{round}").into_bytes();
            assert_eq!(
                association.ask(*peer, payload.as_bytes()),
                Some((*peer, expected))
            );
        }
    }
}

#[test]
fn udp_association_ignores_another_ip() {
    let peer = udp_named("peer");
    let runtime = udp_runtime(vec![]);
    let association = Association::any(runtime.addr("in"));
    let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
    stranger
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    send_via(&stranger, association.relay(), peer, b"from a stranger");
    assert_eq!(recv_via(&stranger), None);
    assert_eq!(
        association.ask(peer, b"mine"),
        Some((peer, b"peer:mine".to_vec()))
    );
}

#[test]
fn udp_association_ignores_another_port_once_pinned() {
    let peer = udp_named("peer");
    let runtime = udp_runtime(vec![]);
    let association = Association::any(runtime.addr("in"));
    assert_eq!(
        association.ask(peer, b"pin"),
        Some((peer, b"peer:pin".to_vec()))
    );
    let other_port = UdpSocket::bind("127.0.0.1:0").unwrap();
    other_port
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    send_via(&other_port, association.relay(), peer, b"from another port");
    assert_eq!(recv_via(&other_port), None);
    // The pinned port received nothing for the other port's datagram.
    assert_eq!(association.recv(), None);
}

#[test]
fn udp_association_holds_to_the_port_the_request_names() {
    let peer = udp_named("peer");
    let runtime = udp_runtime(vec![]);
    let named = UdpSocket::bind("127.0.0.1:0").unwrap();
    let named_addr = named.local_addr().unwrap();
    drop(named);
    let association = Association::open_from(runtime.addr("in"), named_addr, named_addr).unwrap();
    // A datagram from another port of the same IP is not the client's, even
    // as the first one.
    let other_port = UdpSocket::bind("127.0.0.1:0").unwrap();
    other_port
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    send_via(
        &other_port,
        association.relay(),
        peer,
        b"first, but from elsewhere",
    );
    assert_eq!(recv_via(&other_port), None);
    assert_eq!(
        association.ask(peer, b"named"),
        Some((peer, b"peer:named".to_vec()))
    );
}

#[test]
fn udp_association_is_not_widened_by_the_request() {
    let peer = udp_named("peer");
    let runtime = udp_runtime(vec![]);
    let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
    stranger
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let stranger_addr: SocketAddr = stranger.local_addr().unwrap();
    // The request names the stranger's address; it is set aside, and only
    // the control connection's IP is heard.
    let association =
        Association::open_from(runtime.addr("in"), any_port(), stranger_addr).unwrap();
    send_via(&stranger, association.relay(), peer, b"widen me");
    assert_eq!(recv_via(&stranger), None);
    assert_eq!(
        association.ask(peer, b"ok"),
        Some((peer, b"peer:ok".to_vec()))
    );
}

#[test]
fn udp_association_sets_aside_a_source_it_cannot_hold_to() {
    let peer = udp_named("peer");
    let runtime = udp_runtime(vec![]);
    // The request names an address that is not the control connection's:
    // neither trusted nor refused, and the client is heard from its own IP.
    let elsewhere: SocketAddr = "10.1.2.3:7000".parse().unwrap();
    let association = Association::open_from(runtime.addr("in"), any_port(), elsewhere).unwrap();
    assert_eq!(
        association.ask(peer, b"here"),
        Some((peer, b"peer:here".to_vec()))
    );
}
