//! The full chains: one program at both ends of one protocol, as an
//! operator runs it (ours to ours, shadowsocks-rust to shadowsocks-rust,
//! v2ray to v2ray, trojan-gfw to trojan-gfw, sing-box to sing-box). The
//! bench speaks plain SOCKS5 to the client, which speaks the protocol to
//! the server, which connects to the bench's loopback servers. The figures
//! that compare the chains add the client's and the server's.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::chain::{checked, loopback};
use crate::peers::{launch_etemenanki_as, Binaries, Launch};
use crate::pki::{self, Pki};
use crate::protocol::{require, sslocal};
use crate::proxy::{free_port, Proxy, Ready, ScratchDir};

const SS_METHOD: &str = "aes-128-gcm";
const SS2022_METHOD: &str = "2022-blake3-aes-128-gcm";
const PASSWORD: &str = "etemenanki-bench-secret";
/// The 2022 PSK: base64 of 16 bytes of 0x42 (nothing here is secret).
const SS2022_PSK: &str = "QkJCQkJCQkJCQkJCQkJCQg==";
const ID: &str = "6b1a5c4e-2f3d-4a8b-9c7e-0d1f2a3b4c5d";
const WS_PATH: &str = "/bench-ws";

const SSSERVER: &str = "ssserver";
const SSLOCAL: &str = "sslocal";
const V2RAY: &str = "/usr/bin/v2ray";
const SING_BOX: &str = "sing-box";
const TROJAN: &str = "/usr/bin/trojan";

/// A protocol and transport the chains are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Chain {
    Shadowsocks,
    Ss2022,
    VmessTcp,
    VlessWs,
    TrojanTls,
}

impl Chain {
    pub const ALL: [Chain; 5] = [
        Chain::Shadowsocks,
        Chain::Ss2022,
        Chain::VmessTcp,
        Chain::VlessWs,
        Chain::TrojanTls,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Chain::Shadowsocks => "full chains: shadowsocks AEAD (aes-128-gcm)",
            Chain::Ss2022 => "full chains: shadowsocks 2022 (2022-blake3-aes-128-gcm)",
            Chain::VmessTcp => "full chains: vmess over tcp (aes-128-gcm, AEAD header)",
            Chain::VlessWs => "full chains: vless over ws",
            Chain::TrojanTls => "full chains: trojan over tls",
        }
    }
}

/// The program at both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Etemenanki,
    /// shadowsocks-rust: sslocal to ssserver.
    SsRust,
    /// v2ray 4.34 at both ends.
    V2ray,
    /// trojan-gfw, `run_type` client to `run_type` server.
    TrojanGfw,
    SingBox,
}

/// Starts the server of `chain` as `side` writes it, then `side`'s client
/// in front of it, then one byte through both to `echo`.
pub fn launch(
    name: &'static str,
    chain: Chain,
    side: Side,
    bins: &Binaries,
    echo: SocketAddr,
) -> io::Result<Launch> {
    let programs = match side {
        Side::Etemenanki => Ok((PathBuf::new(), PathBuf::new())),
        Side::SsRust => require(SSSERVER).and_then(|s| Ok((s, require(SSLOCAL)?))),
        Side::V2ray => require(V2RAY).map(|v| (v.clone(), v)),
        Side::TrojanGfw => require(TROJAN).map(|t| (t.clone(), t)),
        Side::SingBox => require(SING_BOX).map(|s| (s.clone(), s)),
    };
    let (server_bin, client_bin) = match programs {
        Ok(programs) => programs,
        Err(why) => return Ok(Launch::Skipped(why)),
    };
    if chain == Chain::TrojanTls {
        if let Some(why) = pki::missing() {
            return Ok(Launch::Skipped(why));
        }
    }
    let server_dir = ScratchDir::new(&format!("{name}-server"))?;
    let pki = match chain {
        Chain::TrojanTls => Some(Pki::make(server_dir.path())?),
        _ => None,
    };
    let server_addr = loopback(free_port()?);
    let server = match side {
        Side::Etemenanki => {
            let config = etemenanki_server(chain, server_addr.port(), pki.as_ref());
            let server = launch_etemenanki_as(
                "etemenanki server",
                bins,
                &config,
                server_addr,
                server_dir,
                Ready::Accepts,
            )?;
            match server {
                Ok(server) => server,
                Err(why) => return Ok(Launch::Skipped(why)),
            }
        }
        Side::SsRust => {
            let (method, key) = method_and_key(chain);
            let mut command = Command::new(&server_bin);
            command
                .arg("-s")
                .arg(server_addr.to_string())
                .args(["-m", method, "-k", key]);
            Proxy::spawn_until("ssserver", command, server_addr, server_dir, Ready::Accepts)?
        }
        Side::V2ray | Side::SingBox | Side::TrojanGfw => {
            let (file, config, label) = match side {
                Side::V2ray => (
                    "v2ray.json",
                    v2ray_server(chain, server_addr.port()),
                    "v2ray server",
                ),
                Side::SingBox => (
                    "sing-box.json",
                    sing_box_server(chain, server_addr.port(), pki.as_ref()),
                    "sing-box server",
                ),
                _ => {
                    let pki = pki.as_ref().expect("trojan has certificates");
                    // What it cannot authenticate goes to a port nothing
                    // listens on.
                    let fallback = free_port()?;
                    (
                        "trojan.json",
                        crate::protocol::trojan_server_config(
                            server_addr.port(),
                            fallback,
                            &pki.cert,
                            &pki.key,
                        ),
                        "trojan-gfw server",
                    )
                }
            };
            let path = server_dir.path().join(file);
            std::fs::write(&path, config)?;
            Proxy::spawn_until(
                label,
                run_config(side, &server_bin, &path),
                server_addr,
                server_dir,
                Ready::Accepts,
            )?
        }
    };
    // The server is listening, so the front's port cannot be its.
    let front_addr = loopback(free_port()?);
    let front_dir = ScratchDir::new(&format!("{name}-front"))?;
    let ca = pki.as_ref().map(|p| p.ca.as_path());
    let front = match side {
        Side::Etemenanki => {
            let config = etemenanki_client(chain, front_addr.port(), server_addr.port(), ca);
            match launch_etemenanki_as(name, bins, &config, front_addr, front_dir, Ready::Socks5)? {
                Ok(front) => front,
                Err(why) => return Ok(Launch::Skipped(why)),
            }
        }
        Side::SsRust => {
            let (method, key) = method_and_key(chain);
            let command = sslocal(&client_bin, front_addr, server_addr, method, key);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
        Side::V2ray | Side::SingBox | Side::TrojanGfw => {
            let (file, config) = match side {
                Side::V2ray => (
                    "v2ray.json",
                    v2ray_client(chain, front_addr.port(), server_addr.port()),
                ),
                Side::SingBox => (
                    "sing-box.json",
                    sing_box_client(chain, front_addr.port(), server_addr.port(), ca),
                ),
                _ => (
                    "trojan.json",
                    crate::protocol::trojan_client_config(
                        front_addr.port(),
                        server_addr.port(),
                        ca.expect("trojan has certificates"),
                    ),
                ),
            };
            let path = front_dir.path().join(file);
            std::fs::write(&path, config)?;
            Proxy::spawn(
                name,
                run_config(side, &client_bin, &path),
                front_addr,
                front_dir,
            )?
        }
    };
    checked(name, front, server, echo)
}

/// The command that runs `program` on its configuration file `path`.
fn run_config(side: Side, program: &Path, path: &Path) -> Command {
    let mut command = Command::new(program);
    match side {
        Side::V2ray => command.arg("-config").arg(path),
        Side::SingBox => command.args(["run", "--disable-color", "-c"]).arg(path),
        _ => command.arg("-c").arg(path),
    };
    command
}

fn method_and_key(chain: Chain) -> (&'static str, &'static str) {
    match chain {
        Chain::Ss2022 => (SS2022_METHOD, SS2022_PSK),
        _ => (SS_METHOD, PASSWORD),
    }
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// Our server: the chain's inbound on 127.0.0.1, then freedom.
pub fn etemenanki_server(chain: Chain, port: u16, pki: Option<&Pki>) -> String {
    let tables = match chain {
        Chain::Shadowsocks => {
            format!("[inbound.settings]\nmethod = \"{SS_METHOD}\"\npassword = \"{PASSWORD}\"\n")
        }
        Chain::Ss2022 => {
            format!("[inbound.settings]\nmethod = \"{SS2022_METHOD}\"\npsk = \"{SS2022_PSK}\"\n")
        }
        Chain::VmessTcp => format!("[inbound.settings]\nid = \"{ID}\"\n"),
        Chain::VlessWs => format!(
            "[inbound.stream]\nnetwork = \"ws\"\n[inbound.stream.ws]\npath = \"{WS_PATH}\"\n\
             [inbound.settings]\nid = \"{ID}\"\n"
        ),
        Chain::TrojanTls => {
            let pki = pki.expect("trojan has certificates");
            format!(
                "[inbound.stream]\nsecurity = \"tls\"\n[inbound.stream.tls]\n\
                 cert_file = \"{}\"\nkey_file = \"{}\"\n[inbound.settings]\npassword = \"{PASSWORD}\"\n",
                show(&pki.cert),
                show(&pki.key)
            )
        }
    };
    format!(
        "[[inbound]]\ntag = \"in\"\nprotocol = \"{}\"\nlisten = \"127.0.0.1\"\nport = {port}\n{tables}\n\
         [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n[route]\ndefault = \"direct\"\n",
        protocol_name(chain)
    )
}

/// Our client: a plain SOCKS5 inbound on 127.0.0.1, the chain's outbound
/// to the server (trojan's TLS trusting `ca` and checking 127.0.0.1).
pub fn etemenanki_client(chain: Chain, port: u16, server_port: u16, ca: Option<&Path>) -> String {
    let tables = match chain {
        Chain::Shadowsocks => {
            format!("[outbound.settings]\nmethod = \"{SS_METHOD}\"\npassword = \"{PASSWORD}\"\n")
        }
        Chain::Ss2022 => {
            format!("[outbound.settings]\nmethod = \"{SS2022_METHOD}\"\npsk = \"{SS2022_PSK}\"\n")
        }
        Chain::VmessTcp => {
            format!("[outbound.settings]\nid = \"{ID}\"\nsecurity = \"aes-128-gcm\"\n")
        }
        Chain::VlessWs => format!(
            "[outbound.stream]\nnetwork = \"ws\"\n[outbound.stream.ws]\npath = \"{WS_PATH}\"\n\
             [outbound.settings]\nid = \"{ID}\"\n"
        ),
        Chain::TrojanTls => format!(
            "[outbound.stream]\nnetwork = \"tls\"\n[outbound.stream.tls]\nca_file = \"{}\"\n\
             [outbound.settings]\npassword = \"{PASSWORD}\"\n",
            ca.map(show).unwrap_or_default()
        ),
    };
    format!(
        "[[inbound]]\ntag = \"socks-in\"\nprotocol = \"socks\"\nlisten = \"127.0.0.1\"\nport = {port}\n\n\
         [[outbound]]\ntag = \"out\"\nprotocol = \"{}\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\
         {tables}\n[route]\ndefault = \"out\"\n",
        protocol_name(chain)
    )
}

fn protocol_name(chain: Chain) -> &'static str {
    match chain {
        Chain::Shadowsocks => "shadowsocks",
        Chain::Ss2022 => "shadowsocks-2022",
        Chain::VmessTcp => "vmess",
        Chain::VlessWs => "vless",
        Chain::TrojanTls => "trojan",
    }
}

/// v2ray's inbound or outbound `streamSettings` for `chain`.
fn v2ray_stream(chain: Chain) -> String {
    match chain {
        Chain::VlessWs => {
            format!(r#""network": "ws", "wsSettings": {{ "path": "{WS_PATH}" }}"#)
        }
        _ => r#""network": "tcp""#.to_owned(),
    }
}

/// v2ray 4.34 as the server: the chain's inbound (vmess with alterId 0,
/// vless), then freedom.
pub fn v2ray_server(chain: Chain, port: u16) -> String {
    let (protocol, settings) = match chain {
        Chain::VlessWs => (
            "vless",
            format!(r#"{{ "clients": [{{ "id": "{ID}" }}], "decryption": "none" }}"#),
        ),
        _ => (
            "vmess",
            format!(r#"{{ "clients": [{{ "id": "{ID}", "alterId": 0 }}] }}"#),
        ),
    };
    format!(
        r#"{{ "log": {{ "loglevel": "warning" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {port}, "protocol": "{protocol}",
    "settings": {settings}, "streamSettings": {{ {} }} }}],
  "outbounds": [{{ "protocol": "freedom", "settings": {{}} }}] }}
"#,
        v2ray_stream(chain)
    )
}

/// v2ray 4.34 as the client: a socks inbound on 127.0.0.1, the chain's
/// outbound (vmess aes-128-gcm with alterId 0, so the AEAD header).
pub fn v2ray_client(chain: Chain, port: u16, server_port: u16) -> String {
    let (protocol, user) = match chain {
        Chain::VlessWs => ("vless", format!(r#""id": "{ID}", "encryption": "none""#)),
        _ => (
            "vmess",
            format!(r#""id": "{ID}", "alterId": 0, "security": "aes-128-gcm""#),
        ),
    };
    format!(
        r#"{{ "log": {{ "loglevel": "warning" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {port}, "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": false }} }}],
  "outbounds": [{{ "protocol": "{protocol}",
    "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {server_port}, "users": [{{ {user} }}] }}] }},
    "streamSettings": {{ {} }} }}] }}
"#,
        v2ray_stream(chain)
    )
}

/// sing-box's inbound or outbound `transport` key for `chain`, with its
/// leading comma, or nothing.
fn sing_box_transport(chain: Chain) -> String {
    match chain {
        Chain::VlessWs => {
            format!(r#", "transport": {{ "type": "ws", "path": "{WS_PATH}" }}"#)
        }
        _ => String::new(),
    }
}

/// sing-box 1.14 as the server: the chain's inbound, then direct.
pub fn sing_box_server(chain: Chain, port: u16, pki: Option<&Pki>) -> String {
    let inbound = match chain {
        Chain::Shadowsocks | Chain::Ss2022 => {
            let (method, key) = method_and_key(chain);
            format!(r#""type": "shadowsocks", "method": "{method}", "password": "{key}""#)
        }
        Chain::VmessTcp => {
            format!(r#""type": "vmess", "users": [{{ "uuid": "{ID}", "alterId": 0 }}]"#)
        }
        Chain::VlessWs => format!(r#""type": "vless", "users": [{{ "uuid": "{ID}" }}]"#),
        Chain::TrojanTls => {
            let pki = pki.expect("trojan has certificates");
            format!(
                r#""type": "trojan", "users": [{{ "password": "{PASSWORD}" }}],
    "tls": {{ "enabled": true, "certificate_path": "{}", "key_path": "{}" }}"#,
                show(&pki.cert),
                show(&pki.key)
            )
        }
    };
    format!(
        r#"{{ "log": {{ "level": "warn" }},
  "inbounds": [{{ {inbound}, "listen": "127.0.0.1", "listen_port": {port}{} }}],
  "outbounds": [{{ "type": "direct" }}] }}
"#,
        sing_box_transport(chain)
    )
}

/// sing-box 1.14 as the client: a socks inbound on 127.0.0.1, the chain's
/// outbound (trojan's TLS trusting `ca` as its root, checking 127.0.0.1).
pub fn sing_box_client(chain: Chain, port: u16, server_port: u16, ca: Option<&Path>) -> String {
    let outbound = match chain {
        Chain::Shadowsocks | Chain::Ss2022 => {
            let (method, key) = method_and_key(chain);
            format!(r#""type": "shadowsocks", "method": "{method}", "password": "{key}""#)
        }
        Chain::VmessTcp => {
            format!(r#""type": "vmess", "uuid": "{ID}", "security": "aes-128-gcm", "alter_id": 0"#)
        }
        Chain::VlessWs => format!(r#""type": "vless", "uuid": "{ID}""#),
        Chain::TrojanTls => format!(
            r#""type": "trojan", "password": "{PASSWORD}",
    "tls": {{ "enabled": true, "server_name": "127.0.0.1", "certificate_path": "{}" }}"#,
            ca.map(show).unwrap_or_default()
        ),
    };
    format!(
        r#"{{ "log": {{ "level": "warn" }},
  "inbounds": [{{ "type": "socks", "listen": "127.0.0.1", "listen_port": {port} }}],
  "outbounds": [{{ {outbound}, "server": "127.0.0.1", "server_port": {server_port}{} }}] }}
"#,
        sing_box_transport(chain)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_listens_on_loopback_and_dials_the_server_on_loopback() {
        let pki = Pki {
            ca: PathBuf::from("/scratch/ca.pem"),
            cert: PathBuf::from("/scratch/server.pem"),
            key: PathBuf::from("/scratch/server-key.pem"),
        };
        for chain in Chain::ALL {
            let server = etemenanki_server(chain, 2000, Some(&pki));
            assert!(
                server.contains("listen = \"127.0.0.1\"\nport = 2000\n"),
                "{server}"
            );
            let client = etemenanki_client(chain, 1000, 2000, Some(&pki.ca));
            assert!(client.contains("listen = \"127.0.0.1\"\nport = 1000\n"));
            assert!(client.contains("server = \"127.0.0.1\"\nport = 2000\n"));
            let server = sing_box_server(chain, 2000, Some(&pki));
            assert!(server.contains(r#""listen": "127.0.0.1", "listen_port": 2000"#));
            let client = sing_box_client(chain, 1000, 2000, Some(&pki.ca));
            assert!(client.contains(r#""listen": "127.0.0.1", "listen_port": 1000"#));
            assert!(client.contains(r#""server": "127.0.0.1", "server_port": 2000"#));
        }
        for chain in [Chain::VmessTcp, Chain::VlessWs] {
            assert!(v2ray_server(chain, 2000).contains(r#""listen": "127.0.0.1", "port": 2000"#));
            let client = v2ray_client(chain, 1000, 2000);
            assert!(client.contains(r#""listen": "127.0.0.1", "port": 1000"#));
            assert!(client.contains(r#""address": "127.0.0.1", "port": 2000"#));
        }
        let ws = etemenanki_server(Chain::VlessWs, 2000, None);
        assert!(ws.contains("network = \"ws\"\n[inbound.stream.ws]\npath = \"/bench-ws\"\n"));
    }

    #[test]
    fn the_2022_psk_is_16_bytes() {
        // 16 bytes are 24 base64 characters with two '=' of padding.
        assert_eq!(SS2022_PSK.len(), 24);
        assert!(SS2022_PSK.ends_with("=="));
    }
}
