//! Shadowsocks 2022: our shadowsocks-2022 outbound through shadowsocks-rust's
//! `ssserver` for every method, TCP and UDP, and through multi-user servers
//! (ssserver's and sing-box's `users`) with identity PSKs; a wrong PSK
//! fails its flow and the runtime serves the next one.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::binaries::{ours, peer};
use crate::support::client::{check_echo, check_greeting, pattern, socks5_connect, Association};
use crate::support::etemenanki::serve;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo, udp_echo};

/// 1 MiB each way, checked byte for byte.
const BULK: usize = 1024 * 1024;

const METHODS: [(&str, usize); 3] = [
    ("2022-blake3-aes-128-gcm", 16),
    ("2022-blake3-aes-256-gcm", 32),
    ("2022-blake3-chacha20-poly1305", 32),
];

/// A PSK of `len` bytes, every one `byte`, in standard base64.
fn psk(len: usize, byte: u8) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = vec![byte; len];
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    // Each short final group is padded to four characters.
    for _ in 0..(3 - len % 3) % 3 {
        out.push('=');
    }
    out
}

/// Our runtime: a SOCKS inbound on `socks` (UDP too), every flow to a
/// shadowsocks-2022 outbound of `server`.
fn ours_through(
    dir: &Path,
    socks: SocketAddr,
    server: SocketAddr,
    method: &str,
    psk: &str,
    identities: &[String],
) -> Process {
    let mut text = format!(
        "[[inbound]]\ntag = \"socks-in\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n\
         [[outbound]]\ntag = \"out\"\nprotocol = \"shadowsocks-2022\"\nserver = \"{}\"\nport = {}\n\
         [outbound.settings]\nmethod = \"{method}\"\npsk = \"{psk}\"\n",
        socks.ip(),
        socks.port(),
        server.ip(),
        server.port()
    );
    if !identities.is_empty() {
        let list: Vec<String> = identities.iter().map(|k| format!("\"{k}\"")).collect();
        let _ = writeln!(text, "identity_psks = [{}]", list.join(", "));
    }
    text.push_str("\n[route]\ndefault = \"out\"\n");
    let source = dir.join("etemenanki.toml");
    let plan = dir.join("plan.bin");
    std::fs::write(&source, &text).expect("writing the configuration");
    let out = Command::new(ours("etc"))
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(&plan)
        .output()
        .expect("running etc build");
    assert!(
        out.status.success(),
        "etc build failed:\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut process = serve(&plan, &[], dir);
    process.wait_listening(socks);
    process
}

/// ssserver on `listen`, TCP and UDP; with `users`, a multi-user server
/// whose own PSK is `password` (the identity PSK) and whose users hold
/// the PSKs given.
fn ssserver(
    bin: &Path,
    dir: &Path,
    listen: SocketAddr,
    method: &str,
    password: &str,
    users: &[(&str, String)],
) -> Process {
    // One entry of `servers`: only there does ssserver read `users`.
    let mut config = format!(
        "{{\"servers\": [{{\"server\": \"{}\", \"server_port\": {}, \"method\": \"{method}\", \
         \"password\": \"{password}\", \"mode\": \"tcp_and_udp\"",
        listen.ip(),
        listen.port()
    );
    if !users.is_empty() {
        let list: Vec<String> = users
            .iter()
            .map(|(name, key)| format!("{{\"name\": \"{name}\", \"password\": \"{key}\"}}"))
            .collect();
        let _ = write!(config, ", \"users\": [{}]", list.join(", "));
    }
    config.push_str("}]}");
    let path = dir.join("ssserver.json");
    std::fs::write(&path, config).expect("writing ssserver.json");
    let mut command = Command::new(bin);
    command.arg("-c").arg(&path).arg("-v");
    Process::spawn_listening("ssserver", command, dir, listen)
}

/// sing-box with a shadowsocks inbound on `listen`; with `users`, a
/// multi-user one whose own PSK is `password`.
fn sing_box(
    bin: &Path,
    dir: &Path,
    listen: SocketAddr,
    method: &str,
    password: &str,
    users: &[(&str, String)],
) -> Process {
    let list: Vec<String> = users
        .iter()
        .map(|(name, key)| format!("{{\"name\": \"{name}\", \"password\": \"{key}\"}}"))
        .collect();
    let users = if list.is_empty() {
        String::new()
    } else {
        format!(", \"users\": [{}]", list.join(", "))
    };
    let config = format!(
        "{{\"log\": {{\"level\": \"debug\"}}, \"inbounds\": [{{\"type\": \"shadowsocks\", \
         \"listen\": \"{}\", \"listen_port\": {}, \"method\": \"{method}\", \
         \"password\": \"{password}\"{users}}}], \
         \"outbounds\": [{{\"type\": \"direct\"}}]}}",
        listen.ip(),
        listen.port(),
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(bin);
    command.arg("run").arg("-c").arg(&path);
    Process::spawn_listening("sing-box", command, dir, listen)
}

/// A short message and BULK bytes each way over TCP, and two datagrams
/// through a UDP association, through `socks`.
fn tcp_and_udp_round_trip(socks: SocketAddr, what: &str) {
    let echo = tcp_echo();
    check_echo(socks5_connect(socks, echo, None).unwrap(), what.as_bytes());
    check_echo(socks5_connect(socks, echo, None).unwrap(), &pattern(BULK));
    // Our request waits for the client's first bytes; to a server that
    // speaks first, it goes alone.
    check_greeting(socks, what);
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let association = Association::open(socks).unwrap();
    for payload in [what.as_bytes().to_vec(), pattern(1200)] {
        assert_eq!(
            association.ask(echo, &payload),
            Some((echo, payload)),
            "{what}: udp"
        );
    }
}

/// A flow under a PSK the server does not hold: the dial succeeds (the
/// request leaves with the first bytes, and nothing is awaited) but the
/// stream never carries a byte back; it ends closed or silent, never with
/// bytes.
fn wrong_psk_flow_fails(socks: SocketAddr) {
    let echo = tcp_echo();
    let Ok(mut stream) = socks5_connect(socks, echo, None) else {
        return;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let _ = stream.write_all(b"hello");
    let mut buf = [0u8; 16];
    match stream.read(&mut buf) {
        Ok(n) => assert_eq!(n, 0, "a wrong psk carried bytes back"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::ConnectionReset
            ),
            "{e}"
        ),
    }
}

fn ssserver_bin(test: &str) -> Option<PathBuf> {
    peer(test, "ssserver")
}

#[test]
fn ss2022_outbound_carries_tcp_and_udp_through_ssserver_for_every_method() {
    let test = "ss2022_outbound_carries_tcp_and_udp_through_ssserver_for_every_method";
    let Some(bin) = ssserver_bin(test) else {
        return;
    };
    for (method, len) in METHODS {
        let dir = scratch_dir(&format!("{test}-{method}"));
        let server = free_addr();
        let _server = ssserver(&bin, &dir, server, method, &psk(len, 0x42), &[]);
        let socks = free_addr();
        let runtime = ours_through(&dir, socks, server, method, &psk(len, 0x42), &[]);
        tcp_and_udp_round_trip(socks, method);
        runtime.wait_for_log("via out@v1");
    }
}

#[test]
fn ss2022_outbound_with_a_wrong_psk_fails_its_flow_and_keeps_serving() {
    let test = "ss2022_outbound_with_a_wrong_psk_fails_its_flow_and_keeps_serving";
    let Some(bin) = ssserver_bin(test) else {
        return;
    };
    let (method, len) = METHODS[0];
    let dir = scratch_dir(test);
    let server = free_addr();
    let _server = ssserver(&bin, &dir, server, method, &psk(len, 0x42), &[]);
    let wrong = free_addr();
    let _wrong = ours_through(&dir, wrong, server, method, &psk(len, 0x43), &[]);
    wrong_psk_flow_fails(wrong);
    wrong_psk_flow_fails(wrong);
    // The same server and runtime binary with the right key still carry flows.
    let dir = scratch_dir(&format!("{test}-right"));
    let right = free_addr();
    let _right = ours_through(&dir, right, server, method, &psk(len, 0x42), &[]);
    check_echo(
        socks5_connect(right, tcp_echo(), None).unwrap(),
        b"after a wrong psk",
    );
}

/// What starts a server: `ssserver` or `sing_box`.
type StartServer = fn(&Path, &Path, SocketAddr, &str, &str, &[(&str, String)]) -> Process;

/// A multi-user server as `start` runs it (`ssserver` or `sing_box`):
/// our outbound reaches it as each of its users, for both AES methods, and
/// as a user it does not know fails cleanly.
fn reaches_each_user_of(test: &str, bin: &Path, start: StartServer) {
    for (method, len) in &METHODS[..2] {
        let dir = scratch_dir(&format!("{test}-{method}"));
        let server = free_addr();
        let identity = psk(*len, 0x10);
        let users = [("alice", psk(*len, 0x21)), ("bob", psk(*len, 0x22))];
        let _server = start(bin, &dir, server, method, &identity, &users);
        let stranger = psk(*len, 0x23);
        let clients = users
            .iter()
            .map(|(name, key)| (*name, key))
            .chain([("mallory", &stranger)]);
        for (name, key) in clients {
            let dir = scratch_dir(&format!("{test}-{method}-{name}"));
            let socks = free_addr();
            let identities = std::slice::from_ref(&identity);
            let _ours = ours_through(&dir, socks, server, method, key, identities);
            if name == "mallory" {
                wrong_psk_flow_fails(socks);
            } else {
                tcp_and_udp_round_trip(socks, name);
            }
        }
    }
}

#[test]
fn ss2022_outbound_reaches_each_user_of_a_multi_user_ssserver() {
    let test = "ss2022_outbound_reaches_each_user_of_a_multi_user_ssserver";
    let Some(bin) = ssserver_bin(test) else {
        return;
    };
    reaches_each_user_of(test, &bin, ssserver);
}

#[test]
fn ss2022_outbound_carries_tcp_and_udp_through_sing_box_for_every_method() {
    let test = "ss2022_outbound_carries_tcp_and_udp_through_sing_box_for_every_method";
    let Some(bin) = peer(test, "sing-box") else {
        return;
    };
    for (method, len) in METHODS {
        let dir = scratch_dir(&format!("{test}-{method}"));
        let server = free_addr();
        let _server = sing_box(&bin, &dir, server, method, &psk(len, 0x42), &[]);
        let socks = free_addr();
        let runtime = ours_through(&dir, socks, server, method, &psk(len, 0x42), &[]);
        tcp_and_udp_round_trip(socks, method);
        runtime.wait_for_log("via out@v1");
    }
}

#[test]
fn ss2022_outbound_reaches_each_user_of_a_multi_user_sing_box() {
    let test = "ss2022_outbound_reaches_each_user_of_a_multi_user_sing_box";
    let Some(bin) = peer(test, "sing-box") else {
        return;
    };
    reaches_each_user_of(test, &bin, sing_box);
}

#[test]
fn psks_are_standard_base64() {
    assert_eq!(psk(16, 0), "AAAAAAAAAAAAAAAAAAAAAA==");
    assert_eq!(
        psk(32, 0xff),
        "//////////////////////////////////////////8="
    );
}
