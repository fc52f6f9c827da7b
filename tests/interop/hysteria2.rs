//! Hysteria 2: our hysteria2 outbound against sing-box's hysteria2
//! inbound, trusting the test CA (support/certs.rs): 1 MiB each way over
//! TCP and UDP round trips (fragmented ones included), with and without
//! Salamander; a wrong password fails the flow cleanly and the connection
//! slot backs off; 1 MiB each way still arrives through a relay of the
//! test's own that drops a seeded 5% of datagrams each way; and an
//! unchanged outbound keeps its QUIC connection across an apply while a
//! changed one dials its own. Then sing-box as the client of our hysteria2
//! inbound: the same TCP cases, a wrong password, the loss, and a client
//! that still connects past Initials from addresses that never answer.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::binaries::{ours, peer};
use crate::support::certs::Pki;
use crate::support::client::{check_echo, pattern, socks5_connect, Association};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, free_port, tcp_echo, udp_echo, udp_named};
use crate::support::WAIT;

const PASSWORD: &str = "hysteria2-interop-secret";
const OBFS: &str = "hysteria2-interop-salamander";
const SERVER_NAME: &str = "localhost";
const MIB: usize = 1024 * 1024;

/// sing-box with one hysteria2 inbound on UDP `port` accepting `PASSWORD`,
/// Salamander when `obfs`, and a direct outbound.
fn sing_box_server(sing_box: &Path, dir: &Path, port: u16, pki: &Pki, obfs: bool) -> Process {
    let obfs = if obfs {
        format!(r#""obfs": {{ "type": "salamander", "password": "{OBFS}" }},"#)
    } else {
        String::new()
    };
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "hysteria2", "tag": "hy2-in",
    "listen": "127.0.0.1", "listen_port": {port}, {obfs}
    "users": [{{ "name": "interop", "password": "{PASSWORD}" }}],
    "tls": {{ "enabled": true, "alpn": ["h3"],
      "certificate_path": "{}", "key_path": "{}" }} }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        pki.server.cert.display(),
        pki.server.key.display()
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    let process = Process::spawn("sing-box", command, dir);
    process.wait_for_log("sing-box started");
    process
}

/// The tables of our hysteria2 outbound: `password`, Salamander when
/// `obfs`, trusting the test CA.
fn tables(pki: &Pki, password: &str, obfs: bool) -> String {
    let obfs = if obfs {
        format!("obfs = {{ type = \"salamander\", password = \"{OBFS}\" }}\n")
    } else {
        String::new()
    };
    format!(
        "[outbound.stream.tls]\nserver_name = \"{SERVER_NAME}\"\nca_file = \"{}\"\n\
         [outbound.settings]\npassword = \"{password}\"\n{obfs}",
        pki.ca.display()
    )
}

/// Our runtime: a SOCKS inbound in front of a hysteria2 outbound to
/// `server`.
fn ours_to(dir: &Path, server: SocketAddr, tables: &str) -> (Process, SocketAddr) {
    let listen = free_addr();
    let process = Config::default()
        .socks_in(listen, None)
        .proxy_out("hysteria2", server, tables)
        .start(dir);
    (process, listen)
}

fn peers(test: &str) -> Option<(PathBuf, PathBuf)> {
    Some((peer(test, "sing-box")?, peer(test, "openssl")?))
}

/// 1 MiB each way, byte for byte, and a short message, through `socks`.
fn mebibyte_through(socks: SocketAddr) {
    let echo = tcp_echo();
    check_echo(
        socks5_connect(socks, echo, None).unwrap(),
        b"hello, hysteria",
    );
    check_echo(socks5_connect(socks, echo, None).unwrap(), &pattern(MIB));
}

/// One association, several peers: a packet that fits one QUIC datagram,
/// one that needs fragments each way, and two named peers. sing-box reads
/// at most 4 KiB of a UDP reply (its hysteria2 MaxUDPSize), so the
/// fragmented one stays under that.
fn udp_round_trips(socks: SocketAddr) {
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let association = Association::open(socks).unwrap();
    for payload in [
        b"ping through hysteria2".to_vec(),
        pattern(1000),
        pattern(3000),
    ] {
        let reply = association.ask(echo, &payload);
        let got = reply
            .as_ref()
            .map(|(from, p)| (*from, p.len(), p == &payload));
        assert_eq!(
            got,
            Some((echo, payload.len(), true)),
            "a {}-byte round trip",
            payload.len()
        );
    }
    let (alpha, beta) = (udp_named("alpha"), udp_named("beta"));
    for _ in 0..2 {
        assert_eq!(
            association.ask(alpha, b"who"),
            Some((alpha, b"alpha:who".to_vec()))
        );
        assert_eq!(
            association.ask(beta, b"who"),
            Some((beta, b"beta:who".to_vec()))
        );
    }
}

fn through_sing_box(test: &str, obfs: bool) {
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let port = free_port();
    let _server = sing_box_server(&sing_box, &dir, port, &pki, obfs);
    let server = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let (runtime, socks) = ours_to(&dir, server, &tables(&pki, PASSWORD, obfs));
    mebibyte_through(socks);
    udp_round_trips(socks);
    let log = runtime.log();
    assert_eq!(
        log.matches("hysteria2: connect failed").count(),
        0,
        "one connection carried every flow; log:\n{log}"
    );
}

#[test]
fn hysteria2_outbound_moves_a_mebibyte_each_way_and_udp_through_sing_box() {
    through_sing_box(
        "hysteria2_outbound_moves_a_mebibyte_each_way_and_udp_through_sing_box",
        false,
    );
}

#[test]
fn hysteria2_outbound_with_salamander_moves_a_mebibyte_each_way_and_udp_through_sing_box() {
    through_sing_box(
        "hysteria2_outbound_with_salamander_moves_a_mebibyte_each_way_and_udp_through_sing_box",
        true,
    );
}

/// The flow failed cleanly: a SOCKS refusal, or a stream that ends before
/// the read timeout.
fn fails_cleanly(connected: io::Result<TcpStream>, what: &str) {
    let Ok(mut stream) = connected else { return };
    stream
        .set_read_timeout(Some(WAIT))
        .expect("setting a read timeout");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: the stream carried {n} bytes"),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{what}: the stream hung until the read timeout"
        ),
    }
}

#[test]
fn hysteria2_outbound_with_a_wrong_password_fails_the_flow_cleanly_and_backs_off() {
    let test = "hysteria2_outbound_with_a_wrong_password_fails_the_flow_cleanly_and_backs_off";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let port = free_port();
    let _server = sing_box_server(&sing_box, &dir, port, &pki, false);
    let server = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let (runtime, socks) = ours_to(&dir, server, &tables(&pki, "not-the-password", false));
    let echo = tcp_echo();
    fails_cleanly(socks5_connect(socks, echo, None), "the first flow");
    runtime.wait_for_log("hysteria2: connect failed: ");
    runtime.wait_for_log("authentication failed: the server answered 404");
    // The next flow, within the 2 s backoff, dials nothing.
    fails_cleanly(
        socks5_connect(socks, echo, None),
        "a flow during the backoff",
    );
    runtime.wait_for_log("hysteria2: connection is down, waiting before the next attempt");
    assert_eq!(
        runtime.log().matches("hysteria2: connect failed: ").count(),
        1,
        "one attempt before the backoff ends; log:\n{}",
        runtime.log()
    );
}

/// A UDP relay between a client and `server` that drops a seeded share of
/// the datagrams each way; it stops when dropped.
struct LossyRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

/// xorshift64*: the same drops every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

impl LossyRelay {
    fn start(server: SocketAddr, percent: u64) -> LossyRelay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for socket in [&front, &back] {
            socket
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
        }
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<std::sync::Mutex<Option<SocketAddr>>> = Arc::default();
        let (front, back) = (Arc::new(front), Arc::new(back));
        let mut threads = Vec::new();
        for (upstream, seed) in [(true, 0x5eed_u64), (false, 0xfeed_u64)] {
            let (front, back, stop, client) =
                (front.clone(), back.clone(), stop.clone(), client.clone());
            threads.push(thread::spawn(move || {
                let mut state = seed;
                let mut buf = vec![0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    if upstream {
                        let Ok((n, from)) = front.recv_from(&mut buf) else {
                            continue;
                        };
                        *client.lock().unwrap() = Some(from);
                        if next(&mut state) % 100 >= percent {
                            let _ = back.send(&buf[..n]);
                        }
                    } else {
                        let Ok(n) = back.recv(&mut buf) else { continue };
                        let to = *client.lock().unwrap();
                        if let Some(to) = to {
                            if next(&mut state) % 100 >= percent {
                                let _ = front.send_to(&buf[..n], to);
                            }
                        }
                    }
                }
            }));
        }
        LossyRelay {
            addr,
            stop,
            threads,
        }
    }
}

impl Drop for LossyRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[test]
fn hysteria2_outbound_moves_a_mebibyte_each_way_through_five_percent_loss() {
    let test = "hysteria2_outbound_moves_a_mebibyte_each_way_through_five_percent_loss";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let port = free_port();
    let _server = sing_box_server(&sing_box, &dir, port, &pki, false);
    let relay = LossyRelay::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), 5);
    let (_runtime, socks) = ours_to(&dir, relay.addr, &tables(&pki, PASSWORD, false));
    check_echo(
        socks5_connect(socks, tcp_echo(), None).unwrap(),
        &pattern(MIB),
    );
}

/// The distinct source ports sing-box logged its hysteria2 streams from,
/// in order: one per QUIC connection, whatever streams it carried.
fn source_ports(log: &str) -> Vec<u16> {
    let mut ports = Vec::new();
    for line in log.lines() {
        let Some((_, from)) = line.split_once("inbound connection from 127.0.0.1:") else {
            continue;
        };
        let port = from
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|p| p.parse().ok());
        if let Some(port) = port {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
    }
    ports
}

/// Rewrites the configuration, compiles it over the running plan and
/// reloads with SIGHUP; waits for the apply of `epoch`.
fn reload(runtime: &Process, dir: &Path, text: &str, epoch: u32) {
    let source = dir.join("etemenanki.toml");
    std::fs::write(&source, text).unwrap();
    let out = Command::new(ours("etc"))
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(dir.join("plan.bin"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    runtime.signal("HUP");
    runtime.wait_for_log(&format!("reload: applied epoch {epoch}"));
}

#[test]
fn an_unchanged_hysteria2_outbound_keeps_its_quic_connection_across_apply() {
    let test = "an_unchanged_hysteria2_outbound_keeps_its_quic_connection_across_apply";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let port = free_port();
    let server = sing_box_server(&sing_box, &dir, port, &pki, false);
    let listen = free_addr();
    let first = format!(
        "[[inbound]]\ntag = \"socks-in\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n\
         [[outbound]]\ntag = \"out\"\nprotocol = \"hysteria2\"\nserver = \"127.0.0.1\"\n\
         port = {port}\n{}\n[route]\ndefault = \"out\"\n",
        listen.ip(),
        listen.port(),
        tables(&pki, PASSWORD, false),
    );
    let runtime =
        crate::support::etemenanki::start_ours(&dir, "etemenanki.toml", &first, &[listen]);
    let echo = tcp_echo();
    let mut open = socks5_connect(listen, echo, None).unwrap();
    check_echo(socks5_connect(listen, echo, None).unwrap(), b"first");
    let wait_ports = |count: usize| {
        let start = Instant::now();
        while source_ports(&server.log()).len() < count && start.elapsed() < WAIT {
            thread::sleep(Duration::from_millis(20));
        }
        source_ports(&server.log())
    };
    assert_eq!(wait_ports(1).len(), 1, "log:\n{}", server.log());

    // An apply that changes nothing of the outbound reuses it: the next flow
    // rides the same connection, and the open one keeps working.
    let unchanged = format!("{first}\n[[route.rule]]\noutbound = \"out\"\nport = [9]\n");
    reload(&runtime, &dir, &unchanged, 1);
    check_echo(socks5_connect(listen, echo, None).unwrap(), b"second");
    let ports = wait_ports(1);
    assert_eq!(ports.len(), 1, "a reused outbound dialed again: {ports:?}");

    // A changed outbound is a new version that dials a connection of its
    // own; the flow opened on the old version keeps working.
    let changed = unchanged.replace(
        "[outbound.settings]\n",
        "[outbound.settings]\nup_mbps = 1000\n",
    );
    reload(&runtime, &dir, &changed, 2);
    check_echo(socks5_connect(listen, echo, None).unwrap(), b"third");
    let ports = wait_ports(2);
    assert_eq!(
        ports.len(),
        2,
        "a changed outbound dials its own connection: {ports:?}"
    );
    assert_eq!(crate::support::client::exchange(&mut open, b"old"), b"old");
}

/// Our runtime serving Hysteria 2 on a UDP port of 127.0.0.1 with the test
/// CA's server certificate, Salamander when `obfs`, then freedom. Returns
/// the process and the address the inbound bound (logged once it serves).
fn our_server(dir: &Path, pki: &Pki, obfs: bool) -> (Process, SocketAddr) {
    let obfs = if obfs {
        format!("obfs = {{ type = \"salamander\", password = \"{OBFS}\" }}\n")
    } else {
        String::new()
    };
    our_server_with(dir, pki, &format!("password = \"{PASSWORD}\"\n{obfs}"))
}

/// The configuration of [`our_server`] with `settings` as the inbound's
/// settings table.
fn our_server_text(pki: &Pki, port: u16, settings: &str) -> String {
    format!(
        "[[inbound]]\ntag = \"hy2-in\"\nprotocol = \"hysteria2\"\nlisten = \"127.0.0.1\"\nport = {port}\n\
         [inbound.stream.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n\
         [inbound.settings]\n{settings}\n\
         [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n[route]\ndefault = \"direct\"\n",
        pki.server.cert.display(),
        pki.server.key.display()
    )
}

fn our_server_with(dir: &Path, pki: &Pki, settings: &str) -> (Process, SocketAddr) {
    let config = our_server_text(pki, free_port(), settings);
    let runtime = crate::support::etemenanki::start_ours(dir, "etemenanki.toml", &config, &[]);
    let addr = runtime.listening("hy2-in");
    (runtime, addr)
}

/// sing-box as the client: a SOCKS inbound on `socks`, a hysteria2
/// outbound to `server` trusting the test CA, with `password`.
fn sing_box_client(
    sing_box: &Path,
    dir: &Path,
    socks: SocketAddr,
    server: SocketAddr,
    pki: &Pki,
    password: &str,
    obfs: bool,
) -> Process {
    let obfs = if obfs {
        format!(r#""obfs": {{ "type": "salamander", "password": "{OBFS}" }},"#)
    } else {
        String::new()
    };
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {} }}],
  "outbounds": [{{ "type": "hysteria2", "tag": "out", "server": "127.0.0.1", "server_port": {}, {obfs}
    "password": "{password}",
    "tls": {{ "enabled": true, "server_name": "{SERVER_NAME}", "alpn": ["h3"], "certificate_path": "{}" }} }}] }}
"#,
        socks.port(),
        server.port(),
        pki.ca.display()
    );
    let path = dir.join("sing-box-client.json");
    std::fs::write(&path, config).expect("writing sing-box-client.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    Process::spawn_listening("sing-box-client", command, dir, socks)
}

fn sing_box_to_ours(test: &str, obfs: bool) {
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (runtime, server) = our_server(&dir, &pki, obfs);
    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, server, &pki, PASSWORD, obfs);
    mebibyte_through(socks);
    runtime.wait_for_log("via direct@v1");
}

#[test]
fn sing_box_moves_a_mebibyte_each_way_through_our_hysteria2_inbound() {
    sing_box_to_ours(
        "sing_box_moves_a_mebibyte_each_way_through_our_hysteria2_inbound",
        false,
    );
}

#[test]
fn sing_box_with_salamander_moves_a_mebibyte_each_way_through_our_hysteria2_inbound() {
    sing_box_to_ours(
        "sing_box_with_salamander_moves_a_mebibyte_each_way_through_our_hysteria2_inbound",
        true,
    );
}

#[test]
fn our_hysteria2_inbound_refuses_a_wrong_password_and_serves_the_right_one() {
    let test = "our_hysteria2_inbound_refuses_a_wrong_password_and_serves_the_right_one";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (runtime, server) = our_server(&dir, &pki, false);
    let wrong = free_addr();
    let wrong_client = sing_box_client(&sing_box, &dir, wrong, server, &pki, "wrong", false);
    fails_cleanly(socks5_connect(wrong, tcp_echo(), None), "a wrong password");
    wrong_client.wait_for_log("404");
    drop(wrong_client);
    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, server, &pki, PASSWORD, false);
    check_echo(
        socks5_connect(socks, tcp_echo(), None).unwrap(),
        b"still serving",
    );
    assert!(!runtime.log().contains("panicked"));
}

#[test]
fn sing_box_moves_a_mebibyte_each_way_through_five_percent_loss_to_our_inbound() {
    let test = "sing_box_moves_a_mebibyte_each_way_through_five_percent_loss_to_our_inbound";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (_runtime, server) = our_server(&dir, &pki, false);
    let relay = LossyRelay::start(server, 5);
    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, relay.addr, &pki, PASSWORD, false);
    check_echo(
        socks5_connect(socks, tcp_echo(), None).unwrap(),
        &pattern(MIB),
    );
}

#[test]
fn sing_box_relays_udp_through_our_hysteria2_inbound() {
    let test = "sing_box_relays_udp_through_our_hysteria2_inbound";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (_runtime, server) = our_server(&dir, &pki, false);
    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, server, &pki, PASSWORD, false);
    udp_round_trips(socks);
}

#[test]
fn a_passwords_change_keeps_our_hysteria2_inbound_and_ends_only_the_removed_users_connections() {
    let test = "a_passwords_change_keeps_our_hysteria2_inbound_and_ends_only_the_removed_users_connections";
    let Some(openssl) = peer(test, "openssl") else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let port = free_port();
    let users = |list: &str| our_server_text(&pki, port, &format!("passwords = [{list}]\n"));
    let server = crate::support::etemenanki::start_ours(
        &dir,
        "etemenanki.toml",
        &users("\"alice\", \"bob\""),
        &[],
    );
    let address = server.listening("hy2-in");

    // Our client: one socks inbound per user, each routed to a hysteria2
    // outbound with that user's password.
    let client_dir = scratch_dir(&format!("{test}-client"));
    let (as_alice, as_bob) = (free_addr(), free_addr());
    let mut client = String::new();
    for (tag, listen) in [("alice", as_alice), ("bob", as_bob)] {
        client.push_str(&format!(
            "[[inbound]]\ntag = \"as-{tag}\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n",
            listen.ip(),
            listen.port()
        ));
    }
    for tag in ["alice", "bob"] {
        client.push_str(&format!(
            "[[outbound]]\ntag = \"{tag}\"\nprotocol = \"hysteria2\"\nserver = \"127.0.0.1\"\nport = {}\n\
             [outbound.stream.tls]\nserver_name = \"{SERVER_NAME}\"\nca_file = \"{}\"\n\
             [outbound.settings]\npassword = \"{tag}\"\n\n",
            address.port(),
            pki.ca.display()
        ));
    }
    client.push_str("[route]\ndefault = \"alice\"\n");
    for tag in ["alice", "bob"] {
        client.push_str(&format!(
            "[[route.rule]]\ninbound_tag = [\"as-{tag}\"]\noutbound = \"{tag}\"\n"
        ));
    }
    let _client = crate::support::etemenanki::start_ours(
        &client_dir,
        "etemenanki.toml",
        &client,
        &[as_alice, as_bob],
    );
    let echo = tcp_echo();
    let echo_once = crate::support::client::echo_once;
    let mut alice = socks5_connect(as_alice, echo, None).unwrap();
    let mut bob = socks5_connect(as_bob, echo, None).unwrap();
    assert_eq!(echo_once(&mut alice, b"alice"), b"alice");
    assert_eq!(echo_once(&mut bob, b"bob"), b"bob");

    let before = server.log().len();
    reload(&server, &dir, &users("\"alice\", \"carol\""), 1);
    let applied = server.log()[before..].to_owned();
    assert!(
        applied.contains("apply: = inbound hy2-in  v1  users changed; kept, with its connections"),
        "{applied}"
    );
    assert_eq!(server.listening("hy2-in"), address, "the same socket");
    assert_eq!(echo_once(&mut alice, b"still"), b"still");
    server.wait_for_log("its user was removed");
    bob.set_read_timeout(Some(WAIT)).unwrap();
    assert_eq!(
        echo_once(&mut bob, b"gone"),
        b"",
        "a removed user's connection ends"
    );
    fails_cleanly(socks5_connect(as_bob, echo, None), "a removed user");
    check_echo(socks5_connect(as_alice, echo, None).unwrap(), b"alice anew");
    assert!(!server.log().contains("panicked"));
}

/// A web server of the test's own on loopback: it answers every request
/// with `answer` and closes, handing the request heads it read to the test.
fn tiny_web_server(answer: &'static [u8]) -> (SocketAddr, std::sync::mpsc::Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (heads, seen) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for conn in listener.incoming().take(16) {
            let Ok(mut conn) = conn else { return };
            conn.set_read_timeout(Some(WAIT)).unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                match conn.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let _ = heads.send(String::from_utf8_lossy(&head).into_owned());
            let _ = std::io::Write::write_all(&mut conn, answer);
        }
    });
    (addr, seen)
}

#[test]
fn sing_box_with_a_wrong_password_gets_our_masquerades_answer_and_fails_cleanly() {
    let test = "sing_box_with_a_wrong_password_gets_our_masquerades_answer_and_fails_cleanly";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (web, heads) = tiny_web_server(
        b"HTTP/1.1 418 I'm a teapot\r\nContent-Length: 6\r\nConnection: close\r\n\r\nteapot",
    );
    let (runtime, server) = our_server_with(
        &dir,
        &pki,
        &format!("password = \"{PASSWORD}\"\nmasquerade = \"{web}\"\n"),
    );
    let wrong = free_addr();
    let wrong_client = sing_box_client(&sing_box, &dir, wrong, server, &pki, "wrong", false);
    fails_cleanly(socks5_connect(wrong, tcp_echo(), None), "a wrong password");
    wrong_client.wait_for_log("418");
    let head = heads
        .recv_timeout(WAIT)
        .expect("the web server saw the request");
    assert!(head.starts_with("POST /auth HTTP/1.1\r\n"), "{head}");
    drop(wrong_client);
    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, server, &pki, PASSWORD, false);
    check_echo(
        socks5_connect(socks, tcp_echo(), None).unwrap(),
        b"still serving",
    );
    assert!(!runtime.log().contains("panicked"));
}

#[test]
fn sing_box_with_bandwidth_limits_gets_the_rates_the_protocol_says_from_our_inbound() {
    let test = "sing_box_with_bandwidth_limits_gets_the_rates_the_protocol_says_from_our_inbound";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    // Ours: sends at most 800 Mbit/s, receives at most 400. (Rates high
    // enough that Brutal's window, twice the rate times a loopback RTT,
    // holds several packets: a window of one packet waits out the peer's
    // ACK delay on every round trip.)
    let (runtime, server) = our_server_with(
        &dir,
        &pki,
        &format!("password = \"{PASSWORD}\"\nup_mbps = 800\ndown_mbps = 400\n"),
    );
    // sing-box: receives at 1000 Mbit/s, sends at 600.
    let socks = free_addr();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {} }}],
  "outbounds": [{{ "type": "hysteria2", "tag": "out", "server": "127.0.0.1", "server_port": {},
    "password": "{PASSWORD}", "up_mbps": 600, "down_mbps": 1000,
    "tls": {{ "enabled": true, "server_name": "{SERVER_NAME}", "alpn": ["h3"], "certificate_path": "{}" }} }}] }}
"#,
        socks.port(),
        server.port(),
        pki.ca.display()
    );
    let path = dir.join("sing-box-client.json");
    std::fs::write(&path, config).expect("writing sing-box-client.json");
    let mut command = Command::new(&sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    let _client = Process::spawn_listening("sing-box-client", command, &dir, socks);
    mebibyte_through(socks);
    // The client announced 1000 Mbit/s, capped by our 800: Brutal at
    // 100 MB/s; our answer is our 400 Mbit/s (50 MB/s), which sing-box
    // takes over its own 600.
    runtime.wait_for_log(
        "authenticated: sending with Brutal at 100000000 bytes/s, announcing a receive limit of 50000000 bytes/s",
    );
}

/// `count` QUIC Initials to `server`, each the first datagram quinn sends
/// for a client connection of its own (its own connection ids, 1,200
/// bytes), from clients that will never send another.
fn client_initials(server: SocketAddr, count: usize) -> Vec<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3 with ring")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn_proto::ClientConfig::new(Arc::new(crypto));
    let mut endpoint = quinn_proto::Endpoint::new(
        Arc::new(quinn_proto::EndpointConfig::default()),
        None,
        false,
        None,
    );
    let now = Instant::now();
    (0..count)
        .map(|_| {
            let (_, mut connection) = endpoint
                .connect(now, config.clone(), server, SERVER_NAME)
                .unwrap();
            let mut initial = Vec::new();
            let transmit = connection.poll_transmit(now, 1, &mut initial).unwrap();
            initial.truncate(transmit.size);
            initial
        })
        .collect()
}

/// A QUIC long header's packet type (RFC 9000, 17.2): 0 Initial, 3 Retry.
fn long_header_type(packet: &[u8]) -> Option<u8> {
    let first = *packet.first()?;
    (first & 0x80 != 0).then_some((first >> 4) & 0x3)
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

#[test]
fn sing_box_still_connects_to_our_hysteria2_inbound_past_initials_from_addresses_that_never_answer()
{
    let test = "sing_box_still_connects_to_our_hysteria2_inbound_past_initials_from_addresses_that_never_answer";
    let Some((sing_box, openssl)) = peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    // A handshake that never completes would hold its slots for a minute;
    // QUIC's own 30 s idle timeout ends it first, after the test.
    let config = our_server_text(&pki, free_port(), &format!("password = \"{PASSWORD}\"\n"))
        + "\n[limits]\nmax_handshakes = 512\nhandshake_timeout = 60\n";
    let runtime = crate::support::etemenanki::start_ours(&dir, "etemenanki.toml", &config, &[]);
    let server = runtime.listening("hy2-in");

    // 640 Initials (768,000 bytes of UDP), each from an address of its own,
    // as spoofed ones come, so no per-source bound stops them; no sender
    // ever answers. Each is sent once the one before it was answered, so
    // none is lost to a full socket buffer: the first 256 with the server's
    // first flight, the rest asked to prove their address with a Retry
    // rather than refused.
    let initials = client_initials(server, 640);
    let before = rss_kib(runtime.pid());
    let mut answer = [0u8; 1500];
    let mut answers = Vec::new();
    let senders: Vec<UdpSocket> = initials
        .iter()
        .enumerate()
        .map(|(i, initial)| {
            let from = Ipv4Addr::new(127, 1, (i / 200) as u8, (i % 200) as u8 + 1);
            let socket = UdpSocket::bind((from, 0)).unwrap();
            socket.set_read_timeout(Some(WAIT)).unwrap();
            socket.send_to(initial, server).unwrap();
            let (n, _) = socket
                .recv_from(&mut answer)
                .unwrap_or_else(|e| panic!("Initial {i} is answered: {e}"));
            answers.push(long_header_type(&answer[..n]));
            socket
        })
        .collect();
    // For the figure only, not asserted: what the pending handshakes hold
    // once their first flights are out.
    thread::sleep(Duration::from_millis(500));
    let held = rss_kib(runtime.pid()).saturating_sub(before);
    eprintln!(
        "{held} KiB resident for {} Initials that never answer, {} KiB an Initial",
        initials.len(),
        held / initials.len() as u64
    );
    let retried = answers.iter().position(|&t| t == Some(3));
    assert_eq!(
        retried,
        Some(256),
        "the first Initial answered with a Retry"
    );
    assert!(
        answers[256..].iter().all(|&t| t == Some(3)),
        "every Initial past the first 256 is answered with a Retry"
    );

    let socks = free_addr();
    let _client = sing_box_client(&sing_box, &dir, socks, server, &pki, PASSWORD, false);
    mebibyte_through(socks);
    drop(senders);
}
