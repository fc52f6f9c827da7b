//! What the benchmark measures: the same work done directly, through each
//! Debian peer, through Etemenanki, through chains of two proxies that
//! speak SOCKS over TLS between them, and through protocol chains: a
//! client (ours or a peer's) in front of a real shadowsocks, trojan,
//! vmess, vless, WireGuard or Hysteria 2 server; and full chains, one
//! program at both ends of a protocol.

use std::net::SocketAddr;

use crate::full::{Chain, Side};
use crate::protocol::{Client, Protocol};

/// One column of the result table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Subject {
    /// No proxy: the client talks to the loopback servers itself.
    Direct,
    Microsocks,
    Dante,
    V2ray,
    Etemenanki,
    /// Etemenanki in front (plain socks in, socks over TLS out) of
    /// Etemenanki serving socks over TLS (then freedom).
    EtemenankiTls,
    /// v2ray 4.34 likewise, as both front and server.
    V2rayTls,
    /// Etemenanki as the `etemenanki` column, from the binaries in
    /// `--alt-bin-dir` (another build, to compare two commits in one run);
    /// only when asked for.
    EtemenankiAlt,
    /// Shadowsocks AEAD (aes-256-gcm) to ssserver: our runtime as the client.
    SsEtemenanki,
    /// ... shadowsocks-rust's sslocal as the client.
    SsSslocal,
    /// ... shadowsocks-libev's ss-local as the client.
    SsLocal,
    /// ... sing-box as the client.
    SsSingBox,
    /// Shadowsocks 2022 (2022-blake3-aes-256-gcm) to ssserver: our runtime.
    #[value(name = "ss2022-etemenanki")]
    Ss2022Etemenanki,
    /// ... sslocal.
    #[value(name = "ss2022-sslocal")]
    Ss2022Sslocal,
    /// ... sing-box.
    #[value(name = "ss2022-sing-box")]
    Ss2022SingBox,
    /// Trojan to trojan-gfw over TLS: our runtime.
    TrojanEtemenanki,
    /// ... trojan-gfw's own client (`run_type` client).
    TrojanGfw,
    /// ... sing-box.
    TrojanSingBox,
    /// VMess over TCP (aes-128-gcm) to v2ray: our runtime.
    VmessEtemenanki,
    /// ... v2ray's own client.
    #[value(name = "vmess-v2ray")]
    VmessV2ray,
    /// ... sing-box.
    VmessSingBox,
    /// VLESS over WebSocket and TLS to v2ray: our runtime.
    VlessWsEtemenanki,
    /// ... v2ray's own client.
    #[value(name = "vless-ws-v2ray")]
    VlessWsV2ray,
    /// ... sing-box.
    VlessWsSingBox,
    /// VLESS over gRPC and TLS to sing-box: our runtime.
    VlessGrpcEtemenanki,
    /// ... sing-box's own client (v2ray 4.34 has no gRPC).
    VlessGrpcSingBox,
    /// WireGuard to sing-box's wireguard endpoint: our runtime.
    WgEtemenanki,
    /// ... sing-box's own wireguard endpoint as the client.
    WgSingBox,
    /// Full chain, shadowsocks AEAD (aes-128-gcm): ours to ours.
    #[value(name = "full-ss-etemenanki")]
    FullSsEtemenanki,
    /// ... sslocal to ssserver.
    #[value(name = "full-ss-ss-rust")]
    FullSsRust,
    /// ... sing-box to sing-box.
    #[value(name = "full-ss-sing-box")]
    FullSsSingBox,
    /// Full chain, shadowsocks 2022 (2022-blake3-aes-128-gcm): ours to ours.
    #[value(name = "full-ss2022-etemenanki")]
    FullSs2022Etemenanki,
    /// ... sslocal to ssserver.
    #[value(name = "full-ss2022-ss-rust")]
    FullSs2022Rust,
    /// ... sing-box to sing-box.
    #[value(name = "full-ss2022-sing-box")]
    FullSs2022SingBox,
    /// Full chain, vmess over tcp (aes-128-gcm): ours to ours.
    #[value(name = "full-vmess-etemenanki")]
    FullVmessEtemenanki,
    /// ... v2ray to v2ray.
    #[value(name = "full-vmess-v2ray")]
    FullVmessV2ray,
    /// ... sing-box to sing-box.
    #[value(name = "full-vmess-sing-box")]
    FullVmessSingBox,
    /// Full chain, vless over ws: ours to ours.
    #[value(name = "full-vless-ws-etemenanki")]
    FullVlessWsEtemenanki,
    /// ... v2ray to v2ray.
    #[value(name = "full-vless-ws-v2ray")]
    FullVlessWsV2ray,
    /// ... sing-box to sing-box.
    #[value(name = "full-vless-ws-sing-box")]
    FullVlessWsSingBox,
    /// Full chain, trojan over tls: ours to ours.
    #[value(name = "full-trojan-etemenanki")]
    FullTrojanEtemenanki,
    /// ... trojan-gfw to trojan-gfw.
    #[value(name = "full-trojan-gfw")]
    FullTrojanGfw,
    /// ... sing-box to sing-box.
    #[value(name = "full-trojan-sing-box")]
    FullTrojanSingBox,
    /// Hysteria 2 to sing-box's hysteria2 inbound over QUIC: our runtime.
    #[value(name = "hy2-etemenanki")]
    Hy2Etemenanki,
    /// ... sing-box.
    #[value(name = "hy2-sing-box")]
    Hy2SingBox,
    /// Hysteria 2 end to end: our client to our hysteria2 inbound.
    #[value(name = "hy2-etemenanki-to-etemenanki")]
    Hy2Ours,
    /// ... sing-box's client to sing-box's server.
    #[value(name = "hy2-sing-box-to-sing-box")]
    Hy2SingBoxChain,
}

impl Subject {
    pub const ALL: [Subject; 7] = [
        Subject::Direct,
        Subject::Microsocks,
        Subject::Dante,
        Subject::V2ray,
        Subject::Etemenanki,
        Subject::EtemenankiTls,
        Subject::V2rayTls,
    ];

    /// Every protocol chain, ours first within each protocol.
    pub const PROTOCOL_CHAINS: [Subject; 24] = [
        Subject::SsEtemenanki,
        Subject::SsSslocal,
        Subject::SsLocal,
        Subject::SsSingBox,
        Subject::Ss2022Etemenanki,
        Subject::Ss2022Sslocal,
        Subject::Ss2022SingBox,
        Subject::TrojanEtemenanki,
        Subject::TrojanGfw,
        Subject::TrojanSingBox,
        Subject::VmessEtemenanki,
        Subject::VmessV2ray,
        Subject::VmessSingBox,
        Subject::VlessWsEtemenanki,
        Subject::VlessWsV2ray,
        Subject::VlessWsSingBox,
        Subject::VlessGrpcEtemenanki,
        Subject::VlessGrpcSingBox,
        Subject::WgEtemenanki,
        Subject::WgSingBox,
        Subject::Hy2Etemenanki,
        Subject::Hy2SingBox,
        Subject::Hy2Ours,
        Subject::Hy2SingBoxChain,
    ];

    /// Every full chain, ours first within each protocol.
    pub const FULL_CHAINS: [Subject; 15] = [
        Subject::FullSsEtemenanki,
        Subject::FullSsRust,
        Subject::FullSsSingBox,
        Subject::FullSs2022Etemenanki,
        Subject::FullSs2022Rust,
        Subject::FullSs2022SingBox,
        Subject::FullVmessEtemenanki,
        Subject::FullVmessV2ray,
        Subject::FullVmessSingBox,
        Subject::FullVlessWsEtemenanki,
        Subject::FullVlessWsV2ray,
        Subject::FullVlessWsSingBox,
        Subject::FullTrojanEtemenanki,
        Subject::FullTrojanGfw,
        Subject::FullTrojanSingBox,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subject::Direct => "direct",
            Subject::Microsocks => "microsocks",
            Subject::Dante => "dante",
            Subject::V2ray => "v2ray",
            Subject::Etemenanki => "etemenanki",
            Subject::EtemenankiTls => "etemenanki-tls",
            Subject::V2rayTls => "v2ray-tls",
            Subject::EtemenankiAlt => "etemenanki-alt",
            Subject::SsEtemenanki => "ss-etemenanki",
            Subject::SsSslocal => "ss-sslocal",
            Subject::SsLocal => "ss-local",
            Subject::SsSingBox => "ss-sing-box",
            Subject::Ss2022Etemenanki => "ss2022-etemenanki",
            Subject::Ss2022Sslocal => "ss2022-sslocal",
            Subject::Ss2022SingBox => "ss2022-sing-box",
            Subject::TrojanEtemenanki => "trojan-etemenanki",
            Subject::TrojanGfw => "trojan-gfw",
            Subject::TrojanSingBox => "trojan-sing-box",
            Subject::VmessEtemenanki => "vmess-etemenanki",
            Subject::VmessV2ray => "vmess-v2ray",
            Subject::VmessSingBox => "vmess-sing-box",
            Subject::VlessWsEtemenanki => "vless-ws-etemenanki",
            Subject::VlessWsV2ray => "vless-ws-v2ray",
            Subject::VlessWsSingBox => "vless-ws-sing-box",
            Subject::VlessGrpcEtemenanki => "vless-grpc-etemenanki",
            Subject::VlessGrpcSingBox => "vless-grpc-sing-box",
            Subject::WgEtemenanki => "wg-etemenanki",
            Subject::WgSingBox => "wg-sing-box",
            Subject::FullSsEtemenanki => "full-ss-etemenanki",
            Subject::FullSsRust => "full-ss-ss-rust",
            Subject::FullSsSingBox => "full-ss-sing-box",
            Subject::FullSs2022Etemenanki => "full-ss2022-etemenanki",
            Subject::FullSs2022Rust => "full-ss2022-ss-rust",
            Subject::FullSs2022SingBox => "full-ss2022-sing-box",
            Subject::FullVmessEtemenanki => "full-vmess-etemenanki",
            Subject::FullVmessV2ray => "full-vmess-v2ray",
            Subject::FullVmessSingBox => "full-vmess-sing-box",
            Subject::FullVlessWsEtemenanki => "full-vless-ws-etemenanki",
            Subject::FullVlessWsV2ray => "full-vless-ws-v2ray",
            Subject::FullVlessWsSingBox => "full-vless-ws-sing-box",
            Subject::FullTrojanEtemenanki => "full-trojan-etemenanki",
            Subject::FullTrojanGfw => "full-trojan-gfw",
            Subject::FullTrojanSingBox => "full-trojan-sing-box",
            Subject::Hy2Etemenanki => "hy2-etemenanki",
            Subject::Hy2SingBox => "hy2-sing-box",
            Subject::Hy2Ours => "hy2-etemenanki-to-etemenanki",
            Subject::Hy2SingBoxChain => "hy2-sing-box-to-sing-box",
        }
    }

    /// A chain of a front proxy and a server behind it: a TLS socks server,
    /// or a protocol's real server.
    pub fn is_chain(self) -> bool {
        matches!(self, Subject::EtemenankiTls | Subject::V2rayTls)
            || self.protocol().is_some()
            || self.full().is_some()
    }

    /// A protocol chain or a full chain: compared on TCP alone, and its
    /// idle connections write one byte (a shadowsocks client may send its
    /// request only with the first payload).
    pub fn is_protocol_chain(self) -> bool {
        self.protocol().is_some() || self.full().is_some()
    }

    /// The protocol and the program at both ends of a full chain.
    pub fn full(self) -> Option<(Chain, Side)> {
        Some(match self {
            Subject::FullSsEtemenanki => (Chain::Shadowsocks, Side::Etemenanki),
            Subject::FullSsRust => (Chain::Shadowsocks, Side::SsRust),
            Subject::FullSsSingBox => (Chain::Shadowsocks, Side::SingBox),
            Subject::FullSs2022Etemenanki => (Chain::Ss2022, Side::Etemenanki),
            Subject::FullSs2022Rust => (Chain::Ss2022, Side::SsRust),
            Subject::FullSs2022SingBox => (Chain::Ss2022, Side::SingBox),
            Subject::FullVmessEtemenanki => (Chain::VmessTcp, Side::Etemenanki),
            Subject::FullVmessV2ray => (Chain::VmessTcp, Side::V2ray),
            Subject::FullVmessSingBox => (Chain::VmessTcp, Side::SingBox),
            Subject::FullVlessWsEtemenanki => (Chain::VlessWs, Side::Etemenanki),
            Subject::FullVlessWsV2ray => (Chain::VlessWs, Side::V2ray),
            Subject::FullVlessWsSingBox => (Chain::VlessWs, Side::SingBox),
            Subject::FullTrojanEtemenanki => (Chain::TrojanTls, Side::Etemenanki),
            Subject::FullTrojanGfw => (Chain::TrojanTls, Side::TrojanGfw),
            Subject::FullTrojanSingBox => (Chain::TrojanTls, Side::SingBox),
            _ => return None,
        })
    }

    /// The protocol and the client of a protocol chain.
    pub fn protocol(self) -> Option<(Protocol, Client)> {
        Some(match self {
            Subject::SsEtemenanki => (Protocol::Shadowsocks, Client::Etemenanki),
            Subject::SsSslocal => (Protocol::Shadowsocks, Client::Sslocal),
            Subject::SsLocal => (Protocol::Shadowsocks, Client::SsLocal),
            Subject::SsSingBox => (Protocol::Shadowsocks, Client::SingBox),
            Subject::Ss2022Etemenanki => (Protocol::Ss2022, Client::Etemenanki),
            Subject::Ss2022Sslocal => (Protocol::Ss2022, Client::Sslocal),
            Subject::Ss2022SingBox => (Protocol::Ss2022, Client::SingBox),
            Subject::TrojanEtemenanki => (Protocol::Trojan, Client::Etemenanki),
            Subject::TrojanGfw => (Protocol::Trojan, Client::TrojanGfw),
            Subject::TrojanSingBox => (Protocol::Trojan, Client::SingBox),
            Subject::VmessEtemenanki => (Protocol::Vmess, Client::Etemenanki),
            Subject::VmessV2ray => (Protocol::Vmess, Client::V2ray),
            Subject::VmessSingBox => (Protocol::Vmess, Client::SingBox),
            Subject::VlessWsEtemenanki => (Protocol::VlessWs, Client::Etemenanki),
            Subject::VlessWsV2ray => (Protocol::VlessWs, Client::V2ray),
            Subject::VlessWsSingBox => (Protocol::VlessWs, Client::SingBox),
            Subject::VlessGrpcEtemenanki => (Protocol::VlessGrpc, Client::Etemenanki),
            Subject::VlessGrpcSingBox => (Protocol::VlessGrpc, Client::SingBox),
            Subject::WgEtemenanki => (Protocol::Wireguard, Client::Etemenanki),
            Subject::WgSingBox => (Protocol::Wireguard, Client::SingBox),
            Subject::Hy2Etemenanki => (Protocol::Hysteria2, Client::Etemenanki),
            Subject::Hy2SingBox => (Protocol::Hysteria2, Client::SingBox),
            Subject::Hy2Ours => (Protocol::Hysteria2Chain, Client::Etemenanki),
            Subject::Hy2SingBoxChain => (Protocol::Hysteria2Chain, Client::SingBox),
            _ => return None,
        })
    }

    /// Where this column's client asks to go for a loopback server at
    /// `server`: through a WireGuard tunnel, the server's port at the
    /// peer's own tunnel address, which sing-box sends on to loopback.
    pub fn target(self, server: SocketAddr) -> SocketAddr {
        match self.protocol() {
            Some((Protocol::Wireguard, _)) => crate::protocol::through_tunnel(server),
            _ => server,
        }
    }
}
