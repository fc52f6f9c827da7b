//! A cidr or geoip block holds however the destination is written, and the
//! proxy refuses to be its own destination (issue 14, items 1, 2 and 6).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};

use etemenanki_ir::route::{Cidr, DomainStrategy, RouteTable};
use etemenanki_ir::spec::Spec;

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{exchange, socks5_connect_to, Association, Target};
use crate::support::servers::{tcp_echo, udp_echo};
use crate::support::WAIT;

/// `cidr 127.0.0.0/8, ::1/128 -> block`, default direct.
fn loopback_blocked(inbounds: Vec<etemenanki_ir::spec::InboundSpec>) -> Spec {
    let mut blocked = rule("block");
    blocked.cidr = vec![
        Cidr::parse("127.0.0.0/8").unwrap(),
        Cidr::parse("::1/128").unwrap(),
    ];
    spec(
        inbounds,
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    )
}

/// `geoip private -> block`, default direct, under `strategy`.
fn private_blocked(strategy: DomainStrategy) -> Spec {
    let mut blocked = rule("block");
    blocked.geoip = vec!["private".into()];
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    );
    spec.route = RouteTable::new(spec.route.rules().to_vec(), "direct".into())
        .unwrap()
        .with_domain_strategy(strategy);
    spec
}

fn with_timeouts(stream: TcpStream) -> TcpStream {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    stream
}

/// Sends `request` and reads the first `n` bytes of the answer (fewer if
/// the connection closes first).
fn answer(to: SocketAddr, request: &[u8], n: usize) -> (TcpStream, Vec<u8>) {
    let mut stream = with_timeouts(TcpStream::connect(to).unwrap());
    stream.write_all(request).unwrap();
    let mut got = vec![0u8; n];
    let mut have = 0;
    while have < n {
        match stream.read(&mut got[have..]) {
            Ok(0) | Err(_) => break,
            Ok(read) => have += read,
        }
    }
    got.truncate(have);
    (stream, got)
}

#[test]
fn a_socks5_domain_that_is_an_ip_literal_routes_as_an_ip() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&loopback_blocked(vec![socks_inbound("in", false)]));
    for name in ["127.0.0.1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"] {
        let to = Target::Name(name, echo.port());
        let mut stream = socks5_connect_to(runtime.addr("in"), to).unwrap();
        assert_eq!(
            exchange(&mut stream, b"ping"),
            b"",
            "{name} reached the echo"
        );
    }
}

#[test]
fn a_socks4a_domain_that_is_an_ip_literal_routes_as_an_ip() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&loopback_blocked(vec![socks_inbound("in", false)]));
    let mut request = vec![4, 1];
    request.extend_from_slice(&echo.port().to_be_bytes());
    request.extend_from_slice(&[0, 0, 0, 1, 0]);
    request.extend_from_slice(b"127.0.0.1\0");
    let (mut stream, reply) = answer(runtime.addr("in"), &request, 8);
    assert_eq!(reply[1], 0x5a, "the blackhole grants, then swallows");
    assert_eq!(exchange(&mut stream, b"ping"), b"");
}

#[test]
fn a_socks5_udp_datagram_to_a_domain_that_is_an_ip_literal_routes_as_an_ip() {
    let peer = udp_echo(Ipv4Addr::LOCALHOST);
    let runtime = Runtime::start(&loopback_blocked(vec![socks_inbound("in", true)]));
    let association = Association::any(runtime.addr("in"));
    let (socket, relay) = association.parts();
    let mut datagram = vec![0, 0, 0, 3, 9];
    datagram.extend_from_slice(b"127.0.0.1");
    datagram.extend_from_slice(&peer.port().to_be_bytes());
    datagram.extend_from_slice(b"ping");
    for _ in 0..5 {
        socket.send_to(&datagram, relay).unwrap();
        assert_eq!(association.recv(), None, "the datagram reached the peer");
    }
}

#[test]
fn ip_if_non_match_blocks_a_name_that_resolves_into_the_local_network() {
    let echo = tcp_echo();
    let localhost_echo = Target::Name("localhost", echo.port());
    let as_is = Runtime::start(&private_blocked(DomainStrategy::AsIs));
    let mut stream = socks5_connect_to(as_is.addr("in"), localhost_echo).unwrap();
    assert_eq!(
        exchange(&mut stream, b"ping"),
        b"ping",
        "as_is matches a name only by its name"
    );
    drop(as_is);
    let guarded = Runtime::start(&private_blocked(DomainStrategy::IpIfNonMatch));
    let mut stream = socks5_connect_to(guarded.addr("in"), localhost_echo).unwrap();
    assert_eq!(exchange(&mut stream, b"ping"), b"");
}

#[test]
fn a_connect_to_the_proxys_own_inbound_is_refused() {
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("socks-in", false), http_inbound("http-in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let (socks, http) = (runtime.addr("socks-in"), runtime.addr("http-in"));
    for own in [socks, http] {
        let port = own.port();
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
        for to in [
            Target::Ip(own),
            Target::Ip(mapped),
            Target::Name("127.0.0.1", port),
        ] {
            let refused = socks5_connect_to(socks, to).unwrap_err();
            assert_eq!(refused.to_string(), "socks reply 2", "{to:?}");
        }
        let request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
        let (_, reply) = answer(http, request.as_bytes(), 12);
        assert_eq!(reply, b"HTTP/1.1 403");
    }
    runtime.wait_for_log(&format!(
        "refusing a flow to this proxy's own inbound 127.0.0.1:{}",
        socks.port()
    ));
}

#[test]
fn a_reload_updates_the_inbounds_a_flow_may_not_reach() {
    let echo = tcp_echo();
    let one = spec(
        vec![socks_inbound("first", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    let runtime = Runtime::start(&one);
    let mut two = one.clone();
    two.inbounds.push(socks_inbound("second", false));
    let log = runtime.reload(&two);
    assert!(log.contains("reload: applied epoch"), "{log}");
    let (first, second) = (runtime.addr("first"), runtime.addr("second"));
    let refused = socks5_connect_to(first, Target::Ip(second)).unwrap_err();
    assert_eq!(refused.to_string(), "socks reply 2");
    let mut stream = socks5_connect_to(first, Target::Ip(echo)).unwrap();
    assert_eq!(exchange(&mut stream, b"ping"), b"ping");
}

#[test]
fn a_host_with_control_characters_is_refused() {
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("socks-in", false), http_inbound("http-in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let (_, reply) = answer(
        runtime.addr("http-in"),
        b"CONNECT 127.0.0.1\0:80 HTTP/1.1\r\n\r\n",
        12,
    );
    assert_eq!(reply, b"HTTP/1.1 400");
    // A SOCKS5 domain of ten bytes: `127.0.0.1` and a NUL.
    let request = b"\x05\x01\x00\x05\x01\x00\x03\x0a127.0.0.1\x00\x00\x50";
    let (_, reply) = answer(runtime.addr("socks-in"), request, 4);
    assert_eq!(reply[..2], [5, 0], "the method choice");
    assert_eq!(reply[2..], [5, 8], "address type not supported");
}

#[test]
fn a_sniffing_inbound_refuses_its_own_address_before_its_early_reply() {
    let mut sniffing_socks = socks_inbound("socks-in", false);
    sniffing_socks.sniff = true;
    let mut sniffing_http = http_inbound("http-in");
    sniffing_http.sniff = true;
    let runtime = Runtime::start(&spec(
        vec![sniffing_socks, sniffing_http],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let (socks, http) = (runtime.addr("socks-in"), runtime.addr("http-in"));
    let refused = socks5_connect_to(socks, Target::Ip(http)).unwrap_err();
    assert_eq!(refused.to_string(), "socks reply 2");
    let request = format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", socks.port());
    let (_, reply) = answer(http, request.as_bytes(), 12);
    assert_eq!(reply, b"HTTP/1.1 403");
}
