//! The source model: what an operator wrote, with a span on every value.
//!
//! Both front ends produce a [`Config`]. The TOML front end deserializes it
//! directly (unknown keys refused with serde's texts);
//! the `.et` front end builds it from its parse tree. Lowering turns it into
//! an `ir::Spec`, filling every default.
//!
//! Keys that only some protocols use live in one `settings` table per
//! inbound or outbound; lowering refuses a key that does not apply to the
//! protocol.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Unexpected, Visitor};
use serde::Deserialize;
pub use serde_spanned::Spanned;

use etemenanki_ir::route::PortRange;
use etemenanki_ir::spec::DrainPolicy;

/// A whole configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The drain policy of every outbound that does not set its own.
    #[serde(default)]
    pub drain: Option<Spanned<Drain>>,
    #[serde(default, rename = "inbound")]
    pub inbounds: Vec<Spanned<Inbound>>,
    #[serde(default, rename = "outbound")]
    pub outbounds: Vec<Spanned<Outbound>>,
    #[serde(default, rename = "balancer")]
    pub balancers: Vec<Spanned<Balancer>>,
    /// Not `Spanned`: `[[route.rule]]` alone creates `[route]` implicitly,
    /// and toml 0.8 cannot give an implicit table a span.
    #[serde(default)]
    pub route: Option<Route>,
    #[serde(default)]
    pub dns: Option<Spanned<Dns>>,
    #[serde(default)]
    pub socket: Option<Spanned<Socket>>,
    #[serde(default)]
    pub limits: Option<Spanned<Limits>>,
}

pub type List<T> = Vec<Spanned<T>>;

// ---------------------------------------------------------------- inbounds

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inbound {
    pub tag: Spanned<String>,
    pub protocol: Spanned<String>,
    /// An IP address; defaults to 127.0.0.1.
    #[serde(default)]
    pub listen: Option<Spanned<String>>,
    pub port: Spanned<u16>,
    #[serde(default)]
    pub sniff: Option<Spanned<bool>>,
    /// Tables that a deeper header can create implicitly carry no span.
    #[serde(default)]
    pub stream: Option<InboundStream>,
    #[serde(default)]
    pub settings: Option<InboundSettings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboundSettings {
    /// socks, shadowsocks: relay UDP (default true).
    #[serde(default)]
    pub udp: Option<Spanned<bool>>,
    /// socks, http: username and password pairs.
    #[serde(default)]
    pub accounts: Option<List<Account>>,
    /// trojan, shadowsocks, hysteria2.
    #[serde(default)]
    pub password: Option<Spanned<SecretValue>>,
    /// trojan, hysteria2: several users.
    #[serde(default)]
    pub passwords: Option<List<SecretValue>>,
    /// vless, vmess: one user id.
    #[serde(default)]
    pub id: Option<Spanned<SecretValue>>,
    /// vless, vmess: several user ids.
    #[serde(default)]
    pub ids: Option<List<SecretValue>>,
    /// shadowsocks, shadowsocks-2022.
    #[serde(default)]
    pub method: Option<Spanned<String>>,
    /// shadowsocks-2022: the server PSK, base64.
    #[serde(default)]
    pub psk: Option<Spanned<SecretValue>>,
    /// shadowsocks-2022: user PSKs, base64.
    #[serde(default)]
    pub users: Option<List<SecretValue>>,
    /// hysteria2.
    #[serde(default)]
    pub obfs: Option<Spanned<ObfsConfig>>,
    /// trojan, vless: where a connection that fails authentication is
    /// relayed, with the bytes it sent (an IP address and port).
    #[serde(default)]
    pub fallback: Option<Spanned<String>>,
    /// hysteria2: the web server an HTTP/3 request that is not an
    /// authentication is relayed to (an IP address and port).
    #[serde(default)]
    pub masquerade: Option<Spanned<String>>,
    /// hysteria2: the most this side sends and receives, Mbit/s.
    #[serde(default)]
    pub up_mbps: Option<Spanned<u64>>,
    #[serde(default)]
    pub down_mbps: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboundStream {
    /// "tcp" (default), "ws" or "grpc".
    #[serde(default)]
    pub network: Option<Spanned<String>>,
    /// "none" (default) or "tls".
    #[serde(default)]
    pub security: Option<Spanned<String>>,
    #[serde(default)]
    pub tls: Option<Spanned<ServerTlsConfig>>,
    #[serde(default)]
    pub ws: Option<Spanned<WsConfig>>,
    #[serde(default)]
    pub grpc: Option<Spanned<GrpcConfig>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsConfig {
    pub cert_file: Spanned<String>,
    pub key_file: Spanned<String>,
    #[serde(default)]
    pub alpn: Option<List<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Account {
    pub user: Spanned<String>,
    pub pass: Spanned<SecretValue>,
}

// ---------------------------------------------------------------- outbounds

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outbound {
    pub tag: Spanned<String>,
    pub protocol: Spanned<String>,
    /// A host name or IP address.
    #[serde(default)]
    pub server: Option<Spanned<String>>,
    #[serde(default)]
    pub port: Option<Spanned<u16>>,
    /// freedom, hysteria2, wireguard: which families to dial.
    #[serde(default)]
    pub address_family: Option<Spanned<String>>,
    #[serde(default)]
    pub drain: Option<Spanned<Drain>>,
    /// Tables that a deeper header can create implicitly carry no span.
    #[serde(default)]
    pub stream: Option<OutboundStream>,
    #[serde(default)]
    pub settings: Option<OutboundSettings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundStream {
    /// "tcp" (default), "tls", "ws" or "grpc".
    #[serde(default)]
    pub network: Option<Spanned<String>>,
    /// "none" or "tls"; "tls" is implied by network = "tls".
    #[serde(default)]
    pub security: Option<Spanned<String>>,
    /// Which families the transport dials the proxy server over.
    #[serde(default)]
    pub address_family: Option<Spanned<String>>,
    #[serde(default)]
    pub tls: Option<Spanned<ClientTlsConfig>>,
    #[serde(default)]
    pub ws: Option<Spanned<WsConfig>>,
    #[serde(default)]
    pub grpc: Option<Spanned<GrpcConfig>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsConfig {
    /// SNI; defaults to the server's name.
    #[serde(default)]
    pub server_name: Option<Spanned<String>>,
    /// A PEM bundle trusted in addition to the system roots.
    #[serde(default)]
    pub ca_file: Option<Spanned<String>>,
    /// Skip verification entirely.
    #[serde(default)]
    pub insecure: Option<Spanned<bool>>,
    #[serde(default)]
    pub alpn: Option<List<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsConfig {
    /// Defaults to "/".
    #[serde(default)]
    pub path: Option<Spanned<String>>,
    /// An outbound's Host, defaulting to the server's name; an inbound's,
    /// the Host an upgrade must name, unset accepting any.
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    /// Outbounds only: the most first bytes sent as early data; unset or 0
    /// sends none.
    #[serde(default)]
    pub max_early_data: Option<Spanned<u32>>,
    /// Outbounds only: the header early data travels in; defaults to
    /// `Sec-WebSocket-Protocol`, as Xray has it.
    #[serde(default)]
    pub early_data_header_name: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcConfig {
    /// Defaults to "GunService".
    #[serde(default)]
    pub service_name: Option<Spanned<String>>,
    /// Outbounds only; defaults to the server's name.
    #[serde(default)]
    pub authority: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundSettings {
    /// socks, http.
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    #[serde(default)]
    pub pass: Option<Spanned<SecretValue>>,
    /// trojan, shadowsocks, hysteria2.
    #[serde(default)]
    pub password: Option<Spanned<SecretValue>>,
    /// vless, vmess.
    #[serde(default)]
    pub id: Option<Spanned<SecretValue>>,
    /// vmess: the body cipher (default "auto").
    #[serde(default)]
    pub security: Option<Spanned<String>>,
    /// shadowsocks, shadowsocks-2022.
    #[serde(default)]
    pub method: Option<Spanned<String>>,
    /// shadowsocks-2022: the user PSK, base64.
    #[serde(default)]
    pub psk: Option<Spanned<SecretValue>>,
    /// shadowsocks-2022: identity PSKs of the relays in front, base64.
    #[serde(default)]
    pub identity_psks: Option<List<SecretValue>>,
    /// hysteria2.
    #[serde(default)]
    pub obfs: Option<Spanned<ObfsConfig>>,
    #[serde(default)]
    pub max_concurrent_streams: Option<Spanned<u32>>,
    #[serde(default)]
    pub up_mbps: Option<Spanned<u64>>,
    #[serde(default)]
    pub down_mbps: Option<Spanned<u64>>,
    /// wireguard: base64 keys.
    #[serde(default)]
    pub private_key: Option<Spanned<SecretValue>>,
    #[serde(default)]
    pub peer_public_key: Option<Spanned<String>>,
    #[serde(default)]
    pub preshared_key: Option<Spanned<SecretValue>>,
    /// wireguard: the peer, "host:port".
    #[serde(default)]
    pub endpoint: Option<Spanned<String>>,
    #[serde(default)]
    pub endpoint_address_family: Option<Spanned<String>>,
    /// wireguard: tunnel-local addresses.
    #[serde(default)]
    pub addresses: Option<List<String>>,
    #[serde(default)]
    pub mtu: Option<Spanned<u16>>,
    /// wireguard: persistent keepalive, seconds.
    #[serde(default)]
    pub keepalive: Option<Spanned<u16>>,
    #[serde(default)]
    pub reserved: Option<List<u8>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObfsConfig {
    /// Only "salamander".
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    pub password: Spanned<SecretValue>,
}

// ---------------------------------------------------------------- balancers

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Balancer {
    pub tag: Spanned<String>,
    pub outbounds: List<String>,
    #[serde(default)]
    pub strategy: Option<Spanned<String>>,
    #[serde(default)]
    pub probe_interval: Option<Spanned<Seconds>>,
    #[serde(default)]
    pub probe_timeout: Option<Spanned<Seconds>>,
}

// ---------------------------------------------------------------- route

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Defaults to the first outbound.
    #[serde(default)]
    pub default: Option<Spanned<String>>,
    /// `as_is` (the default), `ip_if_non_match` or `ip_on_demand`.
    #[serde(default)]
    pub domain_strategy: Option<Spanned<String>>,
    #[serde(default, rename = "rule")]
    pub rules: Vec<Spanned<Rule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub outbound: Spanned<String>,
    #[serde(default)]
    pub domain: Option<List<String>>,
    #[serde(default)]
    pub domain_suffix: Option<List<String>>,
    #[serde(default)]
    pub domain_keyword: Option<List<String>>,
    #[serde(default)]
    pub cidr: Option<List<String>>,
    #[serde(default)]
    pub geoip: Option<List<String>>,
    #[serde(default)]
    pub geosite: Option<List<String>>,
    #[serde(default)]
    pub port: Option<List<Port>>,
    #[serde(default)]
    pub source_cidr: Option<List<String>>,
    #[serde(default)]
    pub inbound_tag: Option<List<String>>,
    /// "tcp" or "udp".
    #[serde(default)]
    pub network: Option<Spanned<String>>,
}

// ---------------------------------------------------------------- dns, socket, limits

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dns {
    /// One resolver: "1.1.1.1" or "8.8.8.8:53".
    #[serde(default)]
    pub servers: Option<List<String>>,
    /// Split: asked directly, resolve the proxy servers.
    #[serde(default)]
    pub pre_proxy: Option<List<String>>,
    /// Split: asked through the route table, resolve destinations.
    #[serde(default)]
    pub through_proxy: Option<List<String>>,
    /// A PEM bundle the tls:// and https:// servers are verified against
    /// instead of the system roots; read at compile time.
    #[serde(default)]
    pub ca_file: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Socket {
    #[serde(default)]
    pub mark: Option<Spanned<u32>>,
    #[serde(default)]
    pub interface: Option<Spanned<String>>,
    /// At most one IPv4 and one IPv6 address.
    #[serde(default)]
    pub bind_address: Option<List<String>>,
    #[serde(default)]
    pub tcp_keepalive: Option<Spanned<Seconds>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default)]
    pub max_connections: Option<Spanned<u32>>,
    #[serde(default)]
    pub max_handshakes: Option<Spanned<u32>>,
    #[serde(default)]
    pub max_handshakes_per_source: Option<Spanned<u32>>,
    #[serde(default)]
    pub handshake_timeout: Option<Spanned<Seconds>>,
    #[serde(default)]
    pub relay_idle_timeout: Option<Spanned<Seconds>>,
    #[serde(default)]
    pub connect_timeout: Option<Spanned<Seconds>>,
}

// ---------------------------------------------------------------- value types

/// A duration. TOML writes whole seconds as an integer (a string fails with
/// serde's `invalid type: string "30s", expected u64`); `.et` writes a typed
/// duration literal such as `30s` or `250ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seconds(pub Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("u64")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                Ok(Seconds(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                u64::try_from(v)
                    .map(|v| Seconds(Duration::from_secs(v)))
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_u64(V)
    }
}

/// A port or an inclusive port range: `53` or `"1000-2000"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port(pub PortRange);

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Port;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port number or a range such as \"1000-2000\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Port, E> {
                u16::try_from(v)
                    .map(|p| Port(PortRange { start: p, end: p }))
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Port, E> {
                u16::try_from(v)
                    .map(|p| Port(PortRange { start: p, end: p }))
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Port, E> {
                parse_port_range(v)
                    .map(Port)
                    .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// `"443"` or `"1000-2000"`, start not above end.
pub fn parse_port_range(text: &str) -> Option<PortRange> {
    let (start, end) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let p = text.trim().parse().ok()?;
            (p, p)
        }
    };
    (start <= end).then_some(PortRange { start, end })
}

/// A secret written inline, or a reference read when the config is compiled:
/// `{ env = "NAME" }` / `{ file = "path" }` in TOML, `env("NAME")` /
/// `file("path")` in `.et`.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretValue {
    Plain(String),
    Env(String),
    File(String),
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretValue::Plain(_) => f.write_str("Plain(<secret>)"),
            SecretValue::Env(name) => write!(f, "Env({name})"),
            SecretValue::File(path) => write!(f, "File({path})"),
        }
    }
}

impl<'de> Deserialize<'de> for SecretValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SecretValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, { env = \"NAME\" } or { file = \"path\" }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SecretValue, E> {
                Ok(SecretValue::Plain(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SecretValue, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::invalid_length(0, &self));
                };
                let value: String = map.next_value()?;
                let secret = match key.as_str() {
                    "env" => SecretValue::Env(value),
                    "file" => SecretValue::File(value),
                    other => return Err(de::Error::unknown_field(other, &["env", "file"])),
                };
                if map.next_key::<String>()?.is_some() {
                    return Err(de::Error::invalid_length(2, &self));
                }
                Ok(secret)
            }
        }
        d.deserialize_any(V)
    }
}

/// A drain policy: `"keep"`, `"close"` or `"close after 30s"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drain(pub DrainPolicy);

impl<'de> Deserialize<'de> for Drain {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Drain;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"keep\", \"close\" or \"close after <duration>\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Drain, E> {
                parse_drain(v)
                    .map(Drain)
                    .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
            }
        }
        d.deserialize_str(V)
    }
}

pub fn parse_drain(text: &str) -> Option<DrainPolicy> {
    match text.trim() {
        "keep" => Some(DrainPolicy::Keep),
        "close" => Some(DrainPolicy::Close),
        other => {
            let grace = other.strip_prefix("close after ")?;
            parse_duration(grace.trim()).map(DrainPolicy::CloseAfter)
        }
    }
}

/// `250ms`, `30s`, `5m`, `1h`: an integer and a unit.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    })
}
