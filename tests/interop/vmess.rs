//! Our VMess outbound (AEAD, alterId 0) against v2ray 4.34's and
//! sing-box's VMess inbounds: every body security carrying 4 MiB each way
//! and UDP to one target, a wrong id refused cleanly, and a burst of concurrent connections after
//! which v2ray has seen no replayed auth id.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::binaries::peer;
use crate::support::client::{
    check_echo, check_greeting, exchange, pattern, socks5_connect, Association,
};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo, udp_echo, udp_named};
use crate::support::BULK;

const ID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const OTHER_ID: &str = "0f2d0a3c-5e71-4c9b-9a0e-2b6d3c4e5f60";

/// v2ray's VMess inbound on `listen` for `ID`, alterId 0, to freedom; its
/// log at info, so a refused request shows with its reason.
fn start_v2ray(v2ray: &Path, dir: &Path, listen: SocketAddr) -> Process {
    let config = format!(
        r#"{{ "log": {{ "loglevel": "info" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {}, "protocol": "vmess",
    "settings": {{ "clients": [{{ "id": "{ID}", "alterId": 0 }}] }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}
"#,
        listen.port()
    );
    let path = dir.join("v2ray.json");
    std::fs::write(&path, config).expect("writing v2ray.json");
    let mut command = Command::new(v2ray);
    command.arg("-config").arg(&path);
    Process::spawn_listening("v2ray", command, dir, listen)
}

/// sing-box's VMess inbound on `listen` for `ID`, alterId 0, to direct.
fn start_sing_box(sing_box: &Path, dir: &Path, listen: SocketAddr) -> Process {
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "vmess", "listen": "127.0.0.1", "listen_port": {},
    "users": [{{ "name": "u", "uuid": "{ID}", "alterId": 0 }}] }}],
  "outbounds": [{{ "type": "direct" }}] }}
"#,
        listen.port()
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    Process::spawn_listening("sing-box", command, dir, listen)
}

/// Our socks inbound on `front`, its default outbound VMess to `server`.
fn start_ours(
    dir: &Path,
    front: SocketAddr,
    server: SocketAddr,
    id: &str,
    security: &str,
) -> Process {
    Config::default()
        .socks_in(front, None)
        .proxy_out(
            "vmess",
            server,
            &format!("[outbound.settings]\nid = \"{id}\"\nsecurity = \"{security}\"\n"),
        )
        .start(dir)
}

/// client → our socks inbound → our VMess outbound with `security` → the
/// server `start` brings up → echo: a short message and 4 MiB each way.
fn carries_bulk(
    test: &str,
    server: &str,
    security: &str,
    start: fn(&Path, &Path, SocketAddr) -> Process,
) {
    let Some(binary) = peer(test, server) else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let peer = start(&binary, &dir, upstream);
    let front = free_addr();
    let _ours = start_ours(&dir, front, upstream, ID, security);

    check_echo(socks5_connect(front, echo, None).unwrap(), b"hello, vmess");
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
    // Our request waits for the client's first bytes; to a server that
    // speaks first, it goes alone.
    check_greeting(front, test);
    let log = peer.log();
    assert!(
        log.contains(&format!("127.0.0.1:{}", echo.port())),
        "the server relayed to the echo server:\n{log}"
    );
}

#[test]
fn vmess_aes_128_gcm_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vmess_aes_128_gcm_reaches_v2ray_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "v2ray", "aes-128-gcm", start_v2ray);
}

#[test]
fn vmess_chacha20_poly1305_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vmess_chacha20_poly1305_reaches_v2ray_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "v2ray", "chacha20-poly1305", start_v2ray);
}

#[test]
fn vmess_none_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vmess_none_reaches_v2ray_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "v2ray", "none", start_v2ray);
}

#[test]
fn vmess_zero_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vmess_zero_reaches_v2ray_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "v2ray", "zero", start_v2ray);
}

#[test]
fn vmess_auto_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vmess_auto_reaches_v2ray_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "v2ray", "auto", start_v2ray);
}

#[test]
fn vmess_aes_128_gcm_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vmess_aes_128_gcm_reaches_sing_box_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "sing-box", "aes-128-gcm", start_sing_box);
}

#[test]
fn vmess_chacha20_poly1305_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vmess_chacha20_poly1305_reaches_sing_box_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "sing-box", "chacha20-poly1305", start_sing_box);
}

#[test]
fn vmess_none_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vmess_none_reaches_sing_box_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "sing-box", "none", start_sing_box);
}

#[test]
fn vmess_zero_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vmess_zero_reaches_sing_box_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "sing-box", "zero", start_sing_box);
}

#[test]
fn vmess_auto_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vmess_auto_reaches_sing_box_and_carries_four_mebibytes_each_way";
    carries_bulk(test, "sing-box", "auto", start_sing_box);
}

pub const SECURITIES: [&str; 5] = ["aes-128-gcm", "chacha20-poly1305", "none", "zero", "auto"];

/// UDP through our socks inbound and the VMess outbound: datagrams of
/// several sizes to an echo server, then one to another peer on the same
/// association, which the sub-link's one target (the echo server) answers:
/// a VMess sub-link carries one target, the first packet's.
fn udp_round_trips(front: SocketAddr, security: &str, largest: usize) {
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let association = Association::open(front).unwrap();
    for payload in [
        b"ping through vmess".to_vec(),
        pattern(1200),
        pattern(largest),
    ] {
        let reply = association.ask(echo, &payload);
        assert!(
            reply == Some((echo, payload.clone())),
            "{security}: the echo of {} bytes",
            payload.len()
        );
    }
    let other = udp_named("other");
    assert_eq!(
        association.ask(other, b"who"),
        Some((echo, b"who".to_vec())),
        "{security}: the sub-link carries one target"
    );
}

/// `udp_round_trips` under every security through the server `start`
/// brings up, with datagrams up to `largest` bytes.
fn relays_udp(
    test: &str,
    server: &str,
    largest: usize,
    start: fn(&Path, &Path, SocketAddr) -> Process,
) {
    let Some(binary) = peer(test, server) else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _peer = start(&binary, &dir, upstream);
    for security in SECURITIES {
        let dir = dir.join(security);
        std::fs::create_dir_all(&dir).expect("a directory per security");
        let front = free_addr();
        let _ours = start_ours(&dir, front, upstream, ID, security);
        udp_round_trips(front, security, largest);
    }
}

#[test]
fn vmess_relays_udp_to_one_target_through_v2ray_under_every_security() {
    let test = "vmess_relays_udp_to_one_target_through_v2ray_under_every_security";
    // v2ray 4 seals each reply packet into one 2 KiB buffer, with the
    // length, the tag and up to 63 bytes of padding: a reply of more than
    // 1,967 bytes fails there, at random with the padding.
    relays_udp(test, "v2ray", 1900, start_v2ray);
}

#[test]
fn vmess_relays_udp_to_one_target_through_sing_box_under_every_security() {
    let test = "vmess_relays_udp_to_one_target_through_sing_box_under_every_security";
    relays_udp(test, "sing-box", 8000, start_sing_box);
}

/// Our half-close reaches v2ray as the end of the request (a TCP FIN, which
/// v2ray reads as the end of the chunks) and the echo's end comes back.
#[test]
fn vmess_carries_a_half_close_through_v2ray_and_back() {
    let test = "vmess_carries_a_half_close_through_v2ray_and_back";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _v2ray = start_v2ray(&v2ray, &dir, upstream);
    let front = free_addr();
    let _ours = start_ours(&dir, front, upstream, ID, "aes-128-gcm");
    let payload = pattern(100_000);
    let mut stream = socks5_connect(front, echo, None).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("a read timeout");
    assert!(
        exchange(&mut stream, &payload) == payload,
        "the echo, then its end"
    );
}

/// Reads until the stream ends or fails, bounded: what came back.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("a read timeout");
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

#[test]
fn vmess_with_a_wrong_id_is_refused_by_v2ray_and_ours_keeps_serving() {
    let test = "vmess_with_a_wrong_id_is_refused_by_v2ray_and_ours_keeps_serving";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let v2ray = start_v2ray(&v2ray, &dir, upstream);
    let front = free_addr();
    let ours = start_ours(&dir, front, upstream, OTHER_ID, "aes-128-gcm");

    // The dial succeeds (VMess answers nothing until it has data to send).
    // v2ray drains a few KiB of what we send and closes: with more unread
    // behind them, the close is a reset.
    let mut stream = socks5_connect(front, echo, None).unwrap();
    stream.write_all(&pattern(64 * 1024)).expect("writing");
    assert!(read_until_closed(&mut stream).is_empty(), "nothing echoed");
    v2ray.wait_for_log("invalid user");
    ours.wait_for_log("ended: Connection reset by peer");

    // With less than it drains, v2ray waits for more; our half-close ends
    // its drain and it closes: we see the end before any response header.
    let started = Instant::now();
    let mut stream = socks5_connect(front, echo, None).unwrap();
    stream.write_all(b"short").expect("writing");
    stream.shutdown(Shutdown::Write).expect("half-closing");
    assert!(read_until_closed(&mut stream).is_empty(), "nothing echoed");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "closed, not timed out"
    );
    ours.wait_for_log("vmess: the server closed the connection without a response");
    assert!(!v2ray
        .log()
        .contains(&format!("accepted tcp:127.0.0.1:{}", echo.port())));
}

/// Concurrent VMess connections held open at once, each echoing.
const LOAD: usize = 500;

/// v2ray's own client makes v2ray log `invalid user > replayed request` a
/// few times in 5,000 concurrent connections. Ours
/// draws a fresh timestamp per request and auth ids that cannot repeat
/// within one outbound.
///
/// What is left is v2ray's: it remembers auth ids in two cuckoo filters
/// with 8-bit fingerprints, which answer "seen" for some ids never sent.
/// Three runs of 2,000 connections here (ids unique by construction) drew
/// 4, 2 and 0 such false `replayed request`s; at 500 the odds of one in a
/// run are about one in ten. v2ray refuses such a request like a replay,
/// so the test counts them: every echo that failed must be one v2ray
/// logged as a replay, and there may be no more of those than its filter's
/// false positives explain (a handful in 500: at v2ray's own client's rate,
/// 2 to 13 in 5,000, more than 5 in 500 happens about once in 500 runs),
/// and no other refusal at all. That our ids never repeat is pinned
/// without v2ray by the codec's unit tests.
#[test]
fn five_hundred_concurrent_vmess_connections_leave_v2ray_no_replayed_request() {
    let test = "five_hundred_concurrent_vmess_connections_leave_v2ray_no_replayed_request";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let v2ray = start_v2ray(&v2ray, &dir, upstream);
    let front = free_addr();
    let _ours = start_ours(&dir, front, upstream, ID, "auto");

    let deadline = Instant::now() + Duration::from_secs(120);
    let mut streams = Vec::with_capacity(LOAD);
    for i in 0..LOAD {
        assert!(
            Instant::now() < deadline,
            "opening {i} of {LOAD} took too long"
        );
        let mut stream = socks5_connect(front, echo, None).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a read timeout");
        stream
            .write_all(format!("ping {i:04}").as_bytes())
            .expect("writing");
        streams.push(stream);
    }
    let mut failed = 0;
    for (i, stream) in streams.iter_mut().enumerate() {
        assert!(
            Instant::now() < deadline,
            "echo {i} of {LOAD} took too long"
        );
        let mut got = [0u8; 9];
        match stream.read_exact(&mut got) {
            Ok(()) => assert_eq!(got, format!("ping {i:04}").as_bytes()),
            Err(_) => failed += 1,
        }
    }
    drop(streams);
    // v2ray logs a refusal only once it has drained the connection, up to
    // seconds after our echo failed: the log is read until it explains
    // every failure, or a bound passes. Not "replayed" alone: the scratch
    // directory's name, in the log, has it. One refusal is two lines, the
    // error ("invalid request from …") and the access log's "rejected":
    // the error lines are counted.
    let settled = Instant::now() + Duration::from_secs(30);
    let (log, replayed) = loop {
        let log = v2ray.log();
        let replayed = log
            .lines()
            .filter(|l| l.contains("invalid request from") && l.contains("replayed request"))
            .count();
        if replayed >= failed || Instant::now() >= settled {
            break (log, replayed);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        failed, replayed,
        "an echo failed that v2ray did not refuse as a replay:\n{log}"
    );
    assert!(
        replayed <= 5,
        "more replays than v2ray's filter explains ({replayed}):\n{log}"
    );
    let refused_otherwise = log
        .lines()
        .filter(|l| l.contains("invalid user") && !l.contains("replayed request"))
        .count();
    assert_eq!(refused_otherwise, 0, "v2ray refused a request:\n{log}");
}
