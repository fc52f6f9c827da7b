//! tinyproxy: our HTTP outbound through it with CONNECT, and tinyproxy
//! chaining into our HTTP inbound as its upstream.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::client::{check_echo, http_connect, pattern, socks5_connect};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo};
use crate::support::BULK;

/// tinyproxy in the foreground on `listen`, allowing loopback clients to
/// CONNECT to `connect_port`; with `upstream`, it forwards through that
/// HTTP proxy.
fn start(
    tinyproxy: &Path,
    dir: &Path,
    listen: SocketAddr,
    connect_port: u16,
    upstream: Option<SocketAddr>,
) -> Process {
    let mut config = format!(
        "Port {}
Listen 127.0.0.1
Timeout 30
MaxClients 16
LogLevel Info
Allow 127.0.0.1
ConnectPort {connect_port}
",
        listen.port()
    );
    if let Some(upstream) = upstream {
        config.push_str(&format!("Upstream http {upstream}\n"));
    }
    let path = dir.join("tinyproxy.conf");
    std::fs::write(&path, config).expect("writing tinyproxy.conf");
    let mut command = Command::new(tinyproxy);
    command.arg("-d").arg("-c").arg(&path);
    Process::spawn_listening("tinyproxy", command, dir, listen)
}

#[test]
fn http_outbound_connects_through_tinyproxy() {
    let test = "http_outbound_connects_through_tinyproxy";
    let Some(tinyproxy) = peer(test, "tinyproxy") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _tinyproxy = start(&tinyproxy, &dir, upstream, echo.port(), None);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .http_out(upstream, None)
        .start(&dir);

    check_echo(
        socks5_connect(ours, echo, None).unwrap(),
        b"hello, tinyproxy",
    );
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn tinyproxy_chains_into_our_http_inbound() {
    let test = "tinyproxy_chains_into_our_http_inbound";
    let Some(tinyproxy) = peer(test, "tinyproxy") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let ours = free_addr();
    let etemenanki = Config::default().http_in(ours, None).freedom().start(&dir);
    let front = free_addr();
    let _tinyproxy = start(&tinyproxy, &dir, front, echo.port(), Some(ours));

    check_echo(http_connect(front, echo, None).unwrap(), b"hello, chain");
    check_echo(http_connect(front, echo, None).unwrap(), &pattern(BULK));
    etemenanki.wait_for_log(&format!("-> {echo} (sniffed None) via out@v1"));
}
