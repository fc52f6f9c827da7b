//! Shared by the end-to-end tests: spec builders, the runtime process, small
//! servers and blocking SOCKS clients, all on loopback.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use etemenanki_ir::route::{RouteTable, Rule};
use etemenanki_ir::spec::*;
use etemenanki_proto::socks::{parse_datagram, write_datagram_header};
use etemenanki_proto::Address;

/// How long any single wait in a test may take before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

pub fn localhost(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn socks_inbound(tag: &str, port: u16, udp: bool) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: localhost(port),
        sniff: false,
        protocol: InboundProtocol::Socks {
            accounts: vec![],
            udp,
            tls: None,
        },
    }
}

pub fn http_inbound(tag: &str, port: u16) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: localhost(port),
        sniff: false,
        protocol: InboundProtocol::Http {
            accounts: vec![],
            tls: None,
        },
    }
}

pub fn freedom(tag: &str) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Freedom {
            address_family: AddressFamily::Auto,
        },
        drain: DrainPolicy::Keep,
    }
}

pub fn blackhole(tag: &str) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Blackhole,
        drain: DrainPolicy::Keep,
    }
}

pub fn socks_outbound(tag: &str, server: SocketAddr) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Socks {
            upstream: Upstream {
                server: HostPort {
                    host: Host::Ip(server.ip()),
                    port: server.port(),
                },
                transport: TransportSpec {
                    shape: StreamShape::Tcp,
                    tls: None,
                    address_family: AddressFamily::Auto,
                },
            },
            account: None,
        },
        drain: DrainPolicy::Keep,
    }
}

pub fn http_outbound(tag: &str, server: SocketAddr) -> OutboundSpec {
    let mut spec = socks_outbound(tag, server);
    let OutboundProtocol::Socks { upstream, account } = spec.protocol else {
        unreachable!()
    };
    spec.protocol = OutboundProtocol::Http { upstream, account };
    spec
}

pub fn rule(target: &str) -> Rule {
    Rule {
        target: target.into(),
        line: 1,
        ..Rule::default()
    }
}

pub fn spec(
    inbounds: Vec<InboundSpec>,
    outbounds: Vec<OutboundSpec>,
    rules: Vec<Rule>,
    default: &str,
) -> Spec {
    Spec {
        inbounds,
        outbounds,
        balancers: vec![],
        route: RouteTable::new(rules, default.into()).expect("a valid route table"),
        dns: DnsSpec::System,
        socket: SocketPolicy::default(),
        limits: Limits::default(),
    }
}

fn scratch_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "etemenanki-run-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running `etemenanki-run`, stopped with SIGTERM when dropped.
pub struct Runtime {
    child: Child,
    log: Arc<Mutex<String>>,
    pub plan: PathBuf,
}

/// Runs the binary on `bytes` as a plan file and collects what happens.
pub fn run_plan_bytes(bytes: &[u8]) -> (std::process::ExitStatus, String) {
    let plan = scratch_dir().join("plan.bin");
    std::fs::write(&plan, bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_etemenanki-run"))
        .arg(&plan)
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Runtime {
    /// Starts the runtime on `spec` and waits until every inbound listens.
    pub fn start(spec: &Spec) -> Runtime {
        Runtime::start_with(spec, &[])
    }

    /// As [`Runtime::start`], with more arguments after the plan.
    pub fn start_with(spec: &Spec, args: &[&str]) -> Runtime {
        let plan = scratch_dir().join("plan.bin");
        std::fs::write(&plan, etemenanki_ir::encode::encode(spec, b"test", "test")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_etemenanki-run"))
            .arg(&plan)
            .args(args)
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let runtime = Runtime { child, log, plan };
        for inbound in &spec.inbounds {
            runtime.wait_for_log(&format!("inbound {} listening", inbound.tag));
        }
        runtime
    }

    /// Replaces the plan file the way a deploy does: write aside, rename.
    pub fn replace_plan(&self, spec: &Spec) {
        self.replace_plan_bytes(&etemenanki_ir::encode::encode(spec, b"test", "test"));
    }

    pub fn replace_plan_bytes(&self, bytes: &[u8]) {
        let aside = self.plan.with_extension("new");
        std::fs::write(&aside, bytes).unwrap();
        std::fs::rename(&aside, &self.plan).unwrap();
    }

    /// Replaces the plan and waits (bounded) for the reload to finish, well
    /// or badly; returns the log lines the reload wrote.
    pub fn reload(&self, spec: &Spec) -> String {
        self.reload_bytes(&etemenanki_ir::encode::encode(spec, b"test", "test"))
    }

    pub fn reload_bytes(&self, bytes: &[u8]) -> String {
        let before = self.log().len();
        let done = |log: &str| {
            let tail = &log[before..];
            tail.contains("reload: applied epoch") || tail.contains("reload: build failed")
        };
        self.replace_plan_bytes(bytes);
        let start = Instant::now();
        while start.elapsed() < WAIT {
            let log = self.log();
            if done(&log) {
                return log[before..].to_owned();
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the runtime did not reload; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (bounded) until the log holds `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if self.log().contains(needle) {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the runtime never logged {needle:?}; log:\n{}", self.log());
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the runtime did not exit after SIGTERM");
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP echo server: echoes until EOF, then half-closes.
pub fn tcp_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            thread::spawn(move || {
                let mut buf = [0u8; 16 * 1024];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = stream.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr
}

/// A UDP server that answers each datagram with `<name>:<payload>`.
pub fn udp_echo(name: &'static str) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let mut reply = format!("{name}:").into_bytes();
            reply.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&reply, from);
        }
    });
    addr
}

/// An HTTP/1.1 server that answers every request with `body`.
pub fn http_server(body: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    addr
}

fn with_timeouts(stream: TcpStream) -> TcpStream {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    stream
}

/// Connects through a SOCKS5 proxy; an error carries the reply code.
pub fn socks5_connect(proxy: SocketAddr, destination: &Address) -> io::Result<TcpStream> {
    socks5_connect_from(None, proxy, destination)
}

/// As [`socks5_connect`], from a chosen local IP.
pub fn socks5_connect_from(
    local: Option<IpAddr>,
    proxy: SocketAddr,
    destination: &Address,
) -> io::Result<TcpStream> {
    use etemenanki_proto::codec::ClientCodec;
    use etemenanki_proto::socks::client::{Command, Socks5};
    let mut stream = with_timeouts(connect_from(local, proxy)?);
    let mut codec = Socks5::new(None, Command::Connect(destination));
    let mut out = Vec::new();
    codec.start(&mut out);
    stream.write_all(&out)?;
    out.clear();
    let mut two = [0u8; 2];
    stream.read_exact(&mut two)?;
    codec.decode(&two, &mut out)?;
    stream.write_all(&out)?;
    read_reply(&mut stream)?;
    Ok(stream)
}

fn connect_from(local: Option<IpAddr>, to: SocketAddr) -> io::Result<TcpStream> {
    match local {
        None => TcpStream::connect(to),
        Some(ip) => {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            socket.bind(&SocketAddr::new(ip, 0).into())?;
            socket.connect(&to.into())?;
            Ok(socket.into())
        }
    }
}

/// Reads a SOCKS5 reply; a non-zero code is an error naming it.
fn read_reply(stream: &mut TcpStream) -> io::Result<SocketAddr> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    if head[1] != 0 {
        return Err(io::Error::other(format!("socks reply {}", head[1])));
    }
    let addr = match head[3] {
        1 => {
            let mut rest = [0u8; 6];
            stream.read_exact(&mut rest)?;
            SocketAddr::new(
                IpAddr::from([rest[0], rest[1], rest[2], rest[3]]),
                u16::from_be_bytes([rest[4], rest[5]]),
            )
        }
        4 => {
            let mut rest = [0u8; 18];
            stream.read_exact(&mut rest)?;
            let ip: [u8; 16] = rest[..16].try_into().unwrap();
            SocketAddr::new(IpAddr::from(ip), u16::from_be_bytes([rest[16], rest[17]]))
        }
        other => panic!("unexpected address type {other}"),
    };
    Ok(addr)
}

/// Sends `payload` and reads until the peer closes (bounded by the read
/// timeout); returns what came back.
pub fn exchange(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    stream.write_all(payload).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

/// A SOCKS5 UDP association: the control connection and the relay address.
pub struct Association {
    pub control: TcpStream,
    pub relay: SocketAddr,
    pub socket: UdpSocket,
}

impl Association {
    /// Opens an association from `local` (the UDP socket's address), naming
    /// `requested` as the source in the request.
    pub fn open(
        proxy: SocketAddr,
        local: SocketAddr,
        requested: SocketAddr,
    ) -> io::Result<Association> {
        let socket = UdpSocket::bind(local)?;
        socket.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut control = with_timeouts(connect_from(Some(local.ip()), proxy)?);
        control.write_all(&[5, 1, 0])?;
        let mut two = [0u8; 2];
        control.read_exact(&mut two)?;
        let mut request = vec![5, 3, 0];
        let mut header = Vec::new();
        write_datagram_header(&Address::Ip(requested), &mut header);
        request.extend_from_slice(&header[3..]);
        control.write_all(&request)?;
        let relay = read_reply(&mut control)?;
        Ok(Association {
            control,
            relay,
            socket,
        })
    }

    /// An association from 127.0.0.1 naming no source.
    pub fn any(proxy: SocketAddr) -> Association {
        Association::open(proxy, localhost(0), "0.0.0.0:0".parse().unwrap()).unwrap()
    }

    pub fn send(&self, to: SocketAddr, payload: &[u8]) {
        send_via(&self.socket, self.relay, to, payload);
    }

    /// The next reply and its source, or `None` within the read timeout.
    pub fn recv(&self) -> Option<(SocketAddr, Vec<u8>)> {
        recv_via(&self.socket)
    }
}

pub fn send_via(socket: &UdpSocket, relay: SocketAddr, to: SocketAddr, payload: &[u8]) {
    let mut datagram = Vec::new();
    write_datagram_header(&Address::Ip(to), &mut datagram);
    datagram.extend_from_slice(payload);
    socket.send_to(&datagram, relay).unwrap();
}

pub fn recv_via(socket: &UdpSocket) -> Option<(SocketAddr, Vec<u8>)> {
    let mut buf = [0u8; 2048];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    let (from, payload) = parse_datagram(&buf[..n]).unwrap();
    let Address::Ip(from) = from else {
        panic!("a reply from a domain")
    };
    Some((from, payload.to_vec()))
}

/// Sends until a reply arrives (UDP may be lost), bounded in count.
pub fn ask(
    association: &Association,
    to: SocketAddr,
    payload: &[u8],
) -> Option<(SocketAddr, Vec<u8>)> {
    for _ in 0..5 {
        association.send(to, payload);
        if let Some(reply) = association.recv() {
            return Some(reply);
        }
    }
    None
}

/// `etc` from the compiler package, built into this target directory.
pub fn etc_binary() -> PathBuf {
    let runtime = PathBuf::from(env!("CARGO_BIN_EXE_etemenanki-run"));
    let dir = runtime.parent().unwrap();
    let etc = dir.join("etc");
    let target = dir.parent().unwrap();
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "etemenanki-compiler",
            "--bin",
            "etc",
            "--target-dir",
        ])
        .arg(target)
        .status()
        .unwrap();
    assert!(status.success(), "building etc failed");
    etc
}
