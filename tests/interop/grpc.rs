//! The gRPC (gun) transport under our vless, vmess and trojan outbounds
//! against sing-box's grpc inbounds, with TLS (ALPN h2) and without (the
//! transport is the protocol's own business), 4 MiB each way through our
//! plain SOCKS inbound; concurrent flows on the outbound's shared HTTP/2
//! connections; a wrong service name or a wrong id fails the flow cleanly
//! and the runtime keeps serving. v2ray 4.34 has no gRPC transport (its config
//! refuses `"network": "grpc"` with `unknown transport protocol: grpc`;
//! gRPC came in v2fly 4.36), so sing-box is the server here.

use std::net::SocketAddr;
use std::path::Path;

use crate::serve::ends;
use crate::support::binaries::peer;
use crate::support::certs::Pair;
use crate::support::client::socks5_connect;
use crate::support::client::{check_echo, pattern};
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo};
use crate::vless::{
    carries_bulk, fails_cleanly, pki, settings, sing_box_inbound, sing_box_server, start_ours,
    start_ours_with, tls_table, ID, WRONG_ID,
};

const SERVICE: &str = "etemenanki.Tunnel";

/// sing-box's transport object for gun on `service`.
fn sing_box_grpc(service: &str) -> String {
    format!(r#"{{ "type": "grpc", "service_name": "{service}" }}"#)
}

/// `[outbound.stream]` for grpc to `service`, under TLS when `tls` holds
/// the tls table.
fn grpc_tables(service: &str, tls: Option<String>) -> String {
    grpc_tables_with(service, tls, &settings(ID))
}

/// As [`grpc_tables`], with `settings` (an `[outbound.settings]` table).
fn grpc_tables_with(service: &str, tls: Option<String>, settings: &str) -> String {
    let security = if tls.is_some() {
        "security = \"tls\"\n"
    } else {
        ""
    };
    format!(
        "[outbound.stream]\nnetwork = \"grpc\"\n{security}[outbound.stream.grpc]\n\
         service_name = \"{service}\"\n{}{settings}",
        tls.unwrap_or_default(),
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
    let (_ours, front) = start_ours(&dir, upstream, &tables);
    // sing-box answers each call to another service with a 404: the SOCKS
    // client is answered (the request rides the call, so the dial
    // succeeded), then its flow ends with no byte back; the next the same.
    for flow in ["first", "second"] {
        let mut stream = socks5_connect(front, tcp_echo(), None).expect("the dial itself succeeds");
        ends(&mut stream, &format!("the {flow} flow to another service"));
    }
}

const PASSWORD: &str = "grpc-interop-password";

/// sing-box with one trojan inbound on `listen`, over TLS with `pair` when
/// given, and gun on `SERVICE`, and a direct outbound.
fn sing_box_trojan(
    sing_box: &Path,
    dir: &Path,
    listen: SocketAddr,
    pair: Option<&Pair>,
) -> Process {
    let users = format!(r#"[{{ "name": "interop", "password": "{PASSWORD}" }}]"#);
    let transport = sing_box_grpc(SERVICE);
    sing_box_inbound(sing_box, dir, listen, "trojan", &users, pair, &transport)
}

/// Our trojan outbound over grpc, under TLS when `tls` holds the tls table.
fn trojan_tables(tls: Option<String>) -> String {
    let settings = format!("[outbound.settings]\npassword = \"{PASSWORD}\"\n");
    grpc_tables_with(SERVICE, tls, &settings)
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
    let _server = sing_box_trojan(&sing_box, &dir, upstream, Some(&pki.server));
    let tables = trojan_tables(Some(tls_table(&pki.ca)));
    let (ours, front) = start_ours_with("trojan", &dir, upstream, &tables);
    carries_bulk(&ours, front, b"hello, sing-box over trojan, grpc and tls");
}

#[test]
fn trojan_over_grpc_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "trojan_over_grpc_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _server = sing_box_trojan(&sing_box, &dir, upstream, None);
    let (ours, front) = start_ours_with("trojan", &dir, upstream, &trojan_tables(None));
    carries_bulk(&ours, front, b"hello, sing-box over trojan and grpc");
}

/// sing-box's VMess inbound for `ID` (alterId 0) over gun on `SERVICE`,
/// over TLS with `pair` when given.
fn sing_box_vmess(sing_box: &Path, dir: &Path, listen: SocketAddr, pair: Option<&Pair>) -> Process {
    let users = format!(r#"[{{ "name": "interop", "uuid": "{ID}", "alterId": 0 }}]"#);
    let transport = sing_box_grpc(SERVICE);
    sing_box_inbound(sing_box, dir, listen, "vmess", &users, pair, &transport)
}

#[test]
fn vmess_over_grpc_with_and_without_tls_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test =
        "vmess_over_grpc_with_and_without_tls_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let vmess = format!("[outbound.settings]\nid = \"{ID}\"\nsecurity = \"aes-128-gcm\"\n");

    let plain = free_addr();
    let plain_dir = scratch_dir(&format!("{test}-plain"));
    let _plain = sing_box_vmess(&sing_box, &plain_dir, plain, None);
    let tables = grpc_tables_with(SERVICE, None, &vmess);
    let (ours, front) = start_ours_with("vmess", &plain_dir, plain, &tables);
    carries_bulk(&ours, front, b"hello, sing-box over vmess and grpc");
    drop(ours);

    let tls = free_addr();
    let _tls = sing_box_vmess(&sing_box, &dir, tls, Some(&pki.server));
    let tables = grpc_tables_with(SERVICE, Some(tls_table(&pki.ca)), &vmess);
    let (ours, front) = start_ours_with("vmess", &dir, tls, &tables);
    carries_bulk(&ours, front, b"hello, sing-box over vmess, grpc and tls");
}

#[test]
fn vless_with_a_wrong_id_over_grpc_fails_the_flow_cleanly_at_sing_box_and_keeps_serving() {
    let test =
        "vless_with_a_wrong_id_over_grpc_fails_the_flow_cleanly_at_sing_box_and_keeps_serving";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let server = sing_box_server(&sing_box, &dir, upstream, None, &sing_box_grpc(SERVICE));
    let tables = grpc_tables_with(SERVICE, None, &settings(WRONG_ID));
    let (ours, front) = start_ours(&dir, upstream, &tables);
    // Both flows ride one shared connection: the first refusal closes its
    // stream, not the connection the second takes a stream on.
    fails_cleanly(&ours, front);
    server.wait_for_log("unknown UUID");
    fails_cleanly(&ours, front);
}

/// Flows open at once over one outbound, each on a stream of the shared
/// connection.
const CONCURRENT: usize = 32;

#[test]
fn concurrent_vless_flows_over_grpc_and_tls_share_one_connection_at_sing_box() {
    let test = "concurrent_vless_flows_over_grpc_and_tls_share_one_connection_at_sing_box";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let server = sing_box_server(
        &sing_box,
        &dir,
        upstream,
        Some(&pki.server),
        &sing_box_grpc(SERVICE),
    );
    let tables = grpc_tables(SERVICE, Some(tls_table(&pki.ca)));
    let (_ours, front) = start_ours(&dir, upstream, &tables);
    let echo = tcp_echo();
    let flows: Vec<_> = (0..CONCURRENT)
        .map(|n| {
            std::thread::spawn(move || {
                let payload = pattern(64 * 1024 + n);
                check_echo(socks5_connect(front, echo, None).unwrap(), &payload);
            })
        })
        .collect();
    for flow in flows {
        flow.join().expect("every flow echoed");
    }
    // sing-box logs each stream with the TCP connection's source: fewer
    // flows than a connection carries came on one.
    let log = server.log();
    let mut sources: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split("inbound connection from ").nth(1))
        .collect();
    assert_eq!(sources.len(), CONCURRENT, "a stream per flow:\n{log}");
    sources.sort_unstable();
    sources.dedup();
    assert_eq!(sources.len(), 1, "one shared connection:\n{log}");
}
