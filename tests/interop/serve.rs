//! What the serve_* modules share: our runtime as the server (one proxy
//! inbound and freedom), the real clients in front of it (v2ray and
//! sing-box with a socks inbound for the test's client, or our own
//! runtime), the transfers every test makes through the client's SOCKS5
//! front, and the probes (noise and truncated first flights) that must
//! never crash an inbound.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::binaries::peer;
use crate::support::certs::{Pair, Pki};
use crate::support::client::{check_echo, check_greeting, pattern, socks5_connect, Association};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo, udp_echo, udp_named};
use crate::support::WAIT;

/// 1 MiB each way, checked byte for byte.
pub const MIB: usize = 1024 * 1024;

/// How long a refused flow is watched for a byte coming back.
pub const SILENCE: Duration = Duration::from_secs(2);

/// The handshake limit of the refusal tests: a refused client without a
/// fallback is held this long, then closed and logged, well within
/// [`WAIT`].
pub const SHORT_HANDSHAKE: &str = "[limits]\nhandshake_timeout = 3\n";

/// A handshake limit far past [`WAIT`]: an answer that comes within WAIT
/// came before the deadline.
pub const LONG_HANDSHAKE: &str = "[limits]\nhandshake_timeout = 60\n";

/// What our runtime logs when it closes a refused client that had no
/// fallback (runtime/run/src/inbound/refused.rs).
pub const HELD: &str = "held until the handshake deadline";

/// The name the test CA's server certificate carries, which clients check.
pub const SERVER_NAME: &str = "localhost";

/// The transport of one inbound (and of the client that reaches it).
#[derive(Clone, Copy)]
pub enum Transport<'a> {
    Tcp,
    Tls(&'a Pair),
    Ws(&'a str),
    WsTls(&'a str, &'a Pair),
    Grpc(&'a str),
    GrpcTls(&'a str, &'a Pair),
}

impl<'a> Transport<'a> {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Tls(_) => "tls",
            Transport::Ws(_) => "ws",
            Transport::WsTls(..) => "ws+tls",
            Transport::Grpc(_) => "grpc",
            Transport::GrpcTls(..) => "grpc+tls",
        }
    }

    fn pair(self) -> Option<&'a Pair> {
        match self {
            Transport::Tls(pair) | Transport::WsTls(_, pair) | Transport::GrpcTls(_, pair) => {
                Some(pair)
            }
            _ => None,
        }
    }

    /// Our inbound's `[inbound.stream]` tables for this transport; a
    /// gRPC inbound under TLS offers ALPN h2, as gRPC clients require.
    pub fn inbound_tables(self) -> String {
        let mut text = String::new();
        let network = match self {
            Transport::Tcp | Transport::Tls(_) => None,
            Transport::Ws(_) | Transport::WsTls(..) => Some("ws"),
            Transport::Grpc(_) | Transport::GrpcTls(..) => Some("grpc"),
        };
        if network.is_some() || self.pair().is_some() {
            text.push_str("[inbound.stream]\n");
        }
        if let Some(network) = network {
            text.push_str(&format!("network = \"{network}\"\n"));
        }
        if self.pair().is_some() {
            text.push_str("security = \"tls\"\n");
        }
        match self {
            Transport::Ws(path) | Transport::WsTls(path, _) => {
                text.push_str(&format!("[inbound.stream.ws]\npath = \"{path}\"\n"));
            }
            Transport::Grpc(service) | Transport::GrpcTls(service, _) => {
                text.push_str(&format!(
                    "[inbound.stream.grpc]\nservice_name = \"{service}\"\n"
                ));
            }
            _ => {}
        }
        if let Some(pair) = self.pair() {
            text.push_str(&format!(
                "[inbound.stream.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
                pair.cert.display(),
                pair.key.display()
            ));
            if matches!(self, Transport::GrpcTls(..)) {
                text.push_str("alpn = [\"h2\"]\n");
            }
        }
        text
    }

    /// Our outbound's `[outbound.stream]` tables for this transport,
    /// trusting `ca` for [`SERVER_NAME`] under TLS.
    pub fn outbound_tables(self, ca: &Path) -> String {
        let tls = format!(
            "[outbound.stream.tls]\nserver_name = \"{SERVER_NAME}\"\nca_file = \"{}\"\n",
            ca.display()
        );
        let security = if self.pair().is_some() {
            "security = \"tls\"\n"
        } else {
            ""
        };
        match self {
            Transport::Tcp => String::new(),
            Transport::Tls(_) => format!("[outbound.stream]\nnetwork = \"tls\"\n{tls}"),
            Transport::Ws(path) | Transport::WsTls(path, _) => format!(
                "[outbound.stream]\nnetwork = \"ws\"\n{security}[outbound.stream.ws]\n\
                 path = \"{path}\"\nhost = \"{SERVER_NAME}\"\n{}",
                if self.pair().is_some() { &tls } else { "" }
            ),
            Transport::Grpc(service) | Transport::GrpcTls(service, _) => format!(
                "[outbound.stream]\nnetwork = \"grpc\"\n{security}[outbound.stream.grpc]\n\
                 service_name = \"{service}\"\n{}",
                if self.pair().is_some() { &tls } else { "" }
            ),
        }
    }

    /// v2ray's `streamSettings` for this transport, trusting `ca` for
    /// [`SERVER_NAME`] under TLS. v2ray 4.34 has no gRPC.
    pub fn v2ray_stream(self, ca: &Path) -> String {
        let tls = format!(
            r#", "security": "tls", "tlsSettings": {{ "serverName": "{SERVER_NAME}",
      "certificates": [{{ "usage": "verify", "certificateFile": "{}" }}] }}"#,
            ca.display()
        );
        let ws = |path: &str| format!(r#", "wsSettings": {{ "path": "{path}" }}"#);
        match self {
            Transport::Tcp => r#""network": "tcp""#.to_owned(),
            Transport::Tls(_) => format!(r#""network": "tcp"{tls}"#),
            Transport::Ws(path) => format!(r#""network": "ws"{}"#, ws(path)),
            Transport::WsTls(path, _) => format!(r#""network": "ws"{}{tls}"#, ws(path)),
            Transport::Grpc(_) | Transport::GrpcTls(..) => {
                panic!("v2ray 4.34 has no grpc transport")
            }
        }
    }

    /// sing-box's `tls` and `transport` keys of an outbound for this
    /// transport (with a leading comma, or empty), trusting `ca`.
    pub fn sing_box_keys(self, ca: &Path) -> String {
        let tls = format!(
            r#", "tls": {{ "enabled": true, "server_name": "{SERVER_NAME}", "certificate_path": "{}" }}"#,
            ca.display()
        );
        let tls = if self.pair().is_some() { &tls[..] } else { "" };
        match self {
            Transport::Tcp | Transport::Tls(_) => tls.to_owned(),
            Transport::Ws(path) | Transport::WsTls(path, _) => format!(
                r#"{tls}, "transport": {{ "type": "ws", "path": "{path}", "headers": {{ "Host": "{SERVER_NAME}" }} }}"#
            ),
            Transport::Grpc(service) | Transport::GrpcTls(service, _) => {
                format!(r#"{tls}, "transport": {{ "type": "grpc", "service_name": "{service}" }}"#)
            }
        }
    }
}

/// The peers and the certificates (made in its scratch directory) of a test, or `None` when one is
/// missing (the test skips).
pub fn setup(test: &str, peers: &[&str]) -> Option<(Vec<PathBuf>, PathBuf, Pki)> {
    let mut found = Vec::new();
    for name in peers {
        found.push(peer(test, name)?);
    }
    let openssl = peer(test, "openssl")?;
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    Some((found, dir, pki))
}

/// Our runtime serving one `protocol` inbound on `listen` with `tables`
/// (its `[inbound.stream]` and `[inbound.settings]`), every flow to
/// freedom, and `extra` (a `[limits]` table, say) after.
pub fn serve(dir: &Path, protocol: &str, listen: SocketAddr, tables: &str, extra: &str) -> Process {
    server_config(protocol, listen, tables, extra).start(dir)
}

/// The configuration [`serve`] starts, for a reload.
pub fn server_config(protocol: &str, listen: SocketAddr, tables: &str, extra: &str) -> Config {
    Config::default()
        .proxy_in(protocol, listen, tables)
        .freedom()
        .raw(extra)
}

/// A prober sends `probe` to `server`, a plain TCP inbound whose fallback
/// is an echo server, then nothing: the fallback's answer, `probe` itself,
/// comes back within [`WAIT`].
pub fn fallback_echoes(server: SocketAddr, probe: &[u8], what: &str) {
    let mut stream = TcpStream::connect_timeout(&server, WAIT).unwrap();
    stream.write_all(probe).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = vec![0; probe.len()];
    if let Err(e) = stream.read_exact(&mut got) {
        panic!("{what}: the fallback's answer did not come back within {WAIT:?} ({e})");
    }
    assert_eq!(got, probe, "{what}");
}

/// An open flow through a client ends: a write, then end of stream or a
/// reset within [`SILENCE`], no byte back.
pub fn ends(stream: &mut TcpStream, what: &str) {
    let _ = stream.write_all(b"are you still there?");
    stream.set_read_timeout(Some(SILENCE)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{what}: the flow carried {n} bytes back"),
        Err(e) => panic!("{what}: the flow is still open ({e})"),
    }
}

/// Our own `protocol` outbound (`outbound`, its tables) against our own
/// inbound (`inbound`): 1 MiB each way and UDP through both, and the
/// server's log shows the flows. Each runtime in its own directory under
/// `dir`.
pub fn ours_to_ours(dir: &Path, protocol: &str, inbound: &str, outbound: &str, what: &str) {
    let server = free_addr();
    let ours = serve(
        &own_dir(dir, "server", server),
        protocol,
        server,
        inbound,
        "",
    );
    let (_client, front) = ours_client(&own_dir(dir, "client", server), protocol, server, outbound);
    carries_tcp(front, what);
    // A destination that speaks first: whatever our outbound holds for the
    // client's first bytes goes alone, and our inbound opens on it.
    check_greeting(front, what);
    carries_udp(front, what, UDP_MAX);
    ours.wait_for_log("via out@v1");
}

/// Probes our `protocol` inbound (`inbound`, its tables) with noise and
/// with the first flight of our outbound (`outbound`) cut short; with
/// `udp`, its UDP side too with our outbound's first datagram. Then our
/// outbound is still served, TCP (and UDP), while the hanging probes stay
/// open, and no task panicked.
pub fn survives_probes(
    dir: &Path,
    protocol: &str,
    inbound: &str,
    outbound: &str,
    udp: bool,
    what: &str,
) {
    let flight = first_flight(dir, protocol, outbound);
    let packet = udp.then(|| first_datagram(dir, protocol, outbound));
    let server = free_addr();
    let ours = serve(
        &own_dir(dir, "server", server),
        protocol,
        server,
        inbound,
        "",
    );
    let hanging = probe(server, &flight);
    if let Some(packet) = &packet {
        probe_udp(server, packet);
    }
    let (_client, front) = ours_client(&own_dir(dir, "client", server), protocol, server, outbound);
    let what = format!("{what} after probes");
    carries_tcp(front, &what);
    if udp {
        carries_udp(front, &what, UDP_MAX);
    }
    drop(hanging);
    never_panicked(&ours);
}

/// Our runtime as the client: a SOCKS5 inbound (UDP on) in front of a
/// `protocol` outbound to `server` with `tables`. Returns it and its
/// SOCKS5 front.
pub fn ours_client(
    dir: &Path,
    protocol: &str,
    server: SocketAddr,
    tables: &str,
) -> (Process, SocketAddr) {
    let front = free_addr();
    let process = Config::default()
        .socks_in(front, None)
        .proxy_out(protocol, server, tables)
        .start(dir);
    (process, front)
}

/// v2ray 4.34 as the client: its socks inbound (UDP on) for the test's
/// client, in front of `outbound` (a JSON object). Each client gets its own
/// directory under `dir`, so two may run side by side.
pub fn v2ray_client(v2ray: &Path, dir: &Path, outbound: &str) -> (Process, SocketAddr) {
    let front = free_addr();
    let dir = own_dir(dir, "v2ray", front);
    let config = format!(
        r#"{{ "log": {{ "loglevel": "info" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {}, "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }} }}],
  "outbounds": [{outbound}] }}
"#,
        front.port()
    );
    let path = dir.join("v2ray.json");
    std::fs::write(&path, config).expect("writing v2ray.json");
    let mut command = Command::new(v2ray);
    command.arg("-config").arg(&path);
    (
        Process::spawn_listening("v2ray", command, &dir, front),
        front,
    )
}

/// sing-box 1.14 as the client: its socks inbound for the test's client,
/// in front of `outbound` (a JSON object).
pub fn sing_box_client(sing_box: &Path, dir: &Path, outbound: &str) -> (Process, SocketAddr) {
    let front = free_addr();
    let dir = own_dir(dir, "sing-box", front);
    let config = format!(
        r#"{{ "log": {{ "level": "debug" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {} }}],
  "outbounds": [{outbound}] }}
"#,
        front.port()
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    (
        Process::spawn_listening("sing-box", command, &dir, front),
        front,
    )
}

/// `<dir>/<name>-<port>`, created: where one client writes its config and
/// log.
pub fn own_dir(dir: &Path, name: &str, front: SocketAddr) -> PathBuf {
    let dir = dir.join(format!("{name}-{}", front.port()));
    std::fs::create_dir_all(&dir).expect("a directory for a client");
    dir
}

/// A short message and 1 MiB each way over TCP through the SOCKS5 front
/// `front` to a loopback echo server, checked byte for byte.
pub fn carries_tcp(front: SocketAddr, what: &str) {
    // Shown with a failure, whose panic comes from check_echo.
    eprintln!("carrying tcp: {what}");
    let echo = tcp_echo();
    let hello = format!("hello, {what}");
    check_echo(
        socks5_connect(front, echo, None).unwrap_or_else(|e| panic!("{what}: {e}")),
        hello.as_bytes(),
    );
    check_echo(
        socks5_connect(front, echo, None).unwrap_or_else(|e| panic!("{what}: {e}")),
        &pattern(MIB),
    );
}

/// `flows` TCP flows at once through the SOCKS5 front `front`, each
/// moving a little over [`MIB`] each way to a loopback echo, checked byte
/// for byte: a client with mux carries them as sessions of one connection.
pub fn carries_tcp_at_once(front: SocketAddr, what: &str, flows: usize) {
    eprintln!("carrying {flows} tcp flows at once: {what}");
    let echo = tcp_echo();
    let running: Vec<_> = (0..flows)
        .map(|flow| {
            let what = what.to_string();
            thread::spawn(move || {
                let stream = socks5_connect(front, echo, None)
                    .unwrap_or_else(|e| panic!("{what}: flow {flow}: {e}"));
                check_echo(stream, &pattern(MIB + flow * 1000));
            })
        })
        .collect();
    for (flow, running) in running.into_iter().enumerate() {
        assert!(running.join().is_ok(), "{what}: flow {flow} failed");
    }
}

/// What our runtime logs for each TCP session of a Mux.Cool connection
/// (runtime/run/src/inbound/mux).
pub const MUX_TCP_SESSION: &str = "mux: a tcp session to";

/// `outbound`, v2ray's `protocol` outbound (a JSON object), with v2ray's
/// Mux.Cool on: every flow a session inside one connection, up to 8 at
/// once.
pub fn v2ray_with_mux(outbound: &str, protocol: &str) -> String {
    let key = format!(r#""protocol": "{protocol}","#);
    assert!(
        outbound.contains(&key),
        "no {key} in the outbound:\n{outbound}"
    );
    outbound.replacen(
        &key,
        &format!(r#"{key} "mux": {{ "enabled": true, "concurrency": 8 }},"#),
        1,
    )
}

/// v2ray's Mux.Cool through its SOCKS5 front `front` to our `protocol`
/// inbound (`ours`, its log counted from this call on): 1 MiB each way,
/// then six flows of a little over 1 MiB each way at once, all eight TCP
/// sessions of one mux.cool stream; then UDP sessions (v2ray sends no
/// XUDP: a session per destination), a round trip of each size and
/// queries to two servers in turn, and TCP sessions still served beside
/// them; no task panicked.
pub fn carries_v2ray_mux(front: SocketAddr, ours: &Process, protocol: &str, what: &str) {
    let stream = format!("{protocol}: a mux.cool stream from");
    let count = |needle: &str| ours.log().matches(needle).count();
    let (streams, sessions) = (count(&stream), count(MUX_TCP_SESSION));
    carries_tcp(front, what);
    carries_tcp_at_once(front, what, 6);
    // Our runtime logs both lines before a session's first byte moves.
    let log = ours.log();
    assert_eq!(
        (
            log.matches(&stream).count() - streams,
            log.matches(MUX_TCP_SESSION).count() - sessions
        ),
        (1, 8),
        "{what}: eight tcp flows (two, then six at once) should be the sessions of one \
         mux.cool stream (new streams, new tcp sessions)"
    );
    carries_udp(front, what, SMALL_UDP_MAX);
    asks_two_servers_in_turn(front, what);
    carries_tcp_at_once(front, what, 3);
    carries_udp(front, what, SMALL_UDP_MAX);
    never_panicked(ours);
}

/// The longest datagram v2ray 4.34 and shadowsocks-libev's `ss-local`
/// are sent here: v2ray reads each one, SOCKS5 header included, into a
/// 2,048-byte buffer, and a vmess reply's chunk (with up to 64 bytes of
/// padding and its tag) must fit one too, so its own vmess chain loses a
/// 2,000-byte echo (1,900 come back); ss-local reads into 2,794 bytes
/// (twice its default packet size of 1,397), its ciphertext too. Each cuts
/// or drops what is longer.
pub const SMALL_UDP_MAX: usize = 1800;

/// The longest datagram the other clients are sent.
pub const UDP_MAX: usize = 8000;

/// Datagrams through a UDP association of the SOCKS5 front `front` to a
/// loopback UDP echo server: a short one, 1200 bytes and `largest` bytes,
/// each coming back whole from the echo's address.
pub fn carries_udp(front: SocketAddr, what: &str, largest: usize) {
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let association =
        Association::open(front).unwrap_or_else(|e| panic!("{what}: udp associate: {e}"));
    for payload in [
        format!("ping, {what}").into_bytes(),
        pattern(1200),
        pattern(largest),
    ] {
        let len = payload.len();
        match association.ask(echo, &payload) {
            Some((from, got)) if from == echo && got == payload => {}
            Some((from, got)) => panic!(
                "{what}: a datagram of {len} bytes came back from {from} as {} bytes{}",
                got.len(),
                if got.len() < len && payload.starts_with(&got) {
                    ", its start"
                } else {
                    ""
                }
            ),
            None => panic!("{what}: a datagram of {len} bytes never came back"),
        }
    }
}

/// A DNS-like exchange through `front`'s one UDP association: many small
/// queries, each answered, alternating between two servers, so that every
/// reply must come back from the server it was sent to.
pub fn asks_two_servers_in_turn(front: SocketAddr, what: &str) {
    let (alpha, beta) = (udp_named("alpha"), udp_named("beta"));
    let association =
        Association::open(front).unwrap_or_else(|e| panic!("{what}: udp associate: {e}"));
    for round in 0..40 {
        for (server, name) in [(alpha, "alpha"), (beta, "beta")] {
            let query = format!("query {round}");
            assert_eq!(
                association.ask(server, query.as_bytes()),
                Some((server, format!("{name}:{query}").into_bytes())),
                "{what}: round {round} to {name}"
            );
        }
    }
}

/// A flow that must be refused: the client's SOCKS5 CONNECT is refused,
/// or the stream it opens carries no byte back within [`SILENCE`], ending
/// closed, reset or silent.
pub fn carries_nothing(front: SocketAddr, what: &str) {
    let echo = tcp_echo();
    let Ok(mut stream) = socks5_connect(front, echo, None) else {
        return;
    };
    stream.set_read_timeout(Some(SILENCE)).unwrap();
    let _ = stream.write_all(b"is anyone there?");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(n) => assert_eq!(n, 0, "{what}: a refused flow carried {n} bytes back"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::ConnectionReset
            ),
            "{what}: {e}"
        ),
    }
}

/// The first bytes our own `protocol` outbound with `tables` sends a
/// server: what a capturing listener reads from it until it stops sending
/// (it then awaits an answer that never comes). Its transport's first
/// flight for tls, ws and grpc: a ClientHello, an upgrade request, an
/// HTTP/2 preface.
pub fn first_flight(dir: &Path, protocol: &str, tables: &str) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a capturing listener");
    let server = listener.local_addr().unwrap();
    let (sent, captured) = mpsc::channel();
    thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        let start = Instant::now();
        while bytes.len() < 65536 && start.elapsed() < WAIT {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) if !bytes.is_empty() => break,
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        let _ = sent.send(bytes);
    });
    let dir = own_dir(dir, "capture", server);
    let (_client, front) = ours_client(&dir, protocol, server, tables);
    // The SOCKS5 reply may wait for the server's answer; the bytes are
    // captured either way.
    thread::spawn(move || {
        if let Ok(mut stream) = socks5_connect(front, tcp_echo(), None) {
            let _ = stream.write_all(b"probe");
            let mut buf = [0u8; 16];
            let _ = stream.read(&mut buf);
        }
    });
    let bytes = captured
        .recv_timeout(WAIT + WAIT)
        .expect("our outbound's first flight");
    assert!(!bytes.is_empty(), "{protocol}: our outbound sent nothing");
    bytes
}

/// A refused client as a prober sees it: our inbound (`protocol` over
/// plain TCP with `inbound`, and [`SHORT_HANDSHAKE`]) is sent the first
/// flight of our outbound with `wrong` (its tables under a credential the
/// inbound lacks), raw. Nothing comes back, the connection is still open
/// [`SILENCE`] later, it ends once the handshake deadline passes, and the
/// log says it was held.
pub fn refused_and_held(test: &str, protocol: &str, inbound: &str, wrong: &str) {
    let dir = scratch_dir(test);
    let flight = first_flight(&dir, protocol, wrong);
    let server = free_addr();
    let ours = serve(&dir, protocol, server, inbound, SHORT_HANDSHAKE);
    let mut stream = TcpStream::connect_timeout(&server, WAIT).unwrap();
    stream.write_all(&flight).unwrap();
    stream.set_read_timeout(Some(SILENCE)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(0) => panic!("{protocol}: a refused client was closed at once, not held"),
        Ok(n) => panic!("{protocol}: a refused client was answered {n} bytes"),
        Err(e) => panic!("{protocol}: a refused client met {e} at once, not held"),
    }
    stream.set_read_timeout(Some(WAIT)).unwrap();
    match stream.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{protocol}: a refused client was answered {n} bytes"),
        Err(e) => panic!(
            "{protocol}: a refused client was still held {WAIT:?} after a 3 s handshake limit ({e})"
        ),
    }
    ours.wait_for_log(HELD);
}

/// `len` bytes of noise from `seed`, different for each seed.
fn noise(len: usize, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 11) as u8
        })
        .collect()
}

/// Probes the inbound on `listen`: noise of many sizes, and `flight` (a
/// real client's first bytes) cut short at several points, each written
/// and then closed, half-closed or left hanging. Returns the hanging
/// connections: the caller keeps them open while it checks that a real
/// client is still served, then checks that no task panicked.
pub fn probe(listen: SocketAddr, flight: &[u8]) -> Vec<TcpStream> {
    let mut payloads: Vec<Vec<u8>> = [0, 1, 2, 15, 16, 17, 32, 56, 57, 58, 100, 1000, 5000, 70000]
        .iter()
        .enumerate()
        .map(|(seed, &len)| noise(len, seed as u32 + 1))
        .collect();
    let len = flight.len();
    for cut in [
        1,
        2,
        len / 4,
        len / 2,
        len.saturating_sub(2),
        len.saturating_sub(1),
    ] {
        if (1..len).contains(&cut) {
            payloads.push(flight[..cut].to_vec());
        }
    }
    // The whole flight, then noise where the request's rest should be.
    let mut spoiled = flight.to_vec();
    spoiled.extend_from_slice(&noise(300, 99));
    payloads.push(spoiled);
    let mut hanging = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        let Ok(mut stream) = TcpStream::connect_timeout(&listen, WAIT) else {
            panic!("probe {i}: the inbound on {listen} no longer accepts connections");
        };
        let _ = stream.set_write_timeout(Some(WAIT));
        let _ = stream.write_all(payload);
        match i % 3 {
            0 => drop(stream),
            1 => {
                let _ = stream.shutdown(Shutdown::Write);
                hanging.push(stream);
            }
            _ => hanging.push(stream),
        }
    }
    hanging
}

/// Sends noise datagrams of many sizes, and `packet` (a real client's
/// first datagram) cut short, to the UDP side of the inbound on `listen`.
pub fn probe_udp(listen: SocketAddr, packet: &[u8]) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("binding a udp socket");
    let len = packet.len();
    let cuts = [1, len / 2, len.saturating_sub(1)];
    let truncated = cuts.iter().filter(|cut| (1..len).contains(*cut));
    for (seed, datagram) in [0, 1, 15, 16, 17, 32, 48, 64, 100, 1500, 9000]
        .iter()
        .enumerate()
        .map(|(seed, &len)| noise(len, seed as u32 + 200))
        .chain(truncated.map(|&cut| packet[..cut].to_vec()))
        .enumerate()
    {
        socket
            .send_to(&datagram, listen)
            .unwrap_or_else(|e| panic!("udp probe {seed}: {e}"));
    }
}

/// The first datagram our own `protocol` outbound with `tables` sends a
/// server for a UDP association: what a capturing UDP socket receives.
pub fn first_datagram(dir: &Path, protocol: &str, tables: &str) -> Vec<u8> {
    let capture = UdpSocket::bind("127.0.0.1:0").expect("binding a capturing udp socket");
    capture.set_read_timeout(Some(WAIT)).unwrap();
    let server = capture.local_addr().unwrap();
    let dir = own_dir(dir, "capture-udp", server);
    let (_client, front) = ours_client(&dir, protocol, server, tables);
    let association = Association::open(front).expect("a udp association");
    association.send(udp_echo(Ipv4Addr::LOCALHOST), b"probe");
    let mut buf = vec![0u8; 65536];
    let (n, _) = capture
        .recv_from(&mut buf)
        .expect("our outbound's first datagram");
    buf.truncate(n);
    buf
}

/// What `curl` (trusting `ca`) gets from `<scheme>://localhost:<port>/`
/// of `server`: a prober asking the port for a web page.
pub fn curl_page(curl: &Path, ca: &Path, scheme: &str, server: SocketAddr) -> Vec<u8> {
    let out = Command::new(curl)
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("{SERVER_NAME}:{}:127.0.0.1", server.port()))
        .arg(format!("{scheme}://{SERVER_NAME}:{}/", server.port()))
        .output()
        .expect("running curl");
    assert!(
        out.status.success(),
        "curl {scheme} to {server} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Our runtime's log holds no panic.
pub fn never_panicked(ours: &Process) {
    let log = ours.log();
    assert!(
        !log.contains("panicked"),
        "our runtime panicked; log:\n{log}"
    );
}

/// A shadowsocks client with a SOCKS5 front.
#[derive(Clone, Copy)]
pub enum SsLocal {
    /// shadowsocks-libev's `ss-local`.
    Libev,
    /// shadowsocks-rust's `sslocal`.
    Rust,
}

impl SsLocal {
    pub fn binary(self) -> &'static str {
        match self {
            SsLocal::Libev => "ss-local",
            SsLocal::Rust => "sslocal",
        }
    }

    /// The client (`bin`) of `server` for `method` and `password` (for a
    /// 2022 multi-user server, `<identity psk>:<user psk>`), relaying TCP
    /// and UDP; returns it and its SOCKS5 front.
    pub fn start(
        self,
        bin: &Path,
        dir: &Path,
        server: SocketAddr,
        method: &str,
        password: &str,
    ) -> (Process, SocketAddr) {
        let front = free_addr();
        let dir = own_dir(dir, self.binary(), front);
        let mut command = Command::new(bin);
        match self {
            SsLocal::Libev => command
                .args(["-s", "127.0.0.1", "-p"])
                .arg(server.port().to_string())
                .args(["-b", "127.0.0.1", "-l"])
                .arg(front.port().to_string())
                .args(["-k", password, "-m", method, "-u", "-v"]),
            SsLocal::Rust => command
                .arg("-b")
                .arg(front.to_string())
                .arg("-s")
                .arg(server.to_string())
                .args(["-k", password, "-m", method, "-U", "-v"]),
        };
        (
            Process::spawn_listening(self.binary(), command, &dir, front),
            front,
        )
    }
}
