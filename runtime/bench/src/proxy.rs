//! A proxy process under test: its address, its log, its scratch directory.
//! Dropping it kills the process (and, for a tree like dante's, the workers
//! exit with their parent) and removes the directory, so an error or a panic
//! anywhere in a measurement never leaves a peer running.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::socks5::client;

/// How long a proxy may take to accept its first SOCKS5 greeting.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Log lines kept to explain a failure.
const TAIL_LINES: usize = 20;

/// The proxies running now, by pid with their scratch directories, for
/// [`kill_all`].
static RUNNING: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

/// Kills every running proxy and its workers at once and removes their
/// scratch directories, for a bench ending on a signal.
pub fn kill_all() {
    let running = RUNNING.lock().map(|r| r.clone()).unwrap_or_default();
    for (root, dir) in running {
        // Workers first, so none is re-parented before it is found.
        for pid in crate::procfs::tree(root).into_iter().rev() {
            let _ = send_signal(pid, "KILL");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A scratch directory under the system's temporary directory, removed on
/// drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(name: &str) -> io::Result<ScratchDir> {
        let dir =
            std::env::temp_dir().join(format!("etemenanki-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(ScratchDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free port on 127.0.0.1 for a peer to listen on: bound and released,
/// so another process could take it in between; the readiness check then
/// fails with the peer's own message.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A line the proxy wrote to stderr, and when the benchmark read it.
pub struct LogLine {
    pub at: Instant,
    pub text: String,
}

/// When a proxy counts as started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// It answers a SOCKS5 greeting in the clear.
    Socks5,
    /// It accepts a TCP connection: a server behind TLS, which the bench
    /// cannot greet; the chain in front of it is checked end to end.
    Accepts,
    /// Its UDP port is bound (a bind of it fails): a QUIC server, which
    /// accepts no TCP connection; the chain in front of it is checked end
    /// to end.
    BoundUdp,
}

pub struct Proxy {
    pub name: &'static str,
    pub addr: SocketAddr,
    child: Child,
    log: Receiver<LogLine>,
    tail: VecDeque<String>,
    // Dropped after the child is killed (fields drop after `drop` runs).
    _dir: ScratchDir,
}

impl Proxy {
    /// Starts `command` (stdout discarded, stderr read line by line) and
    /// waits until it answers a SOCKS5 greeting on `addr`.
    pub fn spawn(
        name: &'static str,
        command: Command,
        addr: SocketAddr,
        dir: ScratchDir,
    ) -> io::Result<Proxy> {
        Proxy::spawn_until(name, command, addr, dir, Ready::Socks5)
    }

    /// [`Proxy::spawn`], waiting until `ready` holds.
    pub fn spawn_until(
        name: &'static str,
        mut command: Command,
        addr: SocketAddr,
        dir: ScratchDir,
        ready: Ready,
    ) -> io::Result<Proxy> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))?;
        if let Ok(mut running) = RUNNING.lock() {
            running.push((child.id(), dir.path().to_owned()));
        }
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, log) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-log"))
            .spawn(move || {
                for text in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let line = LogLine {
                        at: Instant::now(),
                        text,
                    };
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            })?;
        let mut proxy = Proxy {
            name,
            addr,
            child,
            log,
            tail: VecDeque::new(),
            _dir: dir,
        };
        proxy.wait_ready(ready)?;
        Ok(proxy)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self, ready: Ready) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.check_alive()?;
            let greeted = match ready {
                Ready::BoundUdp => match std::net::UdpSocket::bind(self.addr) {
                    Ok(_) => Err(io::Error::other("the udp port is not bound yet")),
                    Err(_) => Ok(()),
                },
                _ => client::dial(self.addr).and_then(|mut s| match ready {
                    Ready::Socks5 => client::greet(&mut s),
                    _ => Ok(()),
                }),
            };
            match greeted {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(self.failure(&format!(
                        "{} did not answer on {} within {:?}: {e}",
                        self.name, self.addr, READY_TIMEOUT
                    )))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// An error if the process has exited, with the end of its log.
    pub fn check_alive(&mut self) -> io::Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => {
                // Give the log thread a moment to read the last words.
                std::thread::sleep(Duration::from_millis(50));
                Err(self.failure(&format!("{} exited ({status})", self.name)))
            }
        }
    }

    /// An error carrying `what` and the last lines of the proxy's log.
    pub fn failure(&mut self, what: &str) -> io::Error {
        self.drain_log();
        let mut text = what.to_owned();
        for line in &self.tail {
            text.push_str("\n    | ");
            text.push_str(line);
        }
        io::Error::other(text)
    }

    /// Moves the lines read so far into the tail kept for error messages.
    pub fn drain_log(&mut self) {
        while let Ok(line) = self.log.try_recv() {
            self.remember(line.text);
        }
    }

    /// Waits up to `timeout` for the next log line.
    pub fn next_log_line(&mut self, timeout: Duration) -> Option<LogLine> {
        match self.log.recv_timeout(timeout) {
            Ok(line) => {
                self.remember(line.text.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    fn remember(&mut self, text: String) {
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(text);
    }
}

/// Sends `signal` (a name such as `HUP`) to one process we started.
pub fn send_signal(pid: u32, signal: &str) -> io::Result<()> {
    // A worker may exit on its own first: the failure is returned, and kill's
    // own message is not wanted.
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "kill -{signal} {pid} failed ({status})"
        )))
    }
}

impl Drop for Proxy {
    /// SIGTERM, up to two seconds to exit, then SIGKILL; then SIGKILL for
    /// any worker of the tree that outlived its parent.
    fn drop(&mut self) {
        let comm = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
        let workers: Vec<(u32, Option<String>)> = crate::procfs::tree(self.pid())
            .into_iter()
            .skip(1)
            .map(|pid| (pid, comm(pid)))
            .collect();
        let _ = send_signal(self.pid(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(mut running) = RUNNING.lock() {
            running.retain(|(pid, _)| *pid != self.pid());
        }
        // Only a process still bearing the worker's name: its pid is not
        // reused by someone else's.
        for (pid, name) in workers {
            if name.is_some() && comm(pid) == name {
                let _ = send_signal(pid, "KILL");
            }
        }
    }
}
