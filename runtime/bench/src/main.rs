//! etemenanki-bench: measures a SOCKS5 proxy on loopback against the same
//! work done directly. `run.sh` beside this crate starts each proxy and
//! calls this tool; see it for how the figures are produced.
//!
//! ```text
//! etemenanki-bench plan SOCKS_PORT OUT [N GEN]  write a plan.bin: socks inbound (UDP on), freedom
//!                                              outbound; with N, N more freedom outbounds each with a
//!                                              route rule, whose address family GEN 0 or 1 flips
//! etemenanki-bench measure LABEL PROXY|direct [PID]
//! ```
//!
//! `measure` prints one line of `key=value` figures: bulk MiB/s and CPU
//! seconds per GiB (of PID, from /proc), sequential and 50-concurrent
//! connects per second, KiB of resident memory per idle proxied connection,
//! and UDP round trips per second.

mod clients;
mod procfs;
mod servers;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use etemenanki_ir::route::RouteTable;
use etemenanki_ir::spec::*;

const BULK_BYTES: u64 = 2 << 30;
const SEQUENTIAL_CONNECTS: u32 = 3_000;
const CONCURRENT_CLIENTS: u32 = 50;
const CONNECTS_PER_CLIENT: u32 = 200;
const IDLE_CONNECTIONS: usize = 1_000;
const UDP_ROUND_TRIPS: u32 = 20_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["plan", port, out] => write_plan(port, out, 0, 0),
        ["plan", port, out, n, generation] => match (n.parse(), generation.parse()) {
            (Ok(n), Ok(generation)) => write_plan(port, out, n, generation),
            _ => {
                eprintln!("etemenanki-bench: N and GEN are numbers");
                ExitCode::from(2)
            }
        },
        ["measure", label, proxy] => measure(label, proxy, None),
        ["measure", label, proxy, pid] => measure(label, proxy, pid.parse().ok()),
        _ => {
            eprintln!(
                "usage: etemenanki-bench plan SOCKS_PORT OUT | measure LABEL PROXY|direct [PID]"
            );
            ExitCode::from(2)
        }
    }
}

/// A plan with one socks inbound and a freedom default, plus `extra`
/// freedom outbounds, each reached by a domain rule. Flipping `generation`
/// changes every extra outbound, so a reload between the two rebuilds them
/// all.
fn write_plan(port: &str, out: &str, extra: usize, generation: u8) -> ExitCode {
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("etemenanki-bench: {port} is not a port");
        return ExitCode::from(2);
    };
    let family = if generation == 0 {
        AddressFamily::Auto
    } else {
        AddressFamily::PreferIpv4
    };
    let mut extra_outbounds = Vec::new();
    let mut rules = Vec::new();
    for i in 0..extra {
        let tag = format!("o{i}");
        extra_outbounds.push(OutboundSpec {
            tag: tag.clone(),
            protocol: OutboundProtocol::Freedom {
                address_family: family,
            },
            drain: DrainPolicy::Keep,
        });
        rules.push(etemenanki_ir::route::Rule {
            target: tag.clone(),
            line: i as u32 + 1,
            domain: vec![format!("{tag}.example")],
            ..Default::default()
        });
    }
    let spec = Spec {
        inbounds: vec![InboundSpec {
            tag: "socks".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            sniff: false,
            protocol: InboundProtocol::Socks {
                accounts: vec![],
                udp: true,
            },
        }],
        outbounds: vec![OutboundSpec {
            tag: "direct".into(),
            protocol: OutboundProtocol::Freedom {
                address_family: AddressFamily::Auto,
            },
            drain: DrainPolicy::Keep,
        }]
        .into_iter()
        .chain(extra_outbounds)
        .collect(),
        balancers: vec![],
        route: RouteTable::new(rules, "direct".into()).expect("a valid route table"),
        dns: DnsSpec::System,
        socket: SocketPolicy::default(),
        limits: Limits::default(),
    };
    match std::fs::write(out, etemenanki_ir::encode::encode(&spec, b"bench", "bench")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("etemenanki-bench: cannot write {out}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn measure(label: &str, proxy: &str, pid: Option<u32>) -> ExitCode {
    let proxy: Option<SocketAddr> = match proxy {
        "direct" => None,
        addr => match addr.parse() {
            Ok(addr) => Some(addr),
            Err(_) => {
                eprintln!("etemenanki-bench: {addr} is not a socket address");
                return ExitCode::from(2);
            }
        },
    };
    let sink = servers::tcp_sink();
    let echo = servers::tcp_echo();
    let udp_echo = servers::udp_echo();
    let dialer = clients::Dialer { proxy };

    let cpu_before = pid.and_then(procfs::cpu_seconds);
    let started = Instant::now();
    let sent = dialer.bulk(sink, BULK_BYTES);
    let bulk_secs = started.elapsed().as_secs_f64();
    let cpu_per_gib = match (pid.and_then(procfs::cpu_seconds), cpu_before) {
        (Some(after), Some(before)) => format!(
            "{:.2}",
            (after - before) / (sent as f64 / f64::from(1u32 << 30))
        ),
        _ => "-".into(),
    };

    let started = Instant::now();
    for _ in 0..SEQUENTIAL_CONNECTS {
        dialer.ping(echo);
    }
    let sequential = f64::from(SEQUENTIAL_CONNECTS) / started.elapsed().as_secs_f64();

    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..CONCURRENT_CLIENTS {
            scope.spawn(|| {
                for _ in 0..CONNECTS_PER_CLIENT {
                    dialer.ping(echo);
                }
            });
        }
    });
    let concurrent =
        f64::from(CONCURRENT_CLIENTS * CONNECTS_PER_CLIENT) / started.elapsed().as_secs_f64();

    let idle_kib = match pid {
        Some(pid) => {
            let before = procfs::rss_kib(pid).unwrap_or(0);
            let held: Vec<_> = (0..IDLE_CONNECTIONS).map(|_| dialer.hold(echo)).collect();
            std::thread::sleep(Duration::from_millis(500));
            let after = procfs::rss_kib(pid).unwrap_or(0);
            drop(held);
            format!(
                "{:.1}",
                (after.saturating_sub(before)) as f64 / IDLE_CONNECTIONS as f64
            )
        }
        None => "-".into(),
    };

    let udp = match dialer.udp_round_trips(udp_echo, UDP_ROUND_TRIPS) {
        Some(elapsed) => format!("{:.0}", f64::from(UDP_ROUND_TRIPS) / elapsed.as_secs_f64()),
        None => "-".into(),
    };

    println!(
        "{label:<14} bulk_mib_s={:.0} cpu_s_per_gib={cpu_per_gib} seq_connects_s={sequential:.0} conc50_connects_s={concurrent:.0} idle_kib_per_conn={idle_kib} udp_rtt_s={udp}",
        sent as f64 / f64::from(1u32 << 20) / bulk_secs
    );
    ExitCode::SUCCESS
}
