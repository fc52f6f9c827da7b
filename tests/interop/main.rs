//! Interop: Etemenanki's clients and servers against real implementations
//! (see tests/README.md). Each module is one peer; each test spawns the
//! peer and the real `etc` and `etemenanki-run` binaries on 127.0.0.1 and
//! moves bytes to a loopback echo server through them.

mod curl;
mod dante;
mod dns;
mod grpc;
mod hysteria2;
mod microsocks;
mod serve;
mod serve_shadowsocks;
mod serve_ss2022;
mod serve_trojan;
mod serve_vless;
mod serve_vmess;
mod shadowsocks;
mod ss2022;
// Shared with tests/e2e, which uses parts these tests do not.
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;
mod tinyproxy;
mod tls;
mod trojan;
mod v2ray;
mod vless;
mod vmess;
mod wireguard;
mod ws;
