//! Reloads: the plan file replaced (or SIGHUP), planned with the planner
//! `etc plan` uses, and applied atomically.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use etemenanki_ir::route::Rule;
use etemenanki_ir::spec::{
    AddressFamily, DrainPolicy, InboundProtocol, InboundSpec, InboundTransport, OutboundProtocol,
    OutboundSpec, Secret, ServerShape, Spec,
};

use crate::plan::*;
use crate::runtime::{run_plan_bytes, Runtime};
use crate::support::binaries::ours;
use crate::support::client::{echo_once, exchange, socks5_connect, Association};
use crate::support::servers::{http_origin, tcp_echo, udp_named};
use crate::support::WAIT;

fn direct(family: AddressFamily, drain: DrainPolicy) -> OutboundSpec {
    OutboundSpec {
        tag: "direct".into(),
        protocol: OutboundProtocol::Freedom {
            address_family: family,
        },
        drain,
    }
}

#[test]
fn a_route_change_reaches_the_next_udp_packet_but_not_an_established_tcp_flow() {
    let echo = tcp_echo();
    let peer = udp_named("peer");
    let inbounds = vec![socks_inbound("in", true)];
    let outbounds = vec![freedom("direct"), blackhole("block")];
    let runtime = Runtime::start(&spec(inbounds.clone(), outbounds.clone(), vec![], "direct"));
    let mut tcp = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut tcp, b"before"), b"before");
    let association = Association::any(runtime.addr("in"));
    assert_eq!(
        association.ask(peer, b"1"),
        Some((peer, b"peer:1".to_vec()))
    );

    let applied = runtime.reload(&spec(inbounds, outbounds, vec![], "block"));
    assert!(applied.contains("reload: applied epoch 1"), "{applied}");
    assert_eq!(
        association.ask(peer, b"2"),
        None,
        "the next packet routes on the new plane"
    );
    assert_eq!(
        echo_once(&mut tcp, b"after"),
        b"after",
        "the established flow keeps its outbound"
    );
}

#[test]
fn a_changed_outbound_keeps_its_old_flows_unless_drained_with_close() {
    let echo = tcp_echo();
    let inbounds = vec![socks_inbound("in", false)];
    let runtime = Runtime::start(&spec(
        inbounds.clone(),
        vec![direct(AddressFamily::Auto, DrainPolicy::Keep)],
        vec![],
        "direct",
    ));
    let mut on_v1 = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut on_v1, b"v1"), b"v1");

    // v2 replaces v1, which is drained with keep: its flow runs on.
    let applied = runtime.reload(&spec(
        inbounds.clone(),
        vec![direct(AddressFamily::PreferIpv4, DrainPolicy::Keep)],
        vec![],
        "direct",
    ));
    assert!(
        applied.contains("- outbound direct  v1  replaced by v2 (drain: keep)"),
        "{applied}"
    );
    assert_eq!(echo_once(&mut on_v1, b"v1 again"), b"v1 again");
    let mut on_v2 = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut on_v2, b"v2"), b"v2");

    // v3 replaces v2, which is drained with close: its flow is closed.
    let applied = runtime.reload(&spec(
        inbounds,
        vec![direct(AddressFamily::PreferIpv6, DrainPolicy::Close)],
        vec![],
        "direct",
    ));
    assert!(
        applied.contains("- outbound direct  v2  replaced by v3 (drain: close)"),
        "{applied}"
    );
    runtime.wait_for_log("the outbound this flow was opened on was drained");
    assert_eq!(echo_once(&mut on_v2, b"v2 again"), b"");
    assert_eq!(echo_once(&mut on_v1, b"v1 still"), b"v1 still");
    let mut on_v3 = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut on_v3, b"v3"), b"v3");
}

#[test]
fn a_plan_that_fails_to_load_or_build_keeps_the_current_config() {
    let echo = tcp_echo();
    let inbounds = vec![socks_inbound("in", false)];
    let runtime = Runtime::start(&spec(
        inbounds.clone(),
        vec![freedom("direct")],
        vec![],
        "direct",
    ));

    let failed = runtime.reload_bytes(b"not a plan at all");
    assert!(
        failed.contains("reload: build failed, keeping current config: cannot load plan"),
        "{failed}"
    );

    // An inbound that cannot listen fails the prepare phase.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut busy = socks_inbound("busy", false);
    busy.listen = taken.local_addr().unwrap();
    let mut inbounds_with_busy = inbounds.clone();
    inbounds_with_busy.push(busy);
    let failed = runtime.reload(&spec(
        inbounds_with_busy,
        vec![freedom("direct"), blackhole("block")],
        vec![],
        "block",
    ));
    assert!(
        failed.contains(
            "reload: build failed, keeping current config: building inbound busy@v1 failed"
        ),
        "{failed}"
    );
    let mut stream = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(exchange(&mut stream, b"still direct"), b"still direct");
}

#[test]
fn sighup_reloads_and_an_unchanged_inbound_keeps_its_connections() {
    let echo = tcp_echo();
    let inbounds = vec![socks_inbound("in", false)];
    let runtime = Runtime::start(&spec(
        inbounds.clone(),
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let mut open = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut open, b"one"), b"one");
    runtime.signal("HUP");
    runtime.wait_for_log("reload: SIGHUP");
    runtime.wait_for_log("reload: applied epoch 1");
    assert!(runtime.log().contains("apply: = inbound in  v1  unchanged"));
    assert_eq!(echo_once(&mut open, b"two"), b"two");
}

/// The step lines of `etc plan --verbose` output or of the runtime's
/// `apply:` log lines, with runs of spaces collapsed.
fn steps(lines: impl Iterator<Item = String>) -> Vec<String> {
    lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn the_steps_the_runtime_logs_for_a_reload_are_the_steps_etc_plan_showed() {
    let etc = ours("etc");
    let inbounds = vec![socks_inbound("in", false)];
    let first = spec(
        inbounds.clone(),
        vec![freedom("direct"), blackhole("block")],
        vec![],
        "direct",
    );
    let state =
        std::env::temp_dir().join(format!("etemenanki-run-state-{}.bin", std::process::id()));
    let runtime = Runtime::start_with(&first, &["--state", state.to_str().unwrap()]);
    // The inbounds log their binding before the state file is written;
    // "serving" comes after it.
    runtime.wait_for_log("serving ");

    let mut next: Spec = spec(
        inbounds,
        vec![
            direct(AddressFamily::Ipv4Only, DrainPolicy::Close),
            freedom("other"),
        ],
        vec![],
        "other",
    );
    next.limits.relay_idle_timeout = std::time::Duration::from_secs(60);
    let next_plan = state.with_extension("next.bin");
    std::fs::write(
        &next_plan,
        etemenanki_ir::encode::encode(&next, b"test", "test"),
    )
    .unwrap();
    let preview = Command::new(&etc)
        .arg("plan")
        .arg("--verbose")
        .arg("--from")
        .arg(&state)
        .arg(&next_plan)
        .output()
        .unwrap();
    assert!(
        preview.status.success(),
        "{}",
        String::from_utf8_lossy(&preview.stderr)
    );
    let preview = String::from_utf8(preview.stdout).unwrap();
    let shown = steps(
        preview
            .lines()
            .filter(|l| l.starts_with("  ") && !l.contains("route plane republished"))
            .map(str::to_owned),
    );

    let applied = runtime.reload(&next);
    let logged = steps(
        applied
            .lines()
            .filter_map(|l| l.split_once("apply: "))
            .map(|(_, step)| step.to_owned()),
    );
    assert!(!shown.is_empty());
    assert_eq!(logged, shown, "preview:\n{preview}\nlog:\n{applied}");
    let _ = std::fs::remove_file(&state);
    let _ = std::fs::remove_file(&next_plan);
}

#[test]
fn a_limits_change_reaches_a_reused_inbound() {
    let echo = tcp_echo();
    let before = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    let runtime = Runtime::start(&before);
    let mut held = socks5_connect(runtime.addr("in"), echo, None).unwrap();
    assert_eq!(echo_once(&mut held, b"held"), b"held");

    let mut after = before.clone();
    after.limits.max_connections = 1;
    let applied = runtime.reload(&after);
    assert!(
        applied.contains("apply: = inbound in  v1  unchanged"),
        "{applied}"
    );
    // The held connection takes the only slot: the next one is dropped.
    let mut refused = TcpStream::connect(runtime.addr("in")).unwrap();
    refused.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 1];
    assert!(matches!(refused.read(&mut buf), Ok(0) | Err(_)));
    runtime.wait_for_log(
        "inbound in: refused 1 connection in the last second: live connection slots full",
    );
    assert_eq!(echo_once(&mut held, b"still"), b"still");
}

#[test]
fn a_changed_inbound_takes_over_its_address_and_ends_the_old_connections() {
    let echo = tcp_echo();
    let web = http_origin(b"through the new inbound");
    let runtime = Runtime::start(&spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    let address = runtime.addr("in");
    let mut old = socks5_connect(address, echo, None).unwrap();
    assert_eq!(echo_once(&mut old, b"old"), b"old");

    let applied = runtime.reload(&spec(
        vec![http_inbound("in")],
        vec![freedom("direct")],
        vec![],
        "direct",
    ));
    assert!(
        applied.contains("apply: ~ inbound in  v1 -> v2"),
        "{applied}"
    );
    assert_eq!(echo_once(&mut old, b"gone"), b"");
    let url = format!("http://127.0.0.1:{}/", web.port());
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "--proxy",
            &format!("http://{address}"),
            &url,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "through the new inbound"
    );
}

#[test]
fn a_second_runtime_on_a_taken_address_is_refused() {
    let mut spec = spec(
        vec![socks_inbound("in", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    let first = Runtime::start(&spec);
    let taken = first.addr("in");
    spec.inbounds[0].listen = taken;
    let (status, stderr) = run_plan_bytes(&etemenanki_ir::encode::encode(&spec, b"", "t"));
    assert!(!status.success());
    assert!(
        stderr.contains(&format!(
            "building inbound in@v1 failed: cannot listen on {taken}"
        )),
        "{stderr}"
    );
}

#[test]
fn an_inbound_added_on_port_0_gets_a_port_of_its_own() {
    let echo = tcp_echo();
    let one = spec(
        vec![socks_inbound("first", false)],
        vec![freedom("direct")],
        vec![],
        "direct",
    );
    let runtime = Runtime::start(&one);
    let first = runtime.addr("first");
    let mut two = one.clone();
    two.inbounds.push(socks_inbound("second", false));
    let log = runtime.reload(&two);
    assert!(log.contains("reload: applied epoch"), "{log}");
    let second = runtime.addr("second");
    assert_ne!(
        first, second,
        "the second inbound took the first one's socket"
    );
    assert_eq!(runtime.addr("first"), first);
    for proxy in [first, second] {
        let mut stream = socks5_connect(proxy, echo, None).unwrap();
        assert_eq!(exchange(&mut stream, b"ping"), b"ping", "via {proxy}");
    }
}

fn trojan_inbound(passwords: &[&str]) -> InboundSpec {
    InboundSpec {
        tag: "trojan-in".into(),
        listen: any_port(),
        sniff: false,
        protocol: InboundProtocol::Trojan {
            passwords: passwords.iter().map(|p| Secret(p.to_string())).collect(),
            transport: InboundTransport {
                shape: ServerShape::Tcp,
                tls: None,
            },
            fallback: None,
        },
    }
}

fn trojan_outbound(tag: &str, server: SocketAddr, password: &str) -> OutboundSpec {
    let mut spec = socks_outbound(tag, server);
    let OutboundProtocol::Socks { upstream, .. } = spec.protocol else {
        unreachable!()
    };
    spec.protocol = OutboundProtocol::Trojan {
        upstream,
        password: Secret(password.into()),
    };
    spec
}

#[test]
fn a_users_change_keeps_the_inbound_and_ends_only_the_removed_users_connections() {
    let echo = tcp_echo();
    // A refused client is held until the handshake deadline: a short one.
    let server_spec = |passwords: &[&str]| {
        let mut spec = spec(
            vec![trojan_inbound(passwords)],
            vec![freedom("direct")],
            vec![],
            "direct",
        );
        spec.limits.handshake_timeout = Duration::from_secs(1);
        spec
    };
    let server = Runtime::start(&server_spec(&["alice", "bob"]));
    let address = server.addr("trojan-in");
    let by_inbound = |inbound: &str, target: &str| Rule {
        inbound_tag: vec![inbound.into()],
        ..rule(target)
    };
    let client = Runtime::start(&spec(
        vec![
            socks_inbound("as-alice", false),
            socks_inbound("as-bob", false),
        ],
        vec![
            trojan_outbound("alice", address, "alice"),
            trojan_outbound("bob", address, "bob"),
        ],
        vec![by_inbound("as-alice", "alice"), by_inbound("as-bob", "bob")],
        "alice",
    ));
    let mut alice = socks5_connect(client.addr("as-alice"), echo, None).unwrap();
    let mut bob = socks5_connect(client.addr("as-bob"), echo, None).unwrap();
    assert_eq!(echo_once(&mut alice, b"alice"), b"alice");
    assert_eq!(echo_once(&mut bob, b"bob"), b"bob");

    let applied = server.reload(&server_spec(&["alice", "carol"]));
    assert!(
        applied
            .contains("apply: = inbound trojan-in  v1  users changed; kept, with its connections"),
        "{applied}"
    );
    assert_eq!(
        server.addr("trojan-in"),
        address,
        "the same listening socket"
    );
    assert_eq!(echo_once(&mut alice, b"still"), b"still");
    assert_eq!(
        echo_once(&mut bob, b"gone"),
        b"",
        "a removed user's connection ends"
    );
    let mut again = socks5_connect(client.addr("as-bob"), echo, None)
        .expect("the client's socks handshake answers before the trojan one");
    assert_eq!(
        echo_once(&mut again, b"refused"),
        b"",
        "a removed user is refused"
    );
}
