//! Our side of a test: a TOML configuration compiled by the real `etc
//! build` and served by the real `etemenanki-run`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::binaries::ours;
use super::client::Login;
use super::process::Process;
use super::WAIT;

/// An Etemenanki configuration in TOML, built up one table at a time.
#[derive(Default)]
pub struct Config {
    text: String,
    listens: Vec<SocketAddr>,
}

impl Config {
    /// A `socks` inbound on `listen`, relaying UDP, with `login` as its
    /// only account when given.
    pub fn socks_in(mut self, listen: SocketAddr, login: Option<Login>) -> Config {
        self.inbound("socks", listen, login);
        self
    }

    /// An `http` inbound on `listen`, with `login` as its only account when
    /// given.
    pub fn http_in(mut self, listen: SocketAddr, login: Option<Login>) -> Config {
        self.inbound("http", listen, login);
        self
    }

    fn inbound(&mut self, protocol: &str, listen: SocketAddr, login: Option<Login>) {
        let _ = write!(
            self.text,
            "[[inbound]]\ntag = \"{protocol}-in\"\nprotocol = \"{protocol}\"\n\
             listen = \"{}\"\nport = {}\n\n",
            listen.ip(),
            listen.port()
        );
        if let Some(login) = login {
            let _ = write!(
                self.text,
                "[[inbound.settings.accounts]]\nuser = \"{}\"\npass = \"{}\"\n\n",
                login.user, login.pass
            );
        }
        self.listens.push(listen);
    }

    /// A `protocol` inbound on `listen` (trojan, vless, vmess,
    /// shadowsocks, ...), with the inbound's tables (`[inbound.stream]`,
    /// `[inbound.settings]`, ...) as `tables` writes them.
    pub fn proxy_in(mut self, protocol: &str, listen: SocketAddr, tables: &str) -> Config {
        let _ = write!(
            self.text,
            "[[inbound]]\ntag = \"{protocol}-in\"\nprotocol = \"{protocol}\"\n\
             listen = \"{}\"\nport = {}\n{tables}\n",
            listen.ip(),
            listen.port()
        );
        self.listens.push(listen);
        self
    }

    /// `text` as written, after what is there: a `[limits]` table, or an
    /// outbound the helpers here do not spell and the route to it.
    pub fn raw(mut self, text: &str) -> Config {
        self.text.push_str(text);
        self
    }

    /// The default outbound: a `socks` client of `server`.
    pub fn socks_out(self, server: SocketAddr, login: Option<Login>) -> Config {
        self.outbound("socks", Some(server), login)
    }

    /// The default outbound: an `http` CONNECT client of `server`.
    pub fn http_out(self, server: SocketAddr, login: Option<Login>) -> Config {
        self.outbound("http", Some(server), login)
    }

    /// The default outbound: a `protocol` client of `server`, with the
    /// outbound's tables (`[outbound.stream]`, `[outbound.settings]`, ...)
    /// as `tables` writes them.
    pub fn proxy_out(mut self, protocol: &str, server: SocketAddr, tables: &str) -> Config {
        let _ = write!(
            self.text,
            "[[outbound]]\ntag = \"out\"\nprotocol = \"{protocol}\"\n\
             server = \"{}\"\nport = {}\n{tables}\n[route]\ndefault = \"out\"\n",
            server.ip(),
            server.port()
        );
        self
    }

    /// The default outbound: `freedom`, straight to the destination.
    pub fn freedom(self) -> Config {
        self.outbound("freedom", None, None)
    }

    fn outbound(
        mut self,
        protocol: &str,
        server: Option<SocketAddr>,
        login: Option<Login>,
    ) -> Config {
        let _ = write!(
            self.text,
            "[[outbound]]\ntag = \"out\"\nprotocol = \"{protocol}\"\n"
        );
        if let Some(server) = server {
            let _ = write!(
                self.text,
                "server = \"{}\"\nport = {}\n",
                server.ip(),
                server.port()
            );
        }
        if let Some(login) = login {
            let _ = write!(
                self.text,
                "[outbound.settings]\nuser = \"{}\"\npass = \"{}\"\n",
                login.user, login.pass
            );
        }
        self.text.push_str("\n[route]\ndefault = \"out\"\n");
        self
    }

    /// Compiles the configuration in `dir` with `etc build` and starts
    /// `etemenanki-run` on the plan, waiting until every inbound listens.
    pub fn start(self, dir: &Path) -> Process {
        start_ours(dir, "etemenanki.toml", &self.text, &self.listens)
    }
}

/// Writes `text` to `<dir>/<file>` (`.toml` or `.et`), compiles it with the
/// real `etc build` and serves the plan with `etemenanki-run`, waiting until
/// every address in `listens` accepts connections.
pub fn start_ours(dir: &Path, file: &str, text: &str, listens: &[SocketAddr]) -> Process {
    let plan = dir.join("plan.bin");
    compile(dir, file, text, &plan);
    let mut process = serve(&plan, &[], dir);
    for &addr in listens {
        process.wait_listening(addr);
    }
    process
}

/// Writes `text` to `<dir>/<file>` and compiles it with the real `etc
/// build` into `plan`.
fn compile(dir: &Path, file: &str, text: &str, plan: &Path) {
    let source = dir.join(file);
    std::fs::write(&source, text).expect("writing the configuration");
    let out = Command::new(ours("etc"))
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(plan)
        .output()
        .expect("running etc build");
    assert!(
        out.status.success(),
        "etc build failed ({}):\n{}\nconfiguration:\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
    );
}

impl Config {
    /// Compiles this configuration and puts its plan in the place of the
    /// plan `process` (started by [`Config::start`] in `dir`) serves, which
    /// it then reloads; waits (bounded) for the reload to be applied and
    /// returns the log lines it wrote.
    pub fn reload(self, process: &Process, dir: &Path) -> String {
        let before = process.log().len();
        let aside = dir.join("plan.new");
        compile(dir, "etemenanki.toml", &self.text, &aside);
        std::fs::rename(&aside, dir.join("plan.bin")).expect("renaming the new plan");
        let start = Instant::now();
        while start.elapsed() < WAIT {
            let log = process.log();
            if log[before..].contains("reload: applied epoch") {
                return log[before..].to_owned();
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the runtime did not reload; log:\n{}", process.log());
    }
}

/// Starts `etemenanki-run` on `plan` (with `args` after it) and debug
/// logging, its log in `<dir>/etemenanki.log`.
pub fn serve(plan: &Path, args: &[&str], dir: &Path) -> Process {
    let mut command = Command::new(ours("etemenanki-run"));
    command.arg(plan).args(args).env("RUST_LOG", "debug");
    Process::spawn("etemenanki", command, dir)
}

impl Process {
    /// The address inbound `tag` of this `etemenanki-run` (or `etc run`)
    /// listens on, read from the line `inbound <tag> listening on <addr>`
    /// that the runtime logs with the address it bound: so a spec may ask
    /// for port 0 and no test races another for a probed free port. Waits
    /// (bounded) for the line; the latest one counts, as after a reload.
    pub fn listening(&self, tag: &str) -> SocketAddr {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if let Some(addr) = bound_addr(&self.log(), tag) {
                return addr;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "inbound {tag} never logged the address it listens on; log:\n{}",
            self.log()
        );
    }
}

/// The address in the last complete `inbound <tag> listening on <addr>`
/// line of `log` (a line still being written has no newline yet).
fn bound_addr(log: &str, tag: &str) -> Option<SocketAddr> {
    let needle = format!("inbound {tag} listening on ");
    let at = log.rfind(&needle)? + needle.len();
    let (line, _) = log[at..].split_once('\n')?;
    let addr = line.split_whitespace().next()?;
    Some(
        addr.parse()
            .unwrap_or_else(|e| panic!("inbound {tag} logged a bad address {addr:?}: {e}")),
    )
}
