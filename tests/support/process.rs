//! A spawned process that cannot outlive its test.

use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::WAIT;

/// A fresh directory for one test's configuration files and logs.
pub fn scratch_dir(test: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "etemenanki-test-{}-{}-{test}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

/// A running process whose output goes to a log file. It leads its own
/// process group, and dropping it kills the whole group (dante forks
/// helpers) and waits for it, on success and on panic alike; on panic the
/// log is printed so that a failure shows what the peer said.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Spawns `command` with stdout and stderr in `<dir>/<name>.log`.
    pub fn spawn(name: &str, command: Command, dir: &Path) -> Process {
        Process::spawn_logging(name, command, dir, true)
    }

    /// As [`Process::spawn`], with only stderr in the log and stdout
    /// discarded: for a check of exactly what a process says on stderr.
    pub fn spawn_stderr(name: &str, command: Command, dir: &Path) -> Process {
        Process::spawn_logging(name, command, dir, false)
    }

    fn spawn_logging(name: &str, mut command: Command, dir: &Path, stdout: bool) -> Process {
        let log = dir.join(format!("{name}.log"));
        let err = std::fs::File::create(&log).expect("creating a log file");
        let out = if stdout {
            Stdio::from(err.try_clone().expect("cloning a log file handle"))
        } else {
            Stdio::null()
        };
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        Process {
            name: name.to_owned(),
            child,
            log,
        }
    }

    /// As [`Process::spawn`], then [`Process::wait_listening`].
    pub fn spawn_listening(name: &str, command: Command, dir: &Path, addr: SocketAddr) -> Process {
        let mut process = Process::spawn(name, command, dir);
        process.wait_listening(addr);
        process
    }

    /// Waits (bounded) until `addr` accepts a TCP connection; a process
    /// that exits first fails the test.
    pub fn wait_listening(&mut self, addr: SocketAddr) {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before listening on {addr}; log:\n{}",
                    self.name,
                    self.log()
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{} did not listen on {addr} within {WAIT:?}; log:\n{}",
            self.name,
            self.log()
        );
    }

    /// Waits (bounded) until the log holds `needle`: the proof that a
    /// chain really passed through this process.
    pub fn wait_for_log(&self, needle: &str) {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if self.log().contains(needle) {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{} never logged {needle:?}; log:\n{}",
            self.name,
            self.log()
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends the signal `name` (`HUP`, `TERM`, ...) to the process.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{name} {} failed", self.pid());
    }

    /// Waits (bounded) for the process to exit on its own and returns its
    /// status; one still running after [`WAIT`] fails the test.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if let Some(status) = self.child.try_wait().expect("polling a child") {
                return status;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{} did not exit within {WAIT:?}; log:\n{}",
            self.name,
            self.log()
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("---- {} log ----\n{}", self.name, self.log());
        }
    }
}
