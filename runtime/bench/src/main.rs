//! etemenanki-bench: the same loopback work done directly, through Debian's
//! SOCKS peers (microsocks, dante, v2ray), through Etemenanki, and through
//! chains that speak SOCKS over TLS between two proxies (Etemenanki to
//! Etemenanki, v2ray to v2ray), printed as one table with every figure also
//! as a ratio to direct. See README.md.

mod chain;
mod dns;
mod full;
mod interrupt;
mod measure;
mod peers;
mod pki;
mod procfs;
mod protocol;
mod proxy;
mod report;
mod servers;
mod socks5;
mod subject;
mod suite;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use measure::reload::Reload;
use measure::Limits;
use peers::{Binaries, Launch};
use report::{Cell, Figure, Table};
use servers::Servers;
use subject::Subject;
use suite::{measure_memory, measure_round, report, Best, Column};

#[derive(Debug, Parser)]
#[command(
    about = "Loopback benchmark: direct, microsocks, dante, v2ray, Etemenanki, SOCKS over TLS chains, and shadowsocks and trojan clients"
)]
struct Args {
    /// Which columns to measure, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Subject::ALL)]
    subjects: Vec<Subject>,
    /// The directory holding `etc` and `etemenanki-run` [default: this
    /// binary's directory].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Another build's directory holding `etc` and `etemenanki-run`,
    /// measured as the `etemenanki-alt` column beside `etemenanki` in the
    /// same rounds (name it in --subjects).
    #[arg(long)]
    alt_bin_dir: Option<PathBuf>,
    /// Measure direct and every protocol chain (shadowsocks AEAD,
    /// shadowsocks 2022 and trojan, each through our client and through
    /// the peers' own clients to the same real server) instead of
    /// --subjects.
    #[arg(long)]
    protocol_chains: bool,
    /// Measure direct and every full chain (one program at both ends:
    /// ours, shadowsocks-rust, v2ray, trojan-gfw, sing-box; shadowsocks
    /// AEAD, shadowsocks 2022, vmess over tcp, vless over ws, trojan over
    /// tls) instead of --subjects; with --protocol-chains, both.
    #[arg(long)]
    full_chains: bool,
    /// Bulk transfer size, MiB.
    #[arg(long, default_value_t = 1024)]
    bulk_mib: u64,
    /// Bulk transfer time bound, seconds.
    #[arg(long, default_value_t = 10.0)]
    bulk_seconds: f64,
    /// Sequential connections at most.
    #[arg(long, default_value_t = 5_000)]
    sequential_connects: u64,
    /// Concurrent connections at most (over all workers).
    #[arg(long, default_value_t = 20_000)]
    concurrent_connects: u64,
    /// Concurrent workers.
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    /// Time bound of each connection-rate run, seconds.
    #[arg(long, default_value_t = 3.0)]
    connect_seconds: f64,
    /// Rounds of the throughput and rate measurements, each round over every
    /// subject in turn; the best is kept, since on a shared machine other
    /// load only ever slows a run down, and rounds spread each subject's
    /// runs over the whole benchmark.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Idle proxied connections held for the memory figure.
    #[arg(long, default_value_t = 1_000)]
    idle_connections: usize,
    /// UDP round trips at most.
    #[arg(long, default_value_t = 50_000)]
    udp_round_trips: u64,
    /// UDP time bound, seconds.
    #[arg(long, default_value_t = 3.0)]
    udp_seconds: f64,
    /// Outbounds (and rules) in the reload measurement.
    #[arg(long, default_value_t = 1_000)]
    reload_outbounds: usize,
    /// Measure the DNS service (queries/s, p50/p99, cached and uncached)
    /// beside dnsmasq instead of --subjects.
    #[arg(long)]
    dns: bool,
    /// Client threads of the DNS measurement.
    #[arg(long, default_value_t = 8)]
    dns_workers: usize,
    /// Queries per DNS measurement at most.
    #[arg(long, default_value_t = 200_000)]
    dns_queries: u64,
    /// Time bound of each DNS measurement, seconds.
    #[arg(long, default_value_t = 3.0)]
    dns_seconds: f64,
    /// Text of the runtime's log line that marks a finished apply.
    #[arg(long, default_value = "reload: applied")]
    reload_done: String,
}

impl Args {
    fn limits(&self) -> Limits {
        Limits {
            bulk_bytes: self.bulk_mib << 20,
            bulk_time: Duration::from_secs_f64(self.bulk_seconds),
            sequential_connects: self.sequential_connects,
            concurrent_connects: self.concurrent_connects,
            concurrency: self.concurrency,
            connect_time: Duration::from_secs_f64(self.connect_seconds),
            idle_connections: self.idle_connections,
            udp_round_trips: self.udp_round_trips,
            udp_time: Duration::from_secs_f64(self.udp_seconds),
            reload_outbounds: self.reload_outbounds,
        }
    }

    fn binaries(&self) -> io::Result<Binaries> {
        let etemenanki_dir = match &self.bin_dir {
            Some(dir) => dir.clone(),
            None => std::env::current_exe()?
                .parent()
                .map(PathBuf::from)
                .unwrap_or_default(),
        };
        Ok(Binaries {
            etemenanki_dir,
            alt_dir: self.alt_bin_dir.clone(),
        })
    }

    fn subjects(&self) -> Vec<Subject> {
        if !self.protocol_chains && !self.full_chains {
            return self.subjects.clone();
        }
        let protocol = self.protocol_chains.then_some(Subject::PROTOCOL_CHAINS);
        let full = self.full_chains.then_some(Subject::FULL_CHAINS);
        std::iter::once(Subject::Direct)
            .chain(protocol.into_iter().flatten())
            .chain(full.into_iter().flatten())
            .collect()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let load_before = load_average();
    if args.dns {
        let limits = dns::Limits {
            workers: args.dns_workers.max(1),
            queries: args.dns_queries,
            time: Duration::from_secs_f64(args.dns_seconds),
        };
        let measured = interrupt::install()
            .and_then(|()| args.binaries())
            .and_then(|bins| dns::run(&bins, &limits, args.runs));
        if let Err(e) = measured {
            eprintln!("etemenanki-bench: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "load average {load_before} at the start, {} at the end",
            load_average()
        );
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(table) => {
            print!("{}", table.render());
            let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
            println!(
                "load average {load_before} at the start, {} at the end, on {cores} cores",
                load_average()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("etemenanki-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The 1, 5 and 15 minute load averages: other work on the machine moves
/// every figure, so the table says how busy it was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn run(args: &Args) -> io::Result<Table> {
    interrupt::install()?;
    let servers = Servers::start()?;
    let bins = args.binaries()?;
    let limits = args.limits();
    let ticks = procfs::ticks_per_second();
    let subjects = args.subjects();
    let mut table = Table::new(subjects.clone());
    let mut columns = Vec::new();
    for &subject in &subjects {
        if subject == Subject::Direct {
            columns.push(Column {
                subject,
                proxy: None,
                server: None,
            });
            continue;
        }
        match peers::launch(subject, &bins, servers.echo) {
            Ok(Launch::Ready(proxy)) => columns.push(Column {
                subject,
                proxy: Some(proxy),
                server: None,
            }),
            Ok(Launch::Chain { front, server }) => columns.push(Column {
                subject,
                proxy: Some(front),
                server: Some(server),
            }),
            Ok(Launch::Skipped(why)) => {
                eprintln!("{}: skipped: {why}", subject.name());
                for figure in Figure::ALL {
                    table.set(subject, figure, Cell::Skipped(why.clone()));
                }
            }
            Err(e) => {
                eprintln!("{}: {e}", subject.name());
                for figure in Figure::ALL {
                    table.set(subject, figure, Cell::Failed(e.to_string()));
                }
            }
        }
    }
    eprintln!("== memory, on fresh proxies");
    for column in &mut columns {
        measure_memory(&mut table, column, &servers, &limits);
    }
    let mut best = Best::default();
    for round in 1..=args.runs {
        eprintln!("== round {round} of {}", args.runs);
        for column in &mut columns {
            measure_round(&mut best, column, &servers, &limits, ticks);
        }
    }
    best.fill(&mut table);
    // Every peer stops before the reload, which starts a runtime of its own.
    drop(columns);
    for &subject in &subjects {
        if subject != Subject::Etemenanki {
            table.set(subject, Figure::Reload, Cell::NotApplicable);
            continue;
        }
        if matches!(
            table.get(subject, Figure::Bulk),
            Some(Cell::Skipped(_) | Cell::Failed(_))
        ) {
            continue;
        }
        eprintln!("== reload");
        let cell = match measure::reload::run(&bins, limits.reload_outbounds, &args.reload_done) {
            Ok(Reload::Took(took)) => Cell::Value(took.as_secs_f64() * 1e3),
            Ok(Reload::Skipped(why)) => Cell::Skipped(why),
            Err(e) => Cell::Failed(e.to_string()),
        };
        report(subject, Figure::Reload, &cell);
        table.set(subject, Figure::Reload, cell);
    }
    Ok(table)
}
