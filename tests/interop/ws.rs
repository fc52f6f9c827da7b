//! The WebSocket transport under our vless outbound: against v2ray 4.34's
//! and sing-box's ws inbounds, with and without TLS (ALPN http/1.1), 4 MiB
//! each way; a wrong path fails the dial cleanly (the server answers the
//! upgrade with 404); early data in `Sec-WebSocket-Protocol` against
//! sing-box, which reads it as the stream's first bytes.

use crate::support::binaries::peer;
use crate::support::client::socks5_connect;
use crate::support::process::scratch_dir;
use crate::support::servers::{free_addr, tcp_echo};
use crate::vless::{
    carries_bulk, pki, settings, sing_box_server, start_ours, tls_table, v2ray_server, Transport,
    ID, SERVER_NAME,
};

const PATH: &str = "/vless-ws";

/// `[outbound.stream]` for ws to `path`, under TLS when `tls` holds the
/// tls table, and `extra` ws keys.
fn ws_tables(path: &str, tls: Option<String>, extra: &str) -> String {
    let security = if tls.is_some() {
        "security = \"tls\"\n"
    } else {
        ""
    };
    format!(
        "[outbound.stream]\nnetwork = \"ws\"\n{security}[outbound.stream.ws]\npath = \"{path}\"\n\
         host = \"{SERVER_NAME}\"\n{extra}{}{}",
        tls.unwrap_or_default(),
        settings(ID)
    )
}

#[test]
fn vless_over_ws_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vless_over_ws_reaches_v2ray_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _v2ray = v2ray_server(&v2ray, &dir, upstream, Transport::Ws(PATH));
    let (ours, front) = start_ours(&dir, upstream, &ws_tables(PATH, None, ""));
    carries_bulk(&ours, front, b"hello, v2ray over vless and ws");
}

#[test]
fn vless_over_ws_and_tls_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "vless_over_ws_and_tls_reaches_v2ray_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let _v2ray = v2ray_server(&v2ray, &dir, upstream, Transport::WsTls(PATH, &pki.server));
    let tables = ws_tables(PATH, Some(tls_table(&pki.ca)), "");
    let (ours, front) = start_ours(&dir, upstream, &tables);
    carries_bulk(&ours, front, b"hello, v2ray over vless, ws and tls");
}

#[test]
fn a_wrong_ws_path_fails_the_dial_cleanly_at_v2ray_and_keeps_serving() {
    let test = "a_wrong_ws_path_fails_the_dial_cleanly_at_v2ray_and_keeps_serving";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _v2ray = v2ray_server(&v2ray, &dir, upstream, Transport::Ws(PATH));
    let (ours, front) = start_ours(&dir, upstream, &ws_tables("/elsewhere", None, ""));
    for _ in 0..2 {
        // The dial fails, so the SOCKS client is refused.
        let e = socks5_connect(front, tcp_echo(), None).unwrap_err();
        assert!(e.to_string().starts_with("socks reply "), "{e}");
    }
    ours.wait_for_log("websocket: the server answered the upgrade with 404");
}

#[test]
fn vless_over_ws_with_and_without_tls_reaches_sing_box() {
    let test = "vless_over_ws_with_and_without_tls_reaches_sing_box";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let transport = format!(r#"{{ "type": "ws", "path": "{PATH}" }}"#);
    let plain = free_addr();
    let plain_dir = scratch_dir(&format!("{test}-plain"));
    let _plain = sing_box_server(&sing_box, &plain_dir, plain, None, &transport);
    let (ours, front) = start_ours(&plain_dir, plain, &ws_tables(PATH, None, ""));
    carries_bulk(&ours, front, b"hello, sing-box over vless and ws");
    drop(ours);

    let tls = free_addr();
    let _tls = sing_box_server(&sing_box, &dir, tls, Some(&pki.server), &transport);
    let tables = ws_tables(PATH, Some(tls_table(&pki.ca)), "");
    let (ours, front) = start_ours(&dir, tls, &tables);
    carries_bulk(&ours, front, b"hello, sing-box over vless, ws and tls");
}

#[test]
fn vless_over_ws_sends_early_data_that_sing_box_reads_as_the_first_bytes() {
    let test = "vless_over_ws_sends_early_data_that_sing_box_reads_as_the_first_bytes";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    // The whole VLESS request (at most 278 bytes) fits the allowance, so
    // nothing follows the upgrade until the client speaks: a server that
    // ignored the header would never see the request and the flow would
    // fail.
    let transport = format!(
        r#"{{ "type": "ws", "path": "{PATH}", "max_early_data": 2048,
    "early_data_header_name": "Sec-WebSocket-Protocol" }}"#
    );
    let upstream = free_addr();
    let _sing_box = sing_box_server(&sing_box, &dir, upstream, None, &transport);
    let tables = ws_tables(PATH, None, "max_early_data = 2048\n");
    let (ours, front) = start_ours(&dir, upstream, &tables);
    carries_bulk(&ours, front, b"hello, sing-box with early data");
}
