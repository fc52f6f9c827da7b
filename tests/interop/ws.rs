//! The WebSocket transport under our vless outbound: against v2ray 4.34's
//! and sing-box's ws inbounds, with and without TLS (ALPN http/1.1), 4 MiB
//! each way; a wrong path fails the dial cleanly (the server answers the
//! upgrade with 404); early data in `Sec-WebSocket-Protocol` against
//! sing-box, which reads it as the stream's first bytes. Our vmess
//! outbound over ws and ws+tls to v2ray under every body security, and our
//! trojan outbound over ws+tls to v2ray's trojan inbound. Our ws inbound
//! answers probers (another path, no upgrade, HTTP/1.0, pipelined
//! requests, heads Go refuses) with v2ray's bytes but the date, keeping or
//! closing the connection as v2ray does.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::serve as served;
use crate::support::binaries::peer;
use crate::support::client::socks5_connect;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo};
use crate::vless::{
    carries_bulk, pki, settings, sing_box_server, start_ours, start_ours_with, tls_table,
    v2ray_inbound, v2ray_server, Transport, ID, SERVER_NAME,
};
use crate::vmess::SECURITIES;

const PATH: &str = "/vless-ws";

/// `[outbound.stream]` for ws to `path`, under TLS when `tls` holds the
/// tls table, and `extra` ws keys; the vless settings for `ID`.
fn ws_tables(path: &str, tls: Option<String>, extra: &str) -> String {
    ws_tables_with(path, tls, extra, &settings(ID))
}

/// As [`ws_tables`], with `settings` (an `[outbound.settings]` table).
fn ws_tables_with(path: &str, tls: Option<String>, extra: &str, settings: &str) -> String {
    let security = if tls.is_some() {
        "security = \"tls\"\n"
    } else {
        ""
    };
    format!(
        "[outbound.stream]\nnetwork = \"ws\"\n{security}[outbound.stream.ws]\npath = \"{path}\"\n\
         host = \"{SERVER_NAME}\"\n{extra}{}{settings}",
        tls.unwrap_or_default(),
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

/// `[outbound.settings]` of our vmess outbound for `ID` under `security`.
fn vmess_settings(security: &str) -> String {
    format!("[outbound.settings]\nid = \"{ID}\"\nsecurity = \"{security}\"\n")
}

/// v2ray's VMess inbound for `ID` (alterId 0) over `transport`.
fn v2ray_vmess(v2ray: &Path, dir: &Path, listen: SocketAddr, transport: Transport) -> Process {
    let settings = format!(r#"{{ "clients": [{{ "id": "{ID}", "alterId": 0 }}] }}"#);
    v2ray_inbound(v2ray, dir, listen, "vmess", &settings, transport)
}

/// Our vmess outbound over ws (`tls` as [`ws_tables`] takes it) to
/// `upstream` under every body security, 4 MiB each way with each.
fn vmess_over_ws_carries_bulk_under_every_security(
    dir: &Path,
    upstream: SocketAddr,
    tls: Option<String>,
) {
    for security in SECURITIES {
        let dir = dir.join(security);
        std::fs::create_dir_all(&dir).expect("a directory per security");
        let tables = ws_tables_with(PATH, tls.clone(), "", &vmess_settings(security));
        let (ours, front) = start_ours_with("vmess", &dir, upstream, &tables);
        carries_bulk(&ours, front, format!("hello, v2ray, {security}").as_bytes());
    }
}

#[test]
fn vmess_over_ws_reaches_v2ray_under_every_security_and_carries_four_mebibytes_each_way() {
    let test =
        "vmess_over_ws_reaches_v2ray_under_every_security_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let _v2ray = v2ray_vmess(&v2ray, &dir, upstream, Transport::Ws(PATH));
    vmess_over_ws_carries_bulk_under_every_security(&dir, upstream, None);
}

#[test]
fn vmess_over_ws_and_tls_reaches_v2ray_under_every_security_and_carries_four_mebibytes_each_way() {
    let test = "vmess_over_ws_and_tls_reaches_v2ray_under_every_security_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let _v2ray = v2ray_vmess(&v2ray, &dir, upstream, Transport::WsTls(PATH, &pki.server));
    let tls = Some(tls_table(&pki.ca));
    vmess_over_ws_carries_bulk_under_every_security(&dir, upstream, tls);
}

#[test]
fn vmess_with_a_wrong_id_over_ws_fails_the_flow_cleanly_at_v2ray_and_keeps_serving() {
    let test = "vmess_with_a_wrong_id_over_ws_fails_the_flow_cleanly_at_v2ray_and_keeps_serving";
    let Some(v2ray_bin) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let upstream = free_addr();
    let v2ray = v2ray_vmess(&v2ray_bin, &dir, upstream, Transport::Ws(PATH));
    let wrong = format!(
        "[outbound.settings]\nid = \"{}\"\nsecurity = \"aes-128-gcm\"\n",
        crate::vless::WRONG_ID
    );
    let (ours, front) = start_ours_with(
        "vmess",
        &dir,
        upstream,
        &ws_tables_with(PATH, None, "", &wrong),
    );
    for _ in 0..2 {
        nothing_echoed(front);
    }
    v2ray.wait_for_log("invalid user");
    ours.wait_for_log("vmess: the server closed the connection without a response");
}

/// A flow the server refuses after the dial: the SOCKS client is
/// answered, then the stream ends with no byte of the echo.
fn nothing_echoed(front: SocketAddr) {
    let mut stream = socks5_connect(front, tcp_echo(), None).expect("the dial itself succeeds");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let _ = stream.write_all(b"never echoed");
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    assert!(got.is_empty(), "the refused flow carried {got:?}");
}

const TROJAN_PASSWORD: &str = "ws-interop-password";

#[test]
fn trojan_over_ws_and_tls_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "trojan_over_ws_and_tls_reaches_v2ray_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let upstream = free_addr();
    let settings = format!(r#"{{ "clients": [{{ "password": "{TROJAN_PASSWORD}" }}] }}"#);
    let transport = Transport::WsTls(PATH, &pki.server);
    let _v2ray = v2ray_inbound(&v2ray, &dir, upstream, "trojan", &settings, transport);
    let trojan = format!("[outbound.settings]\npassword = \"{TROJAN_PASSWORD}\"\n");
    let tables = ws_tables_with(PATH, Some(tls_table(&pki.ca)), "", &trojan);
    let (ours, front) = start_ours_with("trojan", &dir, upstream, &tables);
    carries_bulk(&ours, front, b"hello, v2ray over trojan, ws and tls");
}

/// Requests a prober sends to a ws inbound at [`PATH`], each script in one
/// write on a connection of its own, with how many answers it draws.
const PROBES: &[(&str, usize)] = &[
    ("GET / HTTP/1.1\r\nHost: cdn.example\r\n\r\n", 1),
    ("GET /vless-ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n", 1),
    (
        "GET /vless-ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        1,
    ),
    (
        "POST /vless-ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        1,
    ),
    (
        "GET /x HTTP/1.1\r\nHost: a\r\n\r\nPOST /y HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n\
         helloGET /vless-ws HTTP/1.1\r\nHost: a\r\n\r\nGET /z HTTP/1.1\r\nHost: a\r\n\
         Connection: close\r\n\r\nGET /unread HTTP/1.1\r\nHost: a\r\n\r\n",
        4,
    ),
    ("GET /x HTTP/1.0\r\n\r\n", 1),
    ("GET /vless-ws HTTP/1.0\r\n\r\n", 1),
    ("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1),
    ("GET /x HTTP/1.1\r\n\r\n", 1),
    ("garbage\r\n\r\n", 1),
];

/// What a server sent to one probe script: its answers with their `Date`
/// values blanked, and whether it then closed the connection or, still
/// open, answered one more request.
fn probe(server: SocketAddr, script: &str, answers: usize) -> (Vec<String>, bool) {
    let mut tcp = std::net::TcpStream::connect(server).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(script.as_bytes()).unwrap();
    let mut got: Vec<String> = (0..answers).map(|_| read_answer(&mut tcp)).collect();
    let mut rest = [0u8; 1];
    let open = match tcp.write_all(b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n") {
        Err(_) => false,
        Ok(()) => match tcp.peek(&mut rest) {
            Ok(0) | Err(_) => false,
            Ok(_) => {
                got.push(read_answer(&mut tcp));
                true
            }
        },
    };
    (got, open)
}

/// One HTTP answer from `tcp`: its head, then its Content-Length of body
/// (all of it, to the end, for an answer that has none and closes), the
/// `Date` value blanked.
fn read_answer(tcp: &mut std::net::TcpStream) -> String {
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        match tcp.read(&mut byte) {
            Ok(1) => answer.push(byte[0]),
            other => panic!("the answer ended early ({other:?}): {answer:?}"),
        }
    }
    let head = String::from_utf8(answer.clone()).unwrap();
    match head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
    {
        Some(length) => {
            let mut body = vec![0u8; length.parse().unwrap()];
            tcp.read_exact(&mut body).unwrap();
            answer.extend_from_slice(&body);
        }
        None => {
            let _ = tcp.read_to_end(&mut answer);
        }
    }
    String::from_utf8(answer)
        .unwrap()
        .split("\r\n")
        .map(|line| {
            if line.starts_with("Date: ") {
                "Date: *"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

#[test]
fn our_ws_inbound_answers_probers_byte_for_byte_as_v2ray_does_and_keeps_the_connection_alike() {
    let test =
        "our_ws_inbound_answers_probers_byte_for_byte_as_v2ray_does_and_keeps_the_connection_alike";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let theirs = free_addr();
    let _v2ray = v2ray_server(&v2ray, &dir, theirs, Transport::Ws(PATH));
    let ours = free_addr();
    let tables = format!(
        "{}[inbound.settings]\nid = \"{ID}\"\n",
        served::Transport::Ws(PATH).inbound_tables()
    );
    let _ours = served::serve(
        &served::own_dir(&dir, "ours", ours),
        "vless",
        ours,
        &tables,
        "",
    );
    for (script, answers) in PROBES {
        let want = probe(theirs, script, *answers);
        assert_eq!(probe(ours, script, *answers), want, "{script}");
    }
}
