//! What the benchmark reads about a proxy from /proc: CPU time, resident
//! memory and whether it catches a signal. A proxy may be a tree of
//! processes (dante forks workers), so CPU and memory are summed over the
//! process and its descendants.

use std::fs;
use std::io;

/// One process's line in /proc/<pid>/stat, the fields the benchmark uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ppid: u32,
    /// utime + stime + cutime + cstime, in clock ticks.
    pub cpu_ticks: u64,
}

/// Parses /proc/<pid>/stat. The command name sits in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last
/// `)`.
pub fn parse_stat(line: &str) -> io::Result<Stat> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected /proc stat line: {line}"),
        )
    };
    let rest = &line[line.rfind(')').ok_or_else(bad)? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let field = |i: usize| -> io::Result<u64> {
        fields.get(i).and_then(|f| f.parse().ok()).ok_or_else(bad)
    };
    Ok(Stat {
        ppid: u32::try_from(field(1)?).map_err(|_| bad())?,
        cpu_ticks: field(11)? + field(12)? + field(13)? + field(14)?,
    })
}

fn stat(pid: u32) -> io::Result<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

/// The process and every live descendant.
pub fn tree(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Ok(stat) = stat(pid) {
                parents.push((pid, stat.ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut next = 0;
    // Each pass adds the children of one found process; a process appears once.
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !found.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        next += 1;
    }
    found
}

/// The CPU time a process tree has used so far, read two ways: clock
/// ticks from each process's stat (every thread that ever ran, reaped
/// children included, but only to the tick: 10 ms), and nanoseconds from
/// each live thread's schedstat (its run time, user and system).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSample {
    ticks: u64,
    nanos: u64,
    /// The (pid, tid) of every thread counted in `nanos`, sorted.
    threads: Vec<(u32, u32)>,
}

impl CpuSample {
    /// CPU seconds used between `before` and this sample: to the
    /// nanosecond when the same threads ran throughout, else (a thread or
    /// process came or went, taking its run time with it) to the tick.
    pub fn seconds_since(&self, before: &CpuSample, ticks_per_second: u64) -> f64 {
        if self.threads == before.threads {
            self.nanos.saturating_sub(before.nanos) as f64 / 1e9
        } else {
            self.ticks.saturating_sub(before.ticks) as f64 / ticks_per_second as f64
        }
    }
}

/// The first field of /proc/<pid>/task/<tid>/schedstat: nanoseconds run.
pub fn parse_schedstat(line: &str) -> io::Result<u64> {
    line.split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected /proc schedstat line: {line}"),
            )
        })
}

/// The tree's CPU time so far; see [`CpuSample`].
pub fn cpu_sample(root: u32) -> io::Result<CpuSample> {
    let mut sample = CpuSample {
        ticks: 0,
        nanos: 0,
        threads: Vec::new(),
    };
    for pid in tree(root) {
        match stat(pid) {
            Ok(stat) => sample.ticks += stat.cpu_ticks,
            Err(e) if pid == root => return Err(e),
            // A worker that exits between listing and reading is simply gone.
            Err(_) => continue,
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Ok(line) = fs::read_to_string(task.path().join("schedstat")) {
                sample.nanos += parse_schedstat(&line)?;
                sample.threads.push((pid, tid));
            }
        }
    }
    sample.threads.sort_unstable();
    Ok(sample)
}

/// The value of a `Key:` line of /proc/<pid>/status.
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// A `Key:   N kB` value in KiB, from /proc status or smaps_rollup text.
pub fn parse_kib(text: &str, key: &str) -> Option<u64> {
    status_field(text, key)?
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// `key` (from the file /proc/<pid>/`file`) summed over the process tree,
/// in KiB.
fn tree_kib(root: u32, file: &str, key: &str) -> io::Result<u64> {
    let mut total = 0;
    for pid in tree(root) {
        match fs::read_to_string(format!("/proc/{pid}/{file}")) {
            Ok(text) => total += parse_kib(&text, key).unwrap_or(0),
            Err(e) if pid == root => return Err(e),
            // A worker that exited meanwhile holds no memory.
            Err(_) => {}
        }
    }
    Ok(total)
}

/// Resident memory (VmRSS) of the process tree, in KiB. Pages a forked
/// worker shares with its parent count once per process.
pub fn rss_kib(root: u32) -> io::Result<u64> {
    tree_kib(root, "status", "VmRSS")
}

/// Proportional set size of the process tree, in KiB: each shared page is
/// split among the processes sharing it, so a forking server like dante is
/// not charged several times for one page.
pub fn pss_kib(root: u32) -> io::Result<u64> {
    tree_kib(root, "smaps_rollup", "Pss")
}

/// Whether the process has a handler installed for `signal` (its bit in
/// the SigCgt mask of /proc/<pid>/status).
pub fn catches(pid: u32, signal: u32) -> io::Result<bool> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let mask = status_field(&status, "SigCgt")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no SigCgt in /proc status"))?;
    Ok(mask & (1 << (signal - 1)) != 0)
}

/// Clock ticks per second, as `getconf CLK_TCK` reports it (100 on every
/// Linux the benchmark targets, the fallback).
pub fn ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (tokio (rt) w) S 17 4242 17 0 -1 4194560 900 0 0 0 \
                    150 30 4 2 20 0 5 0 123 456 789";
        assert_eq!(
            parse_stat(line).unwrap(),
            Stat {
                ppid: 17,
                cpu_ticks: 150 + 30 + 4 + 2
            }
        );
        assert!(parse_stat("4242 (name) S 17").is_err());
    }

    #[test]
    fn schedstat_gives_the_run_time_in_nanoseconds() {
        assert_eq!(parse_schedstat("936265 0 1\n").unwrap(), 936_265);
        assert!(parse_schedstat("").is_err());
        assert!(parse_schedstat("x 0 1").is_err());
    }

    #[test]
    fn cpu_is_read_to_the_nanosecond_while_the_threads_stay() {
        let sample = |ticks, nanos, threads: &[(u32, u32)]| CpuSample {
            ticks,
            nanos,
            threads: threads.to_vec(),
        };
        let before = sample(10, 100_000_000, &[(1, 1), (1, 2)]);
        let same = sample(12, 112_345_678, &[(1, 1), (1, 2)]);
        assert_eq!(same.seconds_since(&before, 100), 0.012_345_678);
        // A thread gone took its nanoseconds along: the ticks still count it.
        let fewer = sample(13, 50_000_000, &[(1, 1)]);
        assert_eq!(fewer.seconds_since(&before, 100), 0.03);
    }

    #[test]
    fn rss_and_signal_mask_are_read_from_status_lines() {
        let status = "Name:\tdanted\nVmRSS:\t    4124 kB\nSigCgt:\t0000000000014a03\n";
        assert_eq!(parse_kib(status, "VmRSS"), Some(4124));
        assert_eq!(parse_kib("Rss: 900 kB\nPss:  712 kB\n", "Pss"), Some(712));
        assert_eq!(status_field(status, "SigCgt"), Some("0000000000014a03"));
        assert_eq!(status_field(status, "VmHWM"), None);
    }

    #[test]
    fn own_process_is_found_and_measured() {
        let me = std::process::id();
        assert_eq!(tree(me)[0], me);
        let before = cpu_sample(me).unwrap();
        assert!(before.threads.contains(&(me, me)));
        let mut spin = 0u64;
        for i in 0..1_000_000u64 {
            spin = std::hint::black_box(spin.wrapping_add(i));
        }
        assert!(cpu_sample(me).unwrap().nanos > before.nanos);
        assert!(rss_kib(me).unwrap() > 0);
        assert!(pss_kib(me).unwrap() > 0);
        // The test harness installs no SIGHUP handler.
        assert!(!catches(me, 1).unwrap());
    }
}
