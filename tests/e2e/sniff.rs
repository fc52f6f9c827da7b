//! A sniffed domain routes an IP-addressed flow, while the dial still goes to
//! the requested address.

use std::io::{Read, Write};
use std::net::SocketAddr;

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::socks5_connect;
use crate::support::servers::tcp_echo;

fn sniffing_runtime(sniff: bool) -> Runtime {
    let mut inbound = socks_inbound("in", false);
    inbound.sniff = sniff;
    let mut blocked = rule("block");
    blocked.domain_suffix = vec!["blocked.example".into()];
    Runtime::start(&spec(
        vec![inbound],
        vec![freedom("direct"), blackhole("block")],
        vec![blocked],
        "direct",
    ))
}

/// Sends `first` through the proxy to the echo server and returns what
/// comes back before the close.
fn through(runtime: &Runtime, echo: SocketAddr, first: &[u8]) -> Vec<u8> {
    let mut stream = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    stream.write_all(first).unwrap();
    let mut got = vec![0u8; first.len()];
    match stream.read_exact(&mut got) {
        Ok(()) => got,
        Err(_) => Vec::new(),
    }
}

#[test]
fn an_http_host_routes_an_ip_addressed_flow() {
    let echo = tcp_echo();
    let runtime = sniffing_runtime(true);
    let blocked = b"GET / HTTP/1.1\r\nHost: www.blocked.example\r\n\r\n";
    let allowed = b"GET / HTTP/1.1\r\nHost: www.allowed.example\r\n\r\n";
    assert_eq!(through(&runtime, echo, blocked), b"");
    // The dial goes to the requested IP: the echo server answers although
    // the name does not resolve.
    assert_eq!(through(&runtime, echo, allowed), allowed);
}

#[test]
fn a_tls_sni_routes_an_ip_addressed_flow() {
    let echo = tcp_echo();
    let runtime = sniffing_runtime(true);
    assert_eq!(
        through(&runtime, echo, &client_hello("blocked.example")),
        b""
    );
    let allowed = client_hello("allowed.example");
    assert_eq!(through(&runtime, echo, &allowed), allowed);
}

#[test]
fn turning_sniffing_off_stops_the_domain_rule_matching() {
    let echo = tcp_echo();
    let runtime = sniffing_runtime(false);
    let blocked = b"GET / HTTP/1.1\r\nHost: www.blocked.example\r\n\r\n";
    assert_eq!(through(&runtime, echo, blocked), blocked);
}

/// A minimal TLS 1.2 ClientHello record with one SNI extension.
fn client_hello(name: &str) -> Vec<u8> {
    let name = name.as_bytes();
    let mut sni = Vec::new();
    sni.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
    sni.push(0);
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name);
    let mut exts = vec![0x00, 0x00];
    exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    exts.extend_from_slice(&sni);
    let mut hello = vec![0x03, 0x03];
    hello.extend_from_slice(&[7; 32]);
    hello.push(0);
    hello.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    hello.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    hello.extend_from_slice(&exts);
    let mut handshake = vec![0x01];
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}
