//! The result table: one row per figure, one column per subject, each
//! figure also as a ratio to the direct baseline where that means something,
//! and Etemenanki's figures checked against its targets.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::full::{Chain, Side};
use crate::protocol::{Client, Protocol};
use crate::subject::Subject;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Figure {
    Bulk,
    CpuPerGib,
    /// The least proxy CPU per GiB over the rounds' bulk runs.
    LeastCpuPerGib,
    /// A chain's second proxy, the TLS socks server.
    ServerCpuPerGib,
    Sequential,
    /// The proxy's CPU per connection of the sequential run, µs.
    CpuPerConnect,
    Concurrent,
    IdleKib,
    IdlePssKib,
    ServerIdleKib,
    /// Memory per idle SOCKS5 UDP association, after one round trip.
    IdleUdpKib,
    Udp,
    /// The proxy's CPU per UDP round trip, µs.
    CpuPerUdp,
    Reload,
}

/// A goal for Etemenanki: a ratio to direct at least this, or a value at
/// most this.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    RatioAtLeast(f64),
    ValueAtMost(f64),
}

impl Figure {
    pub const ALL: [Figure; 14] = [
        Figure::Bulk,
        Figure::CpuPerGib,
        Figure::LeastCpuPerGib,
        Figure::ServerCpuPerGib,
        Figure::Sequential,
        Figure::CpuPerConnect,
        Figure::Concurrent,
        Figure::IdleKib,
        Figure::IdlePssKib,
        Figure::ServerIdleKib,
        Figure::IdleUdpKib,
        Figure::Udp,
        Figure::CpuPerUdp,
        Figure::Reload,
    ];

    /// The figures of a chain's server, which no single proxy has.
    pub fn is_server(self) -> bool {
        matches!(self, Figure::ServerCpuPerGib | Figure::ServerIdleKib)
    }

    pub fn label(self) -> &'static str {
        match self {
            Figure::Bulk => "bulk TCP, MB/s",
            Figure::CpuPerGib => "proxy CPU s per GiB",
            Figure::LeastCpuPerGib => "proxy CPU s per GiB, least",
            Figure::ServerCpuPerGib => "server CPU s per GiB",
            Figure::Sequential => "sequential connects/s",
            Figure::CpuPerConnect => "proxy CPU us per connect",
            Figure::Concurrent => "concurrent connects/s",
            Figure::IdleKib => "idle KiB/conn, VmRSS",
            Figure::IdlePssKib => "idle KiB/conn, PSS",
            Figure::ServerIdleKib => "server idle KiB/conn, VmRSS",
            Figure::IdleUdpKib => "idle KiB/UDP association, VmRSS",
            Figure::Udp => "UDP round trips/s",
            Figure::CpuPerUdp => "proxy CPU us per UDP round trip",
            Figure::Reload => "reload time, ms",
        }
    }

    /// Whether the figure has a direct baseline to divide by: work done
    /// per second does; what only a proxy spends (CPU, memory, reload)
    /// does not.
    fn has_ratio(self) -> bool {
        matches!(
            self,
            Figure::Bulk | Figure::Sequential | Figure::Concurrent | Figure::Udp
        )
    }

    fn decimals(self) -> usize {
        match self {
            Figure::CpuPerGib | Figure::LeastCpuPerGib | Figure::ServerCpuPerGib => 2,
            Figure::IdleKib
            | Figure::IdlePssKib
            | Figure::ServerIdleKib
            | Figure::IdleUdpKib
            | Figure::Reload => 1,
            _ => 0,
        }
    }

    pub fn target(self) -> Option<Target> {
        match self {
            Figure::Bulk => Some(Target::RatioAtLeast(0.6)),
            Figure::Sequential => Some(Target::RatioAtLeast(0.3)),
            Figure::Udp => Some(Target::RatioAtLeast(0.15)),
            Figure::IdleKib => Some(Target::ValueAtMost(10.0)),
            Figure::IdleUdpKib => Some(Target::ValueAtMost(8.0)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Cell {
    Value(f64),
    /// The figure has no meaning for this subject (direct has no proxy).
    NotApplicable,
    Skipped(String),
    Failed(String),
}

pub struct Table {
    subjects: Vec<Subject>,
    cells: HashMap<(Subject, Figure), Cell>,
}

impl Table {
    pub fn new(subjects: Vec<Subject>) -> Table {
        Table {
            subjects,
            cells: HashMap::new(),
        }
    }

    pub fn set(&mut self, subject: Subject, figure: Figure, cell: Cell) {
        self.cells.insert((subject, figure), cell);
    }

    pub fn get(&self, subject: Subject, figure: Figure) -> Option<&Cell> {
        self.cells.get(&(subject, figure))
    }

    fn value(&self, subject: Subject, figure: Figure) -> Option<f64> {
        match self.cells.get(&(subject, figure)) {
            Some(Cell::Value(v)) => Some(*v),
            _ => None,
        }
    }

    fn ratio(&self, subject: Subject, figure: Figure) -> Option<f64> {
        if !figure.has_ratio() || subject == Subject::Direct {
            return None;
        }
        Some(self.value(subject, figure)? / self.value(Subject::Direct, figure)?)
    }

    fn text(&self, subject: Subject, figure: Figure) -> String {
        match self.cells.get(&(subject, figure)) {
            None => "-".to_owned(),
            Some(Cell::NotApplicable) => "n/a".to_owned(),
            Some(Cell::Skipped(_)) => "skipped".to_owned(),
            Some(Cell::Failed(_)) => "failed".to_owned(),
            Some(Cell::Value(v)) => {
                let mut text = format!("{v:.*}", figure.decimals());
                if let Some(ratio) = self.ratio(subject, figure) {
                    let _ = write!(text, " ({ratio:.2}x)");
                }
                text
            }
        }
    }

    /// The table, then the reasons for every skipped or failed cell, then
    /// Etemenanki against its targets.
    pub fn render(&self) -> String {
        let mut rows = vec![std::iter::once("figure".to_owned())
            .chain(self.subjects.iter().map(|s| s.name().to_owned()))
            .collect::<Vec<_>>()];
        for figure in self.shown() {
            rows.push(
                std::iter::once(figure.label().to_owned())
                    .chain(self.subjects.iter().map(|&s| self.text(s, figure)))
                    .collect(),
            );
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &rows {
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    let _ = write!(out, "{cell:<w$}", w = widths[c]);
                } else {
                    let _ = write!(out, "  {cell:>w$}", w = widths[c]);
                }
            }
            out.push('\n');
        }
        out.push_str("(ratios are to direct; n/a: direct has no proxy, or the figure is Etemenanki's alone)\n");
        if self
            .subjects
            .iter()
            .any(|s| s.is_chain() && s.protocol().is_none())
        {
            out.push_str("(a -tls column is a chain: its proxy rows are the front, its server rows the TLS socks server)\n");
        }
        if self.subjects.iter().any(|s| s.protocol().is_some()) {
            out.push_str("(an ss-, ss2022-, trojan-, vmess-, vless- or wg- column is a protocol chain: its proxy rows are the client's, its server rows the real server's)\n");
        }
        if self.subjects.iter().any(|s| s.full().is_some()) {
            out.push_str("(a full- column is one program at both ends: its proxy rows are the client's, its server rows the server's)\n");
        }
        for &subject in &self.subjects {
            let reasons: Vec<(Figure, &String)> = Figure::ALL
                .into_iter()
                .filter_map(|figure| match self.cells.get(&(subject, figure)) {
                    Some(Cell::Skipped(why) | Cell::Failed(why)) => Some((figure, why)),
                    _ => None,
                })
                .collect();
            // A column skipped or failed as a whole (but for the figures it
            // has no meaning for) says why once.
            let meant = Figure::ALL
                .into_iter()
                .filter(|&figure| {
                    !matches!(
                        self.cells.get(&(subject, figure)),
                        Some(Cell::NotApplicable)
                    )
                })
                .count();
            if !reasons.is_empty()
                && reasons.len() == meant
                && reasons.iter().all(|(_, w)| *w == reasons[0].1)
            {
                let _ = writeln!(out, "{}: {}", subject.name(), reasons[0].1);
                continue;
            }
            for (figure, why) in reasons {
                let _ = writeln!(out, "{} / {}: {why}", subject.name(), figure.label());
            }
        }
        if self.subjects.contains(&Subject::Etemenanki) {
            out.push_str(&self.targets());
        }
        for protocol in Protocol::ALL {
            out.push_str(&self.protocol_section(protocol));
        }
        for chain in Chain::ALL {
            out.push_str(&self.full_section(chain));
        }
        out
    }

    /// `subject`'s name, then each of `values` with its decimals; a figure
    /// it lacks says why its bulk run has none (skipped, failed) or `-`.
    fn value_row(
        &self,
        subject: Subject,
        values: &[Option<f64>],
        decimals: &[usize],
    ) -> Vec<String> {
        let mut row = vec![subject.name().to_owned()];
        for (value, &decimals) in values.iter().zip(decimals) {
            row.push(match value {
                Some(v) => format!("{v:.decimals$}"),
                None => match self.cells.get(&(subject, Figure::Bulk)) {
                    Some(Cell::Skipped(_)) => "skipped".to_owned(),
                    Some(Cell::Failed(_)) => "failed".to_owned(),
                    _ => "-".to_owned(),
                },
            });
        }
        row
    }

    /// One protocol's full chains side by side, the client's and the
    /// server's CPU and memory added (CPU from the fastest bulk run, whose
    /// two figures come from the same bytes), then ours divided by each
    /// peer's, then the goals: ahead of the best peer chain on MiB per
    /// CPU-second and on connects per second, at no more than a quarter of
    /// its idle memory per connection.
    fn full_section(&self, chain: Chain) -> String {
        let chains: Vec<(Subject, Side)> = self
            .subjects
            .iter()
            .filter_map(|&s| match s.full() {
                Some((c, side)) if c == chain => Some((s, side)),
                _ => None,
            })
            .collect();
        if chains.is_empty() {
            return String::new();
        }
        let sum = |subject: Subject, a: Figure, b: Figure| -> Option<f64> {
            Some(self.value(subject, a)? + self.value(subject, b)?)
        };
        let figures = |subject: Subject| -> [Option<f64>; 8] {
            let cpu = sum(subject, Figure::CpuPerGib, Figure::ServerCpuPerGib);
            [
                self.value(subject, Figure::Bulk)
                    .map(|mb| mb * 1e6 / (1u64 << 20) as f64),
                cpu,
                cpu.filter(|c| *c > 0.0).map(|c| 1024.0 / c),
                self.value(subject, Figure::Sequential),
                self.value(subject, Figure::Concurrent),
                sum(subject, Figure::IdleKib, Figure::ServerIdleKib),
                self.value(subject, Figure::IdleKib),
                self.value(subject, Figure::ServerIdleKib),
            ]
        };
        const HEADS: [&str; 8] = [
            "MiB/s",
            "chain CPU s/GiB",
            "MiB/CPU-s",
            "seq conn/s",
            "50-conc conn/s",
            "chain idle KiB",
            "client KiB",
            "server KiB",
        ];
        const DECIMALS: [usize; 8] = [0, 2, 0, 0, 0, 1, 1, 1];
        let mut rows: Vec<Vec<String>> = vec![std::iter::once("chain".to_owned())
            .chain(HEADS.iter().map(|h| (*h).to_owned()))
            .collect()];
        for &(subject, _) in &chains {
            rows.push(self.value_row(subject, &figures(subject), &DECIMALS));
        }
        let ours = chains
            .iter()
            .find(|(_, side)| *side == Side::Etemenanki)
            .map(|(s, _)| *s);
        let peers: Vec<Subject> = chains
            .iter()
            .filter(|(_, side)| *side != Side::Etemenanki)
            .map(|(s, _)| *s)
            .collect();
        if let Some(ours) = ours {
            let mine = figures(ours);
            for &peer in &peers {
                rows.push(ratio_row(peer, &mine, &figures(peer)));
            }
        }
        let mut out = format!("\n{}\n{}", chain.name(), aligned(&rows));
        let Some(ours) = ours else {
            return out;
        };
        let mine = figures(ours);
        // Ahead of the best peer chain on each rate.
        for (index, what) in [
            (2, "MiB per CPU-second"),
            (3, "sequential connects per second"),
            (4, "50-concurrent connects per second"),
        ] {
            let best = peers
                .iter()
                .filter_map(|&p| Some((p, figures(p)[index]?)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let _ = match (best, mine[index]) {
                (Some((peer, theirs)), Some(m)) if theirs > 0.0 => writeln!(
                    out,
                    "  goal: more {what} than the best peer chain ({}, {theirs:.0}): {m:.0}, {:.2}x, {}",
                    peer.name(),
                    m / theirs,
                    if m > theirs { "met" } else { "missed" }
                ),
                _ => writeln!(out, "  goal: {what}: not measured"),
            };
        }
        // A quarter of the idle memory of the best peer chain on MiB per
        // CPU-second.
        let best = peers
            .iter()
            .filter_map(|&p| Some((p, figures(p)[2]?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let _ = match (best.and_then(|(p, _)| Some((p, figures(p)[5]?))), mine[5]) {
            (Some((peer, theirs)), Some(m)) if theirs > 0.0 => writeln!(
                out,
                "  goal: at most a quarter of {}'s idle KiB per connection ({theirs:.1}): {m:.1}, {:.2}x, {}",
                peer.name(),
                m / theirs,
                if m <= theirs / 4.0 { "met" } else { "missed" }
            ),
            _ => writeln!(out, "  goal: idle memory: not measured"),
        };
        out
    }

    /// One protocol's clients side by side, in the units the comparison
    /// is made in, then ours divided by each peer's, then the goals: more
    /// MiB per CPU-second than the best peer, and at most a quarter of its
    /// memory per idle connection.
    fn protocol_section(&self, protocol: Protocol) -> String {
        let clients: Vec<(Subject, Client)> = self
            .subjects
            .iter()
            .filter_map(|&s| match s.protocol() {
                Some((p, client)) if p == protocol => Some((s, client)),
                _ => None,
            })
            .collect();
        if clients.is_empty() {
            return String::new();
        }
        let figures = |subject: Subject| -> [Option<f64>; 7] {
            // The least of the rounds: other load on the machine only ever
            // adds to a process's CPU per byte.
            let cpu = self.value(subject, Figure::LeastCpuPerGib);
            [
                self.value(subject, Figure::Bulk)
                    .map(|mb| mb * 1e6 / (1u64 << 20) as f64),
                cpu,
                cpu.filter(|c| *c > 0.0).map(|c| 1024.0 / c),
                self.value(subject, Figure::Sequential),
                self.value(subject, Figure::Concurrent),
                self.value(subject, Figure::IdleKib),
                self.value(subject, Figure::IdlePssKib),
            ]
        };
        const HEADS: [&str; 7] = [
            "MiB/s",
            "CPU s/GiB",
            "MiB/CPU-s",
            "seq conn/s",
            "50-conc conn/s",
            "idle KiB RSS",
            "idle KiB PSS",
        ];
        const DECIMALS: [usize; 7] = [0, 2, 0, 0, 0, 1, 1];
        let mut rows: Vec<Vec<String>> = vec![std::iter::once("client".to_owned())
            .chain(HEADS.iter().map(|h| (*h).to_owned()))
            .collect()];
        let ours = clients
            .iter()
            .find(|(_, c)| *c == Client::Etemenanki)
            .map(|(s, _)| *s);
        for &(subject, _) in &clients {
            rows.push(self.value_row(subject, &figures(subject), &DECIMALS));
        }
        let peers: Vec<Subject> = clients
            .iter()
            .filter(|(_, c)| *c != Client::Etemenanki)
            .map(|(s, _)| *s)
            .collect();
        if let Some(ours) = ours {
            let mine = figures(ours);
            for &peer in &peers {
                rows.push(ratio_row(peer, &mine, &figures(peer)));
            }
        }
        let mut out = format!("\n{}\n{}", protocol.name(), aligned(&rows));
        let Some(ours) = ours else {
            return out;
        };
        let mine = figures(ours);
        // The best peer on MiB per CPU-second, and its idle memory.
        let best = peers
            .iter()
            .filter_map(|&p| Some((p, figures(p)[2]?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match (best, mine[2]) {
            (Some((peer, theirs)), Some(m)) => {
                let verdict = if m > theirs { "met" } else { "missed" };
                let _ = writeln!(
                    out,
                    "  goal: more MiB per CPU-second than the best peer ({}, {theirs:.0}): {m:.0}, {:.2}x, {verdict}",
                    peer.name(),
                    m / theirs
                );
                match (figures(peer)[5], mine[5]) {
                    (Some(t), Some(m)) if t > 0.0 => {
                        let verdict = if m <= t / 4.0 { "met" } else { "missed" };
                        let _ = writeln!(
                            out,
                            "  goal: at most a quarter of {}'s idle KiB per connection ({t:.1}): {m:.1}, {:.2}x, {verdict}",
                            peer.name(),
                            m / t
                        );
                    }
                    _ => {
                        let _ = writeln!(
                            out,
                            "  goal: idle memory against {}: not measured",
                            peer.name()
                        );
                    }
                }
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  goals: not measured (ours or every peer lacks a CPU figure)"
                );
            }
        }
        // The strictest reading: against the leanest peer.
        let leanest = peers
            .iter()
            .filter_map(|&p| Some((p, figures(p)[5]?)))
            .filter(|(_, kib)| *kib > 0.0)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some((peer, t)), Some(m)) = (leanest, mine[5]) {
            let _ = writeln!(
                out,
                "  (against the leanest peer, {} at {t:.1} KiB: {:.2}x)",
                peer.name(),
                m / t
            );
        }
        out
    }

    /// The rows to print: every figure but a chain server's when no column
    /// is a chain.
    fn shown(&self) -> Vec<Figure> {
        let chains = self.subjects.iter().any(|s| s.is_chain());
        Figure::ALL
            .into_iter()
            .filter(|figure| chains || !figure.is_server())
            .collect()
    }

    fn targets(&self) -> String {
        let mut out = String::from("etemenanki targets:\n");
        for figure in Figure::ALL {
            let Some(target) = figure.target() else {
                continue;
            };
            let (goal, got) = match target {
                Target::RatioAtLeast(goal) => (
                    format!(">= {goal:.2}x direct"),
                    self.ratio(Subject::Etemenanki, figure)
                        .map(|r| (r, r >= goal)),
                ),
                Target::ValueAtMost(goal) => (
                    format!("<= {goal:.0}"),
                    self.value(Subject::Etemenanki, figure)
                        .map(|v| (v, v <= goal)),
                ),
            };
            let verdict = match got {
                Some((value, true)) => format!("{value:.2}, met"),
                Some((value, false)) => format!("{value:.2}, missed"),
                None => "not measured".to_owned(),
            };
            let _ = writeln!(out, "  {}: {goal}: {verdict}", figure.label());
        }
        out
    }
}

/// Ours divided by `peer`'s, figure by figure.
fn ratio_row(peer: Subject, mine: &[Option<f64>], theirs: &[Option<f64>]) -> Vec<String> {
    let mut row = vec![format!("ratio ours/{}", peer.name())];
    for (m, t) in mine.iter().zip(theirs) {
        row.push(match (m, t) {
            (Some(m), Some(t)) if *t != 0.0 => format!("{:.2}x", m / t),
            _ => "-".to_owned(),
        });
    }
    row
}

/// `rows` as a table: the first column left-aligned, the others right,
/// each as wide as its widest cell, every line indented by two spaces.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        out.push(' ');
        for (c, cell) in row.iter().enumerate() {
            if c == 0 {
                let _ = write!(out, " {cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(out, "  {cell:>w$}", w = widths[c]);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_to_direct_and_only_for_rates() {
        let mut table = Table::new(vec![Subject::Direct, Subject::Etemenanki]);
        table.set(Subject::Direct, Figure::Bulk, Cell::Value(1000.0));
        table.set(Subject::Etemenanki, Figure::Bulk, Cell::Value(650.0));
        table.set(Subject::Direct, Figure::IdleKib, Cell::NotApplicable);
        table.set(Subject::Etemenanki, Figure::IdleKib, Cell::Value(12.34));
        assert_eq!(table.text(Subject::Etemenanki, Figure::Bulk), "650 (0.65x)");
        assert_eq!(table.text(Subject::Direct, Figure::Bulk), "1000");
        assert_eq!(table.text(Subject::Etemenanki, Figure::IdleKib), "12.3");
        assert_eq!(table.text(Subject::Direct, Figure::IdleKib), "n/a");
        let rendered = table.render();
        assert!(rendered.contains("  bulk TCP, MB/s: >= 0.60x direct: 0.65, met\n"));
        assert!(rendered.contains("  idle KiB/conn, VmRSS: <= 10: 12.34, missed\n"));
        assert!(rendered.contains("  UDP round trips/s: >= 0.15x direct: not measured\n"));
    }

    #[test]
    fn skipped_cells_give_their_reason_under_the_table() {
        let mut table = Table::new(vec![Subject::Direct, Subject::Dante]);
        table.set(
            Subject::Dante,
            Figure::Udp,
            Cell::Skipped("not installed".to_owned()),
        );
        let rendered = table.render();
        assert!(rendered.contains("skipped"));
        assert!(rendered.contains("dante / UDP round trips/s: not installed\n"));
    }

    #[test]
    fn server_rows_are_shown_only_when_a_chain_is_measured() {
        let plain = Table::new(vec![Subject::Direct, Subject::Etemenanki]).render();
        assert!(!plain.contains("server CPU s per GiB"));
        assert!(!plain.contains("-tls column"));
        let mut chained = Table::new(vec![Subject::Direct, Subject::EtemenankiTls]);
        chained.set(
            Subject::EtemenankiTls,
            Figure::ServerCpuPerGib,
            Cell::Value(0.5),
        );
        chained.set(
            Subject::Direct,
            Figure::ServerCpuPerGib,
            Cell::NotApplicable,
        );
        let rendered = chained.render();
        assert!(rendered.contains("server CPU s per GiB"));
        assert!(rendered.contains("server idle KiB/conn, VmRSS"));
        assert_eq!(
            chained.text(Subject::EtemenankiTls, Figure::ServerCpuPerGib),
            "0.50"
        );
        assert_eq!(
            chained.text(Subject::Direct, Figure::ServerCpuPerGib),
            "n/a"
        );
    }

    #[test]
    fn a_column_skipped_as_a_whole_gives_its_reason_once() {
        let mut table = Table::new(vec![Subject::Direct, Subject::V2ray]);
        for figure in Figure::ALL {
            table.set(
                Subject::V2ray,
                figure,
                Cell::Skipped("not installed".to_owned()),
            );
        }
        let rendered = table.render();
        assert!(rendered.contains("\nv2ray: not installed\n"));
        assert!(!rendered.contains("v2ray / "));
    }

    #[test]
    fn a_protocol_section_holds_ours_against_the_peer_with_the_most_mib_per_cpu_second() {
        let subjects = vec![
            Subject::Direct,
            Subject::TrojanEtemenanki,
            Subject::TrojanGfw,
            Subject::TrojanSingBox,
        ];
        let mut table = Table::new(subjects);
        for (subject, cpu, kib) in [
            (Subject::TrojanEtemenanki, 0.5, 10.0),
            (Subject::TrojanGfw, 1.0, 100.0),
            (Subject::TrojanSingBox, 0.8, 50.0),
        ] {
            table.set(subject, Figure::Bulk, Cell::Value(1048.576));
            table.set(subject, Figure::LeastCpuPerGib, Cell::Value(cpu));
            table.set(subject, Figure::IdleKib, Cell::Value(kib));
        }
        let section = table.protocol_section(Protocol::Trojan);
        assert!(section.contains("trojan (TLS), server trojan-gfw\n"));
        assert!(section.contains(
            "  goal: more MiB per CPU-second than the best peer (trojan-sing-box, 1280): 2048, 1.60x, met\n"
        ));
        assert!(section.contains(
            "  goal: at most a quarter of trojan-sing-box's idle KiB per connection (50.0): 10.0, 0.20x, met\n"
        ));
        assert!(
            section.contains("  (against the leanest peer, trojan-sing-box at 50.0 KiB: 0.20x)\n")
        );
        assert_eq!(table.protocol_section(Protocol::Shadowsocks), "");
    }

    #[test]
    fn a_full_section_adds_both_ends_and_holds_ours_against_the_best_peer_chain() {
        let subjects = vec![
            Subject::Direct,
            Subject::FullVmessEtemenanki,
            Subject::FullVmessV2ray,
            Subject::FullVmessSingBox,
        ];
        let mut table = Table::new(subjects);
        for (subject, cpu, connects, kib) in [
            (Subject::FullVmessEtemenanki, 0.25, 900.0, 10.0),
            (Subject::FullVmessV2ray, 1.5, 1000.0, 60.0),
            (Subject::FullVmessSingBox, 1.0, 800.0, 40.0),
        ] {
            table.set(subject, Figure::Bulk, Cell::Value(1048.576));
            // The client and the server each take half.
            table.set(subject, Figure::CpuPerGib, Cell::Value(cpu / 2.0));
            table.set(subject, Figure::ServerCpuPerGib, Cell::Value(cpu / 2.0));
            table.set(subject, Figure::Sequential, Cell::Value(connects));
            table.set(subject, Figure::Concurrent, Cell::Value(connects));
            table.set(subject, Figure::IdleKib, Cell::Value(kib / 2.0));
            table.set(subject, Figure::ServerIdleKib, Cell::Value(kib / 2.0));
        }
        let section = table.full_section(Chain::VmessTcp);
        assert!(section.contains("full chains: vmess over tcp (aes-128-gcm, AEAD header)\n"));
        assert!(section.contains(
            "  goal: more MiB per CPU-second than the best peer chain (full-vmess-sing-box, 1024): 4096, 4.00x, met\n"
        ));
        assert!(section.contains(
            "  goal: more sequential connects per second than the best peer chain (full-vmess-v2ray, 1000): 900, 0.90x, missed\n"
        ));
        assert!(section.contains(
            "  goal: at most a quarter of full-vmess-sing-box's idle KiB per connection (40.0): 10.0, 0.25x, met\n"
        ));
        assert_eq!(table.full_section(Chain::TrojanTls), "");
    }
}
