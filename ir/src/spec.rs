//! The frozen spec: everything the runtime needs, with every default filled in.
//!
//! The compiler produces a [`Spec`]; the runtime executes it and never fills a
//! gap of its own. Secrets are held in [`Secret`], whose `Debug` masks them.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::route::RouteTable;

/// The whole configuration, frozen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub inbounds: Vec<InboundSpec>,
    pub outbounds: Vec<OutboundSpec>,
    pub balancers: Vec<BalancerSpec>,
    pub route: RouteTable,
    pub dns: DnsSpec,
    pub socket: SocketPolicy,
    pub limits: Limits,
}

impl Spec {
    pub fn outbound(&self, tag: &str) -> Option<&OutboundSpec> {
        self.outbounds.iter().find(|o| o.tag == tag)
    }

    pub fn balancer(&self, tag: &str) -> Option<&BalancerSpec> {
        self.balancers.iter().find(|b| b.tag == tag)
    }

    pub fn inbound(&self, tag: &str) -> Option<&InboundSpec> {
        self.inbounds.iter().find(|i| i.tag == tag)
    }
}

/// A password, key or other value that must never be printed.
///
/// A human-readable serializer (JSON, for `etc inspect`) sees `"<secret>"`;
/// a binary one (postcard, for plan.bin and the state file) sees the value.
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct Secret<T = String>(pub T);

impl<T: Serialize> Serialize for Secret<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.serialize_str("<secret>")
        } else {
            self.0.serialize(serializer)
        }
    }
}

impl<T> Secret<T> {
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// A host (name or IP) and a port, as written for a server or endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostPort {
    pub host: Host,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Host {
    Ip(IpAddr),
    Domain(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Domain(name) => f.write_str(name),
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Host {
    /// The name a TLS handshake or HTTP request names this host by.
    pub fn name(&self) -> String {
        match self {
            Host::Ip(ip) => ip.to_string(),
            Host::Domain(name) => name.clone(),
        }
    }
}

/// Which address families a dial may use, and in which order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AddressFamily {
    #[default]
    Auto,
    Ipv4Only,
    Ipv6Only,
    PreferIpv4,
    PreferIpv6,
}

impl AddressFamily {
    pub const NAMES: &'static [&'static str] = &[
        "auto",
        "ipv4_only",
        "ipv6_only",
        "prefer_ipv4",
        "prefer_ipv6",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "auto" => Self::Auto,
            "ipv4_only" => Self::Ipv4Only,
            "ipv6_only" => Self::Ipv6Only,
            "prefer_ipv4" => Self::PreferIpv4,
            "prefer_ipv6" => Self::PreferIpv6,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ipv4Only => "ipv4_only",
            Self::Ipv6Only => "ipv6_only",
            Self::PreferIpv4 => "prefer_ipv4",
            Self::PreferIpv6 => "prefer_ipv6",
        }
    }
}

// ---------------------------------------------------------------- outbounds

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundSpec {
    pub tag: String,
    pub protocol: OutboundProtocol,
    /// How the flows of this outbound's running version are treated when a
    /// reload replaces or removes it. Not part of what the planner compares.
    pub drain: DrainPolicy,
}

/// What an outbound is. The planner compares this with `==`: every field that
/// changes behaviour is here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutboundProtocol {
    Freedom {
        address_family: AddressFamily,
    },
    Blackhole,
    Socks {
        upstream: Upstream,
        account: Option<Account>,
    },
    Http {
        upstream: Upstream,
        account: Option<Account>,
    },
    Trojan {
        upstream: Upstream,
        password: Secret,
    },
    Vless {
        upstream: Upstream,
        id: Secret<Uuid>,
    },
    Vmess {
        upstream: Upstream,
        id: Secret<Uuid>,
        security: VmessSecurity,
    },
    Shadowsocks {
        upstream: Upstream,
        method: SsMethod,
        password: Secret,
    },
    Ss2022 {
        upstream: Upstream,
        method: Ss2022Method,
        psk: Secret<Vec<u8>>,
        identity_psks: Vec<Secret<Vec<u8>>>,
    },
    Hysteria2(Hysteria2Spec),
    Wireguard(WireguardSpec),
}

impl OutboundProtocol {
    /// The protocol's name as the configuration spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Freedom { .. } => "freedom",
            Self::Blackhole => "blackhole",
            Self::Socks { .. } => "socks",
            Self::Http { .. } => "http",
            Self::Trojan { .. } => "trojan",
            Self::Vless { .. } => "vless",
            Self::Vmess { .. } => "vmess",
            Self::Shadowsocks { .. } => "shadowsocks",
            Self::Ss2022 { .. } => "shadowsocks-2022",
            Self::Hysteria2(_) => "hysteria2",
            Self::Wireguard(_) => "wireguard",
        }
    }

    /// The proxy server a stream transport dials, for the seven proxy clients.
    pub fn upstream(&self) -> Option<&Upstream> {
        match self {
            Self::Socks { upstream, .. }
            | Self::Http { upstream, .. }
            | Self::Trojan { upstream, .. }
            | Self::Vless { upstream, .. }
            | Self::Vmess { upstream, .. }
            | Self::Shadowsocks { upstream, .. }
            | Self::Ss2022 { upstream, .. } => Some(upstream),
            _ => None,
        }
    }

    /// Where a balancer's TCP health probe connects: the upstream server of a
    /// proxy client; nothing for freedom, blackhole, Hysteria 2 and WireGuard.
    pub fn probe_target(&self) -> Option<&HostPort> {
        self.upstream().map(|u| &u.server)
    }

    /// Whether UDP flows can be carried: http carries only TCP. Both
    /// shadowsocks families carry UDP, in the formats shadowsocks-rust,
    /// sing-box and Xray relay.
    pub fn carries_udp(&self) -> bool {
        !matches!(self, Self::Http { .. })
    }

    /// Whether the outbound holds resolvers built from the DNS spec, so a DNS
    /// change rebuilds it. Every outbound but blackhole does.
    pub fn uses_dns(&self) -> bool {
        !matches!(self, Self::Blackhole)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub user: String,
    pub pass: Secret,
}

impl Account {
    /// The user and the password, as the SOCKS and HTTP codecs take them.
    pub fn pair(&self) -> (String, String) {
        (self.user.clone(), self.pass.expose().clone())
    }
}

/// A 16-byte UUID (VLESS and VMess user ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// Parses the hyphenated form `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub fn parse(text: &str) -> Option<Self> {
        let groups: Vec<&str> = text.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        if groups.len() != 5 || groups.iter().zip(lens).any(|(g, n)| g.len() != n) {
            return None;
        }
        let hex: String = groups.concat();
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Uuid(out))
    }
}

/// The proxy server of a stream-based client and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub server: HostPort,
    pub transport: TransportSpec,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportSpec {
    pub shape: StreamShape,
    /// Present exactly when the shape is `Tls`, or a `Ws`/`Grpc` shape under
    /// `security = tls`. Validation keeps the two consistent.
    pub tls: Option<TlsSpec>,
    pub address_family: AddressFamily,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamShape {
    Tcp,
    Tls,
    Ws {
        path: String,
        host: String,
        /// The first bytes of the stream sent inside the upgrade request.
        early_data: Option<WsEarlyData>,
    },
    Grpc {
        service_name: String,
        authority: String,
    },
}

impl StreamShape {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Tls => "tls",
            Self::Ws { .. } => "ws",
            Self::Grpc { .. } => "grpc",
        }
    }
}

/// WebSocket early data as Xray and sing-box send it: up to `max` first
/// bytes of the stream, base64url in the request header `header`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WsEarlyData {
    pub max: u32,
    pub header: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSpec {
    /// SNI and the name the certificate is checked against; defaults to the
    /// server's host.
    pub server_name: String,
    pub verify: Verify,
    /// Extra ALPN protocols; the transport adds its own (http/1.1 for ws, h2
    /// for grpc) when this is empty.
    pub alpn: Vec<String>,
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verify {
    /// The system roots, hostname checked.
    System,
    /// The system roots plus every certificate of this PEM bundle (read by the
    /// compiler), hostname checked.
    CustomCa { path: String, pem: Vec<u8> },
    /// No verification at all.
    Insecure,
}

impl fmt::Debug for Verify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verify::System => f.write_str("System"),
            Verify::CustomCa { path, pem } => {
                write!(f, "CustomCa({path}, {} bytes)", pem.len())
            }
            Verify::Insecure => f.write_str("Insecure"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmessSecurity {
    Aes128Gcm,
    Chacha20Poly1305,
    None,
    Zero,
    Auto,
}

impl VmessSecurity {
    pub const NAMES: &'static [&'static str] =
        &["aes-128-gcm", "chacha20-poly1305", "none", "zero", "auto"];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "aes-128-gcm" => Self::Aes128Gcm,
            "chacha20-poly1305" | "chacha20-ietf-poly1305" => Self::Chacha20Poly1305,
            "none" => Self::None,
            "zero" => Self::Zero,
            "auto" => Self::Auto,
            _ => return None,
        })
    }
}

/// Legacy Shadowsocks AEAD methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SsMethod {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20IetfPoly1305,
}

impl SsMethod {
    pub const NAMES: &'static [&'static str] =
        &["aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305"];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "aes-128-gcm" => Self::Aes128Gcm,
            "aes-256-gcm" => Self::Aes256Gcm,
            "chacha20-ietf-poly1305" | "chacha20-poly1305" => Self::Chacha20IetfPoly1305,
            _ => return None,
        })
    }

    pub fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm | Self::Chacha20IetfPoly1305 => 32,
        }
    }
}

/// Shadowsocks 2022 methods (SIP022).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ss2022Method {
    Blake3Aes128Gcm,
    Blake3Aes256Gcm,
    Blake3Chacha20Poly1305,
}

impl Ss2022Method {
    pub const NAMES: &'static [&'static str] = &[
        "2022-blake3-aes-128-gcm",
        "2022-blake3-aes-256-gcm",
        "2022-blake3-chacha20-poly1305",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "2022-blake3-aes-128-gcm" => Self::Blake3Aes128Gcm,
            "2022-blake3-aes-256-gcm" => Self::Blake3Aes256Gcm,
            "2022-blake3-chacha20-poly1305" => Self::Blake3Chacha20Poly1305,
            _ => return None,
        })
    }

    /// The length of every PSK, in bytes, before base64.
    pub fn key_len(self) -> usize {
        match self {
            Self::Blake3Aes128Gcm => 16,
            Self::Blake3Aes256Gcm | Self::Blake3Chacha20Poly1305 => 32,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hysteria2Spec {
    /// A UDP endpoint.
    pub server: HostPort,
    pub server_name: String,
    pub password: Secret,
    pub verify: Verify,
    pub alpn: Vec<String>,
    pub obfs: Option<Obfs>,
    pub max_concurrent_streams: u32,
    /// Bandwidth hints in bits per second; 0 leaves congestion control to BBR.
    pub up_bps: u64,
    pub down_bps: u64,
    pub address_family: AddressFamily,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Obfs {
    Salamander { psk: Secret },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireguardSpec {
    pub private_key: Secret<[u8; 32]>,
    pub peer_public_key: [u8; 32],
    pub preshared_key: Option<Secret<[u8; 32]>>,
    /// A UDP endpoint.
    pub endpoint: HostPort,
    pub endpoint_address_family: AddressFamily,
    /// The tunnel-local addresses.
    pub addresses: Vec<IpAddr>,
    pub mtu: u16,
    /// Persistent keepalive, in seconds; `None` sends none.
    pub keepalive: Option<u16>,
    /// The three reserved header bytes some servers expect.
    pub reserved: Option<[u8; 3]>,
    pub address_family: AddressFamily,
}

// ---------------------------------------------------------------- inbounds

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundSpec {
    pub tag: String,
    /// The listening address; UDP-capable inbounds bind the same port for UDP.
    pub listen: SocketAddr,
    /// Sniff TLS SNI and HTTP Host for routing (300 ms, 4 KiB).
    pub sniff: bool,
    pub protocol: InboundProtocol,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InboundProtocol {
    Socks {
        accounts: Vec<Account>,
        udp: bool,
        /// SOCKS over TLS: the TCP control connection is served under TLS;
        /// UDP relay datagrams stay plain, as in v2ray and sing-box.
        tls: Option<ServerTls>,
    },
    Http {
        accounts: Vec<Account>,
        /// An HTTPS proxy (`curl --proxy https://...`).
        tls: Option<ServerTls>,
    },
    Trojan {
        passwords: Vec<Secret>,
        transport: InboundTransport,
        /// Where a connection that fails authentication is relayed, with
        /// the bytes it sent, so the port answers a prober as the web
        /// server there would; `None` holds it until the handshake
        /// deadline and closes it.
        fallback: Option<SocketAddr>,
    },
    Vless {
        ids: Vec<Secret<Uuid>>,
        transport: InboundTransport,
        fallback: Option<SocketAddr>,
    },
    Vmess {
        ids: Vec<Secret<Uuid>>,
        transport: InboundTransport,
    },
    Shadowsocks {
        method: SsMethod,
        password: Secret,
        udp: bool,
    },
    Ss2022 {
        method: Ss2022Method,
        psk: Secret<Vec<u8>>,
        users: Vec<Secret<Vec<u8>>>,
        udp: bool,
    },
    Hysteria2 {
        tls: ServerTls,
        /// A connection authenticates with any of them.
        passwords: Vec<Secret>,
        obfs: Option<Obfs>,
        /// The web server an HTTP/3 request that is not an authentication
        /// is relayed to, as HTTP/1.1, so the port answers a prober as that
        /// server would; `None` answers 404.
        masquerade: Option<SocketAddr>,
        /// Bits per second this side sends and receives at most; 0: no
        /// limit of its own (see docs/runtime.md, "Hysteria 2").
        up_bps: u64,
        down_bps: u64,
    },
    /// The DNS service for the host itself: UDP and TCP DNS on the same
    /// port, answered from the `destinations` resolver.
    Dns,
}

impl InboundProtocol {
    /// The stream transport its connections are accepted under: plain TCP
    /// (under TLS for socks and http when they say so) unless the protocol
    /// names a transport of its own. Hysteria 2 takes QUIC and answers TCP.
    pub fn transport(&self) -> (&ServerShape, Option<&ServerTls>) {
        static TCP: ServerShape = ServerShape::Tcp;
        match self {
            Self::Socks { tls, .. } | Self::Http { tls, .. } => (&TCP, tls.as_ref()),
            Self::Trojan { transport, .. }
            | Self::Vless { transport, .. }
            | Self::Vmess { transport, .. } => (&transport.shape, transport.tls.as_ref()),
            Self::Shadowsocks { .. } | Self::Ss2022 { .. } | Self::Hysteria2 { .. } | Self::Dns => {
                (&TCP, None)
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Socks { .. } => "socks",
            Self::Http { .. } => "http",
            Self::Trojan { .. } => "trojan",
            Self::Vless { .. } => "vless",
            Self::Vmess { .. } => "vmess",
            Self::Shadowsocks { .. } => "shadowsocks",
            Self::Ss2022 { .. } => "shadowsocks-2022",
            Self::Hysteria2 { .. } => "hysteria2",
            Self::Dns => "dns",
        }
    }
}

/// The transport a server-side proxy protocol listens under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundTransport {
    pub shape: ServerShape,
    pub tls: Option<ServerTls>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerShape {
    Tcp,
    /// `host`: the Host an upgrade must name (its port not compared, case
    /// ignored, as Xray has it); `None` accepts any.
    Ws {
        path: String,
        host: Option<String>,
    },
    Grpc {
        service_name: String,
    },
}

/// A certificate chain and its key, read by the compiler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTls {
    pub cert_path: String,
    pub cert_pem: Vec<u8>,
    pub key_pem: Secret<Vec<u8>>,
    pub alpn: Vec<String>,
}

// ---------------------------------------------------------------- balancers

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalancerSpec {
    pub tag: String,
    /// Outbound tags, in priority order; a tag may appear twice.
    pub members: Vec<String>,
    pub strategy: Strategy,
    pub probe_interval: Duration,
    pub probe_timeout: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// The first healthy member in order.
    Failover,
    /// Each healthy member in turn.
    RoundRobin,
}

impl Strategy {
    pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(30);
    pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

    /// Exact, case-sensitive.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "failover" => Some(Self::Failover),
            "round_robin" => Some(Self::RoundRobin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Failover => "failover",
            Self::RoundRobin => "round_robin",
        }
    }
}

// ---------------------------------------------------------------- drains

/// What a reload does to the flows of an outbound version it replaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DrainPolicy {
    /// Old flows run on until they end.
    #[default]
    Keep,
    /// Old flows are aborted at once.
    Close,
    /// Old flows are aborted once the grace period has passed.
    CloseAfter(Duration),
}

impl fmt::Display for DrainPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DrainPolicy::Keep => f.write_str("keep"),
            DrainPolicy::Close => f.write_str("close"),
            DrainPolicy::CloseAfter(grace) => {
                write!(f, "close after {}", crate::format_duration(*grace))
            }
        }
    }
}

// ---------------------------------------------------------------- dns, sockets, limits

/// The route target of the internal DNS service: no outbound or balancer
/// may take this tag (the compiler refuses one that does).
pub const DNS_TARGET: &str = "dns";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DnsSpec {
    /// The host's resolv.conf.
    #[default]
    System,
    /// One resolver for both the proxy servers and the destinations.
    Single { servers: Vec<DnsServer> },
    /// `pre_proxy` servers are asked directly and resolve the proxy servers;
    /// `through_proxy` servers are asked through the route table and resolve
    /// destinations.
    Split {
        pre_proxy: Vec<DnsServer>,
        through_proxy: Vec<DnsServer>,
    },
}

/// One upstream DNS server, in the order a resolver asks them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DnsServer {
    /// Plain DNS (`8.8.8.8:53`): UDP, and TCP for an answer that came
    /// truncated.
    Plain(SocketAddr),
    /// DNS over TLS (`tls://1.1.1.1:853`, RFC 7858); the certificate is
    /// checked against the host (an IP against the certificate's IP SAN).
    Tls { server: HostPort, tls: TlsSpec },
    /// DNS over HTTPS (`https://dns.example/dns-query`, RFC 8484): a POST
    /// of the query to `path` over HTTP/2.
    Https {
        server: HostPort,
        path: String,
        tls: TlsSpec,
    },
}

impl fmt::Display for DnsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsServer::Plain(addr) => write!(f, "{addr}"),
            DnsServer::Tls { server, .. } => write!(f, "tls://{server}"),
            DnsServer::Https { server, path, .. } => write!(f, "https://{server}{path}"),
        }
    }
}

/// Applied to every socket an outbound, probe or resolver opens.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketPolicy {
    /// SO_MARK.
    pub mark: Option<u32>,
    /// SO_BINDTODEVICE.
    pub interface: Option<String>,
    pub bind_v4: Option<std::net::Ipv4Addr>,
    pub bind_v6: Option<std::net::Ipv6Addr>,
    /// TCP keepalive idle time on direct connections.
    pub tcp_keepalive: Option<Duration>,
}

/// Limits and timeouts, with the defaults a configuration that names none
/// gets (`Limits::default`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Live connections per inbound.
    pub max_connections: u32,
    /// Connections in their handshake per inbound.
    pub max_handshakes: u32,
    /// The least fair share of an inbound's handshake slots one source (an
    /// IPv4 address, or an IPv6 /64) keeps while they are scarce (more than
    /// half in use); below that a source takes as many as it likes.
    pub max_handshakes_per_source: u32,
    pub handshake_timeout: Duration,
    pub relay_idle_timeout: Duration,
    /// One TCP connect attempt.
    pub connect_timeout: Duration,
    pub sniff_timeout: Duration,
    pub sniff_max_bytes: u32,
    /// Sub-links per UDP association.
    pub udp_max_sublinks: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 65_536,
            max_handshakes: 2_048,
            max_handshakes_per_source: 64,
            handshake_timeout: Duration::from_secs(10),
            relay_idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            sniff_timeout: Duration::from_millis(300),
            sniff_max_bytes: 4_096,
            udp_max_sublinks: 64,
        }
    }
}
