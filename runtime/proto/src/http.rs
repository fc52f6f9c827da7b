//! HTTP proxy request heads: `CONNECT host:port` and absolute-form requests
//! (`GET http://host/path HTTP/1.1`).
//!
//! An absolute-form request is rewritten to origin form for the server: the
//! `Proxy-*` headers are removed, and `Connection: close` is set so every
//! request on a client connection is parsed and routed by the proxy (a
//! keep-alive connection could otherwise carry a request for another host to
//! the first host's server).

use crate::Address;

pub mod client;
mod server;

pub use server::Core;

/// The largest request head accepted (64 KiB); a longer one is refused.
pub const MAX_HEAD: usize = 64 * 1024;

pub const RESPONSE_ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
pub const RESPONSE_BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
pub const RESPONSE_AUTH_REQUIRED: &[u8] = b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"etemenanki\"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
pub const RESPONSE_FORBIDDEN: &[u8] =
    b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
pub const RESPONSE_BAD_GATEWAY: &[u8] =
    b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
pub const RESPONSE_TOO_LARGE: &[u8] =
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A tunnel: answer 200 once connected, then relay.
    Connect,
    /// A plain request: send `head` (the rewritten request head) to the
    /// server, then relay.
    Forward { head: Vec<u8> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub destination: Address,
    pub kind: Kind,
    /// The length of the head in the input, the blank line included.
    pub len: usize,
    /// The user and password of `Proxy-Authorization: Basic`, if any.
    pub credentials: Option<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed: answer 400.
    Bad(&'static str),
    /// Longer than [`MAX_HEAD`]: answer 431.
    TooLarge,
}

impl HeadError {
    pub fn response(self) -> &'static [u8] {
        match self {
            HeadError::Bad(_) => RESPONSE_BAD_REQUEST,
            HeadError::TooLarge => RESPONSE_TOO_LARGE,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            HeadError::Bad(reason) => reason,
            HeadError::TooLarge => "http: request head larger than 64 KiB",
        }
    }
}

/// The end of the head (after `\r\n\r\n`) if it is all in `buf`.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a request head; `Ok(None)` means more bytes are needed.
pub fn parse_request_head(buf: &[u8]) -> Result<Option<RequestHead>, HeadError> {
    let Some(len) = head_end(buf) else {
        return if buf.len() >= MAX_HEAD {
            Err(HeadError::TooLarge)
        } else {
            Ok(None)
        };
    };
    let head = std::str::from_utf8(&buf[..len])
        .map_err(|_| HeadError::Bad("http: the request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Bad("http: malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HeadError::Bad("http: unsupported http version"));
    }
    let headers: Vec<(&str, &str)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split_once(':').map(|(n, v)| (n.trim(), v.trim())))
        .collect::<Option<_>>()
        .ok_or(HeadError::Bad("http: malformed header line"))?;
    let credentials = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|(_, v)| basic_credentials(v));

    if method == "CONNECT" {
        let destination = Address::parse_host_port(target)
            .ok_or(HeadError::Bad("http: CONNECT target is not host:port"))?;
        return Ok(Some(RequestHead {
            destination,
            kind: Kind::Connect,
            len,
            credentials,
        }));
    }

    let rest = target.strip_prefix("http://").ok_or(HeadError::Bad(
        "http: a proxy request must use an absolute http:// URI",
    ))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let destination = match Address::parse_host_port(authority) {
        Some(addr) => addr,
        None => Address::from_host(authority, 80)
            .ok_or(HeadError::Bad("http: bad host in the request URI"))?,
    };
    let mut out = Vec::with_capacity(len + 32);
    out.extend_from_slice(format!("{method} {path} {version}\r\n").as_bytes());
    let mut has_host = false;
    for (name, value) in &headers {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        has_host |= lower == "host";
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    if !has_host {
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(RequestHead {
        destination,
        kind: Kind::Forward { head: out },
        len,
        credentials,
    }))
}

fn basic_credentials(value: &str) -> Option<(String, String)> {
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(etemenanki_ir::base64::decode(token.trim())?).ok()?;
    let (user, pass) = decoded.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

/// Whether the request may pass: no accounts, or a matching one.
pub fn authorized(head: &RequestHead, accounts: &[(String, String)]) -> bool {
    accounts.is_empty()
        || head
            .credentials
            .as_ref()
            .is_some_and(|c| accounts.iter().any(|a| a == c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_names_its_target() {
        let input = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03";
        let head = parse_request_head(input).unwrap().unwrap();
        assert_eq!(head.destination, Address::Domain("example.com".into(), 443));
        assert_eq!(head.kind, Kind::Connect);
        assert_eq!(&input[head.len..], b"\x16\x03");
    }

    #[test]
    fn a_connect_to_an_ip_literal_names_an_ip() {
        for (target, addr) in [
            ("[::1]:80", "[::1]:80"),
            ("::ffff:127.0.0.1:80", "[::ffff:127.0.0.1]:80"),
            ("127.0.0.1:80", "127.0.0.1:80"),
        ] {
            let input = format!("CONNECT {target} HTTP/1.1\r\n\r\n");
            let head = parse_request_head(input.as_bytes()).unwrap().unwrap();
            assert_eq!(
                head.destination,
                Address::Ip(addr.parse().unwrap()),
                "{target}"
            );
        }
    }

    #[test]
    fn a_host_with_control_characters_is_a_bad_request() {
        for input in [
            &b"CONNECT 127.0.0.1\0:80 HTTP/1.1\r\n\r\n"[..],
            b"CONNECT exa\x01mple.com:443 HTTP/1.1\r\n\r\n",
            b"GET http://127.0.0.1\0/ HTTP/1.1\r\n\r\n",
            b"GET http://exa\tmple.com:8080/ HTTP/1.1\r\n\r\n",
        ] {
            let refused = parse_request_head(input);
            assert!(matches!(refused, Err(HeadError::Bad(_))), "{refused:?}");
            assert_eq!(refused.unwrap_err().response(), RESPONSE_BAD_REQUEST);
        }
    }

    #[test]
    fn an_incomplete_head_needs_more() {
        assert_eq!(parse_request_head(b"CONNECT a:1 HTTP/1.1\r\n"), Ok(None));
    }

    #[test]
    fn absolute_form_is_rewritten_to_origin_form() {
        let input = b"GET http://127.0.0.1:8080/a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let head = parse_request_head(input).unwrap().unwrap();
        assert_eq!(
            head.destination,
            Address::Ip("127.0.0.1:8080".parse().unwrap())
        );
        let Kind::Forward { head: out } = head.kind else {
            panic!()
        };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn absolute_form_without_a_port_or_path_defaults_to_80_and_slash() {
        let head = parse_request_head(b"GET http://example.com HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.destination, Address::Domain("example.com".into(), 80));
        let Kind::Forward { head: out } = head.kind else {
            panic!()
        };
        assert!(out.starts_with(b"GET / HTTP/1.0\r\nHost: example.com\r\n"));
    }

    #[test]
    fn origin_form_and_https_uris_are_bad_requests() {
        assert!(matches!(
            parse_request_head(b"GET / HTTP/1.1\r\n\r\n"),
            Err(HeadError::Bad(_))
        ));
        assert!(matches!(
            parse_request_head(b"GET https://a/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::Bad(_))
        ));
        assert!(matches!(
            parse_request_head(b"GARBAGE\r\n\r\n"),
            Err(HeadError::Bad(_))
        ));
    }

    #[test]
    fn a_head_that_never_ends_is_too_large() {
        let input = vec![b'a'; MAX_HEAD];
        assert_eq!(parse_request_head(&input), Err(HeadError::TooLarge));
    }

    #[test]
    fn basic_credentials_are_checked() {
        let accounts = vec![("user".to_owned(), "pass".to_owned())];
        let with = b"CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n";
        let head = parse_request_head(with).unwrap().unwrap();
        assert!(authorized(&head, &accounts));
        let wrong = b"CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Basic dXNlcjp4\r\n\r\n";
        assert!(!authorized(
            &parse_request_head(wrong).unwrap().unwrap(),
            &accounts
        ));
        let without = parse_request_head(b"CONNECT a:1 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!authorized(&without, &accounts));
        assert!(authorized(&without, &[]));
    }
}
