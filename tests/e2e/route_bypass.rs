//! A cidr or geoip block holds however the destination is written, and the
//! proxy refuses to be its own destination.
//! The support clients address by IPv4 only; the requests that carry a
//! name are written here byte by byte, from RFC 1928 and the SOCKS4a note.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use etemenanki_ir::route::{Cidr, DomainStrategy, RouteTable};
use etemenanki_ir::spec::{InboundSpec, Spec};

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{exchange, socks5_connect};
use crate::support::servers::{tcp_echo, udp_named};
use crate::support::WAIT;

/// `cidr 127.0.0.0/8, ::1/128 -> block`, default direct.
fn loopback_blocked(inbounds: Vec<InboundSpec>) -> Spec {
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

fn connect(to: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&to, WAIT).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    stream
}

/// Sends `request` and reads up to `n` bytes of the answer (fewer if the
/// connection closes first).
fn answer(to: SocketAddr, request: &[u8], n: usize) -> (TcpStream, Vec<u8>) {
    let mut stream = connect(to);
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

/// SOCKS5 `command` for the domain `name` (address type 3), without
/// authentication; returns the stream and the reply's code and bound
/// address (IPv4, as our server answers).
fn socks5_domain(
    proxy: SocketAddr,
    command: u8,
    name: &[u8],
    port: u16,
) -> (TcpStream, u8, SocketAddr) {
    let mut request = vec![5, 1, 0, 5, command, 0, 3, name.len() as u8];
    request.extend_from_slice(name);
    request.extend_from_slice(&port.to_be_bytes());
    let (stream, reply) = answer(proxy, &request, 2 + 10);
    assert_eq!(reply[..2], [5, 0], "the method choice");
    let bound = SocketAddr::from((
        [reply[6], reply[7], reply[8], reply[9]],
        u16::from_be_bytes([reply[10], reply[11]]),
    ));
    (stream, reply[3], bound)
}

/// SOCKS5 CONNECT to an IP through `proxy`, with the reply code as the
/// error, as support's client says it.
fn refused_code(proxy: SocketAddr, to: SocketAddr) -> String {
    socks5_connect(proxy, to, None).unwrap_err().to_string()
}

#[test]
fn a_socks5_domain_that_is_an_ip_literal_routes_as_an_ip() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&loopback_blocked(vec![socks_inbound("in", false)]));
    for name in ["127.0.0.1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"] {
        let (mut stream, code, _) =
            socks5_domain(runtime.addr("in"), 1, name.as_bytes(), echo.port());
        assert_eq!(code, 0, "the blackhole grants, then swallows");
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
    let peer = udp_named("peer");
    let runtime = Runtime::start(&loopback_blocked(vec![socks_inbound("in", true)]));
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // UDP ASSOCIATE naming no source; the control connection stays open.
    let (_control, code, mut relay) = socks5_domain(runtime.addr("in"), 3, b"0.0.0.0", 0);
    assert_eq!(code, 0);
    if relay.ip().is_unspecified() {
        relay.set_ip(Ipv4Addr::LOCALHOST.into());
    }
    let mut datagram = vec![0, 0, 0, 3, 9];
    datagram.extend_from_slice(b"127.0.0.1");
    datagram.extend_from_slice(&peer.port().to_be_bytes());
    datagram.extend_from_slice(b"ping");
    let mut buf = [0u8; 512];
    for _ in 0..5 {
        socket.send_to(&datagram, relay).unwrap();
        let heard = socket.recv_from(&mut buf);
        assert!(heard.is_err(), "the datagram reached the peer");
    }
}

#[test]
fn ip_if_non_match_blocks_a_name_that_resolves_into_the_local_network() {
    let echo = tcp_echo();
    let as_is = Runtime::start(&private_blocked(DomainStrategy::AsIs));
    let (mut stream, code, _) = socks5_domain(as_is.addr("in"), 1, b"localhost", echo.port());
    assert_eq!(code, 0);
    assert_eq!(
        exchange(&mut stream, b"ping"),
        b"ping",
        "as_is matches a name by its name only"
    );
    drop(as_is);
    let guarded = Runtime::start(&private_blocked(DomainStrategy::IpIfNonMatch));
    let (mut stream, code, _) = socks5_domain(guarded.addr("in"), 1, b"localhost", echo.port());
    assert_eq!(code, 0, "the blackhole grants, then swallows");
    assert_eq!(exchange(&mut stream, b"ping"), b"");
}

fn two_inbounds(sniff: bool) -> Spec {
    let mut socks = socks_inbound("socks-in", false);
    socks.sniff = sniff;
    let mut http = http_inbound("http-in");
    http.sniff = sniff;
    spec(vec![socks, http], vec![freedom("direct")], vec![], "direct")
}

/// What the HTTP inbound at `proxy` answers `CONNECT target`: its status
/// line's first twelve bytes.
fn http_status(proxy: SocketAddr, target: &str) -> Vec<u8> {
    let request = format!("CONNECT {target} HTTP/1.1\r\n\r\n");
    answer(proxy, request.as_bytes(), 12).1
}

#[test]
fn a_connect_to_the_proxys_own_inbound_is_refused() {
    let runtime = Runtime::start(&two_inbounds(false));
    let (socks, http) = (runtime.addr("socks-in"), runtime.addr("http-in"));
    for own in [socks, http] {
        assert_eq!(refused_code(socks, own), "socks reply 2", "{own}");
        let (_, code, _) = socks5_domain(socks, 1, b"127.0.0.1", own.port());
        assert_eq!(code, 2, "127.0.0.1 written as a domain");
        let (_, code, _) = socks5_domain(socks, 1, b"::ffff:127.0.0.1", own.port());
        assert_eq!(code, 2, "the IPv4-mapped form");
        assert_eq!(http_status(http, &own.to_string()), b"HTTP/1.1 403");
    }
    runtime.wait_for_log(&format!(
        "refusing a flow to this proxy's own inbound {socks}"
    ));
}

#[test]
fn a_name_that_resolves_to_the_proxys_own_inbound_is_refused_under_every_domain_strategy() {
    for strategy in [
        DomainStrategy::AsIs,
        DomainStrategy::IpIfNonMatch,
        DomainStrategy::IpOnDemand,
    ] {
        let mut spec = two_inbounds(false);
        spec.route = RouteTable::new(vec![], "direct".into())
            .unwrap()
            .with_domain_strategy(strategy);
        let runtime = Runtime::start(&spec);
        let (socks, http) = (runtime.addr("socks-in"), runtime.addr("http-in"));
        for own in [socks, http] {
            for name in ["localhost", "api.localhost"] {
                let (_, code, _) = socks5_domain(socks, 1, name.as_bytes(), own.port());
                assert_eq!(code, 2, "{strategy} {name}:{}", own.port());
                let target = format!("{name}:{}", own.port());
                assert_eq!(http_status(http, &target), b"HTTP/1.1 403", "{strategy}");
            }
        }
        runtime.wait_for_log(&format!(
            "refusing a flow to this proxy's own inbound {http}"
        ));
    }
}

#[test]
fn a_sniffing_inbound_refuses_its_own_address_before_its_early_success_reply() {
    let runtime = Runtime::start(&two_inbounds(true));
    let (socks, http) = (runtime.addr("socks-in"), runtime.addr("http-in"));
    assert_eq!(refused_code(socks, http), "socks reply 2");
    assert_eq!(http_status(http, &socks.to_string()), b"HTTP/1.1 403");
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
    let first = runtime.addr("first");
    assert_eq!(refused_code(first, runtime.addr("second")), "socks reply 2");
    let mut stream = socks5_connect(first, echo, None).unwrap();
    assert_eq!(exchange(&mut stream, b"ping"), b"ping");
}

#[test]
fn a_host_with_control_characters_is_refused() {
    let runtime = Runtime::start(&two_inbounds(false));
    let request = b"CONNECT 127.0.0.1\0:80 HTTP/1.1\r\n\r\n";
    let (_, reply) = answer(runtime.addr("http-in"), request, 12);
    assert_eq!(reply, b"HTTP/1.1 400");
    let (_, code, _) = socks5_domain(runtime.addr("socks-in"), 1, b"127.0.0.1\0", 80);
    assert_eq!(code, 8, "address type not supported");
}
