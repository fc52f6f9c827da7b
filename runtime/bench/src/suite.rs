//! The parts of a benchmark run: the columns with their proxies, the memory
//! figure on fresh proxies, one round of rates, and the best of the rounds.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;

use crate::measure::{self, Limits};
use crate::procfs;
use crate::proxy::Proxy;
use crate::report::{Cell, Figure, Table};
use crate::servers::Servers;
use crate::subject::Subject;

/// A subject and its running proxy (`None` for direct, or once the proxy
/// has died); for a chain, the proxy is the front the client speaks to and
/// `server` the TLS socks server behind it. The front drops first.
pub struct Column {
    pub subject: Subject,
    pub proxy: Option<Proxy>,
    pub server: Option<Proxy>,
}

impl Column {
    fn via(&self) -> Option<SocketAddr> {
        self.proxy.as_ref().map(|p| p.addr)
    }

    /// The proxy's pid, then the server's.
    fn pids(&self) -> Vec<u32> {
        self.proxy
            .iter()
            .chain(&self.server)
            .map(Proxy::pid)
            .collect()
    }
}

/// Memory per idle connection, first, before the other runs grow the
/// proxy's heap.
pub fn measure_memory(table: &mut Table, column: &mut Column, servers: &Servers, limits: &Limits) {
    let subject = column.subject;
    if column.server.is_none() {
        table.set(subject, Figure::ServerIdleKib, Cell::NotApplicable);
        table.set(subject, Figure::ServerCpuPerGib, Cell::NotApplicable);
    }
    let Some(proxy) = &column.proxy else {
        table.set(subject, Figure::IdleKib, Cell::NotApplicable);
        table.set(subject, Figure::IdlePssKib, Cell::NotApplicable);
        table.set(subject, Figure::CpuPerGib, Cell::NotApplicable);
        table.set(subject, Figure::LeastCpuPerGib, Cell::NotApplicable);
        table.set(subject, Figure::CpuPerConnect, Cell::NotApplicable);
        table.set(subject, Figure::CpuPerUdp, Cell::NotApplicable);
        table.set(subject, Figure::IdleUdpKib, Cell::NotApplicable);
        return;
    };
    let pids = column.pids();
    let (rss, pss, server) = match measure::idle::run(
        proxy.addr,
        &pids,
        servers,
        subject.target(servers.idle),
        limits.idle_connections,
        subject.is_protocol_chain(),
    ) {
        Ok(idle) => {
            for (which, idle) in ["", " server"].iter().zip(&idle) {
                eprintln!(
                    "   {}{which}: VmRSS {} -> {} KiB, PSS {} -> {} KiB with {} idle connections",
                    subject.name(),
                    idle.before.rss,
                    idle.after.rss,
                    idle.before.pss,
                    idle.after.pss,
                    idle.connections
                );
            }
            (
                Cell::Value(idle[0].rss_per_connection()),
                Cell::Value(idle[0].pss_per_connection()),
                idle.get(1).map(|s| Cell::Value(s.rss_per_connection())),
            )
        }
        Err(e) => {
            let failed = Cell::Failed(e.to_string());
            let server = column.server.as_ref().map(|_| failed.clone());
            (failed.clone(), failed, server)
        }
    };
    report(subject, Figure::IdleKib, &rss);
    table.set(subject, Figure::IdleKib, rss);
    // A SOCKS5 association at the proxy itself: a chain's front speaks
    // SOCKS5 but carries UDP on only some protocols.
    let udp = if subject.is_protocol_chain() {
        Cell::NotApplicable
    } else {
        match measure::idle::run_udp(
            proxy.addr,
            &pids[..1],
            servers.udp_echo,
            limits.idle_connections,
        ) {
            Ok(idle) => Cell::Value(idle[0].rss_per_connection()),
            Err(e) => Cell::Failed(e.to_string()),
        }
    };
    report(subject, Figure::IdleUdpKib, &udp);
    table.set(subject, Figure::IdleUdpKib, udp);
    table.set(subject, Figure::IdlePssKib, pss);
    if let Some(server) = server {
        report(subject, Figure::ServerIdleKib, &server);
        table.set(subject, Figure::ServerIdleKib, server);
    }
}

/// One run of every rate for one subject.
pub fn measure_round(
    best: &mut Best,
    column: &mut Column,
    servers: &Servers,
    limits: &Limits,
    ticks: u64,
) {
    let subject = column.subject;
    if subject != Subject::Direct && column.proxy.is_none() {
        return;
    }
    let via = column.via();
    // The proxy's (a chain's front's) CPU, which other load on the machine
    // moves far less than it moves a rate.
    let front = column.proxy.as_ref().map(Proxy::pid);
    let cpu = || front.and_then(|pid| procfs::cpu_sample(pid).ok());
    let cpu_before = cpu();
    let sequential = measure::connects::sequential(
        via,
        subject.target(servers.echo),
        limits.sequential_connects,
        limits.connect_time,
    );
    if let (Ok(rate), Some(before), Some(after)) = (&sequential, cpu_before, cpu()) {
        let used = after.seconds_since(&before, ticks);
        best.keep_least(subject, Figure::CpuPerConnect, rate.count, used);
    }
    best.keep(
        subject,
        Figure::Sequential,
        sequential.map(|r| r.per_second()),
    );
    let concurrent = measure::connects::concurrent(
        via,
        subject.target(servers.echo),
        limits.concurrency,
        limits.concurrent_connects,
        limits.connect_time,
    );
    best.keep(
        subject,
        Figure::Concurrent,
        concurrent.map(|r| r.per_second()),
    );
    let sink = subject.target(servers.sink);
    match measure::bulk::run(via, sink, &column.pids(), ticks, limits) {
        Ok(bulk) => best.keep_bulk(subject, bulk.mb_per_second(), &bulk.cpu_per_gib()),
        Err(e) => best.keep(subject, Figure::Bulk, Err(e)),
    }
    // The protocol and full chains are compared on TCP alone, but for
    // Hysteria 2.
    let measures_udp = subject.protocol().is_some_and(|(p, _)| p.measures_udp());
    if subject.is_protocol_chain() && !measures_udp {
        best.not_applicable(subject, Figure::Udp);
        best.not_applicable(subject, Figure::CpuPerUdp);
        check_alive(column);
        return;
    }
    let cpu_before = cpu();
    let udp = measure::udp::run(
        via,
        servers.udp_echo,
        limits.udp_round_trips,
        limits.udp_time,
    );
    if let (Ok(udp), Some(before), Some(after)) = (&udp, cpu_before, cpu()) {
        let used = after.seconds_since(&before, ticks);
        best.keep_least(subject, Figure::CpuPerUdp, udp.rate.count, used);
    }
    best.keep(
        subject,
        Figure::Udp,
        udp.map(|udp| {
            if udp.lost > 0 {
                eprintln!("   {}: {} datagrams lost", subject.name(), udp.lost);
            }
            udp.rate.per_second()
        }),
    );
    check_alive(column);
}

/// Drops a column's processes, to measure it no more, when either has died.
fn check_alive(column: &mut Column) {
    let alive = |proxy: &mut Proxy| match proxy.check_alive() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("   {e}");
            false
        }
    };
    // A chain with either end dead is measured no more.
    let front = column.proxy.as_mut().is_none_or(alive);
    let server = column.server.as_mut().is_none_or(alive);
    if !(front && server) {
        column.proxy = None;
        column.server = None;
    }
}

/// The best of the rounds for every subject and rate: the highest value,
/// and for bulk the CPU per GiB of that same run. The first failure of a
/// figure stands.
#[derive(Default)]
pub struct Best {
    cells: HashMap<(Subject, Figure), Cell>,
}

impl Best {
    fn not_applicable(&mut self, subject: Subject, figure: Figure) {
        self.cells.insert((subject, figure), Cell::NotApplicable);
    }

    fn keep(&mut self, subject: Subject, figure: Figure, result: io::Result<f64>) {
        let cell = match result {
            Ok(value) => Cell::Value(value),
            Err(e) => Cell::Failed(e.to_string()),
        };
        report(subject, figure, &cell);
        match (self.cells.get(&(subject, figure)), &cell) {
            (Some(Cell::Failed(_)), _) => {}
            (Some(Cell::Value(old)), Cell::Value(new)) if old >= new => {}
            _ => {
                self.cells.insert((subject, figure), cell);
            }
        }
    }

    /// Keeps the least CPU per operation (µs) over the rounds: other load
    /// only ever adds to it.
    fn keep_least(&mut self, subject: Subject, figure: Figure, count: u64, cpu_seconds: f64) {
        if count == 0 {
            return;
        }
        let micros = cpu_seconds * 1e6 / count as f64;
        report(subject, figure, &Cell::Value(micros));
        match self.cells.get(&(subject, figure)) {
            Some(Cell::Value(old)) if *old <= micros => {}
            _ => {
                self.cells.insert((subject, figure), Cell::Value(micros));
            }
        }
    }

    /// Keeps a bulk rate and, when it is the best so far, the CPU per GiB
    /// of the same run: the proxy's (a chain's front), then a chain's
    /// server's.
    fn keep_bulk(&mut self, subject: Subject, mb_per_second: f64, cpu_per_gib: &[f64]) {
        let better = match self.cells.get(&(subject, Figure::Bulk)) {
            Some(Cell::Value(old)) => mb_per_second > *old,
            Some(_) => false,
            None => true,
        };
        self.keep(subject, Figure::Bulk, Ok(mb_per_second));
        if let Some(&cpu) = cpu_per_gib.first() {
            match self.cells.get(&(subject, Figure::LeastCpuPerGib)) {
                Some(Cell::Value(old)) if *old <= cpu => {}
                _ => {
                    self.cells
                        .insert((subject, Figure::LeastCpuPerGib), Cell::Value(cpu));
                }
            }
        }
        if !better {
            return;
        }
        for (figure, &cpu) in [Figure::CpuPerGib, Figure::ServerCpuPerGib]
            .iter()
            .zip(cpu_per_gib)
        {
            report(subject, *figure, &Cell::Value(cpu));
            self.cells.insert((subject, *figure), Cell::Value(cpu));
        }
    }

    pub fn fill(self, table: &mut Table) {
        for ((subject, figure), cell) in self.cells {
            // A failed bulk run leaves no CPU figure of its own.
            if figure == Figure::Bulk {
                if let Cell::Failed(why) = &cell {
                    table.set(subject, Figure::CpuPerGib, Cell::Failed(why.clone()));
                    table.set(subject, Figure::LeastCpuPerGib, Cell::Failed(why.clone()));
                    if subject.is_chain() {
                        table.set(subject, Figure::ServerCpuPerGib, Cell::Failed(why.clone()));
                    }
                }
            }
            table.set(subject, figure, cell);
        }
    }
}

pub fn report(subject: Subject, figure: Figure, cell: &Cell) {
    let name = subject.name();
    match cell {
        Cell::Value(v) => eprintln!("   {name}: {}: {v:.2}", figure.label()),
        Cell::NotApplicable => {}
        Cell::Skipped(why) => eprintln!("   {name}: {}: skipped: {why}", figure.label()),
        Cell::Failed(why) => eprintln!("   {name}: {}: failed: {why}", figure.label()),
    }
}
