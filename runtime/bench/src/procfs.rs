//! CPU time and resident memory of a process and its descendants, from
//! /proc. Descendants count because some servers (dante) serve from child
//! processes.

use std::collections::HashMap;

/// The process and every descendant of it.
fn family(pid: u32) -> Vec<u32> {
    let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(parent) = stat_fields(child).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
            parents.entry(parent).or_default().push(child);
        }
    }
    let mut all = vec![pid];
    let mut at = 0;
    while at < all.len() {
        if let Some(children) = parents.get(&all[at]) {
            all.extend(children);
        }
        at += 1;
    }
    all
}

/// The fields of /proc/PID/stat after the command name (which is in
/// parentheses and may hold spaces): state, ppid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    Some(rest.split(' ').map(str::to_owned).collect())
}

/// User plus system CPU seconds used by the process and its descendants.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let mut ticks = 0.0;
    for member in family(pid) {
        let Some(fields) = stat_fields(member) else {
            continue;
        };
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        ticks += utime + stime;
    }
    // Clock ticks; USER_HZ is 100 on Linux.
    Some(ticks / 100.0)
}

/// Resident set size in KiB, summed over the process and its descendants
/// (pages they share are counted once per process).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let mut total = 0;
    for member in family(pid) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{member}/status")) else {
            continue;
        };
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        total += line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    }
    Some(total)
}
