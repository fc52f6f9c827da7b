//! dante-server (`danted`): our SOCKS outbound through dante, for CONNECT
//! and UDP ASSOCIATE, and dante chaining into our SOCKS inbound.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::client::{check_echo, pattern, socks5_connect, Association};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo, udp_echo};
use crate::support::BULK;

/// dante in the foreground on `listen`, without authentication, passing
/// CONNECT and UDP for loopback; with `upstream`, every CONNECT goes on
/// through that SOCKS5 server (dante's server chaining).
fn start(danted: &Path, dir: &Path, listen: SocketAddr, upstream: Option<SocketAddr>) -> Process {
    let mut config = format!(
        "logoutput: stderr
internal: 127.0.0.1 port = {}
external: 127.0.0.1
clientmethod: none
socksmethod: none
client pass {{
  from: 127.0.0.0/8 to: 0.0.0.0/0
}}
socks pass {{
  from: 127.0.0.0/8 to: 0.0.0.0/0
  command: connect udpassociate udpreply
}}
",
        listen.port()
    );
    if let Some(upstream) = upstream {
        config.push_str(&format!(
            "route {{
  from: 0.0.0.0/0 to: 0.0.0.0/0 via: {} port = {}
  proxyprotocol: socks_v5
  command: connect
  method: none
}}
",
            upstream.ip(),
            upstream.port()
        ));
    }
    let path = dir.join("danted.conf");
    std::fs::write(&path, config).expect("writing danted.conf");
    let mut command = Command::new(danted);
    command
        .arg("-f")
        .arg(&path)
        .arg("-p")
        .arg(dir.join("danted.pid"));
    Process::spawn_listening("danted", command, dir, listen)
}

#[test]
fn socks_outbound_connects_through_dante() {
    let test = "socks_outbound_connects_through_dante";
    let Some(danted) = peer(test, "danted") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let dante = free_addr();
    let _dante = start(&danted, &dir, dante, None);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(dante, None)
        .start(&dir);

    check_echo(socks5_connect(ours, echo, None).unwrap(), b"hello, dante");
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn socks_outbound_relays_udp_through_dante() {
    let test = "socks_outbound_relays_udp_through_dante";
    let Some(danted) = peer(test, "danted") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let dante = free_addr();
    let _dante = start(&danted, &dir, dante, None);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(dante, None)
        .start(&dir);

    let association = Association::open(ours).unwrap();
    for payload in [b"ping through dante".to_vec(), pattern(1200)] {
        let reply = association.ask(echo, &payload);
        assert_eq!(reply, Some((echo, payload)));
    }
}

#[test]
fn dante_chains_into_our_socks_inbound() {
    let test = "dante_chains_into_our_socks_inbound";
    let Some(danted) = peer(test, "danted") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let ours = free_addr();
    let etemenanki = Config::default().socks_in(ours, None).freedom().start(&dir);
    let dante = free_addr();
    let _dante = start(&danted, &dir, dante, Some(ours));

    check_echo(socks5_connect(dante, echo, None).unwrap(), b"hello, chain");
    check_echo(socks5_connect(dante, echo, None).unwrap(), &pattern(BULK));
    etemenanki.wait_for_log(&format!("-> {echo} (sniffed None) via out@v1"));
}
