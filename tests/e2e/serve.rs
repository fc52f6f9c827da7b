//! The runtime end to end: loading a plan, the SOCKS and HTTP inbounds with
//! real clients (curl among them), blackhole, the handshake watchdog and
//! shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use etemenanki_ir::spec::{
    Account, BalancerSpec, InboundProtocol, InboundSpec, InboundTransport, Secret, ServerShape,
    Strategy, Uuid,
};

use crate::plan::*;
use crate::runtime::{run_plan_bytes, Runtime};
use crate::support::client::{connect_from, exchange, socks5_connect};
use crate::support::servers::{free_addr, http_origin, tcp_echo};
use crate::support::WAIT;

#[test]
fn a_corrupt_truncated_or_foreign_plan_is_refused_with_one_line() {
    let good = etemenanki_ir::encode::encode(
        &spec(vec![], vec![freedom("direct")], vec![], "direct"),
        b"",
        "t",
    );
    let mut other_version = good.clone();
    other_version[8] = 9;
    let mut corrupt = good.clone();
    *corrupt.last_mut().unwrap() ^= 0x5a;
    let cases: [(&[u8], &str); 4] = [
        (&good[..20], "truncated plan"),
        (&other_version, "plan format version 9 is not supported"),
        (&corrupt, "corrupt plan"),
        (b"[inbound]\nfoo = 1\n", "not a plan file"),
    ];
    for (bytes, expected) in cases {
        let (status, stderr) = run_plan_bytes(bytes);
        assert!(!status.success(), "{expected}: exited with success");
        assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
        assert!(stderr.contains(expected), "{expected} not in {stderr}");
    }
}

#[test]
fn socks5_relays_both_ways_with_half_close() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let mut stream = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    // The client half-closes after sending; the echo's bytes and its EOF
    // still come back through the proxy.
    assert!(exchange(&mut stream, &payload) == payload);
    drop(runtime);
}

#[test]
fn socks4_and_socks4a_connect() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let ip = match echo.ip() {
        std::net::IpAddr::V4(ip) => ip.octets(),
        _ => unreachable!(),
    };
    let mut socks4 = vec![4, 1];
    socks4.extend_from_slice(&echo.port().to_be_bytes());
    socks4.extend_from_slice(&ip);
    socks4.push(0);
    let mut socks4a = vec![4, 1];
    socks4a.extend_from_slice(&echo.port().to_be_bytes());
    socks4a.extend_from_slice(&[0, 0, 0, 1, b'u', 0]);
    socks4a.extend_from_slice(b"localhost\0");
    for request in [socks4, socks4a] {
        let mut stream = TcpStream::connect(runtime.addr("in")).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.write_all(&request).unwrap();
        let mut reply = [0u8; 8];
        stream.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 0x5a, "request {request:?} was not granted");
        assert_eq!(exchange(&mut stream, b"four"), b"four");
    }
}

#[test]
fn curl_reaches_a_web_server_through_socks5h_http_connect_and_absolute_form() {
    let web = http_origin(b"hello from the web server");
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("socks", false), http_inbound("http")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let (socks, http) = (runtime.addr("socks"), runtime.addr("http"));
    let url = format!("http://localhost:{}/page", web.port());
    let cases = [
        vec!["--proxy".to_owned(), format!("socks5h://{socks}")],
        vec!["--proxy".to_owned(), format!("socks4a://{socks}")],
        vec!["--proxy".to_owned(), format!("http://{http}")],
        vec![
            "--proxytunnel".to_owned(),
            "--proxy".to_owned(),
            format!("http://{http}"),
        ],
    ];
    for proxy in cases {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10"])
            .args(&proxy)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl {proxy:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello from the web server",
            "curl {proxy:?}"
        );
    }
}

#[test]
fn accounts_are_required_when_the_inbound_has_them() {
    let web = http_origin(b"secret page");
    let accounts = vec![Account {
        user: "alice".into(),
        pass: Secret("wonder".into()),
    }];
    let mut socks_in = socks_inbound("socks", false);
    socks_in.protocol = InboundProtocol::Socks {
        accounts: accounts.clone(),
        udp: false,
        tls: None,
    };
    let mut http_in = http_inbound("http");
    http_in.protocol = InboundProtocol::Http {
        accounts,
        tls: None,
    };
    let runtime = Runtime::start(&spec(
        vec![socks_in, http_in],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let (socks, http) = (runtime.addr("socks"), runtime.addr("http"));
    let url = format!("http://127.0.0.1:{}/", web.port());
    let curl = |proxy: String| {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--proxy", &proxy, &url])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        curl(format!("socks5://alice:wonder@{socks}")),
        (true, "secret page".into())
    );
    assert_eq!(
        curl(format!("http://alice:wonder@{http}")),
        (true, "secret page".into())
    );
    assert!(!curl(format!("socks5://alice:wrong@{socks}")).0);
    let (_, body) = curl(format!("http://{http}"));
    assert_ne!(body, "secret page");
}

#[test]
fn blackhole_accepts_and_ends_the_flow_at_once() {
    let echo = tcp_echo();
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![blackhole("block")],
        vec![],
        "block",
    ));
    let mut stream = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(exchange(&mut stream, b"into the void"), b"");
}

#[test]
fn an_unreachable_destination_gets_a_refusal_reply() {
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let closed = free_addr();
    let err = socks5_connect(runtime.addr("in"), closed, None).unwrap_err();
    assert_eq!(err.to_string(), "socks reply 5");
}

#[test]
fn a_silent_client_is_dropped_at_the_handshake_deadline() {
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.limits.handshake_timeout = Duration::from_secs(1);
    let runtime = Runtime::start(&spec);
    let mut silent = TcpStream::connect(runtime.addr("in")).unwrap();
    silent.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 1];
    // The proxy closes the connection: EOF, not the read timeout.
    assert_eq!(silent.read(&mut buf).unwrap(), 0);
    runtime.wait_for_log("inbound handshake timed out after 1s");
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let listening = runtime.addr("in");
    let status = runtime.terminate();
    assert!(status.success(), "exit status {status}");
    let start = Instant::now();
    // The port is free again once the process is gone.
    while TcpStream::connect(listening).is_ok() && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(TcpStream::connect(listening).is_err());
}

#[test]
fn a_member_with_no_upstream_is_refused() {
    let mut spec = spec(vec![], vec![freedom("direct")], vec![], "pool");
    spec.balancers.push(BalancerSpec {
        tag: "pool".into(),
        members: vec!["direct".into()],
        strategy: Strategy::Failover,
        probe_interval: Duration::from_secs(30),
        probe_timeout: Duration::from_secs(5),
    });
    let (status, stderr) = run_plan_bytes(&etemenanki_ir::encode::encode(&spec, b"", "t"));
    assert!(!status.success());
    assert_eq!(
        stderr.trim(),
        "etemenanki-run: building balancer pool@v1 failed: outbound direct has no upstream a TCP health probe can reach"
    );
}

/// `localhost.` A with id `id`, framed for TCP (RFC 1035 4.1 and 4.2.2):
/// the DNS service answers it without a server.
fn framed_localhost_query(id: u16) -> Vec<u8> {
    let mut query = id.to_be_bytes().to_vec();
    query.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    query.extend_from_slice(b"\x09localhost\x00\x00\x01\x00\x01");
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    framed
}

/// Asks the DNS inbound at `dns` from `from` over TCP; the connection,
/// still open, once the answer to `id` came.
fn asked_over_tcp(from: [u8; 4], dns: std::net::SocketAddr, id: u16) -> TcpStream {
    let mut stream = connect_from(from.into(), dns).unwrap();
    stream.write_all(&framed_localhost_query(id)).unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer[..2], id.to_be_bytes());
    stream
}

/// Whether the server closed `stream` (an end of stream or a reset) with
/// no byte sent, rather than holding it past the read timeout.
fn closed(stream: &mut TcpStream) -> bool {
    match stream.read(&mut [0u8; 1]) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn a_partial_dns_message_holds_a_handshake_slot_of_its_source_until_its_deadline() {
    let mut spec = spec(
        vec![dns_inbound("dns-in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.limits.max_connections = 64;
    spec.limits.max_handshakes = 4;
    spec.limits.max_handshakes_per_source = 1;
    spec.limits.handshake_timeout = Duration::from_secs(1);
    let runtime = Runtime::start(&spec);
    let dns = runtime.addr("dns-in");
    // Clients that asked and stay open hold no slot ...
    let asked: Vec<TcpStream> = (0..8)
        .map(|id| asked_over_tcp([127, 0, 0, 1], dns, id))
        .collect();
    // ... one whose message is partial holds one: four take every slot,
    // the fifth is dropped unread.
    let partial: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = connect_from([127, 0, 0, 1].into(), dns).unwrap();
            stream.write_all(&[0xff, 0xff, 0]).unwrap();
            stream
        })
        .collect();
    let mut fifth = connect_from([127, 0, 0, 1].into(), dns).unwrap();
    let _ = fifth.write_all(&framed_localhost_query(99));
    assert!(closed(&mut fifth));
    runtime.wait_for_log(
        "inbound dns-in: refused 1 connection in the last second: handshake slots full",
    );
    // Another source is still answered: it takes the oldest partial's slot.
    drop(asked_over_tcp([127, 0, 0, 2], dns, 100));
    // That one is closed at once, the others at the deadline, and their
    // source is answered again.
    for mut stream in partial {
        assert!(closed(&mut stream));
    }
    runtime.wait_for_log("inbound handshake timed out after 1s");
    drop(asked_over_tcp([127, 0, 0, 1], dns, 101));
    drop(asked);
}

#[test]
fn outbound_sockets_are_opened_under_the_socket_policy() {
    // A server that answers with the address it sees the client at.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let peer = stream.peer_addr().unwrap().ip().to_string();
            let _ = stream.write_all(peer.as_bytes());
        }
    });
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.socket.bind_v4 = Some("127.0.0.3".parse().unwrap());
    let runtime = Runtime::start(&spec);
    let mut stream = socks5_connect(runtime.addr("in"), server, None).unwrap();
    let mut seen = String::new();
    stream.read_to_string(&mut seen).unwrap();
    assert_eq!(seen, "127.0.0.3");
}

/// A vless inbound over gRPC (gun) on the service `svc`.
fn vless_grpc_inbound(tag: &str) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: any_port(),
        sniff: false,
        protocol: InboundProtocol::Vless {
            ids: vec![Secret(Uuid([7; 16]))],
            transport: InboundTransport {
                shape: ServerShape::Grpc {
                    service_name: "svc".into(),
                },
                tls: None,
            },
            fallback: None,
        },
    }
}

/// An HTTP/2 client connection over cleartext (RFC 9113 section 3.4): the
/// preface and an empty SETTINGS frame.
fn h2_connect(addr: std::net::SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    tcp
}

/// One gRPC call to `/other/Tun`, a service the inbound does not serve, on
/// stream `id`: a HEADERS frame ending the stream, its fields literal
/// (RFC 7541 section 6.2.2) against the static table.
fn refused_call(tcp: &mut TcpStream, id: u32) -> std::io::Result<()> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    for (index, value) in [
        (&[0x04][..], "/other/Tun"),             // :path
        (&[0x01][..], "grpc.example"),           // :authority
        (&[0x0f, 0x10][..], "application/grpc"), // content-type
    ] {
        block.extend_from_slice(index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    let mut frame = (block.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[0x01, 0x05]); // HEADERS, END_HEADERS | END_STREAM
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&block);
    tcp.write_all(&frame)
}

#[test]
fn refused_grpc_calls_hold_no_handshake_slot_past_the_deadline_from_accept() {
    let mut spec = spec(
        vec![vless_grpc_inbound("in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.limits.max_handshakes = 8;
    spec.limits.handshake_timeout = Duration::from_secs(1);
    let runtime = Runtime::start(&spec);
    let addr = runtime.addr("in");
    // Eight connections, each making a refused call every 100 ms: they
    // hold every handshake slot until their deadline, one second after
    // their accept, and then are closed, however many calls they make.
    let mut probers: Vec<TcpStream> = (0..8).map(|_| h2_connect(addr)).collect();
    let start = Instant::now();
    let mut id = 1;
    let admitted = loop {
        assert!(
            start.elapsed() < WAIT,
            "refused calls kept every handshake slot for {:?}",
            start.elapsed()
        );
        for prober in &mut probers {
            // A closed connection's write fails: that is the point.
            let _ = refused_call(prober, id);
        }
        id += 2;
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() < Duration::from_millis(1500) {
            continue;
        }
        // Another client is admitted once a slot is free: the server's
        // SETTINGS come, where a dropped socket ends with no byte.
        let mut other = h2_connect(addr);
        other.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = [0u8; 9];
        if other.read_exact(&mut head).is_ok() {
            break head;
        }
    };
    assert_eq!(
        admitted[3], 0x04,
        "the server's first frame is its SETTINGS"
    );
    // Each prober's connection was ended by the server.
    for prober in &mut probers {
        prober.set_read_timeout(Some(WAIT)).unwrap();
        match prober.read_to_end(&mut Vec::new()) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("a prober's connection is still open: {e}"),
        }
    }
}
