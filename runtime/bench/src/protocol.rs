//! The protocol chains: the client speaks plain SOCKS5 to a proxy client
//! (ours or the peer's own), which speaks shadowsocks, shadowsocks 2022,
//! trojan, vmess, vless or WireGuard to a real server of that protocol,
//! which connects
//! to the bench's loopback servers. Every client of one protocol talks to the
//! same server program with the same method and key; the figures that
//! compare the clients are the front's (the client's) own.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::chain::{checked, loopback};
use crate::peers::{launch_etemenanki_as, Binaries, Launch};
use crate::pki::{self, Pki};
use crate::proxy::{free_port, Proxy, Ready, ScratchDir};

/// The shadowsocks AEAD method every AEAD chain uses.
pub const SS_METHOD: &str = "aes-256-gcm";
/// The shadowsocks 2022 method every 2022 chain uses.
pub const SS2022_METHOD: &str = "2022-blake3-aes-256-gcm";
/// The AEAD password, and the trojan password.
const PASSWORD: &str = "etemenanki-bench-secret";
/// The 2022 PSK: base64 of 32 bytes of 0x42 (nothing here is secret).
const SS2022_PSK: &str = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";
/// WireGuard keys made for the bench with `sing-box generate wg-keypair`
/// (nothing here is secret): the server's, and the client's that every
/// WireGuard client uses.
const WG_SERVER_PRIVATE: &str = "ILuP49m9Q22zkqhqe6+Rd2APOXtZwVx3RH8cso5y1kY=";
const WG_SERVER_PUBLIC: &str = "uHtXOzSFDuYkvTQ7kFY+a4cnTS89/y8jDRHVnIQheHo=";
const WG_CLIENT_PRIVATE: &str = "mCHjx/7h8q8sQRGdubrz7UaWrnYxD6xl/3E1MkWGO2U=";
const WG_CLIENT_PUBLIC: &str = "EWr3ZqfVOWUBNOGWaZg61hOEDeL6saB4/3a4gwJhfQg=";
/// The server's and the client's addresses inside the tunnel. sing-box
/// sends what arrives for its own address on to loopback.
const WG_SERVER_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const WG_CLIENT_V4: &str = "10.77.0.2";
const WG_MTU: u16 = 1420;

const SSSERVER: &str = "ssserver";
const SSLOCAL: &str = "sslocal";
const SS_LOCAL: &str = "/usr/bin/ss-local";
const SING_BOX: &str = "sing-box";
const TROJAN: &str = "/usr/bin/trojan";
const V2RAY: &str = "/usr/bin/v2ray";
/// The vmess and vless user.
const UUID: &str = "5a1e7c9d-3b2f-4e8a-9c61-0d4b8f2a7e13";
/// The vmess body security of every vmess client.
pub const VMESS_SECURITY: &str = "aes-128-gcm";
/// The WebSocket path of the vless ws chain.
const WS_PATH: &str = "/bench";
/// The gRPC service of the vless grpc chain.
const GRPC_SERVICE: &str = "bench.Tunnel";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Shadowsocks,
    Ss2022,
    Trojan,
    /// vmess over TCP, to sing-box (v2ray 4.34's server drops the odd
    /// connection of every client under the connection-rate runs).
    Vmess,
    /// vless over WebSocket and TLS, to v2ray.
    VlessWs,
    /// vless over gRPC and TLS, to sing-box (v2ray 4.34 has no gRPC).
    VlessGrpc,
    Wireguard,
    /// Hysteria 2 over QUIC, BBR on both ends, to sing-box.
    Hysteria2,
    /// Hysteria 2 end to end: each client in front of its own project's
    /// server (ours to ours, sing-box to sing-box).
    Hysteria2Chain,
}

impl Protocol {
    pub const ALL: [Protocol; 9] = [
        Protocol::Shadowsocks,
        Protocol::Ss2022,
        Protocol::Trojan,
        Protocol::Vmess,
        Protocol::VlessWs,
        Protocol::VlessGrpc,
        Protocol::Wireguard,
        Protocol::Hysteria2,
        Protocol::Hysteria2Chain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Shadowsocks => "shadowsocks AEAD (aes-256-gcm), server ssserver",
            Protocol::Ss2022 => "shadowsocks 2022 (2022-blake3-aes-256-gcm), server ssserver",
            Protocol::Trojan => "trojan (TLS), server trojan-gfw",
            Protocol::Vmess => "vmess over tcp (aes-128-gcm), server sing-box",
            Protocol::VlessWs => "vless over ws and tls, server v2ray 4.34",
            Protocol::VlessGrpc => {
                "vless over grpc and tls, server sing-box (v2ray 4.34 has no grpc)"
            }
            Protocol::Wireguard => "wireguard, server sing-box's wireguard endpoint",
            Protocol::Hysteria2 => "hysteria2 (QUIC, BBR), server sing-box",
            Protocol::Hysteria2Chain => {
                "hysteria2 (QUIC, BBR), full chains: ours to ours, sing-box to sing-box"
            }
        }
    }

    /// Whether the chain is measured on UDP too: Hysteria 2, whose UDP is
    /// its own path (QUIC datagrams); the others are compared on TCP alone.
    pub fn measures_udp(self) -> bool {
        matches!(self, Protocol::Hysteria2 | Protocol::Hysteria2Chain)
    }

    /// Whether the server presents the bench's certificate.
    fn uses_tls(self) -> bool {
        matches!(
            self,
            Protocol::Trojan
                | Protocol::VlessWs
                | Protocol::VlessGrpc
                | Protocol::Hysteria2
                | Protocol::Hysteria2Chain
        )
    }
}

/// The program in front: ours, or a peer's own client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    Etemenanki,
    /// shadowsocks-rust's sslocal.
    Sslocal,
    /// shadowsocks-libev's ss-local.
    SsLocal,
    SingBox,
    /// trojan-gfw with `run_type` client.
    TrojanGfw,
    /// v2ray 4.34 with a socks inbound and the protocol's outbound.
    V2ray,
}

/// Where a program is: an absolute path, or a name looked up on PATH and
/// in ~/.cargo/bin (where `cargo install shadowsocks-rust` puts it).
pub fn find(program: &str) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.is_absolute() {
        return path.is_file().then(|| path.to_owned());
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

pub fn require(program: &str) -> Result<PathBuf, String> {
    find(program)
        .ok_or_else(|| format!("{program} is not installed (not on PATH nor in ~/.cargo/bin)"))
}

/// Starts the real server of `protocol`, then `client` in front of it,
/// then one byte through both to `echo`. `bins` is the Etemenanki build
/// for our client.
pub fn launch(
    name: &'static str,
    protocol: Protocol,
    client: Client,
    bins: &Binaries,
    echo: SocketAddr,
) -> io::Result<Launch> {
    let server_bin = match protocol {
        Protocol::Shadowsocks | Protocol::Ss2022 => require(SSSERVER),
        Protocol::Trojan => require(TROJAN),
        Protocol::VlessWs => require(V2RAY),
        Protocol::Vmess | Protocol::VlessGrpc | Protocol::Hysteria2 => require(SING_BOX),
        // Our server needs no peer; sing-box's chain ends at sing-box.
        Protocol::Hysteria2Chain if client == Client::Etemenanki => Ok(PathBuf::new()),
        Protocol::Hysteria2Chain => require(SING_BOX),
        Protocol::Wireguard => require(SING_BOX),
    };
    let client_bin = match client {
        Client::Etemenanki => Ok(PathBuf::new()),
        Client::Sslocal => require(SSLOCAL),
        Client::SsLocal => require(SS_LOCAL),
        Client::SingBox => require(SING_BOX),
        Client::TrojanGfw => require(TROJAN),
        Client::V2ray => require(V2RAY),
    };
    let (server_bin, client_bin) = match (server_bin, client_bin) {
        (Ok(server), Ok(client)) => (server, client),
        (Err(why), _) | (_, Err(why)) => return Ok(Launch::Skipped(why)),
    };
    if protocol.uses_tls() {
        if let Some(why) = pki::missing() {
            return Ok(Launch::Skipped(why));
        }
    }
    let server_dir = ScratchDir::new(&format!("{name}-server"))?;
    let pki = protocol
        .uses_tls()
        .then(|| Pki::make(server_dir.path()))
        .transpose()?;
    let server_addr = loopback(free_port()?);
    let ours_to_ours = protocol == Protocol::Hysteria2Chain && client == Client::Etemenanki;
    let mut command = Command::new(&server_bin);
    match protocol {
        _ if ours_to_ours => {}
        Protocol::Shadowsocks | Protocol::Ss2022 => {
            let (method, key) = method_and_key(protocol);
            command
                .arg("-s")
                .arg(server_addr.to_string())
                .args(["-m", method, "-k", key]);
        }
        Protocol::Trojan => {
            let pki = pki.as_ref().expect("trojan has certificates");
            // What it cannot authenticate goes to a port nothing listens on.
            let fallback = free_port()?;
            let config = server_dir.path().join("trojan.json");
            std::fs::write(
                &config,
                trojan_server_config(server_addr.port(), fallback, &pki.cert, &pki.key),
            )?;
            command.arg("-c").arg(&config);
        }
        Protocol::VlessWs => {
            let pki = pki.as_ref().expect("vless over ws has certificates");
            let config = server_dir.path().join("v2ray.json");
            std::fs::write(
                &config,
                v2ray_server_config(server_addr.port(), &pki.cert, &pki.key),
            )?;
            command.arg("-config").arg(&config);
        }
        Protocol::Vmess | Protocol::VlessGrpc | Protocol::Hysteria2 | Protocol::Hysteria2Chain => {
            let pair = pki.as_ref().map(|p| (p.cert.as_path(), p.key.as_path()));
            let config = server_dir.path().join("sing-box.json");
            std::fs::write(
                &config,
                sing_box_server_config(protocol, server_addr.port(), pair),
            )?;
            command.args(["run", "--disable-color", "-c"]).arg(&config);
        }
        Protocol::Wireguard => {
            let config = server_dir.path().join("sing-box.json");
            std::fs::write(&config, wireguard_server_config(server_addr.port()))?;
            command.args(["run", "--disable-color", "-c"]).arg(&config);
        }
    }
    let server_name: &'static str = match protocol {
        _ if ours_to_ours => "etemenanki hysteria2 server",
        Protocol::Trojan => "trojan-gfw server",
        Protocol::VlessWs => "v2ray server",
        Protocol::Vmess | Protocol::VlessGrpc | Protocol::Hysteria2 | Protocol::Hysteria2Chain => {
            "sing-box server"
        }
        Protocol::Shadowsocks | Protocol::Ss2022 => "ssserver",
        Protocol::Wireguard => "sing-box wireguard server",
    };
    // A QUIC server accepts no TCP connection: it is ready once its UDP
    // port is bound.
    let ready = if protocol.measures_udp() {
        Ready::BoundUdp
    } else {
        Ready::Accepts
    };
    let server = if ours_to_ours {
        let pki = pki.as_ref().expect("hysteria2 has certificates");
        let config = etemenanki_hysteria2_server_config(server_addr.port(), &pki.cert, &pki.key);
        match launch_etemenanki_as(server_name, bins, &config, server_addr, server_dir, ready)? {
            Ok(server) => server,
            Err(why) => return Ok(Launch::Skipped(why)),
        }
    } else {
        Proxy::spawn_until(server_name, command, server_addr, server_dir, ready)?
    };
    // The server is listening, so the front's port cannot be its.
    let front_addr = loopback(free_port()?);
    let front_dir = ScratchDir::new(&format!("{name}-front"))?;
    let ca = pki.as_ref().map(|p| p.ca.as_path());
    let front = match client {
        Client::Etemenanki => {
            let config = etemenanki_config(protocol, front_addr.port(), server_addr.port(), ca);
            match launch_etemenanki_as(name, bins, &config, front_addr, front_dir, Ready::Socks5)? {
                Ok(front) => front,
                Err(why) => return Ok(Launch::Skipped(why)),
            }
        }
        Client::Sslocal => {
            let (method, key) = method_and_key(protocol);
            let command = sslocal(&client_bin, front_addr, server_addr, method, key);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
        Client::SsLocal => {
            let (method, key) = method_and_key(protocol);
            let mut command = Command::new(&client_bin);
            command
                .args(["-s", "127.0.0.1", "-p"])
                .arg(server_addr.port().to_string())
                .args(["-b", "127.0.0.1", "-l"])
                .arg(front_addr.port().to_string())
                .args(["-m", method, "-k", key]);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
        Client::SingBox => {
            let config = front_dir.path().join("sing-box.json");
            std::fs::write(
                &config,
                sing_box_config(protocol, front_addr.port(), server_addr.port(), ca),
            )?;
            let mut command = Command::new(&client_bin);
            command.args(["run", "--disable-color", "-c"]).arg(&config);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
        Client::TrojanGfw => {
            let config = front_dir.path().join("trojan.json");
            let ca = ca.expect("trojan has certificates");
            std::fs::write(
                &config,
                trojan_client_config(front_addr.port(), server_addr.port(), ca),
            )?;
            let mut command = Command::new(&client_bin);
            command.arg("-c").arg(&config);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
        Client::V2ray => {
            let config = front_dir.path().join("v2ray.json");
            std::fs::write(
                &config,
                v2ray_client_config(protocol, front_addr.port(), server_addr.port(), ca),
            )?;
            let mut command = Command::new(&client_bin);
            command.arg("-config").arg(&config);
            Proxy::spawn(name, command, front_addr, front_dir)?
        }
    };
    let echo = match protocol {
        Protocol::Wireguard => through_tunnel(echo),
        _ => echo,
    };
    checked(name, front, server, echo)
}

/// shadowsocks-rust's client of `server` for `method` and `key`, SOCKS5 on
/// `front`.
pub fn sslocal(
    bin: &Path,
    front: SocketAddr,
    server: SocketAddr,
    method: &str,
    key: &str,
) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("-b")
        .arg(front.to_string())
        .arg("-s")
        .arg(server.to_string())
        .args(["-m", method, "-k", key]);
    command
}

fn method_and_key(protocol: Protocol) -> (&'static str, &'static str) {
    match protocol {
        Protocol::Ss2022 => (SS2022_METHOD, SS2022_PSK),
        _ => (SS_METHOD, PASSWORD),
    }
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// Our runtime as the client: a plain SOCKS5 inbound on 127.0.0.1, the
/// protocol's outbound to the server (trojan over TLS trusting `ca` and
/// checking 127.0.0.1).
pub fn etemenanki_config(
    protocol: Protocol,
    port: u16,
    server_port: u16,
    ca: Option<&Path>,
) -> String {
    let outbound = match protocol {
        Protocol::Shadowsocks => format!(
            "protocol = \"shadowsocks\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.settings]\nmethod = \"{SS_METHOD}\"\npassword = \"{PASSWORD}\"\n"
        ),
        Protocol::Ss2022 => format!(
            "protocol = \"shadowsocks-2022\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.settings]\nmethod = \"{SS2022_METHOD}\"\npsk = \"{SS2022_PSK}\"\n"
        ),
        Protocol::Trojan => format!(
            "protocol = \"trojan\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.stream]\nnetwork = \"tls\"\n\n\
             [outbound.stream.tls]\nca_file = \"{}\"\n\n\
             [outbound.settings]\npassword = \"{PASSWORD}\"\n",
            ca.map(show).unwrap_or_default()
        ),
        Protocol::Vmess => format!(
            "protocol = \"vmess\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.settings]\nid = \"{UUID}\"\nsecurity = \"{VMESS_SECURITY}\"\n"
        ),
        Protocol::VlessWs => format!(
            "protocol = \"vless\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.stream]\nnetwork = \"ws\"\nsecurity = \"tls\"\n\n\
             [outbound.stream.ws]\npath = \"{WS_PATH}\"\n\n\
             [outbound.stream.tls]\nca_file = \"{}\"\n\n\
             [outbound.settings]\nid = \"{UUID}\"\n",
            ca.map(show).unwrap_or_default()
        ),
        Protocol::VlessGrpc => format!(
            "protocol = \"vless\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.stream]\nnetwork = \"grpc\"\nsecurity = \"tls\"\n\n\
             [outbound.stream.grpc]\nservice_name = \"{GRPC_SERVICE}\"\n\n\
             [outbound.stream.tls]\nca_file = \"{}\"\n\n\
             [outbound.settings]\nid = \"{UUID}\"\n",
            ca.map(show).unwrap_or_default()
        ),
        Protocol::Wireguard => format!(
            "protocol = \"wireguard\"\n\n\
             [outbound.settings]\nprivate_key = \"{WG_CLIENT_PRIVATE}\"\n\
             peer_public_key = \"{WG_SERVER_PUBLIC}\"\n\
             endpoint = \"127.0.0.1:{server_port}\"\naddresses = [\"{WG_CLIENT_V4}\"]\n\
             mtu = {WG_MTU}\n"
        ),
        Protocol::Hysteria2 | Protocol::Hysteria2Chain => format!(
            "protocol = \"hysteria2\"\nserver = \"127.0.0.1\"\nport = {server_port}\n\n\
             [outbound.stream.tls]\nca_file = \"{}\"\n\n\
             [outbound.settings]\npassword = \"{PASSWORD}\"\n\
             max_concurrent_streams = 4096\n",
            ca.map(show).unwrap_or_default()
        ),
    };
    let udp = if protocol.measures_udp() {
        "\n[inbound.settings]\nudp = true\n"
    } else {
        ""
    };
    format!(
        "\
[[inbound]]
tag = \"socks-in\"
protocol = \"socks\"
listen = \"127.0.0.1\"
port = {port}
{udp}
[[outbound]]
tag = \"out\"
{outbound}
[route]
default = \"out\"
"
    )
}

/// sing-box 1.14 as the client: a socks inbound on 127.0.0.1, the
/// protocol's outbound (trojan's TLS trusting `ca` as its root).
pub fn sing_box_config(
    protocol: Protocol,
    port: u16,
    server_port: u16,
    ca: Option<&Path>,
) -> String {
    let outbound = match protocol {
        Protocol::Shadowsocks | Protocol::Ss2022 => {
            let (method, key) = method_and_key(protocol);
            format!(
                r#"{{ "type": "shadowsocks", "tag": "out", "server": "127.0.0.1", "server_port": {server_port},
    "method": "{method}", "password": "{key}" }}"#
            )
        }
        Protocol::Trojan => format!(
            r#"{{ "type": "trojan", "tag": "out", "server": "127.0.0.1", "server_port": {server_port},
    "password": "{PASSWORD}",
    "tls": {{ "enabled": true, "server_name": "127.0.0.1", "certificate_path": "{}" }} }}"#,
            ca.map(show).unwrap_or_default()
        ),
        Protocol::Vmess => format!(
            r#"{{ "type": "vmess", "tag": "out", "server": "127.0.0.1", "server_port": {server_port},
    "uuid": "{UUID}", "security": "{VMESS_SECURITY}", "alter_id": 0 }}"#
        ),
        Protocol::VlessWs | Protocol::VlessGrpc => {
            let transport = match protocol {
                Protocol::VlessWs => format!(r#"{{ "type": "ws", "path": "{WS_PATH}" }}"#),
                _ => format!(r#"{{ "type": "grpc", "service_name": "{GRPC_SERVICE}" }}"#),
            };
            format!(
                r#"{{ "type": "vless", "tag": "out", "server": "127.0.0.1", "server_port": {server_port},
    "uuid": "{UUID}",
    "tls": {{ "enabled": true, "server_name": "127.0.0.1", "certificate_path": "{}" }},
    "transport": {transport} }}"#,
                ca.map(show).unwrap_or_default()
            )
        }
        Protocol::Wireguard => {
            // The client side is an endpoint too; the route sends every
            // flow into it.
            return format!(
                r#"{{
  "log": {{ "level": "warn" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {port} }}],
  "endpoints": [{{ "type": "wireguard", "tag": "out", "system": false, "mtu": {WG_MTU},
    "address": ["{WG_CLIENT_V4}/32"], "private_key": "{WG_CLIENT_PRIVATE}",
    "peers": [{{ "address": "127.0.0.1", "port": {server_port},
      "public_key": "{WG_SERVER_PUBLIC}", "allowed_ips": ["0.0.0.0/0"] }}] }}],
  "route": {{ "final": "out" }}
}}
"#
            );
        }
        Protocol::Hysteria2 | Protocol::Hysteria2Chain => format!(
            r#"{{ "type": "hysteria2", "tag": "out", "server": "127.0.0.1", "server_port": {server_port},
    "password": "{PASSWORD}",
    "tls": {{ "enabled": true, "server_name": "127.0.0.1", "alpn": ["h3"], "certificate_path": "{}" }} }}"#,
            ca.map(show).unwrap_or_default()
        ),
    };
    format!(
        r#"{{
  "log": {{ "level": "warn" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {port} }}],
  "outbounds": [{outbound}]
}}
"#
    )
}

/// v2ray's `streamSettings` of a vless ws chain: ws on the bench's path
/// and TLS with `tls`'s fields (a server's certificate or a client's CA).
fn v2ray_ws_tls(tls: &str) -> String {
    format!(
        r#""streamSettings": {{ "network": "ws", "security": "tls",
      "wsSettings": {{ "path": "{WS_PATH}" }},
      "tlsSettings": {{ {tls} }} }}"#
    )
}

/// v2ray 4.34 serving vless over ws and TLS with `cert` and `key` on
/// `port`, to freedom.
pub fn v2ray_server_config(port: u16, cert: &Path, key: &Path) -> String {
    let stream = v2ray_ws_tls(&format!(
        r#""certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}]"#,
        show(cert),
        show(key)
    ));
    format!(
        r#"{{
  "log": {{ "loglevel": "warning" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {port}, "protocol": "vless",
    "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }},
    {stream} }}],
  "outbounds": [{{ "protocol": "freedom", "settings": {{}} }}]
}}
"#
    )
}

/// v2ray 4.34 as the client: a socks inbound on 127.0.0.1, the vmess
/// outbound, or the vless one over ws and TLS trusting `ca` alone and
/// checking 127.0.0.1.
pub fn v2ray_client_config(
    protocol: Protocol,
    port: u16,
    server_port: u16,
    ca: Option<&Path>,
) -> String {
    let outbound = match protocol {
        Protocol::VlessWs => format!(
            r#"{{ "protocol": "vless",
    "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {server_port},
      "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }},
    {} }}"#,
            v2ray_ws_tls(&format!(
                r#""serverName": "127.0.0.1", "disableSystemRoot": true,
        "certificates": [{{ "usage": "verify", "certificateFile": "{}" }}]"#,
                ca.map(show).unwrap_or_default()
            ))
        ),
        _ => format!(
            r#"{{ "protocol": "vmess",
    "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {server_port},
      "users": [{{ "id": "{UUID}", "alterId": 0, "security": "{VMESS_SECURITY}" }}] }}] }} }}"#
        ),
    };
    format!(
        r#"{{
  "log": {{ "loglevel": "warning" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {port}, "protocol": "socks",
    "settings": {{ "auth": "noauth", "udp": false, "ip": "127.0.0.1" }} }}],
  "outbounds": [{outbound}]
}}
"#
    )
}

/// sing-box serving vmess over TCP, or vless over gRPC and TLS (with
/// `pair`, the certificate and key), on `port`, to direct.
pub fn sing_box_server_config(
    protocol: Protocol,
    port: u16,
    pair: Option<(&Path, &Path)>,
) -> String {
    let inbound = match (protocol, pair) {
        (Protocol::VlessGrpc, Some((cert, key))) => format!(
            r#""type": "vless", "users": [{{ "uuid": "{UUID}" }}],
    "tls": {{ "enabled": true, "certificate_path": "{}", "key_path": "{}" }},
    "transport": {{ "type": "grpc", "service_name": "{GRPC_SERVICE}" }}"#,
            show(cert),
            show(key)
        ),
        (Protocol::Hysteria2 | Protocol::Hysteria2Chain, Some((cert, key))) => format!(
            r#""type": "hysteria2", "users": [{{ "name": "bench", "password": "{PASSWORD}" }}],
    "tls": {{ "enabled": true, "alpn": ["h3"], "certificate_path": "{}", "key_path": "{}" }}"#,
            show(cert),
            show(key)
        ),
        _ => format!(r#""type": "vmess", "users": [{{ "uuid": "{UUID}", "alterId": 0 }}]"#),
    };
    format!(
        r#"{{
  "log": {{ "level": "warn" }},
  "inbounds": [{{ {inbound}, "tag": "in", "listen": "127.0.0.1", "listen_port": {port} }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}]
}}
"#
    )
}

/// `server`'s port at the WireGuard server's own tunnel address, where a
/// client inside the tunnel reaches a loopback server.
pub fn through_tunnel(server: SocketAddr) -> SocketAddr {
    SocketAddr::from((WG_SERVER_V4, server.port()))
}

/// sing-box's wireguard endpoint on UDP 127.0.0.1:`port` with the bench's
/// client as its one peer, sending flows out directly; a socks inbound on
/// TCP 127.0.0.1:`port` only so the bench sees it ready.
pub fn wireguard_server_config(port: u16) -> String {
    format!(
        r#"{{
  "log": {{ "level": "warn" }},
  "inbounds": [{{ "type": "socks", "tag": "ready", "listen": "127.0.0.1", "listen_port": {port} }}],
  "endpoints": [{{ "type": "wireguard", "tag": "wg-in", "system": false, "mtu": {WG_MTU},
    "address": ["{WG_SERVER_V4}/32"], "private_key": "{WG_SERVER_PRIVATE}", "listen_port": {port},
    "peers": [{{ "public_key": "{WG_CLIENT_PUBLIC}", "allowed_ips": ["{WG_CLIENT_V4}/32"] }}] }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}],
  "route": {{ "final": "direct" }}
}}
"#
    )
}

/// Our runtime serving Hysteria 2 on UDP `port` with the bench's
/// certificate, accepting the bench's password, then freedom.
pub fn etemenanki_hysteria2_server_config(port: u16, cert: &Path, key: &Path) -> String {
    format!(
        "[[inbound]]\ntag = \"hy2-in\"\nprotocol = \"hysteria2\"\nlisten = \"127.0.0.1\"\nport = {port}\n\n\
         [inbound.stream.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n\n\
         [inbound.settings]\npassword = \"{PASSWORD}\"\n\n\
         [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n[route]\ndefault = \"direct\"\n",
        show(cert),
        show(key)
    )
}

/// trojan-gfw serving `port` with the bench's certificate; what it does
/// not authenticate goes to `fallback`.
pub fn trojan_server_config(port: u16, fallback: u16, cert: &Path, key: &Path) -> String {
    format!(
        r#"{{ "run_type": "server",
  "local_addr": "127.0.0.1", "local_port": {port},
  "remote_addr": "127.0.0.1", "remote_port": {fallback},
  "password": ["{PASSWORD}"],
  "log_level": 3,
  "ssl": {{ "cert": "{}", "key": "{}" }} }}
"#,
        show(cert),
        show(key)
    )
}

/// trojan-gfw as the client: SOCKS5 on 127.0.0.1, trusting `ca` alone and
/// checking the name 127.0.0.1.
pub fn trojan_client_config(port: u16, server_port: u16, ca: &Path) -> String {
    format!(
        r#"{{ "run_type": "client",
  "local_addr": "127.0.0.1", "local_port": {port},
  "remote_addr": "127.0.0.1", "remote_port": {server_port},
  "password": ["{PASSWORD}"],
  "log_level": 3,
  "ssl": {{ "verify": true, "verify_hostname": true, "cert": "{}", "sni": "127.0.0.1" }} }}
"#,
        show(ca)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_configs_listen_on_loopback_and_dial_the_server_on_loopback() {
        let ca = PathBuf::from("/scratch/ca.pem");
        for protocol in Protocol::ALL {
            let ours = etemenanki_config(protocol, 1000, 2000, Some(&ca));
            assert!(ours.contains("listen = \"127.0.0.1\"\nport = 1000\n"));
            if protocol == Protocol::Wireguard {
                assert!(ours.contains("endpoint = \"127.0.0.1:2000\"\n"));
                let sing_box = sing_box_config(protocol, 1000, 2000, None);
                assert!(sing_box.contains(r#""address": "127.0.0.1", "port": 2000,"#));
                assert!(wireguard_server_config(2000).contains(r#""listen_port": 2000,"#));
                continue;
            }
            assert!(ours.contains("server = \"127.0.0.1\"\nport = 2000\n"));
            let sing_box = sing_box_config(protocol, 1000, 2000, Some(&ca));
            assert!(sing_box.contains(r#""listen": "127.0.0.1", "listen_port": 1000"#));
            assert!(sing_box.contains(r#""server": "127.0.0.1", "server_port": 2000"#));
        }
        let server = sing_box_server_config(Protocol::Vmess, 2000, None);
        assert!(server.contains(r#""type": "vmess""#));
        let pair = (ca.as_path(), ca.as_path());
        let server = v2ray_server_config(2000, &ca, &ca);
        assert!(server.contains(r#""protocol": "vless""#));
        assert!(server.contains(r#""network": "ws", "security": "tls""#));
        for protocol in [Protocol::Vmess, Protocol::VlessWs] {
            let client = v2ray_client_config(protocol, 1000, 2000, Some(&ca));
            assert!(client.contains(r#""listen": "127.0.0.1", "port": 1000"#));
            assert!(client.contains(r#""address": "127.0.0.1", "port": 2000"#));
        }
        let server = sing_box_server_config(Protocol::VlessGrpc, 2000, Some(pair));
        assert!(server.contains(r#""listen": "127.0.0.1", "listen_port": 2000"#));
        assert!(server.contains(r#""type": "grpc""#));
        let ours = etemenanki_config(Protocol::VlessGrpc, 1000, 2000, Some(&ca));
        assert!(ours.contains("network = \"grpc\"\nsecurity = \"tls\"\n"));
        let ours = etemenanki_config(Protocol::Trojan, 1000, 2000, Some(&ca));
        assert!(ours.contains("network = \"tls\"\n"));
        assert!(ours.contains("ca_file = \"/scratch/ca.pem\"\n"));
        let ours = etemenanki_config(Protocol::Ss2022, 1000, 2000, None);
        assert!(ours.contains("method = \"2022-blake3-aes-256-gcm\"\npsk = "));
        let client = trojan_client_config(1000, 2000, &ca);
        assert!(client.contains(r#""local_addr": "127.0.0.1", "local_port": 1000,"#));
        assert!(client.contains(r#""remote_addr": "127.0.0.1", "remote_port": 2000,"#));
    }

    #[test]
    fn the_2022_psk_is_32_bytes() {
        // 32 bytes are 44 base64 characters with one '=' of padding.
        assert_eq!(SS2022_PSK.len(), 44);
        assert!(SS2022_PSK.ends_with('=') && !SS2022_PSK.ends_with("=="));
    }
}
