//! Known answers: the bytes v2ray 4.34 (Go's net/http under
//! gorilla/websocket, as Xray) sent to the same requests on loopback, its
//! date replaced by ours.

use std::time::Duration;

use super::*;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// The date v2ray sent with its answers: Fri, 04 Dec 2026 02:34:16 GMT.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_796_351_656)
}

const UPGRADE: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

fn upgrade(target: &str, extra: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: cdn.example\r\n{UPGRADE}{extra}\r\n")
}

fn upgraded(answer: Answer) -> (String, Vec<u8>) {
    match answer {
        Answer::Upgrade { response, early } => (String::from_utf8(response).unwrap(), early),
        Answer::Refuse(refusal) => panic!("refused: {}", refusal.error()),
    }
}

fn refusal(answer: Answer) -> Refusal {
    match answer {
        Answer::Refuse(refusal) => refusal,
        Answer::Upgrade { .. } => panic!("upgraded"),
    }
}

/// The answer `server` writes to `head`, and whether it keeps the
/// connection after it.
fn refused(server: &Upgrader, head: &str) -> (String, bool) {
    let refusal = refusal(server.answer(head.as_bytes()));
    let mut out = Vec::new();
    refusal.write(now(), &mut out);
    (String::from_utf8(out).unwrap(), refusal.keeps_alive())
}

const NOT_FOUND: &str =
    "HTTP/1.1 404 Not Found\r\nDate: Fri, 04 Dec 2026 02:34:16 GMT\r\nContent-Length: 0\r\n\r\n";

const BAD_REQUEST: &str = "HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\n\
X-Content-Type-Options: nosniff\r\nDate: Fri, 04 Dec 2026 02:34:16 GMT\r\n\
Content-Length: 12\r\n\r\nBad Request\n";

#[test]
fn the_date_is_an_imf_fixdate() {
    for (secs, date) in [
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (951_868_800, "Wed, 01 Mar 2000 00:00:00 GMT"),
        (1_709_251_199, "Thu, 29 Feb 2024 23:59:59 GMT"),
        (1_796_351_656, "Fri, 04 Dec 2026 02:34:16 GMT"),
    ] {
        let mut out = Vec::new();
        write_date(UNIX_EPOCH + Duration::from_secs(secs), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), date, "{secs}");
    }
}

#[test]
fn a_head_ends_at_its_empty_line_with_crlf_or_bare_lf() {
    assert_eq!(
        request_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nrest"),
        Some(27)
    );
    assert_eq!(request_end(b"GET / HTTP/1.1\nHost: a\n\nrest"), Some(24));
    assert_eq!(request_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
    assert_eq!(request_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r"), None);
}

#[test]
fn the_path_upgrades_with_gorillas_101_and_a_query_is_ignored() {
    let server = Upgrader::new("/ws", None);
    for target in ["/ws", "/ws?ed=2048", "/w%73", "http://cdn.example/ws"] {
        let (response, early) = upgraded(server.answer(upgrade(target, "").as_bytes()));
        assert_eq!(
            response,
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {ACCEPT}\r\n\r\n"
            ),
            "{target}"
        );
        assert!(early.is_empty());
    }
    // Tokens among others, in any case, as gorilla finds them.
    let head = upgrade("/ws", "").replace("Connection: Upgrade", "Connection: keep-alive, UPGRADE");
    upgraded(server.answer(head.as_bytes()));
}

#[test]
fn early_data_is_decoded_and_its_header_echoed() {
    let server = Upgrader::new("/ws", None);
    let encoded = etemenanki_ir::base64::encode_url(b"\x16\x03\x01 first bytes");
    let head = upgrade(
        "/ws?ed=2048",
        &format!("Sec-WebSocket-Protocol: {encoded}\r\n"),
    );
    let (response, early) = upgraded(server.answer(head.as_bytes()));
    assert_eq!(early, b"\x16\x03\x01 first bytes");
    assert!(
        response.ends_with(&format!(
            "Sec-WebSocket-Accept: {ACCEPT}\r\nSec-WebSocket-Protocol: {encoded}\r\n\r\n"
        )),
        "{response}"
    );
}

#[test]
fn a_protocol_header_that_is_no_base64_is_no_early_data() {
    let server = Upgrader::new("/ws", None);
    let head = upgrade("/ws", "Sec-WebSocket-Protocol: chat, superchat\r\n");
    let (response, early) = upgraded(server.answer(head.as_bytes()));
    assert!(early.is_empty());
    assert!(!response.contains("Sec-WebSocket-Protocol"), "{response}");
}

#[test]
fn another_path_is_gos_404_upgrade_or_not_and_keeps_the_connection() {
    let server = Upgrader::new("/ws", None);
    for head in [
        upgrade("/other", ""),
        upgrade("/ws/", ""),
        "GET / HTTP/1.1\r\nHost: cdn.example\r\n\r\n".into(),
        "GET /x HTTP/1.1\nHost: a\n\n".into(),
        "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n".into(),
    ] {
        assert_eq!(refused(&server, &head), (NOT_FOUND.into(), true), "{head}");
        let error = refusal(server.answer(head.as_bytes())).into_error();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
    let error = refusal(server.answer(upgrade("/other?ed=1", "").as_bytes())).into_error();
    assert_eq!(error.to_string(), "websocket: no upgrade at \"/other\"");
}

#[test]
fn a_request_at_the_path_that_is_no_upgrade_is_gorillas_400_and_keeps_the_connection() {
    let server = Upgrader::new("/ws", None);
    for (head, why) in [
        (
            "GET /ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n".to_owned(),
            "no 'upgrade' token in Connection",
        ),
        (
            upgrade("/ws", "").replace("Upgrade: websocket", "Upgrade: h2c"),
            "no 'websocket' token in Upgrade",
        ),
        (
            upgrade("/ws", "").replace("Version: 13", "Version: 8"),
            "no version 13 in Sec-WebSocket-Version",
        ),
        (
            upgrade("/ws", "").replace(KEY, "dGhlIHNhbXBsZSBub25jZQ"),
            "Sec-WebSocket-Key is no base64 of 16 bytes",
        ),
        (
            upgrade("/ws", "").replace(&format!("Sec-WebSocket-Key: {KEY}\r\n"), ""),
            "Sec-WebSocket-Key is no base64 of 16 bytes",
        ),
    ] {
        assert_eq!(
            refused(&server, &head),
            (BAD_REQUEST.into(), true),
            "{head}"
        );
        let error = refusal(server.answer(head.as_bytes())).into_error();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            error.to_string(),
            format!("websocket: not an upgrade request: {why}")
        );
    }
}

#[test]
fn an_upgrade_by_another_method_is_gorillas_405() {
    let server = Upgrader::new("/ws", None);
    let head = upgrade("/ws", "").replace("GET", "POST");
    let want = "HTTP/1.1 405 Method Not Allowed\r\n\
Content-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\n\
X-Content-Type-Options: nosniff\r\nDate: Fri, 04 Dec 2026 02:34:16 GMT\r\n\
Content-Length: 19\r\n\r\nMethod Not Allowed\n";
    assert_eq!(refused(&server, &head), (want.into(), true));
}

#[test]
fn http_1_0_or_connection_close_is_answered_as_go_answers_then_closed() {
    let server = Upgrader::new("/ws", None);
    let with_close =
        |answer: &str, at: &str| answer.replacen(at, &format!("{at}Connection: close\r\n"), 1);
    for (head, want, keeps) in [
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_owned(),
            with_close(NOT_FOUND, "Content-Length: 0\r\n"),
            false,
        ),
        (
            "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".into(),
            with_close(BAD_REQUEST, "Content-Length: 12\r\n"),
            false,
        ),
        (
            "GET /x HTTP/1.0\r\n\r\n".into(),
            NOT_FOUND.replace("HTTP/1.1", "HTTP/1.0"),
            false,
        ),
        (
            "GET /ws HTTP/1.0\r\n\r\n".into(),
            BAD_REQUEST.replace("HTTP/1.1", "HTTP/1.0"),
            false,
        ),
        (
            "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".into(),
            NOT_FOUND.replace("HTTP/1.1", "HTTP/1.0").replace(
                "Content-Length: 0\r\n",
                "Content-Length: 0\r\nConnection: keep-alive\r\n",
            ),
            true,
        ),
        // A body Go would not read: 256 KiB, or chunked here.
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 262144\r\n\r\n".into(),
            with_close(NOT_FOUND, "Content-Length: 0\r\n"),
            false,
        ),
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".into(),
            with_close(NOT_FOUND, "Content-Length: 0\r\n"),
            false,
        ),
    ] {
        assert_eq!(refused(&server, &head), (want, keeps), "{head}");
    }
}

#[test]
fn a_body_under_go_s_bound_is_read_before_the_answer() {
    let server = Upgrader::new("/ws", None);
    for (length, body) in [(0, 0), (5, 5), (262_143, 262_143)] {
        let head = format!("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: {length}\r\n\r\n");
        let refusal = refusal(server.answer(head.as_bytes()));
        assert_eq!((refusal.body(), refusal.keeps_alive()), (body, true));
    }
    let head = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 262144\r\n\r\n";
    assert_eq!(refusal(server.answer(head.as_bytes())).body(), 0);
}

#[test]
fn a_head_gos_server_refuses_is_its_answer_then_closed() {
    let server = Upgrader::new("/ws", None);
    let plain = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
Connection: close\r\n\r\n400 Bad Request";
    for (head, want) in [
        ("garbage\r\n\r\n", plain),
        ("GET x HTTP/1.1\r\nHost: a\r\n\r\n", plain),
        ("G@T /x HTTP/1.1\r\nHost: a\r\n\r\n", plain),
        ("GET /x HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", plain),
        ("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", plain),
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
            plain,
        ),
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            plain,
        ),
        ("GET /w%zz HTTP/1.1\r\nHost: a\r\n\r\n", plain),
        (
            "GET /x HTTP/1.1\r\n\r\n",
            "HTTP/1.1 400 Bad Request: missing required Host header\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
400 Bad Request: missing required Host header",
        ),
        (
            "GET /x HTTP/2.0\r\nHost: a\r\n\r\n",
            "HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
505 HTTP Version Not Supported: unsupported protocol version",
        ),
        (
            "GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n\
Connection: close\r\n\r\nUnsupported transfer encoding",
        ),
    ] {
        assert_eq!(refused(&server, head), (want.into(), false), "{head}");
    }
    // HTTP/1.0 needs no Host, and its transfer coding is not read.
    let head = "GET /x HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert_eq!(
        refused(&server, head),
        (NOT_FOUND.replace("HTTP/1.1", "HTTP/1.0"), false)
    );
}

/// The upgrade request of [`upgrade`] with `host` as its Host line, or
/// none.
fn upgrade_naming(host: Option<&str>) -> String {
    let line = host.map_or_else(String::new, |h| format!("Host: {h}\r\n"));
    upgrade("/ws", "").replace("Host: cdn.example\r\n", &line)
}

#[test]
fn the_host_is_compared_without_its_port_or_case_as_xray_compares_it() {
    for (host, wanted, matches) in [
        ("cdn.example", "cdn.example", true),
        ("CDN.Example", "cdn.example", true),
        ("cdn.example", "CDN.EXAMPLE", true),
        ("cdn.example:443", "cdn.example", true),
        ("cdn.example:", "cdn.example", true),
        ("[::1]:8443", "::1", true),
        ("203.0.113.7:80", "203.0.113.7", true),
        ("cdn.example.", "cdn.example", false),
        ("www.cdn.example", "cdn.example", false),
        ("cdn.example:443", "cdn.example:443", false),
        // What SplitHostPort refuses names no host.
        ("::1", "::1", false),
        ("[::1]", "::1", false),
        ("a:b:443", "a:b", false),
        ("[cdn.example]x:443", "cdn.example", false),
        ("cdn]example:443", "cdn]example", false),
        ("", "cdn.example", false),
    ] {
        assert_eq!(
            host_matches(host, wanted),
            matches,
            "{host:?} for {wanted:?}"
        );
    }
}

#[test]
fn the_wanted_host_upgrades_and_any_host_does_without_one() {
    let server = Upgrader::new("/ws", Some("cdn.example"));
    for host in ["cdn.example", "Cdn.Example:8443"] {
        upgraded(server.answer(upgrade_naming(Some(host)).as_bytes()));
    }
    let server = Upgrader::new("/ws", None);
    for host in ["other.example", "[::1]"] {
        upgraded(server.answer(upgrade_naming(Some(host)).as_bytes()));
    }
}

#[test]
fn another_host_is_the_same_404_as_another_path_upgrade_or_not() {
    let server = Upgrader::new("/ws", Some("cdn.example"));
    for (head, shown) in [
        (upgrade_naming(Some("other.example")), "\"other.example\""),
        (
            upgrade_naming(Some("cdn.example.evil")),
            "\"cdn.example.evil\"",
        ),
        (
            "GET /ws HTTP/1.1\r\nHost: other.example\r\n\r\n".into(),
            "\"other.example\"",
        ),
        (
            "GET http://other.example/ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n".into(),
            "\"other.example\"",
        ),
        (
            "POST /elsewhere HTTP/1.1\r\nhost:other.example \r\n\r\n".into(),
            "\"other.example\"",
        ),
    ] {
        assert_eq!(refused(&server, &head), (NOT_FOUND.into(), true), "{shown}");
        let error = refusal(server.answer(head.as_bytes())).into_error();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            error.to_string(),
            format!("websocket: no upgrade for Host {shown}")
        );
    }
    // HTTP/1.0 may name no Host: that is no host either.
    let (answer, _) = refused(&server, "GET /ws HTTP/1.0\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.0 404 Not Found\r\n"), "{answer}");
    // At the path, with the Host, what is no upgrade is still a 400.
    let head = "GET /ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n";
    assert_eq!(refused(&server, head), (BAD_REQUEST.into(), true));
}
