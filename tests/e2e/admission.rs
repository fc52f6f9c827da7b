//! Admission end to end: live and handshaking connections bounded per
//! inbound, bursts from one address served whole while slots are not
//! scarce, a flooding source shed for the others, and what was turned away
//! reported once a second.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{
    connect_from, exchange, http_connect, socks5_connect, socks5_connect_from,
};
use crate::support::servers::tcp_echo;
use crate::support::WAIT;

/// A SOCKS or HTTP CONNECT through the proxy, then a 16-byte echo: what a
/// connection of the bursts below does before it is held open.
fn echoed(stream: std::io::Result<TcpStream>) -> std::io::Result<TcpStream> {
    let mut stream = stream?;
    let payload = *b"sixteen bytes..!";
    stream.write_all(&payload)?;
    let mut back = [0u8; 16];
    stream.read_exact(&mut back)?;
    if back != payload {
        return Err(std::io::Error::other("the echo came back changed"));
    }
    Ok(stream)
}

/// Opens `total` connections with `open`, `in_flight` at once, holding every
/// one open until all are done; the errors of those that failed.
fn burst(
    total: usize,
    in_flight: usize,
    open: impl Fn() -> std::io::Result<TcpStream> + Sync,
) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let held = Mutex::new(Vec::with_capacity(total));
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..in_flight {
            scope.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    match echoed(open()) {
                        Ok(stream) => held.lock().unwrap().push(stream),
                        Err(e) => failed.lock().unwrap().push(e.to_string()),
                    }
                }
            });
        }
    });
    failed.into_inner().unwrap()
}

fn socks_and_http() -> (Runtime, SocketAddr) {
    let echo = tcp_echo();
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("socks-in", false), http_inbound("http-in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    (runtime, echo)
}

#[test]
fn a_burst_of_a_thousand_connections_from_one_address_is_never_dropped() {
    let (runtime, echo) = socks_and_http();
    for in_flight in [200, 500] {
        let socks = burst(1000, in_flight, || {
            socks5_connect(runtime.addr("socks-in"), echo, None)
        });
        let http = burst(1000, in_flight, || {
            http_connect(runtime.addr("http-in"), echo, None)
        });
        println!(
            "{in_flight} in flight: socks dropped {} of 1000, http {}",
            socks.len(),
            http.len()
        );
        assert!(socks.is_empty(), "socks, {in_flight} in flight: {socks:?}");
        assert!(http.is_empty(), "http, {in_flight} in flight: {http:?}");
    }
    assert!(!runtime.log().contains("refused"), "{}", runtime.log());
}

#[test]
fn a_burst_and_a_stranger_are_served_while_another_address_floods_with_silent_connections() {
    let echo = tcp_echo();
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    // Far longer than the test: whatever is served is served because the
    // flood was shed, not because its connections timed out.
    spec.limits.handshake_timeout = Duration::from_secs(120);
    let runtime = Runtime::start(&spec);
    let proxy = runtime.addr("in");
    let flooder: IpAddr = [127, 0, 0, 3].into();
    let flood: Vec<TcpStream> = (0..2100)
        .filter_map(|_| connect_from(flooder, proxy).ok())
        .collect();
    assert_eq!(flood.len(), 2100, "the flood's connects themselves failed");
    // All 2,048 slots are the flood's; the rest of it is turned away.
    runtime.wait_for_log("handshake slots full");

    let burst = burst(200, 200, || socks5_connect(proxy, echo, None));
    assert!(burst.is_empty(), "the burst beside the flood: {burst:?}");

    let stranger: IpAddr = [127, 0, 0, 2].into();
    let mut slowest = Duration::ZERO;
    for i in 0..50 {
        let start = Instant::now();
        let mut stream = socks5_connect_from(stranger, proxy, echo, None)
            .unwrap_or_else(|e| panic!("the stranger's connection {i}: {e}"));
        assert_eq!(exchange(&mut stream, b"answered"), b"answered");
        slowest = slowest.max(start.elapsed());
    }
    println!("the stranger's slowest of 50 connections beside the flood: {slowest:?}");
    runtime.wait_for_log("handshaking connections in the last second: source over its fair share");
    drop(flood);
}

#[test]
fn a_full_inbound_drops_the_socket_before_reading_and_says_so_once_a_second() {
    let echo = tcp_echo();
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.limits.max_connections = 1;
    let runtime = Runtime::start(&spec);
    let mut first = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(first.write(b"x").unwrap(), 1);
    let refused: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(runtime.addr("in")).unwrap())
        .collect();
    for mut second in refused {
        second.set_read_timeout(Some(WAIT)).unwrap();
        let mut buf = [0u8; 1];
        // Dropped without a byte read or written: EOF (or a reset), never
        // a reply.
        assert!(matches!(second.read(&mut buf), Ok(0) | Err(_)));
    }
    runtime.wait_for_log(
        "inbound in: refused 5 connections in the last second: live connection slots full",
    );
    // The live connection is untouched, and its slot frees when it ends.
    assert_eq!(exchange(&mut first, b""), b"x");
    let start = Instant::now();
    let mut third = loop {
        match socks5_connect(runtime.addr("in"), echo, None) {
            Ok(stream) => break stream,
            Err(_) if start.elapsed() < WAIT => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the slot was never freed: {e}"),
        }
    };
    assert_eq!(exchange(&mut third, b"again"), b"again");
}

#[test]
fn one_silent_source_cannot_keep_an_inbound_closed_to_everyone_else() {
    let echo = tcp_echo();
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    spec.limits.max_handshakes = 8;
    spec.limits.max_handshakes_per_source = 2;
    let runtime = Runtime::start(&spec);
    // Eight silent connections take every slot; a ninth is turned away.
    let mut silent: Vec<TcpStream> = (0..9)
        .map(|_| TcpStream::connect(runtime.addr("in")).unwrap())
        .collect();
    runtime
        .wait_for_log("inbound in: refused 1 connection in the last second: handshake slots full");
    // Another source within its share takes the slot of the oldest.
    let mut other = socks5_connect_from([127, 0, 0, 2].into(), runtime.addr("in"), echo, None)
        .expect("another source is admitted");
    assert_eq!(exchange(&mut other, b"still open"), b"still open");
    silent[0].set_read_timeout(Some(WAIT)).unwrap();
    assert!(matches!(silent[0].read(&mut [0u8; 1]), Ok(0) | Err(_)));
    runtime.wait_for_log(
        "inbound in: shed 1 handshaking connection in the last second: \
         source over its fair share of handshake slots",
    );
}

#[test]
fn a_client_waiting_on_a_slow_upstream_holds_no_handshake_slot() {
    // An upstream SOCKS server that never answers: the kernel completes
    // each connect into its backlog, and the greeting waits there.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = mute.local_addr().unwrap();
    let echo = tcp_echo();
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct"), socks_outbound("slow", upstream)],
        vec![],
        "slow",
    );
    spec.limits.max_handshakes = 4;
    let runtime = Runtime::start(&spec);
    // Six clients whose requests are whole, all waiting on the upstream.
    let waiting: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut stream = TcpStream::connect(runtime.addr("in")).unwrap();
            stream.write_all(&[5, 1, 0]).unwrap();
            let mut choice = [0u8; 2];
            stream.set_read_timeout(Some(WAIT)).unwrap();
            stream.read_exact(&mut choice).unwrap();
            let mut request = vec![5, 1, 0, 1];
            request.extend_from_slice(&[127, 0, 0, 1]);
            request.extend_from_slice(&echo.port().to_be_bytes());
            stream.write_all(&request).unwrap();
            stream
        })
        .collect();
    // Had they kept their slots, a fifth handshake would be refused.
    let mut greeted = TcpStream::connect(runtime.addr("in")).unwrap();
    greeted.set_read_timeout(Some(WAIT)).unwrap();
    greeted.write_all(&[5, 1, 0]).unwrap();
    let mut choice = [0u8; 2];
    greeted.read_exact(&mut choice).unwrap();
    assert_eq!(choice, [5, 0]);
    assert!(!runtime.log().contains("refused"), "{}", runtime.log());
    drop(waiting);
}
