//! DNS: the internal DNS service, the DNS inbound and the resolvers against
//! real DNS servers on loopback. dnsmasq is the authority for the zone
//! `test` on UDP and TCP (TTL 3 s, SOA minimum 3 s); unbound serves DNS over
//! TLS and DNS over HTTPS for the same zone with a self-signed certificate
//! the plan trusts. The clients are dig and kdig; a SOCKS client of
//! support/client.rs carries queries through our SOCKS UDP.

use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::binaries::peer;
use crate::support::certs::Pki;
use crate::support::client::{socks5_connect, socks5_connect_to, Association, Target};
use crate::support::etemenanki::start_ours;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::free_addr;
use crate::support::WAIT;

/// The zone's records: `a.test` A and AAAA, `proxy.test` (loopback, for a
/// proxy server named by a name) and `big.test`, eight TXT records of 250
/// bytes (about 2 KB: truncated over UDP at any EDNS size the tools use).
fn start_dnsmasq(dnsmasq: &Path, dir: &Path) -> (Process, SocketAddr) {
    start_dnsmasq_answering(dnsmasq, dir, "192.0.2.1")
}

/// [`start_dnsmasq`] with `a.test` at `a`, its log and configuration named
/// after it.
fn start_dnsmasq_answering(dnsmasq: &Path, dir: &Path, a: &str) -> (Process, SocketAddr) {
    let addr = free_addr();
    let mut conf = format!(
        "no-resolv\nno-hosts\nkeep-in-foreground\nbind-interfaces\nlisten-address=127.0.0.1\n\
         port={}\nlog-queries=extra\nlog-facility=-\n\
         auth-zone=test\nauth-server=ns.test,127.0.0.1\nauth-ttl=3\n\
         host-record=a.test,{a},2001:db8::1\nhost-record=proxy.test,127.0.0.1\n",
        addr.port()
    );
    for i in 0..8 {
        conf.push_str(&format!(
            "txt-record=big.test,\"{}\"\n",
            i.to_string().repeat(250)
        ));
    }
    let name = format!("dnsmasq-{a}");
    // A pid file of its own: the default one in /var/run is one per host.
    let pid = dir.join(format!("{name}.pid"));
    conf.push_str(&format!("pid-file={}\n", pid.display()));
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).unwrap();
    let mut command = Command::new(dnsmasq);
    command.arg(format!("--conf-file={}", path.display()));
    (Process::spawn_listening(&name, command, dir, addr), addr)
}

/// unbound serving `a.test` (192.0.2.7) over TLS and HTTPS with the
/// self-signed certificate `cert`.
fn start_unbound(
    unbound: &Path,
    dir: &Path,
    cert: &Path,
    key: &Path,
) -> (Process, SocketAddr, SocketAddr) {
    let (dot, doh) = (free_addr(), free_addr());
    let conf = format!(
        "server:\n  interface: 127.0.0.1@{dot_port}\n  interface: 127.0.0.1@{doh_port}\n\
         \x20 tls-port: {dot_port}\n  https-port: {doh_port}\n\
         \x20 tls-service-key: \"{key}\"\n  tls-service-pem: \"{cert}\"\n\
         \x20 do-daemonize: no\n  use-syslog: no\n  logfile: \"\"\n  username: \"\"\n  chroot: \"\"\n\
         \x20 directory: \"{dir}\"\n  pidfile: \"\"\n  access-control: 127.0.0.0/8 allow\n\
         \x20 local-zone: \"test.\" static\n  local-data: \"a.test. 60 IN A 192.0.2.7\"\n\
         \x20 local-data: \"test. 60 IN SOA ns.test. hostmaster.test. 1 1200 180 1209600 3\"\n\
         \x20 verbosity: 1\n  log-queries: yes\n  module-config: \"iterator\"\n  do-ip6: no\n\
         remote-control:\n  control-enable: no\n",
        dot_port = dot.port(),
        doh_port = doh.port(),
        key = key.display(),
        cert = cert.display(),
        dir = dir.display(),
    );
    let path = dir.join("unbound.conf");
    std::fs::write(&path, conf).unwrap();
    let mut command = Command::new(unbound);
    command.args(["-d", "-c"]).arg(&path);
    let mut process = Process::spawn("unbound", command, dir);
    process.wait_listening(dot);
    process.wait_listening(doh);
    (process, dot, doh)
}

/// `dig` (or `kdig`) asking `server` for `name`; its whole output.
fn ask(tool: &Path, server: SocketAddr, name: &str, extra: &[&str]) -> String {
    let out = Command::new(tool)
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), name])
        .args(extra)
        .args(match tool.ends_with("kdig") {
            true => ["+retry=0", "+timeout=15"],
            false => ["+tries=1", "+time=15"],
        })
        .output()
        .expect("running the dns client");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has_answer(output: &str, ip: &str) -> bool {
    output.contains("NOERROR") && output.lines().any(|l| l.ends_with(ip) && l.contains("IN"))
}

/// How many queries dnsmasq logged for `what` (`[A] a.test`), from `from`
/// (as `query[A]` or, for its own zone, `auth[A]`).
fn asked(dnsmasq: &Process, what: &str, from: &str) -> usize {
    let needle = format!("{what} from {from}");
    dnsmasq
        .log()
        .lines()
        .filter(|l| l.contains(&needle))
        .count()
}

/// A query for `a.test` A with id `id`, recursion desired, no EDNS: a
/// fixed test vector (RFC 1035 4.1), so the SOCKS client needs no DNS
/// library.
fn query_a_test(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(b"\x01a\x04test\x00\x00\x01\x00\x01");
    q
}

/// Whether `answer` answers [`query_a_test`]`(id)` with NOERROR and
/// carries 192.0.2.1.
fn answers_a_test(answer: &[u8], id: u16) -> bool {
    answer.len() > 12
        && answer[..2] == id.to_be_bytes()
        && answer[2] & 0x80 != 0
        && answer[3] & 0x0f == 0
        && answer.windows(4).any(|w| w == [192, 0, 2, 1])
}

/// Our runtime from `.et` text, waiting for every address in `listens`.
fn ours(dir: &Path, text: &str, listens: &[SocketAddr]) -> Process {
    start_ours(dir, "etemenanki.et", text, listens)
}

struct Peers {
    dnsmasq: PathBuf,
    dig: PathBuf,
    kdig: PathBuf,
}

fn peers(test: &str) -> Option<Peers> {
    Some(Peers {
        dnsmasq: peer(test, "dnsmasq")?,
        dig: peer(test, "dig")?,
        kdig: peer(test, "kdig")?,
    })
}

#[test]
fn port_53_flows_are_answered_by_the_dns_service_over_socks_udp_tcp_and_the_dns_inbound() {
    let test = "port_53_flows_are_answered_by_the_dns_service";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let (socks, dns_in) = (free_addr(), free_addr());
    let _ours = ours(
        &dir,
        &format!(
            "inbound socks-in socks {{ listen = {socks} }}\n\
             inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n\
             route {{\n  port 53 -> dns\n  default -> direct\n}}\n"
        ),
        &[socks, dns_in],
    );
    // To an address nothing listens on: only the service can answer, from
    // where the client sent the query.
    let nowhere: SocketAddr = "192.0.2.53:53".parse().unwrap();
    let association = Association::open(socks).unwrap();
    let (from, answer) = association
        .ask(nowhere, &query_a_test(0x1234))
        .expect("an answer through socks udp");
    assert_eq!(from, nowhere);
    assert!(answers_a_test(&answer, 0x1234), "{answer:?}");

    // TCP DNS to the same address, through a SOCKS CONNECT.
    let mut tcp = socks5_connect(socks, nowhere, None).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let query = query_a_test(0x4321);
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    tcp.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
    tcp.read_exact(&mut answer).unwrap();
    assert!(answers_a_test(&answer, 0x4321), "{answer:?}");

    // The DNS inbound, to dig and kdig over UDP and TCP.
    for (tool, extra) in [
        (&p.dig, &[][..]),
        (&p.dig, &["+tcp"][..]),
        (&p.kdig, &[][..]),
        (&p.kdig, &["+tcp"][..]),
    ] {
        let out = ask(tool, dns_in, "a.test", extra);
        assert!(
            has_answer(&out, "192.0.2.1"),
            "{} {extra:?}:\n{out}",
            tool.display()
        );
    }
    let out = ask(&p.kdig, dns_in, "a.test", &["AAAA"]);
    assert!(has_answer(&out, "2001:db8::1"), "{out}");
    let out = ask(&p.kdig, dns_in, "nx.test", &[]);
    assert!(out.contains("NXDOMAIN"), "{out}");
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp_upstream_and_by_the_client() {
    let test = "a_truncated_answer_is_asked_again_over_tcp";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let dns_in = free_addr();
    let _ours = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n"
        ),
        &[dns_in],
    );
    // Over UDP our answer is truncated too (the client sees TC) ...
    let udp = ask(
        &p.dig,
        dns_in,
        "big.test",
        &["TXT", "+ignore", "+bufsize=1232"],
    );
    assert!(udp.contains(" tc"), "{udp}");
    // ... and dig's retry over TCP gets all eight records, which our
    // resolver could only have had from dnsmasq over TCP.
    let tcp = ask(&p.dig, dns_in, "big.test", &["TXT"]);
    assert!(tcp.contains("ANSWER: 8"), "{tcp}");
}

/// The size of the answer dig (`MSG SIZE  rcvd: N`) or kdig (`Received N
/// B`) printed.
fn received(output: &str) -> usize {
    output
        .lines()
        .find_map(|l| {
            let n = l
                .strip_prefix(";; MSG SIZE  rcvd: ")
                .or_else(|| l.strip_prefix(";; Received ")?.split(' ').next())?;
            n.trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no answer size in:\n{output}"))
}

#[test]
fn a_udp_answer_fits_our_own_payload_size_whatever_the_client_offers_and_comes_whole_over_tcp() {
    let test = "a_udp_answer_fits_our_own_payload_size";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let dns_in = free_addr();
    let _ours = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n"
        ),
        &[dns_in],
    );
    // big.test's eight TXT records are about 2 KB: over UDP they would fit
    // the 65,535 bytes the client offers, but not the 1,232 ours does.
    for tool in [&p.dig, &p.kdig] {
        let udp = ask(
            tool,
            dns_in,
            "big.test",
            &["TXT", "+ignore", "+bufsize=65535"],
        );
        assert!(udp.contains(" tc"), "{}:\n{udp}", tool.display());
        assert!(received(&udp) <= 1232, "{}:\n{udp}", tool.display());
        let tcp = ask(tool, dns_in, "big.test", &["TXT", "+tcp"]);
        assert!(received(&tcp) > 2000, "{}:\n{tcp}", tool.display());
        assert!(!tcp.contains(" tc"), "{}:\n{tcp}", tool.display());
    }
    // Without EDNS the bound is 512.
    let plain = ask(&p.dig, dns_in, "big.test", &["TXT", "+ignore", "+noedns"]);
    assert!(plain.contains(" tc"), "{plain}");
    assert!(received(&plain) <= 512, "{plain}");
}

#[test]
fn a_name_whose_dns_answer_is_our_own_inbound_is_refused_before_connecting() {
    let test = "a_name_whose_dns_answer_is_our_own_inbound";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let socks = free_addr();
    // The default domain strategy, as_is: routing looks no name up, the
    // direct dial does.
    let ours = ours(
        &dir,
        &format!(
            "inbound socks-in socks {{ listen = {socks} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n"
        ),
        &[socks],
    );
    // proxy.test is 127.0.0.1 in dnsmasq's zone.
    let refused = socks5_connect_to(socks, Target::Name("proxy.test", socks.port())).unwrap_err();
    assert_eq!(refused.to_string(), "socks reply 2");
    ours.wait_for_log(&format!(
        "refusing a flow to this proxy's own inbound {socks}"
    ));
}

#[test]
fn a_cached_answer_reaches_no_server_within_its_ttl_and_one_after() {
    let test = "a_cached_answer_reaches_no_server_within_its_ttl";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let dns_in = free_addr();
    let _ours = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n"
        ),
        &[dns_in],
    );
    let first = Instant::now();
    assert!(has_answer(
        &ask(&p.kdig, dns_in, "a.test", &[]),
        "192.0.2.1"
    ));
    assert_eq!(asked(&dnsmasq, "[A] a.test", "127.0.0.1"), 1);
    let out = ask(&p.kdig, dns_in, "nx.test", &[]);
    assert!(out.contains("NXDOMAIN"), "{out}");
    // Within the 3 s TTL (and SOA minimum), answers come from the cache;
    // these asks take far less than that on loopback, and if they did not,
    // the counts below would only be larger, never smaller.
    let again = ask(&p.kdig, dns_in, "a.test", &[]);
    let nx_again = ask(&p.kdig, dns_in, "nx.test", &[]);
    if first.elapsed() < Duration::from_secs(2) {
        assert!(has_answer(&again, "192.0.2.1"), "{again}");
        assert!(nx_again.contains("NXDOMAIN"), "{nx_again}");
        assert_eq!(asked(&dnsmasq, "[A] a.test", "127.0.0.1"), 1);
        assert_eq!(asked(&dnsmasq, "[A] nx.test", "127.0.0.1"), 1);
    }
    std::thread::sleep(Duration::from_millis(3500));
    assert!(has_answer(
        &ask(&p.kdig, dns_in, "a.test", &[]),
        "192.0.2.1"
    ));
    assert!(asked(&dnsmasq, "[A] a.test", "127.0.0.1") >= 2);
}

#[test]
fn a_dead_upstream_gives_way_to_the_next_server() {
    let test = "a_dead_upstream_gives_way_to_the_next_server";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    // Bound, so no ICMP says it is closed: it just never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dead = silent.local_addr().unwrap();
    let dns_in = free_addr();
    let _ours = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{dead}, {server}] }}\n"
        ),
        &[dns_in],
    );
    let out = ask(&p.kdig, dns_in, "a.test", &[]);
    assert!(has_answer(&out, "192.0.2.1"), "{out}");
    let mut buf = [0u8; 512];
    silent
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(
        silent.recv_from(&mut buf).is_ok(),
        "the dead server was asked first"
    );
}

#[test]
fn a_split_specs_through_proxy_query_arrives_from_the_upstream_proxy() {
    let test = "a_split_specs_through_proxy_query_arrives_from_the_upstream_proxy";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    // The upstream proxy: our own socks inbound, dialing from 127.0.0.2.
    let upstream_dir = dir.join("upstream");
    std::fs::create_dir_all(&upstream_dir).unwrap();
    let upstream = free_addr();
    let _upstream = ours(
        &upstream_dir,
        &format!(
            "inbound socks-in socks {{ listen = {upstream} }}\n\
             outbound direct freedom {{}}\n\
             socket {{ bind_address = [127.0.0.2] }}\n"
        ),
        &[upstream],
    );
    let dns_in = free_addr();
    let _ours = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound proxy socks {{ server = proxy.test:{port} }}\n\
             dns {{ pre_proxy = [{server}]  through_proxy = [{server}] }}\n",
            port = upstream.port()
        ),
        &[dns_in],
    );
    let out = ask(&p.kdig, dns_in, "a.test", &["+notcp"]);
    assert!(has_answer(&out, "192.0.2.1"), "{out}");
    // The destination was asked through the proxy, the proxy's own name
    // directly.
    assert!(
        asked(&dnsmasq, "[A] a.test", "127.0.0.2") >= 1,
        "{}",
        dnsmasq.log()
    );
    assert_eq!(
        asked(&dnsmasq, "[A] a.test", "127.0.0.1"),
        0,
        "{}",
        dnsmasq.log()
    );
    assert!(
        asked(&dnsmasq, "[A] proxy.test", "127.0.0.1") >= 1,
        "{}",
        dnsmasq.log()
    );
    assert_eq!(
        asked(&dnsmasq, "[A] proxy.test", "127.0.0.2"),
        0,
        "{}",
        dnsmasq.log()
    );
    // A truncated answer goes back through the proxy over TCP.
    let big = ask(&p.kdig, dns_in, "big.test", &["TXT", "+tcp"]);
    assert!(big.contains("ANSWER: 8"), "{big}");
    assert!(
        asked(&dnsmasq, "[TXT] big.test", "127.0.0.2") >= 1,
        "{}",
        dnsmasq.log()
    );
}

#[test]
fn a_resolver_query_routed_to_the_dns_service_is_refused() {
    let test = "a_resolver_query_routed_to_the_dns_service_is_refused";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (dnsmasq, server) = start_dnsmasq(&p.dnsmasq, &dir);
    let dns_in = free_addr();
    let proxy = free_addr();
    let refusing = ours(
        &dir,
        &format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound proxy socks {{ server = {proxy} }}\n\
             dns {{ pre_proxy = [{server}]  through_proxy = [{server}] }}\n\
             route {{\n  port {port} -> dns\n  default -> proxy\n}}\n",
            port = server.port()
        ),
        &[dns_in],
    );
    let out = ask(&p.kdig, dns_in, "a.test", &[]);
    assert!(out.contains("SERVFAIL"), "{out}");
    refusing.wait_for_log("refusing a resolver query routed to the DNS service itself");
    assert_eq!(asked(&dnsmasq, "[A] a.test", "127.0.0.1"), 0);
}

#[test]
fn dns_over_tls_and_https_upstreams_verify_the_plans_certificate() {
    let test = "dns_over_tls_and_https_upstreams_verify_the_plans_certificate";
    let (Some(unbound), Some(kdig), Some(openssl)) = (
        peer(test, "unbound"),
        peer(test, "kdig"),
        peer(test, "openssl"),
    ) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (_unbound, dot, doh) =
        start_unbound(&unbound, &dir, &pki.untrusted.cert, &pki.untrusted.key);
    for (name, server) in [
        ("dot", format!("tls://{dot}")),
        ("doh", format!("https://{doh}/dns-query")),
    ] {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let trusted = free_addr();
        let _ours = ours(
            &run_dir,
            &format!(
                "inbound local-dns dns {{ listen = {trusted} }}\n\
                 outbound direct freedom {{}}\n\
                 dns {{ servers = [{server}]  ca_file = \"{}\" }}\n",
                pki.untrusted.cert.display()
            ),
            &[trusted],
        );
        let out = ask(&kdig, trusted, "a.test", &[]);
        assert!(has_answer(&out, "192.0.2.7"), "{name}:\n{out}");
        // Under the system roots the self-signed certificate is refused.
        let untrusted_dir = run_dir.join("system-roots");
        std::fs::create_dir_all(&untrusted_dir).unwrap();
        let untrusted = free_addr();
        let ours_untrusting = ours(
            &untrusted_dir,
            &format!(
                "inbound local-dns dns {{ listen = {untrusted} }}\n\
                 outbound direct freedom {{}}\n\
                 dns {{ servers = [{server}] }}\n"
            ),
            &[untrusted],
        );
        let out = ask(&kdig, untrusted, "a.test", &[]);
        assert!(out.contains("SERVFAIL"), "{name}:\n{out}");
        ours_untrusting.wait_for_log("certificate verify failed");
    }
}

#[test]
fn a_changed_dns_spec_rebuilds_the_service_and_a_reused_dns_inbound_answers_from_it() {
    let test = "a_changed_dns_spec_rebuilds_the_service";
    let Some(p) = peers(test) else { return };
    let dir = scratch_dir(test);
    let (_first, first) = start_dnsmasq_answering(&p.dnsmasq, &dir, "192.0.2.1");
    let (_second, second) = start_dnsmasq_answering(&p.dnsmasq, &dir, "192.0.2.2");
    let dns_in = free_addr();
    let config = |server: SocketAddr| {
        format!(
            "inbound local-dns dns {{ listen = {dns_in} }}\n\
             outbound direct freedom {{}}\n\
             dns {{ servers = [{server}] }}\n"
        )
    };
    let runtime = ours(&dir, &config(first), &[dns_in]);
    assert!(has_answer(
        &ask(&p.kdig, dns_in, "a.test", &[]),
        "192.0.2.1"
    ));
    let source = dir.join("etemenanki.et");
    std::fs::write(&source, config(second)).unwrap();
    let built = Command::new(crate::support::binaries::ours("etc"))
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(dir.join("plan.bin"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    runtime.signal("HUP");
    runtime.wait_for_log("reload: applied epoch 1");
    let log = runtime.log();
    assert!(log.contains("~ dns  v1 -> v2  DNS changed"), "{log}");
    assert!(
        log.contains("~ outbound direct  v1 -> v2  DNS changed"),
        "{log}"
    );
    assert!(log.contains("= inbound local-dns"), "{log}");
    // Not the first server's cached answer: the new service's.
    let out = ask(&p.kdig, dns_in, "a.test", &[]);
    assert!(has_answer(&out, "192.0.2.2"), "{out}");
}

#[test]
fn through_proxy_dot_and_doh_queries_go_through_the_upstream_proxy() {
    let test = "through_proxy_dot_and_doh_queries_go_through_the_upstream_proxy";
    let (Some(unbound), Some(kdig), Some(openssl)) = (
        peer(test, "unbound"),
        peer(test, "kdig"),
        peer(test, "openssl"),
    ) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let (unbound, dot, doh) =
        start_unbound(&unbound, &dir, &pki.untrusted.cert, &pki.untrusted.key);
    // The upstream proxy: our own socks inbound, dialing from 127.0.0.2.
    let upstream_dir = dir.join("upstream");
    std::fs::create_dir_all(&upstream_dir).unwrap();
    let upstream = free_addr();
    let _upstream = ours(
        &upstream_dir,
        &format!(
            "inbound socks-in socks {{ listen = {upstream} }}\n\
             outbound direct freedom {{}}\n\
             socket {{ bind_address = [127.0.0.2] }}\n"
        ),
        &[upstream],
    );
    for (name, server) in [
        ("dot", format!("tls://{dot}")),
        ("doh", format!("https://{doh}/dns-query")),
    ] {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let dns_in = free_addr();
        let _ours = ours(
            &run_dir,
            &format!(
                "inbound local-dns dns {{ listen = {dns_in} }}\n\
                 outbound proxy socks {{ server = {upstream} }}\n\
                 dns {{ pre_proxy = [9.9.9.9]  through_proxy = [{server}]  ca_file = \"{}\" }}\n",
                pki.untrusted.cert.display()
            ),
            &[dns_in],
        );
        let out = ask(&kdig, dns_in, &format!("{name}.a.test"), &[]);
        assert!(out.contains("NXDOMAIN"), "{name}:\n{out}");
        unbound.wait_for_log(&format!("127.0.0.2 {name}.a.test. A IN"));
        assert!(
            !unbound.log().contains(&format!("127.0.0.1 {name}.a.test.")),
            "{}",
            unbound.log()
        );
    }
}
