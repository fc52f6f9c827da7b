//! Shadowsocks AEAD: our shadowsocks outbound through shadowsocks-libev's
//! `ss-server` for each method, TCP and UDP, and through shadowsocks-rust's
//! `ssserver`, TCP and UDP; against each, a wrong password gets its flow no
//! byte back and the runtime serves the next one.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::binaries::peer;
use crate::support::client::{check_echo, check_greeting, pattern, socks5_connect, Association};
use crate::support::etemenanki::{start_ours, Config};
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo, udp_echo};
use crate::support::BULK;

const PASSWORD: &str = "correct horse battery staple";
/// How long a flow with a wrong password is watched for a byte.
const SILENCE: Duration = Duration::from_secs(2);

/// Which server to start.
#[derive(Clone, Copy)]
enum Server {
    /// shadowsocks-libev's `ss-server`.
    Libev,
    /// shadowsocks-rust's `ssserver`.
    Rust,
}

impl Server {
    fn binary(self) -> &'static str {
        match self {
            Server::Libev => "ss-server",
            Server::Rust => "ssserver",
        }
    }
}

/// The server on `listen` for `method` and `password`, relaying TCP and UDP.
fn start(server: Server, binary: &Path, dir: &Path, listen: SocketAddr, method: &str) -> Process {
    let mut command = Command::new(binary);
    match server {
        Server::Libev => command
            .args(["-s", "127.0.0.1", "-p"])
            .arg(listen.port().to_string())
            .args(["-k", PASSWORD, "-m", method, "-u", "-v"]),
        Server::Rust => command
            .arg("-s")
            .arg(listen.to_string())
            .args(["-k", PASSWORD, "-m", method, "-U", "-v"]),
    };
    Process::spawn_listening(server.binary(), command, dir, listen)
}

/// The settings of a shadowsocks outbound.
fn settings(method: &str, password: &str) -> String {
    format!("[outbound.settings]\nmethod = \"{method}\"\npassword = \"{password}\"\n")
}

/// Our outbound `tag`, a shadowsocks client of `server`.
fn outbound(tag: &str, server: SocketAddr, method: &str, password: &str) -> String {
    format!(
        "[[outbound]]\ntag = \"{tag}\"\nprotocol = \"shadowsocks\"\nserver = \"{}\"\nport = {}\n{}\n",
        server.ip(),
        server.port(),
        settings(method, password)
    )
}

/// Our SOCKS inbound on `ours`, everything routed to a shadowsocks outbound
/// of `server`.
fn through(ours: SocketAddr, server: SocketAddr, method: &str, dir: &Path) -> Process {
    Config::default()
        .socks_in(ours, None)
        .proxy_out("shadowsocks", server, &settings(method, PASSWORD))
        .start(dir)
}

/// A short message and BULK bytes each way, through `server` with `method`.
fn moves_bulk(test: &str, server: Server, method: &str) {
    let Some(binary) = peer(test, server.binary()) else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let listen = free_addr();
    let _server = start(server, &binary, &dir, listen, method);
    let ours = free_addr();
    let etemenanki = through(ours, listen, method, &dir);

    check_echo(
        socks5_connect(ours, echo, None).unwrap(),
        b"hello, shadowsocks",
    );
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
    // Our request waits for the client's first bytes; to a server that
    // speaks first, it goes alone.
    check_greeting(ours, test);
    etemenanki.wait_for_log(&format!("-> {echo} (sniffed None) via out@v1"));
}

/// A short datagram and 1200 bytes through our SOCKS UDP associate.
fn relays_udp(test: &str, server: Server, method: &str) {
    let Some(binary) = peer(test, server.binary()) else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let listen = free_addr();
    let _server = start(server, &binary, &dir, listen, method);
    let ours = free_addr();
    let _etemenanki = through(ours, listen, method, &dir);

    let association = Association::open(ours).unwrap();
    for payload in [b"ping through shadowsocks".to_vec(), pattern(1200)] {
        let reply = association.ask(echo, &payload);
        assert_eq!(reply, Some((echo, payload)));
    }
}

#[test]
fn shadowsocks_outbound_moves_bulk_through_ss_server_with_aes_128_gcm() {
    moves_bulk(
        "shadowsocks_outbound_moves_bulk_through_ss_server_with_aes_128_gcm",
        Server::Libev,
        "aes-128-gcm",
    );
}

#[test]
fn shadowsocks_outbound_moves_bulk_through_ss_server_with_aes_256_gcm() {
    moves_bulk(
        "shadowsocks_outbound_moves_bulk_through_ss_server_with_aes_256_gcm",
        Server::Libev,
        "aes-256-gcm",
    );
}

#[test]
fn shadowsocks_outbound_moves_bulk_through_ss_server_with_chacha20_ietf_poly1305() {
    moves_bulk(
        "shadowsocks_outbound_moves_bulk_through_ss_server_with_chacha20_ietf_poly1305",
        Server::Libev,
        "chacha20-ietf-poly1305",
    );
}

#[test]
fn shadowsocks_outbound_relays_udp_through_ss_server() {
    relays_udp(
        "shadowsocks_outbound_relays_udp_through_ss_server",
        Server::Libev,
        "chacha20-ietf-poly1305",
    );
}

#[test]
fn shadowsocks_outbound_moves_bulk_through_ssserver() {
    moves_bulk(
        "shadowsocks_outbound_moves_bulk_through_ssserver",
        Server::Rust,
        "aes-256-gcm",
    );
}

#[test]
fn shadowsocks_outbound_relays_udp_through_ssserver() {
    relays_udp(
        "shadowsocks_outbound_relays_udp_through_ssserver",
        Server::Rust,
        "aes-128-gcm",
    );
}

/// Flows to 127.0.0.2 take an outbound with the wrong password, the rest
/// the right one. A Shadowsocks server answers nothing to a client it
/// cannot authenticate, and both ss-server and ssserver hold such a
/// connection open until the client leaves (so a prober learns nothing), so
/// the flow can only end without a byte of the echo: closed, refused, or
/// silent for the bounded wait. The runtime carries the next flow as
/// before, and the server logs `refusal`.
fn wrong_password(test: &str, server: Server, refusal: &str) {
    let Some(binary) = peer(test, server.binary()) else {
        return;
    };
    let method = "aes-256-gcm";
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let listen = free_addr();
    let server = start(server, &binary, &dir, listen, method);
    let ours = free_addr();
    let config = format!(
        "[[inbound]]\ntag = \"socks-in\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n\
         {}{}[route]\ndefault = \"good\"\n\n[[route.rule]]\noutbound = \"bad\"\n\
         cidr = [\"127.0.0.2/32\"]\n",
        ours.ip(),
        ours.port(),
        outbound("good", listen, method, PASSWORD),
        outbound("bad", listen, method, "not the password"),
    );
    let _etemenanki = start_ours(&dir, "etemenanki.toml", &config, &[ours]);

    let elsewhere = SocketAddr::from(([127, 0, 0, 2], echo.port()));
    for _ in 0..2 {
        if let Ok(mut stream) = socks5_connect(ours, elsewhere, None) {
            stream.set_read_timeout(Some(SILENCE)).unwrap();
            let _ = stream.write_all(b"is anyone there?");
            let mut got = [0u8; 64];
            if let Ok(n) = stream.read(&mut got) {
                assert_eq!(n, 0, "a wrong password got {n} bytes back");
            }
        }
        check_echo(socks5_connect(ours, echo, None).unwrap(), b"still serving");
    }
    server.wait_for_log(refusal);
}

#[test]
fn a_wrong_password_gets_no_byte_back_from_ss_server_and_the_runtime_serves_the_next_flow() {
    wrong_password(
        "a_wrong_password_gets_no_byte_back_from_ss_server_and_the_runtime_serves_the_next_flow",
        Server::Libev,
        "authentication error",
    );
}

#[test]
fn a_wrong_password_gets_no_byte_back_from_ssserver_and_the_runtime_serves_the_next_flow() {
    wrong_password(
        "a_wrong_password_gets_no_byte_back_from_ssserver_and_the_runtime_serves_the_next_flow",
        Server::Rust,
        "tcp handshake failed",
    );
}
