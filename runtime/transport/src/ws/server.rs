//! WebSocket under an inbound (seed 003 step 2): the upgrade request read
//! and answered, then the stream of binary messages as bytes
//! ([`WsStream`]).
//!
//! The request head is read here and tungstenite's server handshake
//! (`create_response`, which checks the upgrade and derives the accept
//! key, and `write_response`) answers it, rather than its `accept`, so
//! that the port behaves as Xray's, a Go web server, does:
//! - a request for another path, or naming another Host when the inbound
//!   has one, is a 404, whether or not it asks for an upgrade (tungstenite's
//!   `accept` sends nothing at all to a request that is no upgrade, which
//!   tells a prober what listens); the two 404s are the same bytes, so a
//!   prober learns from one no more than from the other;
//! - a request at the path that is no valid upgrade is a 400;
//! - frames a client sends right behind its request are kept
//!   (tungstenite's `accept` refuses them as junk).
//!
//! Early data as Xray and sing-box send it: the stream's first bytes,
//! base64url, unpadded, in `Sec-WebSocket-Protocol`; the 101 echoes the
//! header, as Xray does, so a client that offered a subprotocol sees it
//! taken. A value that is no base64 is no early data, and is not echoed.
//!
//! The Host is compared as Xray's `IsValidHTTPHost` compares it: case
//! ignored, and when the request's Host has a colon, only its host part
//! as Go's `net.SplitHostPort` takes it (the port stripped, an IPv6
//! address unbracketed; a value it cannot split matches nothing). Without
//! a host in the plan any Host is served, as Xray and sing-box do.

use std::io;

use etemenanki_proto::http::head_end;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::handshake::machine::TryParse;
use tokio_tungstenite::tungstenite::handshake::server::{create_response, write_response, Request};
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::WsStream;
use crate::Stream;

/// The longest request head read before refusing it with a 431: room for
/// the headers a browser sends and 8 KiB of early data.
const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// The largest frame a client may send: clients write one frame per write
/// of their relay, ours up to 64 KiB. Frames are read as they come, never
/// held whole, so this bounds no memory; it is the bound this server had
/// when tungstenite, which holds a frame whole, read its frames.
const MAX_FRAME_FROM_CLIENT: u64 = 1024 * 1024;

/// What Go's server sends for Xray's `WriteHeader(http.StatusNotFound)`,
/// its answer to another path or another Host: a 404 with no body.
const RESPONSE_NOT_FOUND: &[u8] =
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// What gorilla/websocket sends for a request at the path that is no
/// upgrade.
const RESPONSE_BAD_REQUEST: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n\
Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n";

const RESPONSE_TOO_LARGE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
431 Request Header Fields Too Large";

/// How one inbound takes its upgrades.
#[derive(Clone, Debug)]
pub struct WsServer {
    path: String,
    host: Option<String>,
}

/// What to answer one request head.
#[derive(Debug)]
enum Answer {
    /// The 101 to send, and the early data the request carried.
    Upgrade { response: Vec<u8>, early: Vec<u8> },
    /// The response to send before closing, and why.
    Refuse {
        response: &'static [u8],
        error: io::Error,
    },
}

impl WsServer {
    /// `path` is the request path served; a query string after it is
    /// ignored (Xray's clients put `?ed=2048` there). `host`, when set, is
    /// the Host a request must name.
    pub fn new(path: &str, host: Option<&str>) -> Self {
        WsServer {
            path: path.to_owned(),
            host: host.map(str::to_owned),
        }
    }

    /// Reads the upgrade request from `stream` and answers it. A refused
    /// request gets its HTTP answer and the connection is closed; the error
    /// says why. The caller bounds the time this takes.
    pub async fn accept(&self, mut stream: Stream) -> io::Result<WsStream> {
        let mut input = Vec::with_capacity(1024);
        let len = loop {
            if let Some(len) = head_end(&input) {
                break len;
            }
            if input.len() >= MAX_REQUEST_HEAD {
                return Err(refuse(
                    &mut stream,
                    RESPONSE_TOO_LARGE,
                    invalid("websocket: the upgrade request head is too long".into()),
                )
                .await);
            }
            input.reserve(1024.min(MAX_REQUEST_HEAD - input.len()));
            if stream.read_buf(&mut input).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "websocket: the client closed the connection before its upgrade request",
                ));
            }
        };
        match self.answer(&input[..len]) {
            Answer::Refuse { response, error } => Err(refuse(&mut stream, response, error).await),
            Answer::Upgrade { response, early } => {
                stream.write_all(&response).await?;
                stream.flush().await?;
                // Frames the client sent right behind its request.
                let ahead = input.split_off(len);
                Ok(WsStream::server(
                    stream,
                    ahead,
                    early,
                    MAX_FRAME_FROM_CLIENT,
                ))
            }
        }
    }

    /// The answer to `head`, a whole request head.
    fn answer(&self, head: &[u8]) -> Answer {
        let target = head
            .split(|b| *b == b' ')
            .nth(1)
            .and_then(|t| std::str::from_utf8(t).ok())
            .unwrap_or_default();
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        let not_found = |text: String| Answer::Refuse {
            response: RESPONSE_NOT_FOUND,
            error: io::Error::new(io::ErrorKind::NotFound, text),
        };
        // Xray's order: the Host, then the path, then the upgrade.
        if let Some(wanted) = &self.host {
            // A Host that is missing or no text names no host.
            let host = host_header(head).unwrap_or_default();
            if !host_matches(host, wanted) {
                return not_found(format!("websocket: no upgrade for Host {host:?}"));
            }
        }
        if path != self.path {
            return not_found(format!("websocket: no upgrade at {path:?}"));
        }
        let bad = |e: &dyn std::fmt::Display| Answer::Refuse {
            response: RESPONSE_BAD_REQUEST,
            error: invalid(format!("websocket: not an upgrade request: {e}")),
        };
        let request = match Request::try_parse(head) {
            Ok(Some((_, request))) => request,
            Ok(None) => return bad(&"incomplete head"),
            Err(e) => return bad(&e),
        };
        let mut response = match create_response(&request) {
            Ok(response) => response,
            Err(e) => return bad(&e),
        };
        let offered = request.headers().get("sec-websocket-protocol");
        let early = offered
            .and_then(|value| value.to_str().ok())
            .and_then(|value| etemenanki_ir::base64::decode(value.trim()))
            .unwrap_or_default();
        if let (false, Some(offered)) = (early.is_empty(), offered) {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::clone(offered));
        }
        let mut out = Vec::with_capacity(256);
        match write_response(&mut out, &response) {
            Ok(()) => Answer::Upgrade {
                response: out,
                early,
            },
            Err(e) => bad(&e),
        }
    }
}

/// The value of the first Host header of `head`, a whole request head,
/// trimmed; `None` without one or when it is no UTF-8.
fn host_header(head: &[u8]) -> Option<&str> {
    head.split(|b| *b == b'\n')
        .skip(1)
        .find_map(|line| {
            let colon = line.iter().position(|b| *b == b':')?;
            line[..colon]
                .eq_ignore_ascii_case(b"host")
                .then(|| &line[colon + 1..])
        })
        .and_then(|value| std::str::from_utf8(value).ok())
        .map(str::trim)
}

/// Whether the Host `request` names `wanted`, as Xray's
/// `IsValidHTTPHost` has it.
fn host_matches(request: &str, wanted: &str) -> bool {
    let host = if request.contains(':') {
        split_host(request).unwrap_or_default()
    } else {
        request
    };
    host.eq_ignore_ascii_case(wanted)
}

/// The host part of `host:port` as Go's `net.SplitHostPort` splits it
/// (`[v6]:port` unbracketed), or `None` where it fails.
fn split_host(hostport: &str) -> Option<&str> {
    let colon = hostport.rfind(':')?;
    let (host, after_open, after_close) = if hostport.starts_with('[') {
        let close = hostport.find(']')?;
        // `]` must be followed by the last colon and the port.
        if close + 1 != colon {
            return None;
        }
        (&hostport[1..close], 1, close + 1)
    } else {
        let host = &hostport[..colon];
        if host.contains(':') {
            return None;
        }
        (host, 0, 0)
    };
    if hostport[after_open..].contains('[') || hostport[after_close..].contains(']') {
        return None;
    }
    Some(host)
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Sends `response` and closes the connection; returns `error`.
async fn refuse(stream: &mut Stream, response: &[u8], error: io::Error) -> io::Error {
    // The client may be gone already; the refusal is the error either way.
    if stream.write_all(response).await.is_ok() {
        let _ = stream.shutdown().await;
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
    const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

    fn request(target: &str, extra: &str) -> Vec<u8> {
        format!(
            "GET {target} HTTP/1.1\r\nHost: cdn.example\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {KEY}\r\n\
             {extra}\r\n"
        )
        .into_bytes()
    }

    fn upgrade(answer: Answer) -> (String, Vec<u8>) {
        match answer {
            Answer::Upgrade { response, early } => (String::from_utf8(response).unwrap(), early),
            Answer::Refuse { error, .. } => panic!("refused: {error}"),
        }
    }

    fn refusal(answer: Answer) -> (&'static [u8], io::Error) {
        match answer {
            Answer::Refuse { response, error } => (response, error),
            Answer::Upgrade { .. } => panic!("upgraded"),
        }
    }

    #[test]
    fn the_path_upgrades_with_the_rfc_accept_token_and_a_query_is_ignored() {
        let server = WsServer::new("/ws", None);
        for target in ["/ws", "/ws?ed=2048"] {
            let (response, early) = upgrade(server.answer(&request(target, "")));
            assert!(response.starts_with("HTTP/1.1 101 "), "{response}");
            assert!(
                response.contains(&format!("sec-websocket-accept: {ACCEPT}\r\n")),
                "{response}"
            );
            assert!(!response.contains("sec-websocket-protocol"), "{response}");
            assert!(early.is_empty());
        }
    }

    #[test]
    fn early_data_is_decoded_and_its_header_echoed() {
        let server = WsServer::new("/ws", None);
        let encoded = etemenanki_ir::base64::encode_url(b"\x16\x03\x01 first bytes");
        let head = request(
            "/ws?ed=2048",
            &format!("Sec-WebSocket-Protocol: {encoded}\r\n"),
        );
        let (response, early) = upgrade(server.answer(&head));
        assert_eq!(early, b"\x16\x03\x01 first bytes");
        assert!(
            response.contains(&format!("sec-websocket-protocol: {encoded}\r\n")),
            "{response}"
        );
    }

    #[test]
    fn a_protocol_header_that_is_no_base64_is_no_early_data() {
        let server = WsServer::new("/ws", None);
        let head = request("/ws", "Sec-WebSocket-Protocol: chat, superchat\r\n");
        let (response, early) = upgrade(server.answer(&head));
        assert!(early.is_empty());
        assert!(!response.contains("sec-websocket-protocol"), "{response}");
    }

    #[test]
    fn another_path_is_a_404_upgrade_or_not() {
        let server = WsServer::new("/ws", None);
        for head in [
            request("/other", ""),
            request("/ws/", ""),
            b"GET / HTTP/1.1\r\nHost: cdn.example\r\n\r\n".to_vec(),
            b"POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n".to_vec(),
        ] {
            let (response, error) = refusal(server.answer(&head));
            assert_eq!(response, RESPONSE_NOT_FOUND);
            assert_eq!(error.kind(), io::ErrorKind::NotFound);
        }
        let (_, error) = refusal(server.answer(&request("/other?ed=1", "")));
        assert_eq!(error.to_string(), "websocket: no upgrade at \"/other\"");
    }

    #[test]
    fn a_request_at_the_path_that_is_no_upgrade_is_a_400() {
        let server = WsServer::new("/ws", None);
        for head in [
            b"GET /ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n".to_vec(),
            b"POST /ws HTTP/1.1\r\nContent-Length: 0\r\n\r\n".to_vec(),
            String::from_utf8(request("/ws", ""))
                .unwrap()
                .replace("Version: 13", "Version: 8")
                .into_bytes(),
        ] {
            let (response, error) = refusal(server.answer(&head));
            assert_eq!(response, RESPONSE_BAD_REQUEST);
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
            assert!(
                error
                    .to_string()
                    .starts_with("websocket: not an upgrade request: "),
                "{error}"
            );
        }
    }

    /// The upgrade request of [`request`] with `host` as its Host line, or
    /// none.
    fn request_naming(host: Option<&str>) -> Vec<u8> {
        let line = host.map_or_else(String::new, |h| format!("Host: {h}\r\n"));
        String::from_utf8(request("/ws", ""))
            .unwrap()
            .replace("Host: cdn.example\r\n", &line)
            .into_bytes()
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
        let server = WsServer::new("/ws", Some("cdn.example"));
        for host in ["cdn.example", "Cdn.Example:8443"] {
            let (response, _) = upgrade(server.answer(&request_naming(Some(host))));
            assert!(response.starts_with("HTTP/1.1 101 "), "{response}");
        }
        let server = WsServer::new("/ws", None);
        for host in [Some("other.example"), Some("[::1]"), None] {
            let (response, _) = upgrade(server.answer(&request_naming(host)));
            assert!(
                response.starts_with("HTTP/1.1 101 "),
                "{host:?}: {response}"
            );
        }
    }

    #[test]
    fn another_host_is_the_same_404_as_another_path_upgrade_or_not() {
        let server = WsServer::new("/ws", Some("cdn.example"));
        let (wrong_path, _) = refusal(server.answer(&request("/other", "")));
        for (head, shown) in [
            (request_naming(Some("other.example")), "\"other.example\""),
            (
                request_naming(Some("cdn.example.evil")),
                "\"cdn.example.evil\"",
            ),
            (request_naming(None), "\"\""),
            (
                b"GET /ws HTTP/1.1\r\nHost: other.example\r\n\r\n".to_vec(),
                "\"other.example\"",
            ),
            (
                b"POST /elsewhere HTTP/1.0\r\nhost:other.example \r\n\r\n".to_vec(),
                "\"other.example\"",
            ),
        ] {
            let (response, error) = refusal(server.answer(&head));
            assert_eq!(response, wrong_path, "{shown}");
            assert_eq!(response, RESPONSE_NOT_FOUND);
            assert_eq!(error.kind(), io::ErrorKind::NotFound);
            assert_eq!(
                error.to_string(),
                format!("websocket: no upgrade for Host {shown}")
            );
        }
        // At the path, with the Host, what is no upgrade is still a 400.
        let head = b"GET /ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n";
        let (response, _) = refusal(server.answer(head));
        assert_eq!(response, RESPONSE_BAD_REQUEST);
    }
}
