//! Launchers for the proxies under test: Debian's microsocks, dante and
//! v2ray, and Etemenanki (`etc build` then `etemenanki-run`). Each writes
//! its configuration into a scratch directory and listens on 127.0.0.1
//! only. A proxy whose binaries are not installed is skipped with a reason.

use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::proxy::{free_port, Proxy, Ready, ScratchDir};
use crate::subject::Subject;

/// A proxy started, a chain of two started, or why not.
pub enum Launch {
    Ready(Proxy),
    /// A front proxy the client speaks to, and the server behind it.
    Chain {
        front: Proxy,
        server: Proxy,
    },
    Skipped(String),
}

/// Where to find the binaries.
pub struct Binaries {
    /// The directory holding `etc` and `etemenanki-run`.
    pub etemenanki_dir: PathBuf,
    /// Another build's, for the `etemenanki-alt` column.
    pub alt_dir: Option<PathBuf>,
}

impl Binaries {
    pub fn etc(&self) -> PathBuf {
        self.etemenanki_dir.join("etc")
    }

    pub fn runtime(&self) -> PathBuf {
        self.etemenanki_dir.join("etemenanki-run")
    }
}

/// Starts `subject` (never `Direct`, which has no proxy) listening on a
/// fresh loopback port; a chain is checked end to end through `echo`.
pub fn launch(subject: Subject, bins: &Binaries, echo: SocketAddr) -> io::Result<Launch> {
    let port = free_port()?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let dir = ScratchDir::new(subject.name())?;
    let name = subject.name();
    let (binary, command) = match subject {
        Subject::Direct => return Ok(Launch::Skipped("direct has no proxy".to_owned())),
        Subject::Microsocks => {
            let binary = PathBuf::from("/usr/bin/microsocks");
            let mut command = Command::new(&binary);
            command.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
            (binary, command)
        }
        Subject::Dante => {
            let binary = PathBuf::from("/usr/sbin/danted");
            let config = dir.path().join("danted.conf");
            std::fs::write(&config, dante_config(port))?;
            let mut command = Command::new(&binary);
            command
                .arg("-f")
                .arg(&config)
                .arg("-p")
                .arg(dir.path().join("danted.pid"));
            (binary, command)
        }
        Subject::V2ray => {
            let binary = PathBuf::from("/usr/bin/v2ray");
            let config = dir.path().join("v2ray.json");
            std::fs::write(&config, v2ray_config(port))?;
            let mut command = Command::new(&binary);
            command.arg("-config").arg(&config);
            (binary, command)
        }
        Subject::Etemenanki => {
            let config = etemenanki_config(port, &["direct".to_owned()], &[]);
            return launch_etemenanki(bins, &config, addr, dir);
        }
        Subject::EtemenankiAlt => {
            let Some(alt_dir) = &bins.alt_dir else {
                return Ok(Launch::Skipped(
                    "no --alt-bin-dir names another build".to_owned(),
                ));
            };
            let alt = Binaries {
                etemenanki_dir: alt_dir.clone(),
                alt_dir: None,
            };
            let config = etemenanki_config(port, &["direct".to_owned()], &[]);
            return Ok(
                match launch_etemenanki_as(name, &alt, &config, addr, dir, Ready::Socks5)? {
                    Ok(proxy) => Launch::Ready(proxy),
                    Err(why) => Launch::Skipped(why),
                },
            );
        }
        Subject::EtemenankiTls | Subject::V2rayTls => {
            return crate::chain::launch(subject, bins, echo)
        }
        _ => {
            if let Some((chain, side)) = subject.full() {
                return crate::full::launch(name, chain, side, bins, echo);
            }
            let Some((protocol, client)) = subject.protocol() else {
                return Ok(Launch::Skipped(format!("{name} has no launcher")));
            };
            return crate::protocol::launch(name, protocol, client, bins, echo);
        }
    };
    if !binary.is_file() {
        return Ok(Launch::Skipped(format!(
            "{name} is not installed ({} is missing)",
            binary.display()
        )));
    }
    Proxy::spawn(name, command, addr, dir).map(Launch::Ready)
}

/// Compiles `config` with `etc build` into the scratch directory and starts
/// `etemenanki-run` on the plan; the plan is `plan.bin` in that directory.
pub fn launch_etemenanki(
    bins: &Binaries,
    config: &str,
    addr: SocketAddr,
    dir: ScratchDir,
) -> io::Result<Launch> {
    Ok(
        match launch_etemenanki_as("etemenanki", bins, config, addr, dir, Ready::Socks5)? {
            Ok(proxy) => Launch::Ready(proxy),
            Err(why) => Launch::Skipped(why),
        },
    )
}

/// [`launch_etemenanki`] under another name, ready when `ready` holds: the
/// runtime, or why it was skipped.
pub fn launch_etemenanki_as(
    name: &'static str,
    bins: &Binaries,
    config: &str,
    addr: SocketAddr,
    dir: ScratchDir,
    ready: Ready,
) -> io::Result<Result<Proxy, String>> {
    for binary in [bins.etc(), bins.runtime()] {
        if !binary.is_file() {
            return Ok(Err(format!(
                "{} is missing; build etemenanki-run beside etc to measure Etemenanki",
                binary.display()
            )));
        }
    }
    let plan = dir.path().join("plan.bin");
    build_plan(bins, dir.path(), config, &plan)?;
    let mut command = Command::new(bins.runtime());
    command.arg(&plan);
    Proxy::spawn_until(name, command, addr, dir, ready).map(Ok)
}

/// Writes `config` as `config.toml` beside `plan` and runs `etc build` on
/// it.
pub fn build_plan(bins: &Binaries, dir: &Path, config: &str, plan: &Path) -> io::Result<()> {
    let source = dir.join("config.toml");
    std::fs::write(&source, config)?;
    let out = Command::new(bins.etc())
        .arg("build")
        .arg(&source)
        .arg("-o")
        .arg(plan)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "etc build {} failed ({}):\n{}",
            source.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// dante in the foreground: no authentication, CONNECT and UDP ASSOCIATE
/// for loopback clients, logging only errors.
pub fn dante_config(port: u16) -> String {
    format!(
        "\
logoutput: stderr
internal: 127.0.0.1 port = {port}
external: 127.0.0.1
clientmethod: none
socksmethod: none
client pass {{
  from: 127.0.0.0/8 to: 0.0.0.0/0
}}
socks pass {{
  from: 127.0.0.0/8 to: 0.0.0.0/0
  command: bind connect udpassociate bindreply udpreply
}}
"
    )
}

/// v2ray 4.x: a socks inbound with UDP and a freedom outbound.
pub fn v2ray_config(port: u16) -> String {
    format!(
        r#"{{
  "log": {{ "loglevel": "warning" }},
  "inbounds": [{{
    "listen": "127.0.0.1",
    "port": {port},
    "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }}
  }}],
  "outbounds": [{{ "protocol": "freedom", "settings": {{}} }}]
}}
"#
    )
}

/// A route rule of a generated configuration: these domains go to that
/// outbound.
pub struct EtRule {
    pub domain: String,
    pub outbound: String,
}

/// Etemenanki's TOML: a socks inbound with UDP on 127.0.0.1, the given
/// freedom outbounds by tag (the first is the default) and rules.
pub fn etemenanki_config(port: u16, outbounds: &[String], rules: &[EtRule]) -> String {
    let mut text = format!(
        "\
[[inbound]]
tag = \"socks-in\"
protocol = \"socks\"
listen = \"127.0.0.1\"
port = {port}

[inbound.settings]
udp = true
"
    );
    for outbound in outbounds {
        let _ = write!(
            text,
            "\n[[outbound]]\ntag = \"{}\"\nprotocol = \"freedom\"\n",
            outbound
        );
    }
    if let Some(first) = outbounds.first() {
        let _ = write!(text, "\n[route]\ndefault = \"{}\"\n", first);
    }
    for rule in rules {
        let _ = write!(
            text,
            "\n[[route.rule]]\ndomain = [\"{}\"]\noutbound = \"{}\"\n",
            rule.domain, rule.outbound
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etemenanki_config_lists_outbounds_default_and_rules_in_order() {
        let config = etemenanki_config(
            1080,
            &["a".to_owned(), "b".to_owned()],
            &[EtRule {
                domain: "b.example".to_owned(),
                outbound: "b".to_owned(),
            }],
        );
        assert_eq!(
            config,
            r#"[[inbound]]
tag = "socks-in"
protocol = "socks"
listen = "127.0.0.1"
port = 1080

[inbound.settings]
udp = true

[[outbound]]
tag = "a"
protocol = "freedom"

[[outbound]]
tag = "b"
protocol = "freedom"

[route]
default = "a"

[[route.rule]]
domain = ["b.example"]
outbound = "b"
"#
        );
    }

    #[test]
    fn peer_configs_listen_on_loopback_at_the_given_port() {
        assert!(dante_config(1234).contains("internal: 127.0.0.1 port = 1234\n"));
        let v2ray = v2ray_config(1234);
        assert!(v2ray.contains(r#""listen": "127.0.0.1","#));
        assert!(v2ray.contains(r#""port": 1234,"#));
    }
}
