//! The gRPC (gun) transport under our vless outbound against sing-box's
//! grpc inbound, with TLS (ALPN h2) and without, and under our trojan
//! outbound with TLS (the transport is the protocol's own business), 4 MiB
//! each way through our plain SOCKS inbound; a wrong service name fails the flow cleanly and the
//! runtime keeps serving. v2ray 4.34 has no gRPC transport (its config
//! refuses `"network": "grpc"` with `unknown transport protocol: grpc`;
//! gRPC came in v2fly 4.36), so sing-box is the server here.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::binaries::peer;
use crate::support::certs::Pair;
use crate::support::client::socks5_connect;
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo};
use crate::support::WAIT;
use crate::vless::{
    carries_bulk, pki, settings, sing_box_server, start_ours, tls_table, ID, SERVER_NAME,
};

const SERVICE: &str = "etemenanki.Tunnel";

/// sing-box's transport object for gun on `service`.
fn sing_box_grpc(service: &str) -> String {
    format!(r#"{{ "type": "grpc", "service_name": "{service}" }}"#)
}

/// `[outbound.stream]` for grpc to `service`, under TLS when `tls` holds
/// the tls table.
fn grpc_tables(service: &str, tls: Option<String>) -> String {
    let security = if tls.is_some() {
        "security = \"tls\"\n"
    } else {
        ""
    };
    format!(
        "[outbound.stream]\nnetwork = \"grpc\"\n{security}[outbound.stream.grpc]\n\
         service_name = \"{service}\"\n{}{}",
        tls.unwrap_or_default(),
        settings(ID)
    )
}

#[test]
fn vless_over_grpc_and_tls_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vless_over_grpc_and_tls_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let _server = sing_box_server(
        &sing_box,
        &dir,
        upstream,
        Some(&pki.server),
        &sing_box_grpc(SERVICE),
    );
    let tables = grpc_tables(SERVICE, Some(tls_table(&pki.ca)));
    let (ours, front) = start_ours(&dir, upstream, &tables);
    carries_bulk(&ours, front, b"hello, sing-box over vless, grpc and tls");
}

#[test]
fn vless_over_grpc_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "vless_over_grpc_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _server = sing_box_server(&sing_box, &dir, upstream, None, &sing_box_grpc(SERVICE));
    let (ours, front) = start_ours(&dir, upstream, &grpc_tables(SERVICE, None));
    carries_bulk(&ours, front, b"hello, sing-box over vless and grpc");
}

/// A flow whose stream the server refuses: the SOCKS client is answered
/// (the request rides the stream, so the dial succeeded) and the stream
/// then ends with no byte of the echo.
fn gets_nothing_back(front: SocketAddr) {
    let mut stream = socks5_connect(front, tcp_echo(), None).expect("the dial itself succeeds");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stream.write_all(b"never echoed");
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    assert!(got.is_empty(), "the refused flow carried {got:?}");
}

fn wait_for_any(ours: &Process, texts: &[&str]) {
    let start = Instant::now();
    while !texts.iter().any(|t| ours.log().contains(t)) {
        assert!(
            start.elapsed() < WAIT,
            "our log never said why:\n{}",
            ours.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_wrong_grpc_service_name_fails_the_flow_cleanly_at_sing_box_and_keeps_serving() {
    let test = "a_wrong_grpc_service_name_fails_the_flow_cleanly_at_sing_box_and_keeps_serving";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let _server = sing_box_server(
        &sing_box,
        &dir,
        upstream,
        Some(&pki.server),
        &sing_box_grpc(SERVICE),
    );
    let tables = grpc_tables("elsewhere.Tunnel", Some(tls_table(&pki.ca)));
    let (ours, front) = start_ours(&dir, upstream, &tables);
    for _ in 0..2 {
        gets_nothing_back(front);
    }
    wait_for_any(
        &ours,
        &[
            "grpc server answered http status",
            "grpc server ended the stream with status",
            "grpc stream reset by the server",
        ],
    );
}

const PASSWORD: &str = "grpc-interop-password";

/// sing-box with one trojan inbound on `listen` over TLS with `pair` and
/// gun on `SERVICE`, and a direct outbound.
fn sing_box_trojan(sing_box: &Path, dir: &Path, listen: SocketAddr, pair: &Pair) -> Process {
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "trojan", "tag": "trojan-in",
    "listen": "127.0.0.1", "listen_port": {},
    "users": [{{ "name": "interop", "password": "{PASSWORD}" }}],
    "tls": {{ "enabled": true, "server_name": "{SERVER_NAME}",
      "certificate_path": "{}", "key_path": "{}" }},
    "transport": {} }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        listen.port(),
        pair.cert.display(),
        pair.key.display(),
        sing_box_grpc(SERVICE)
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    Process::spawn_listening("sing-box", command, dir, listen)
}

#[test]
fn trojan_over_grpc_and_tls_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "trojan_over_grpc_and_tls_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let _server = sing_box_trojan(&sing_box, &dir, upstream, &pki.server);
    let tables = format!(
        "[outbound.stream]\nnetwork = \"grpc\"\nsecurity = \"tls\"\n[outbound.stream.grpc]\n\
         service_name = \"{SERVICE}\"\n{}[outbound.settings]\npassword = \"{PASSWORD}\"\n",
        tls_table(&pki.ca)
    );
    let front = free_addr();
    let ours = Config::default()
        .socks_in(front, None)
        .proxy_out("trojan", upstream, &tables)
        .start(&dir);
    carries_bulk(&ours, front, b"hello, sing-box over trojan, grpc and tls");
}
