//! Balancers end to end: health from TCP probes moves traffic between
//! members.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use etemenanki_ir::spec::{BalancerSpec, Strategy};

use crate::plan::*;
use crate::runtime::Runtime;
use crate::support::client::{exchange, socks5_connect};
use crate::support::servers::{free_addr, tcp_echo};
use crate::support::WAIT;

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
    let upstream = Runtime::start(&spec(
        vec![socks_inbound("up", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let broken = accept_and_close(stop.clone());

    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![
            socks_outbound("first", broken),
            socks_outbound("second", upstream.addr("up")),
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
    let proxy = runtime.addr("in");

    // The first member accepts TCP, so it probes healthy and failover sends
    // flows to it, where they fail.
    assert!(socks5_connect(proxy, echo, None).is_err());

    stop.store(true, Ordering::Relaxed);
    runtime.wait_for_log("balancer member first is now down");
    let mut stream = socks5_connect(proxy, echo, None).unwrap();
    assert_eq!(
        exchange(&mut stream, b"via the second member"),
        b"via the second member"
    );
}

#[test]
fn a_reused_balancer_keeps_its_health_and_a_rebuilt_one_relearns_it() {
    let echo = tcp_echo();
    let upstream = Runtime::start(&spec(
        vec![socks_inbound("up", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    // Nothing listens on the first member's port: it probes down at once.
    let dead = free_addr();
    let pool = |interval: u64| BalancerSpec {
        tag: "pool".into(),
        members: vec!["first".into(), "second".into()],
        strategy: Strategy::Failover,
        probe_interval: Duration::from_secs(interval),
        probe_timeout: Duration::from_secs(1),
    };
    let mut first_spec = spec(
        vec![socks_inbound("in", false)],
        vec![
            socks_outbound("first", dead),
            socks_outbound("second", upstream.addr("up")),
            blackhole("block"),
        ],
        vec![],
        "pool",
    );
    first_spec.balancers.push(pool(60));
    let runtime = Runtime::start(&first_spec);
    let proxy = runtime.addr("in");
    runtime.wait_for_log("balancer member first is now down");
    let downs = |log: String| log.matches("balancer member first is now down").count();

    // A route change reuses the balancer: its learned health stays, so the
    // flow goes straight to the second member.
    let mut routed = first_spec.clone();
    routed.route = etemenanki_ir::route::RouteTable::new(
        vec![etemenanki_ir::route::Rule {
            port: vec![etemenanki_ir::route::PortRange { start: 9, end: 9 }],
            ..rule("block")
        }],
        "pool".into(),
    )
    .unwrap();
    let applied = runtime.reload(&routed);
    assert!(
        applied.contains("apply: = balancer pool  v1  unchanged"),
        "{applied}"
    );
    let mut stream = socks5_connect(proxy, echo, None).unwrap();
    assert_eq!(exchange(&mut stream, b"kept"), b"kept");
    assert_eq!(downs(runtime.log()), 1);

    // A change to the balancer rebuilds it: members start healthy and the
    // new probes learn the first one is down again.
    let mut rebuilt = routed.clone();
    rebuilt.balancers = vec![pool(30)];
    let applied = runtime.reload(&rebuilt);
    assert!(
        applied.contains("apply: ~ balancer pool  v1 -> v2"),
        "{applied}"
    );
    let start = std::time::Instant::now();
    while downs(runtime.log()) < 2 && start.elapsed() < WAIT {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(downs(runtime.log()), 2, "{}", runtime.log());
}
