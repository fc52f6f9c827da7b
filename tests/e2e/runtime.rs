//! The real `etemenanki-run` on a plan file written from a spec: started,
//! reloaded by replacing the file, signalled, and stopped when dropped (its
//! process group killed, its log printed if the test failed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use etemenanki_ir::spec::Spec;

use crate::plan::encode;
use crate::support::binaries::ours;
use crate::support::etemenanki::serve;
use crate::support::process::{scratch_dir, Process};
use crate::support::WAIT;

/// A running `etemenanki-run`.
pub struct Runtime {
    process: Process,
    pub plan: PathBuf,
}

/// A scratch directory named after the running test.
fn test_dir() -> PathBuf {
    let thread = thread::current();
    let test = thread.name().unwrap_or("test").replace("::", "-");
    scratch_dir(&test)
}

/// Runs the binary on `bytes` as a plan file, expecting it to exit (bounded
/// by [`WAIT`]), and returns its status and what it wrote on stderr.
pub fn run_plan_bytes(bytes: &[u8]) -> (ExitStatus, String) {
    let dir = test_dir();
    let plan = dir.join("plan.bin");
    std::fs::write(&plan, bytes).expect("writing the plan");
    let mut command = Command::new(ours("etemenanki-run"));
    command.arg(&plan);
    let mut process = Process::spawn_stderr("etemenanki-run", command, &dir);
    let status = process.wait_exit();
    (status, process.log())
}

impl Runtime {
    /// Starts the runtime on `spec` and waits until every inbound listens.
    pub fn start(spec: &Spec) -> Runtime {
        Runtime::start_with(spec, &[])
    }

    /// As [`Runtime::start`], with more arguments after the plan.
    pub fn start_with(spec: &Spec, args: &[&str]) -> Runtime {
        let dir = test_dir();
        let plan = dir.join("plan.bin");
        std::fs::write(&plan, encode(spec)).expect("writing the plan");
        let runtime = Runtime {
            process: serve(&plan, args, &dir),
            plan,
        };
        for inbound in &spec.inbounds {
            runtime.process.listening(&inbound.tag);
        }
        runtime
    }

    /// Where a client on this host reaches inbound `tag`: the address it
    /// logged when it bound, with an unspecified IP (`0.0.0.0`, `::`) as
    /// the loopback address of its family.
    pub fn addr(&self, tag: &str) -> SocketAddr {
        let mut addr = self.process.listening(tag);
        match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => addr.set_ip(Ipv4Addr::LOCALHOST.into()),
            IpAddr::V6(ip) if ip.is_unspecified() => addr.set_ip(Ipv6Addr::LOCALHOST.into()),
            _ => {}
        }
        addr
    }

    /// Replaces the plan file the way a deploy does: write aside, rename.
    pub fn replace_plan_bytes(&self, bytes: &[u8]) {
        let aside = self.plan.with_extension("new");
        std::fs::write(&aside, bytes).expect("writing the new plan");
        std::fs::rename(&aside, &self.plan).expect("renaming the new plan");
    }

    /// Replaces the plan and waits (bounded) for the reload to finish, well
    /// or badly; returns the log lines the reload wrote.
    pub fn reload(&self, spec: &Spec) -> String {
        self.reload_bytes(&encode(spec))
    }

    pub fn reload_bytes(&self, bytes: &[u8]) -> String {
        let before = self.log().len();
        let done = |log: &str| {
            let tail = &log[before..];
            tail.contains("reload: applied epoch") || tail.contains("reload: build failed")
        };
        self.replace_plan_bytes(bytes);
        let start = Instant::now();
        while start.elapsed() < WAIT {
            let log = self.log();
            if done(&log) {
                return log[before..].to_owned();
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the runtime did not reload; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Waits (bounded) until the log holds `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        self.process.wait_for_log(needle);
    }

    pub fn signal(&self, name: &str) {
        self.process.signal(name);
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        self.signal("TERM");
        self.process.wait_exit()
    }
}
