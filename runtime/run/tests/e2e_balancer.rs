//! Balancers end to end: health from TCP probes moves traffic between
//! members.

#[allow(dead_code)]
mod support;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use etemenanki_ir::spec::{BalancerSpec, Strategy};
use etemenanki_proto::Address;
use support::*;

/// A server that accepts TCP and closes at once: its probe succeeds while
/// every proxied flow through it fails. Stops listening when `stop` is set.
fn accept_and_close(stop: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => drop(stream),
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    addr
}

#[test]
fn traffic_moves_off_a_member_that_stops_answering() {
    let echo = tcp_echo();
    // The working member is a second runtime: a SOCKS server on freedom.
    let upstream_port = free_port();
    let _upstream = Runtime::start(&spec(
        vec![socks_inbound("up", upstream_port, false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let broken = accept_and_close(stop.clone());

    let port = free_port();
    let mut spec = spec(
        vec![socks_inbound("in", port, false)],
        vec![
            socks_outbound("first", broken),
            socks_outbound("second", localhost(upstream_port)),
        ],
        vec![],
        "pool",
    );
    spec.balancers.push(BalancerSpec {
        tag: "pool".into(),
        members: vec!["first".into(), "second".into()],
        strategy: Strategy::Failover,
        probe_interval: Duration::from_secs(1),
        probe_timeout: Duration::from_secs(1),
    });
    let runtime = Runtime::start(&spec);

    // The first member accepts TCP, so it probes healthy and failover sends
    // flows to it, where they fail.
    assert!(socks5_connect(localhost(port), &Address::Ip(echo)).is_err());

    stop.store(true, Ordering::Relaxed);
    runtime.wait_for_log("balancer member first is now down");
    let mut stream = socks5_connect(localhost(port), &Address::Ip(echo)).unwrap();
    assert_eq!(
        exchange(&mut stream, b"via the second member"),
        b"via the second member"
    );
}
