//! How long a reload takes with many outbounds: start Etemenanki on a plan
//! with N freedom outbounds and N rules, put a plan in its place whose N
//! outbounds and rules all differ (so all are built, and all the old ones
//! drained), send SIGHUP, and stop the clock at the log line that says the
//! apply is done.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::peers::{self, Binaries, EtRule};
use crate::procfs;
use crate::proxy::{free_port, send_signal, Ready, ScratchDir};

/// The longest a reload may take before the measurement gives up.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const SIGHUP: u32 = 1;

pub enum Reload {
    Took(Duration),
    /// Why the reload was not measured.
    Skipped(String),
}

/// The generation's outbound tags and one rule per outbound.
fn generation(name: &str, n: usize) -> (Vec<String>, Vec<EtRule>) {
    let tags: Vec<String> = (0..n).map(|i| format!("{name}-{i:04}")).collect();
    let rules = tags
        .iter()
        .map(|tag| EtRule {
            domain: format!("{tag}.bench.invalid"),
            outbound: tag.clone(),
        })
        .collect();
    (tags, rules)
}

/// Whether a log line reports the end of an apply: it contains `done`, or
/// the apply failed.
fn verdict(line: &str, done: &str) -> Option<io::Result<()>> {
    if line.contains("failed") && line.contains("reload") {
        Some(Err(io::Error::other(format!("reload failed: {line}"))))
    } else if line.contains(done) {
        Some(Ok(()))
    } else {
        None
    }
}

pub fn run(bins: &Binaries, n: usize, done: &str) -> io::Result<Reload> {
    let port = free_port()?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let dir = ScratchDir::new("reload")?;
    let dir_path = dir.path().to_owned();
    let (tags, rules) = generation("first", n);
    let config = peers::etemenanki_config(port, &tags, &rules);
    let mut proxy =
        match peers::launch_etemenanki_as("etemenanki", bins, &config, addr, dir, Ready::Socks5)? {
            Ok(proxy) => proxy,
            Err(why) => return Ok(Reload::Skipped(why)),
        };
    // Without a SIGHUP handler the signal would kill the runtime.
    if !procfs::catches(proxy.pid(), SIGHUP)? {
        return Ok(Reload::Skipped(
            "etemenanki-run installs no SIGHUP handler: reload is not supported yet".to_owned(),
        ));
    }
    let (tags, rules) = generation("second", n);
    let next = dir_path.join("next.bin");
    peers::build_plan(
        bins,
        &dir_path,
        &peers::etemenanki_config(port, &tags, &rules),
        &next,
    )?;
    proxy.drain_log();
    let start = Instant::now();
    std::fs::rename(&next, dir_path.join("plan.bin"))?;
    send_signal(proxy.pid(), "HUP")?;
    let deadline = start + RELOAD_TIMEOUT;
    while Instant::now() < deadline {
        let Some(line) = proxy.next_log_line(Duration::from_millis(100)) else {
            proxy.check_alive()?;
            continue;
        };
        if let Some(outcome) = verdict(&line.text, done) {
            outcome?;
            eprintln!("   {}", line.text);
            return Ok(Reload::Took(line.at - start));
        }
    }
    Err(proxy.failure(&format!(
        "no log line containing {done:?} within {RELOAD_TIMEOUT:?} of SIGHUP"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_sort_in_order_and_each_has_its_rule() {
        let (tags, rules) = generation("first", 3);
        assert_eq!(tags, ["first-0000", "first-0001", "first-0002"]);
        assert_eq!(rules[2].domain, "first-0002.bench.invalid");
        assert_eq!(rules[2].outbound, "first-0002");
    }

    #[test]
    fn reload_verdict_reads_done_and_failed_lines() {
        assert!(matches!(
            verdict("INFO reload: applied", "applied"),
            Some(Ok(()))
        ));
        assert!(verdict("INFO apply: build outbound x@v1", "applied").is_none());
        assert!(matches!(
            verdict(
                "WARN reload: build failed, keeping current config: x",
                "applied"
            ),
            Some(Err(_))
        ));
    }
}
