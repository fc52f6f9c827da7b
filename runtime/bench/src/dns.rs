//! The DNS service on loopback (`--dns`): queries per second and latency
//! percentiles of our DNS inbound for a cached name and for names it has
//! never seen (each a query upstream), beside dnsmasq answering the same
//! names directly, in one run. dnsmasq serves `*.bench.test` from its
//! configuration (`address=`, TTL 300 s), and is our upstream too.
//!
//! Each measurement runs `workers` client threads, each with its own UDP
//! socket sending one query at a time, for a bounded time and count; the
//! latency of every answer is kept. A query unanswered within a second
//! counts as lost.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::peers::{build_plan, Binaries};
use crate::proxy::{free_port, Proxy, Ready, ScratchDir};

const WAIT: Duration = Duration::from_secs(1);

pub struct Limits {
    pub workers: usize,
    pub queries: u64,
    pub time: Duration,
}

/// The names a run asks for: one name again and again, or a new one every
/// time (distinct per run, so a second run misses the cache too).
#[derive(Clone, Copy)]
enum Names {
    Same,
    Fresh { run: u32 },
}

struct Figures {
    qps: f64,
    p50: Duration,
    p99: Duration,
    lost: u64,
}

/// A query for `name` A with `id`, recursion desired: the RFC 1035 4.1
/// layout, written out so the bench needs no DNS library.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// One client thread: queries until the count or the time is up.
fn worker(
    server: SocketAddr,
    names: Names,
    worker: usize,
    queries: u64,
    until: Instant,
) -> io::Result<(Vec<Duration>, u64)> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.connect(server)?;
    socket.set_read_timeout(Some(WAIT))?;
    let mut latencies = Vec::new();
    let mut lost = 0;
    let mut buf = [0u8; 1500];
    for i in 0..queries {
        if Instant::now() >= until {
            break;
        }
        let name = match names {
            Names::Same => "cached.bench.test".to_owned(),
            Names::Fresh { run } => format!("r{run}w{worker}n{i}.bench.test"),
        };
        let id = (i as u16) ^ ((worker as u16) << 12);
        let q = query(id, &name);
        let sent = Instant::now();
        socket.send(&q)?;
        loop {
            match socket.recv(&mut buf) {
                Ok(n) if n >= 12 && buf[..2] == id.to_be_bytes() => {
                    if buf[3] & 0x0f != 0 {
                        return Err(io::Error::other(format!(
                            "{name}: answered with rcode {}",
                            buf[3] & 0x0f
                        )));
                    }
                    latencies.push(sent.elapsed());
                    break;
                }
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    lost += 1;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok((latencies, lost))
}

fn measure(server: SocketAddr, names: Names, limits: &Limits) -> io::Result<Figures> {
    let start = Instant::now();
    let until = start + limits.time;
    let per_worker = limits.queries / limits.workers as u64;
    let threads: Vec<_> = (0..limits.workers)
        .map(|w| std::thread::spawn(move || worker(server, names, w, per_worker, until)))
        .collect();
    let mut all = Vec::new();
    let mut lost = 0;
    for thread in threads {
        let (latencies, l) = thread
            .join()
            .map_err(|_| io::Error::other("a client thread panicked"))??;
        all.extend(latencies);
        lost += l;
    }
    let elapsed = start.elapsed();
    if all.is_empty() {
        return Err(io::Error::other("no query was answered"));
    }
    all.sort();
    let at = |p: f64| all[((all.len() - 1) as f64 * p) as usize];
    Ok(Figures {
        qps: all.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        lost,
    })
}

fn dnsmasq(dir: &ScratchDir) -> io::Result<Proxy> {
    let binary = crate::protocol::find("dnsmasq")
        .or_else(|| crate::protocol::find("/usr/sbin/dnsmasq"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "dnsmasq is not installed"))?;
    let port = free_port()?;
    let config = dir.path().join("dnsmasq.conf");
    std::fs::write(
        &config,
        format!(
            "no-resolv\nno-hosts\nkeep-in-foreground\nbind-interfaces\nlisten-address=127.0.0.1\n\
             port={port}\naddress=/bench.test/192.0.2.1\nlocal-ttl=300\nlog-facility=-\n\
             pid-file={}\n",
            dir.path().join("dnsmasq.pid").display()
        ),
    )?;
    let mut command = Command::new(binary);
    command.arg(format!("--conf-file={}", config.display()));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    Proxy::spawn_until(
        "dnsmasq",
        command,
        addr,
        ScratchDir::new("dnsmasq-run")?,
        Ready::Accepts,
    )
}

fn ours(bins: &Binaries, upstream: SocketAddr) -> io::Result<Proxy> {
    let dir = ScratchDir::new("etemenanki-dns")?;
    let port = free_port()?;
    let config = format!(
        "[[inbound]]\ntag = \"dns-in\"\nprotocol = \"dns\"\nlisten = \"127.0.0.1\"\nport = {port}\n\n\
         [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n\
         [dns]\nservers = [\"{upstream}\"]\n"
    );
    let plan = dir.path().join("plan.bin");
    build_plan(bins, dir.path(), &config, &plan)?;
    let mut command = Command::new(bins.runtime());
    command.arg(&plan).env("RUST_LOG", "warn");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    Proxy::spawn_until("etemenanki", command, addr, dir, Ready::Accepts)
}

/// Runs the DNS benchmark and prints its table.
pub fn run(bins: &Binaries, limits: &Limits, runs: u32) -> io::Result<()> {
    let dir = ScratchDir::new("dnsmasq")?;
    let dnsmasq = dnsmasq(&dir)?;
    let ours = ours(bins, dnsmasq.addr)?;
    let rows: [(&str, SocketAddr, bool); 4] = [
        ("dnsmasq, one name", dnsmasq.addr, false),
        ("dnsmasq, new names", dnsmasq.addr, true),
        ("etemenanki, cached", ours.addr, false),
        ("etemenanki, uncached", ours.addr, true),
    ];
    // Warm the one name into our cache.
    measure(
        ours.addr,
        Names::Same,
        &Limits {
            workers: 1,
            queries: 1,
            time: WAIT,
        },
    )?;
    // The best of `runs` for each row, the rows interleaved per round.
    let mut best: Vec<Option<Figures>> = rows.iter().map(|_| None).collect();
    for round in 1..=runs {
        eprintln!("== dns round {round} of {runs}");
        for (i, (name, server, fresh)) in rows.iter().enumerate() {
            let names = match fresh {
                true => Names::Fresh { run: round },
                false => Names::Same,
            };
            let figures = measure(*server, names, limits)?;
            eprintln!(
                "{name}: {:.0} q/s, p50 {:?}, p99 {:?}",
                figures.qps, figures.p50, figures.p99
            );
            if best[i].as_ref().is_none_or(|b| figures.qps > b.qps) {
                best[i] = Some(figures);
            }
        }
    }
    println!(
        "DNS over UDP on loopback, {} clients, one query in flight each, best of {runs}",
        limits.workers
    );
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>6}",
        "", "queries/s", "p50 µs", "p99 µs", "lost"
    );
    for ((name, _, _), figures) in rows.iter().zip(best) {
        if let Some(f) = figures {
            println!(
                "{name:<24} {:>10.0} {:>10.0} {:>10.0} {:>6}",
                f.qps,
                f.p50.as_secs_f64() * 1e6,
                f.p99.as_secs_f64() * 1e6,
                f.lost
            );
        }
    }
    drop(ours);
    drop(dnsmasq);
    Ok(())
}
