//! The TLS chains: the client speaks plain SOCKS5 to a front proxy, the
//! front speaks SOCKS5 over TLS to a server proxy, and the server connects
//! to the bench's loopback servers. The CA and the server's certificate are
//! made for the run in the server's scratch directory (see `pki`); the
//! front trusts that CA alone and checks the name 127.0.0.1.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::peers::{launch_etemenanki_as, Binaries, Launch};
use crate::pki::{self, Pki};
use crate::proxy::{free_port, Proxy, Ready, ScratchDir};
use crate::socks5::client;
use crate::subject::Subject;

/// How long the chain may take to carry its first connection end to end,
/// and how many attempts it gets.
const THROUGH_TIMEOUT: Duration = Duration::from_secs(15);
const THROUGH_ATTEMPTS: u32 = 300;

const V2RAY: &str = "/usr/bin/v2ray";

/// Starts the chain of `subject` (a chain subject): the server, then the
/// front, then one connection through both to `echo`.
pub fn launch(subject: Subject, bins: &Binaries, echo: SocketAddr) -> io::Result<Launch> {
    if let Some(why) = pki::missing() {
        return Ok(Launch::Skipped(why));
    }
    let server_dir = ScratchDir::new(&format!("{}-server", subject.name()))?;
    let pki = Pki::make(server_dir.path())?;
    let server_addr = loopback(free_port()?);
    let launched = match subject {
        Subject::EtemenankiTls => {
            let server = launch_etemenanki_as(
                "etemenanki-tls server",
                bins,
                &etemenanki_server_config(server_addr.port(), &pki.cert, &pki.key),
                server_addr,
                server_dir,
                Ready::Accepts,
            )?;
            let server = match server {
                Ok(server) => server,
                Err(why) => return Ok(Launch::Skipped(why)),
            };
            // The server is listening, so the front's port cannot be its.
            let front_addr = loopback(free_port()?);
            let front = launch_etemenanki_as(
                "etemenanki-tls front",
                bins,
                &etemenanki_front_config(front_addr.port(), server_addr.port(), &pki.ca),
                front_addr,
                ScratchDir::new(&format!("{}-front", subject.name()))?,
                Ready::Socks5,
            )?;
            match front {
                Ok(front) => Launch::Chain { front, server },
                Err(why) => Launch::Skipped(why),
            }
        }
        Subject::V2rayTls => {
            if !Path::new(V2RAY).is_file() {
                return Ok(Launch::Skipped(format!(
                    "v2ray is not installed ({V2RAY} is missing)"
                )));
            }
            let config = server_dir.path().join("v2ray.json");
            std::fs::write(
                &config,
                v2ray_server_config(server_addr.port(), &pki.cert, &pki.key),
            )?;
            let server = Proxy::spawn_until(
                "v2ray-tls server",
                v2ray(&config),
                server_addr,
                server_dir,
                Ready::Accepts,
            )?;
            let front_addr = loopback(free_port()?);
            let front_dir = ScratchDir::new(&format!("{}-front", subject.name()))?;
            let config = front_dir.path().join("v2ray.json");
            std::fs::write(
                &config,
                v2ray_front_config(front_addr.port(), server_addr.port(), &pki.ca),
            )?;
            let front = Proxy::spawn("v2ray-tls front", v2ray(&config), front_addr, front_dir)?;
            Launch::Chain { front, server }
        }
        other => return Ok(Launch::Skipped(format!("{} is not a chain", other.name()))),
    };
    if let Launch::Chain { front, server } = launched {
        return checked(subject.name(), front, server, echo);
    }
    Ok(launched)
}

pub fn loopback(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn v2ray(config: &Path) -> Command {
    let mut command = Command::new(V2RAY);
    command.arg("-config").arg(config);
    command
}

/// The chain of `front` and `server` once one byte has made the round trip
/// to `echo` through both; otherwise an error with both logs, as either
/// end may be the one that refused.
pub fn checked(
    name: &str,
    mut front: Proxy,
    mut server: Proxy,
    echo: SocketAddr,
) -> io::Result<Launch> {
    if let Err(e) = through(front.addr, echo) {
        let front_log = front.failure(&format!(
            "{name} carries no connection to the echo server: {e}"
        ));
        return Err(server.failure(&format!("{front_log}\n  server:")));
    }
    Ok(Launch::Chain { front, server })
}

/// One byte to the echo server and back through `front`, retried until
/// the whole chain answers, [`THROUGH_TIMEOUT`] has passed or
/// [`THROUGH_ATTEMPTS`] have failed.
pub fn through(front: SocketAddr, echo: SocketAddr) -> io::Result<()> {
    let deadline = Instant::now() + THROUGH_TIMEOUT;
    let mut last = None;
    for _ in 0..THROUGH_ATTEMPTS {
        let outcome = client::connect(front, echo).and_then(|mut stream| {
            stream.write_all(b"*")?;
            let mut answer = [0u8; 1];
            stream.read_exact(&mut answer)
        });
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(last.unwrap_or_else(|| io::Error::other("no attempt was made")))
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// Etemenanki serving SOCKS5 over TLS (with UDP) on 127.0.0.1, then
/// freedom.
pub fn etemenanki_server_config(port: u16, cert: &Path, key: &Path) -> String {
    format!(
        "\
[[inbound]]
tag = \"socks-tls\"
protocol = \"socks\"
listen = \"127.0.0.1\"
port = {port}

[inbound.stream]
security = \"tls\"

[inbound.stream.tls]
cert_file = \"{cert}\"
key_file = \"{key}\"

[inbound.settings]
udp = true

[[outbound]]
tag = \"direct\"
protocol = \"freedom\"

[route]
default = \"direct\"
",
        cert = show(cert),
        key = show(key)
    )
}

/// Etemenanki as the front: plain SOCKS5 (with UDP) in on 127.0.0.1, SOCKS5
/// over TLS out to the server, trusting `ca` and checking 127.0.0.1.
pub fn etemenanki_front_config(port: u16, server_port: u16, ca: &Path) -> String {
    format!(
        "\
[[inbound]]
tag = \"socks-in\"
protocol = \"socks\"
listen = \"127.0.0.1\"
port = {port}

[inbound.settings]
udp = true

[[outbound]]
tag = \"next\"
protocol = \"socks\"
server = \"127.0.0.1\"
port = {server_port}

[outbound.stream]
network = \"tls\"

[outbound.stream.tls]
ca_file = \"{ca}\"

[route]
default = \"next\"
",
        ca = show(ca)
    )
}

/// v2ray 4.x serving socks over TLS (`streamSettings.security = "tls"`)
/// with UDP, then freedom.
pub fn v2ray_server_config(port: u16, cert: &Path, key: &Path) -> String {
    format!(
        r#"{{
  "log": {{ "loglevel": "warning" }},
  "inbounds": [{{
    "listen": "127.0.0.1",
    "port": {port},
    "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }},
    "streamSettings": {{
      "network": "tcp",
      "security": "tls",
      "tlsSettings": {{
        "certificates": [{{ "certificateFile": "{cert}", "keyFile": "{key}" }}]
      }}
    }}
  }}],
  "outbounds": [{{ "protocol": "freedom", "settings": {{}} }}]
}}
"#,
        cert = show(cert),
        key = show(key)
    )
}

/// v2ray 4.x as the front: a plain socks inbound with UDP, a socks outbound
/// over TLS to the server that trusts `ca` alone and checks 127.0.0.1.
pub fn v2ray_front_config(port: u16, server_port: u16, ca: &Path) -> String {
    format!(
        r#"{{
  "log": {{ "loglevel": "warning" }},
  "inbounds": [{{
    "listen": "127.0.0.1",
    "port": {port},
    "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }}
  }}],
  "outbounds": [{{
    "protocol": "socks",
    "settings": {{ "servers": [{{ "address": "127.0.0.1", "port": {server_port} }}] }},
    "streamSettings": {{
      "network": "tcp",
      "security": "tls",
      "tlsSettings": {{
        "serverName": "127.0.0.1",
        "disableSystemRoot": true,
        "certificates": [{{ "usage": "verify", "certificateFile": "{ca}" }}]
      }}
    }}
  }}]
}}
"#,
        ca = show(ca)
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn chain_configs_listen_on_loopback_and_dial_the_server_over_tls() {
        let ca = PathBuf::from("/scratch/ca.pem");
        let cert = PathBuf::from("/scratch/server.pem");
        let key = PathBuf::from("/scratch/server-key.pem");
        let server = etemenanki_server_config(2000, &cert, &key);
        assert!(server.contains("listen = \"127.0.0.1\"\nport = 2000\n"));
        assert!(server.contains("security = \"tls\"\n"));
        assert!(server.contains("cert_file = \"/scratch/server.pem\"\n"));
        let front = etemenanki_front_config(1000, 2000, &ca);
        assert!(front.contains("listen = \"127.0.0.1\"\nport = 1000\n"));
        assert!(front.contains("server = \"127.0.0.1\"\nport = 2000\n"));
        assert!(front.contains("network = \"tls\"\n"));
        assert!(front.contains("ca_file = \"/scratch/ca.pem\"\n"));
        let server = v2ray_server_config(2000, &cert, &key);
        assert!(server.contains(r#""listen": "127.0.0.1","#));
        assert!(server.contains(r#""security": "tls","#));
        let front = v2ray_front_config(1000, 2000, &ca);
        assert!(front.contains(r#""listen": "127.0.0.1","#));
        assert!(front.contains(r#""address": "127.0.0.1", "port": 2000"#));
        assert!(front.contains(r#""certificateFile": "/scratch/ca.pem""#));
    }
}
