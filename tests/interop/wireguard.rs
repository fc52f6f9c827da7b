//! WireGuard: our wireguard outbound against sing-box's `wireguard`
//! endpoint listening on loopback with our public key as its peer. sing-box
//! sends a flow to its own tunnel address on to loopback, so
//! `PEER_V4:<port>` inside the tunnel reaches a loopback server here.
//! 1 MiB each way over TCP, a UDP round trip, TCP over IPv6 inside the
//! tunnel, a reused outbound keeping its tunnel across a reload, a wrong
//! peer key failing flows cleanly, the peer restarted mid-way and
//! recovered by our tunnel slot, and a stalled flow that holds up no other
//! flow of the tunnel.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::binaries::{ours as our_binary, peer};
use crate::support::client::{
    check_echo, pattern, socks5_connect, socks5_connect_to, Association, Target,
};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, free_port, tcp_echo, udp_echo};

/// sing-box's address inside the tunnel, and ours.
const PEER_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const OURS_V4: &str = "10.77.0.2";

/// A WireGuard key pair in base64, from `sing-box generate wg-keypair`.
struct Keys {
    private: String,
    public: String,
}

fn keypair(sing_box: &Path) -> Keys {
    let out = Command::new(sing_box)
        .args(["generate", "wg-keypair"])
        .output()
        .expect("running sing-box generate wg-keypair");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| panic!("no {name} in {text:?}"))
    };
    Keys {
        private: field("PrivateKey:"),
        public: field("PublicKey:"),
    }
}

/// The two sides' keys and the peer's UDP port.
struct Setup {
    peer: Keys,
    ours: Keys,
    port: u16,
}

impl Setup {
    fn new(sing_box: &Path) -> Setup {
        Setup {
            peer: keypair(sing_box),
            ours: keypair(sing_box),
            port: free_port(),
        }
    }
}

/// sing-box with one wireguard endpoint on 127.0.0.1:`port` whose peer is
/// `ours`, sending what arrives through the tunnel out directly.
fn sing_box_peer(sing_box: &Path, dir: &Path, setup: &Setup) -> Process {
    let config = format!(
        r#"{{ "log": {{ "level": "debug" }},
  "endpoints": [{{ "type": "wireguard", "tag": "wg-ep", "system": false, "mtu": 1420,
    "address": ["{PEER_V4}/32", "fd77::1/128"],
    "private_key": "{}", "listen_port": {},
    "peers": [{{ "public_key": "{}", "allowed_ips": ["{OURS_V4}/32", "fd77::2/128"] }}] }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}],
  "route": {{ "final": "direct" }} }}
"#,
        setup.peer.private, setup.port, setup.ours.public
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    let process = Process::spawn("sing-box", command, dir);
    process.wait_for_log("sing-box started");
    process
}

/// The wireguard outbound `out` to the peer, trusting `peer_public`, and
/// the route to it.
fn outbound(setup: &Setup, peer_public: &str) -> String {
    format!(
        "[[outbound]]\ntag = \"out\"\nprotocol = \"wireguard\"\n\
         [outbound.settings]\nprivate_key = \"{}\"\npeer_public_key = \"{peer_public}\"\n\
         endpoint = \"127.0.0.1:{}\"\naddresses = [\"{OURS_V4}\", \"fd77::2\"]\nmtu = 1420\n\
         \n[route]\ndefault = \"out\"\n",
        setup.ours.private, setup.port
    )
}

/// Our socks inbound and the wireguard outbound to the peer, trusting
/// `peer_public`.
fn start_ours(dir: &Path, setup: &Setup, peer_public: &str) -> (Process, SocketAddr) {
    let front = free_addr();
    let ours = Config::default().socks_in(front, None);
    let tables = outbound(setup, peer_public);
    (ours.raw(&tables).start(dir), front)
}

/// `echo`'s port at the peer's tunnel address.
fn through_tunnel(echo: SocketAddr) -> SocketAddr {
    SocketAddr::from((PEER_V4, echo.port()))
}

/// Waits up to `limit` for our log to hold `needle`.
fn wait_long_for_log(process: &Process, needle: &str, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if process.log().contains(needle) {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("never logged {needle:?}; log:\n{}", process.log());
}

fn sing_box(test: &str) -> Option<std::path::PathBuf> {
    peer(test, "sing-box")
}

#[test]
fn wireguard_outbound_moves_a_mebibyte_each_way_and_a_udp_round_trip_through_sing_box() {
    let Some(sing_box) = sing_box("wireguard_bulk") else {
        return;
    };
    let dir = scratch_dir("wireguard-bulk");
    let setup = Setup::new(&sing_box);
    let _peer = sing_box_peer(&sing_box, &dir, &setup);
    let (ours, front) = start_ours(&dir, &setup, &setup.peer.public);
    let echo = through_tunnel(tcp_echo());
    check_echo(socks5_connect(front, echo, None).unwrap(), b"hello");
    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        &pattern(1024 * 1024),
    );
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via out@v1"));

    let udp = SocketAddr::from((PEER_V4, udp_echo(Ipv4Addr::LOCALHOST).port()));
    let association = Association::open(front).unwrap();
    let (from, reply) = association
        .ask(udp, b"ping through the tunnel")
        .expect("a udp reply through the tunnel");
    assert_eq!(reply, b"ping through the tunnel");
    assert_eq!(from, udp, "the reply comes from where the datagram went");

    // IPv6 inside the tunnel: the peer's v6 address leads to ::1.
    let v6_echo = TcpListener::bind("[::1]:0").unwrap();
    let port = v6_echo.local_addr().unwrap().port();
    thread::spawn(move || {
        let Ok((mut stream, _)) = v6_echo.accept() else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 || stream.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    let stream = socks5_connect_to(front, Target::Name("fd77::1", port)).unwrap();
    check_echo(stream, b"over ipv6 inside the tunnel");
}

#[test]
fn a_wrong_peer_key_fails_flows_cleanly_and_the_runtime_stays_up() {
    let Some(sing_box) = sing_box("wireguard_wrong_key") else {
        return;
    };
    let dir = scratch_dir("wireguard-wrong-key");
    let setup = Setup::new(&sing_box);
    let _peer = sing_box_peer(&sing_box, &dir, &setup);
    let stranger = keypair(&sing_box);
    let (ours, front) = start_ours(&dir, &setup, &stranger.public);
    let echo = through_tunnel(tcp_echo());
    // The handshake never completes: the connect inside the tunnel times
    // out (10 s), and the client gets a refusal or nothing, never an echo.
    let mut flow = TcpStream::connect(front).unwrap();
    flow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    flow.write_all(&[5, 1, 0]).unwrap();
    let mut greeting = [0u8; 2];
    flow.read_exact(&mut greeting).unwrap();
    let mut request = vec![5, 1, 0, 1];
    request.extend_from_slice(&PEER_V4.octets());
    request.extend_from_slice(&echo.port().to_be_bytes());
    flow.write_all(&request).unwrap();
    let mut reply = [0u8; 10];
    let answered = flow.read(&mut reply).unwrap_or(0);
    assert!(
        answered < 2 || reply[1] != 0,
        "a flow through a tunnel with no handshake must not succeed: {reply:?}"
    );
    wait_long_for_log(
        &ours,
        &format!(
            "wireguard: tunnel TCP connect failed for all resolved addresses ({PEER_V4}: connect timed out)"
        ),
        Duration::from_secs(20),
    );
    // Still serving: a new client is greeted.
    let mut again = TcpStream::connect(front).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    again.write_all(&[5, 1, 0]).unwrap();
    again.read_exact(&mut greeting).unwrap();
    assert_eq!(greeting, [5, 0]);
}

#[test]
fn a_restarted_peer_is_recovered_by_the_tunnel_slot() {
    let Some(sing_box) = sing_box("wireguard_restart") else {
        return;
    };
    let dir = scratch_dir("wireguard-restart");
    let setup = Setup::new(&sing_box);
    let peer = sing_box_peer(&sing_box, &dir, &setup);
    let (ours, front) = start_ours(&dir, &setup, &setup.peer.public);
    let echo = through_tunnel(tcp_echo());
    check_echo(socks5_connect(front, echo, None).unwrap(), b"before");
    drop(peer);
    // A flow while the peer is gone: its port refuses, the driver stops.
    let _ = socks5_connect(front, echo, None);
    wait_long_for_log(
        &ours,
        "wireguard: tunnel driver ends",
        Duration::from_secs(20),
    );
    let restarted_dir = dir.join("restarted");
    std::fs::create_dir_all(&restarted_dir).unwrap();
    let _peer = sing_box_peer(&sing_box, &restarted_dir, &setup);
    // The slot starts a new tunnel (after its backoff, the old one died
    // young): flows fail meanwhile, then carry bytes again.
    let start = Instant::now();
    let mut recovered = false;
    while start.elapsed() < Duration::from_secs(40) && !recovered {
        if let Ok(mut stream) = socks5_connect(front, echo, None) {
            if stream.write_all(b"after").is_ok() {
                let mut got = [0u8; 5];
                recovered = stream.read_exact(&mut got).is_ok() && &got == b"after";
            }
        }
        if !recovered {
            thread::sleep(Duration::from_millis(500));
        }
    }
    assert!(recovered, "no flow after the restart; log:\n{}", ours.log());
    assert!(ours
        .log()
        .contains("wireguard: tunnel driver stopped, rebuilding"));
}

#[test]
fn a_stalled_flow_holds_up_no_other_flow_of_the_tunnel() {
    let Some(sing_box) = sing_box("wireguard_stalled") else {
        return;
    };
    let dir = scratch_dir("wireguard-stalled");
    let setup = Setup::new(&sing_box);
    let _peer = sing_box_peer(&sing_box, &dir, &setup);
    let (_ours, front) = start_ours(&dir, &setup, &setup.peer.public);

    // A server that accepts and never reads.
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = through_tunnel(sink.local_addr().unwrap());
    let held = thread::spawn(move || sink.accept().map(|(s, _)| s));
    let mut stalled = socks5_connect(front, sink_addr, None).unwrap();
    let _held = held.join().unwrap().unwrap();
    stalled
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let chunk = vec![7u8; 64 * 1024];
    let mut written = 0usize;
    // Bounded: far more than every buffer on the way holds.
    while written < 256 * 1024 * 1024 {
        match stalled.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    assert!(
        written < 256 * 1024 * 1024,
        "the stalled flow never pushed back"
    );
    // The other flow of the same tunnel moves its mebibyte each way.
    let echo = through_tunnel(tcp_echo());
    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        &pattern(1024 * 1024),
    );
}

#[test]
fn a_reused_outbound_keeps_its_tunnel_across_a_reload_and_a_changed_one_starts_its_own() {
    let Some(sing_box) = sing_box("wireguard_reload") else {
        return;
    };
    let dir = scratch_dir("wireguard-reload");
    let setup = Setup::new(&sing_box);
    let _peer = sing_box_peer(&sing_box, &dir, &setup);
    let (ours, front) = start_ours(&dir, &setup, &setup.peer.public);
    let echo = through_tunnel(tcp_echo());
    let started = |ours: &Process| ours.log().matches("wireguard: tunnel to ").count();
    check_echo(socks5_connect(front, echo, None).unwrap(), b"first");
    assert_eq!(started(&ours), 1);

    // The same plan again: the outbound is reused, and so is its tunnel.
    ours.signal("HUP");
    wait_long_for_log(&ours, "reload: applied epoch 1", Duration::from_secs(10));
    check_echo(socks5_connect(front, echo, None).unwrap(), b"reused");
    assert_eq!(started(&ours), 1, "a reused outbound keeps its tunnel");

    // A changed outbound is a new version with a tunnel of its own.
    let source = dir.join("etemenanki.toml");
    let text = std::fs::read_to_string(&source).unwrap();
    let changed = text.replace("mtu = 1420", "mtu = 1400");
    assert_ne!(text, changed);
    std::fs::write(&source, changed).unwrap();
    let built = Command::new(our_binary("etc"))
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(dir.join("plan.bin"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    ours.signal("HUP");
    wait_long_for_log(&ours, "reload: applied epoch 2", Duration::from_secs(10));
    check_echo(socks5_connect(front, echo, None).unwrap(), b"rebuilt");
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via out@v2"));
    assert_eq!(started(&ours), 2, "the new version starts its own tunnel");
}
