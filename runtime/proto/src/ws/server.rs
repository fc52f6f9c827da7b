//! The server side of a WebSocket upgrade, answered byte for byte as Xray's
//! server answers it (Go's net/http under gorilla/websocket), the `Date`
//! aside, which is passed in:
//! - a request head Go's server cannot take is answered by it before any
//!   handler, and the connection closed: a malformed head is a bare
//!   `400 Bad Request`, an HTTP/1.1 request without Host a 400 that says
//!   so, a version other than 1.x a 505, a transfer coding other than
//!   chunked a 501;
//! - a request for another path, or naming another Host when the inbound
//!   has one, is a 404 with no body, upgrade or not;
//! - at the path, what is no valid upgrade is gorilla's 400 (405 for an
//!   upgrade by another method than GET);
//! - a valid upgrade is gorilla's 101, echoing `Sec-WebSocket-Protocol`
//!   when it carries early data (the stream's first bytes, base64url), as
//!   Xray does.
//!
//! After a 404, 400 or 405 the connection stays open for the client's next
//! request, as Go's keeps it alive: unless the request was HTTP/1.0 without
//! `Connection: keep-alive`, asked `Connection: close`, or has a body Go
//! would not read (256 KiB or more, or chunked: Go reads a chunked body
//! under that size, this server does not and closes as Go does for one
//! over it); then the answer says so (`Connection: close`) and the
//! connection is closed. A body is read and dropped before the answer, as
//! Go does.
//!
//! The Host is compared as Xray's `IsValidHTTPHost` compares it: case
//! ignored, and when the request's Host has a colon, only its host part as
//! Go's `net.SplitHostPort` takes it (the port stripped, an IPv6 address
//! unbracketed; a value it cannot split matches nothing). Without a host
//! in the plan any Host is served, as Xray and sing-box do. The path is
//! compared decoded, as Go's `URL.Path`; a query after it is ignored
//! (Xray's clients put `?ed=2048` there).

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use etemenanki_ir::base64;

use super::upgrade::accept_token;

/// The longest request body read and dropped after a refusal to keep the
/// connection: Go's `maxPostHandlerReadBytes` less one.
pub const MAX_DISCARDED_BODY: u64 = 256 * 1024 - 1;

/// Go's answer to a request head longer than it reads, before closing.
pub const RESPONSE_TOO_LARGE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
431 Request Header Fields Too Large";

const RESPONSE_MALFORMED: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request";

const RESPONSE_NO_HOST: &[u8] = b"HTTP/1.1 400 Bad Request: missing required Host header\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
400 Bad Request: missing required Host header";

const RESPONSE_VERSION: &[u8] =
    b"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n\
505 HTTP Version Not Supported: unsupported protocol version";

const RESPONSE_CODING: &[u8] = b"HTTP/1.1 501 Not Implemented\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding";

/// The headers Go's `http.Error` sets, gorilla's version header among
/// them, in Go's order (sorted).
const ERROR_HEADERS: &[u8] = b"Content-Type: text/plain; charset=utf-8\r\n\
Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n";

/// The end of the request head in `buf` (after its empty line, CRLF or a
/// bare LF as Go takes them), if it is all there.
pub fn request_end(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(lf) = buf[at..].iter().position(|b| *b == b'\n') {
        let next = at + lf + 1;
        match &buf[next..] {
            [b'\n', ..] => return Some(next + 1),
            [b'\r', b'\n', ..] => return Some(next + 2),
            _ => at = next,
        }
    }
    None
}

/// The upgrades one inbound takes: its path, and the Host they must name
/// when it has one.
#[derive(Clone, Debug)]
pub struct Upgrader {
    path: String,
    host: Option<String>,
}

/// What to answer one request head.
#[derive(Debug)]
pub enum Answer {
    /// The 101 to send, and the early data the request carried.
    Upgrade {
        response: Vec<u8>,
        early: Vec<u8>,
    },
    Refuse(Refusal),
}

/// A refused request: how it is answered, and what then.
#[derive(Debug)]
pub struct Refusal {
    status: Status,
    /// The request was HTTP/1.0: so is the answer's status line.
    http10: bool,
    after: After,
    body: u64,
    error: io::Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    NotFound,
    BadRequest,
    MethodNotAllowed,
    /// Go's server refused the head before any handler: this whole
    /// answer, then the connection closed.
    Server(&'static [u8]),
}

/// What becomes of the connection after a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    /// Kept for the next request, saying nothing (HTTP/1.1).
    KeepAlive,
    /// Kept, saying `Connection: keep-alive` (HTTP/1.0 that asked).
    KeepAliveSaid,
    /// Closed, saying nothing (HTTP/1.0).
    Close,
    /// Closed, saying `Connection: close`.
    CloseSaid,
}

impl Refusal {
    /// Whether the connection stays open for the client's next request.
    pub fn keeps_alive(&self) -> bool {
        matches!(self.after, After::KeepAlive | After::KeepAliveSaid)
    }

    /// The bytes of request body that follow the head, to read and drop
    /// before answering.
    pub fn body(&self) -> u64 {
        self.body
    }

    /// Why the request was refused.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    pub fn into_error(self) -> io::Error {
        self.error
    }

    /// Appends the answer to `out`, dated `now`.
    pub fn write(&self, now: SystemTime, out: &mut Vec<u8>) {
        let (status, body): (&[u8], &[u8]) = match self.status {
            Status::Server(response) => {
                out.extend_from_slice(response);
                return;
            }
            Status::NotFound => (b"404 Not Found", b""),
            Status::BadRequest => (b"400 Bad Request", b"Bad Request\n"),
            Status::MethodNotAllowed => (b"405 Method Not Allowed", b"Method Not Allowed\n"),
        };
        out.extend_from_slice(if self.http10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        });
        out.extend_from_slice(status);
        out.extend_from_slice(b"\r\n");
        if !body.is_empty() {
            out.extend_from_slice(ERROR_HEADERS);
        }
        out.extend_from_slice(b"Date: ");
        write_date(now, out);
        // Writing to a Vec cannot fail.
        let _ = write!(out, "\r\nContent-Length: {}\r\n", body.len());
        match self.after {
            After::KeepAliveSaid => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            After::CloseSaid => out.extend_from_slice(b"Connection: close\r\n"),
            After::KeepAlive | After::Close => {}
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
    }
}

/// The fields of a request head the answer depends on.
struct Head<'a> {
    method: &'a [u8],
    target: &'a [u8],
    http10: bool,
    /// The header lines, each `name: value`, well formed.
    lines: &'a [u8],
    host: Option<&'a [u8]>,
    body: Body,
}

enum Body {
    Length(u64),
    Chunked,
}

impl<'a> Head<'a> {
    /// The values of every `name` header, trimmed.
    fn values(&self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        header_lines(self.lines)
            .filter_map(split_header)
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// Whether a `name` header's comma-separated list holds `token`, case
    /// ignored, as gorilla's `tokenListContainsValue` looks.
    fn has_token(&self, name: &'a str, token: &str) -> bool {
        self.values(name).any(|value| {
            value
                .split(|b| *b == b',')
                .any(|t| trim(t).eq_ignore_ascii_case(token.as_bytes()))
        })
    }
}

fn header_lines(lines: &[u8]) -> impl Iterator<Item = &[u8]> {
    lines
        .split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
}

/// `name: value` with the value trimmed; `None` for a line Go's textproto
/// refuses (no colon, an empty name, a space in the name, or a folded
/// line).
fn split_header(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|b| *b == b':')?;
    let name = &line[..colon];
    if name.is_empty() || name.iter().any(|b| !is_token(*b)) {
        return None;
    }
    Some((name, trim(&line[colon + 1..])))
}

/// An RFC 9110 token character, as Go checks a method and a header name.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(start), Some(end)) => &bytes[start..=end],
        _ => &[],
    }
}

/// Why Go's server refuses a head before any handler sees it.
fn server_refusal(response: &'static [u8], text: &'static str) -> Answer {
    Answer::Refuse(Refusal {
        status: Status::Server(response),
        http10: false,
        after: After::Close,
        body: 0,
        error: invalid(text),
    })
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Parses `head` as Go's server reads a request, or its refusal.
fn parse(head: &[u8]) -> Result<Head<'_>, Answer> {
    let malformed = |text| server_refusal(RESPONSE_MALFORMED, text);
    let line_end = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    let line = &head[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let lines = &head[(line_end + 1).min(head.len())..];
    let mut parts = line.splitn(3, |b| *b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("websocket: malformed request line"));
    };
    if method.is_empty() || !method.iter().all(|b| is_token(*b)) {
        return Err(malformed("websocket: malformed request method"));
    }
    let http10 = match version {
        b"HTTP/1.0" => true,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            if *major != b'1' {
                return Err(server_refusal(
                    RESPONSE_VERSION,
                    "websocket: unsupported http version",
                ));
            }
            *minor == b'0'
        }
        _ => return Err(malformed("websocket: malformed http version")),
    };
    if !(target.starts_with(b"/") || target.windows(3).any(|w| w == b"://")) {
        return Err(malformed("websocket: malformed request target"));
    }
    let mut host = None;
    let mut hosts = 0;
    let mut length: Option<&[u8]> = None;
    let mut coding: Option<&[u8]> = None;
    for line in header_lines(lines) {
        let Some((name, value)) = split_header(line) else {
            return Err(malformed("websocket: malformed header line"));
        };
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            host = Some(value);
        } else if name.eq_ignore_ascii_case(b"content-length") {
            if length.is_some_and(|seen| seen != value) {
                return Err(malformed("websocket: conflicting content lengths"));
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if coding.is_some() {
                return Err(server_refusal(
                    RESPONSE_CODING,
                    "websocket: unsupported transfer encoding",
                ));
            }
            coding = Some(value);
        }
    }
    if hosts > 1 {
        return Err(malformed("websocket: more than one Host header"));
    }
    if host.is_none() && !http10 {
        return Err(server_refusal(
            RESPONSE_NO_HOST,
            "websocket: the request names no Host",
        ));
    }
    // Go takes a transfer coding from HTTP/1.1 only, and then no length.
    let body = match coding.filter(|_| !http10) {
        Some(coding) if coding.eq_ignore_ascii_case(b"chunked") => Body::Chunked,
        Some(_) => {
            return Err(server_refusal(
                RESPONSE_CODING,
                "websocket: unsupported transfer encoding",
            ))
        }
        None => match length {
            None => Body::Length(0),
            Some(digits) => {
                let parsed = std::str::from_utf8(digits)
                    .ok()
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|d| d.parse().ok());
                match parsed {
                    Some(length) => Body::Length(length),
                    None => return Err(malformed("websocket: malformed content length")),
                }
            }
        },
    };
    Ok(Head {
        method,
        target,
        http10,
        lines,
        host,
        body,
    })
}

impl Upgrader {
    /// `path` is the request path served; `host`, when set, is the Host a
    /// request must name.
    pub fn new(path: &str, host: Option<&str>) -> Self {
        Upgrader {
            path: path.to_owned(),
            host: host.map(str::to_owned),
        }
    }

    /// The answer to `head`, a whole request head (see [`request_end`]).
    pub fn answer(&self, head: &[u8]) -> Answer {
        let head = match parse(head) {
            Ok(head) => head,
            Err(refused) => return refused,
        };
        // An absolute target names the host and the path itself.
        let (target_host, path) = match head.target.windows(3).position(|w| w == b"://") {
            Some(at) => {
                let rest = &head.target[at + 3..];
                let slash = rest.iter().position(|b| *b == b'/').unwrap_or(rest.len());
                (Some(&rest[..slash]), &rest[slash..])
            }
            None => (None, head.target),
        };
        let path = path.split(|b| *b == b'?').next().unwrap_or_default();
        let Some(path) = unescape(path) else {
            return server_refusal(RESPONSE_MALFORMED, "websocket: malformed request path");
        };
        let (after, body) = match head.body {
            Body::Length(length) if length <= MAX_DISCARDED_BODY => {
                let after = match (head.http10, head.has_token("connection", "close")) {
                    (_, true) => After::CloseSaid,
                    (true, false) if head.has_token("connection", "keep-alive") => {
                        After::KeepAliveSaid
                    }
                    (true, false) => After::Close,
                    (false, false) => After::KeepAlive,
                };
                (after, length)
            }
            // Go reads no more than this of a body; then it closes.
            Body::Length(_) | Body::Chunked => (After::CloseSaid, 0),
        };
        let refuse = |status, error| {
            Answer::Refuse(Refusal {
                status,
                http10: head.http10,
                after,
                body,
                error,
            })
        };
        let not_found = |text: String| {
            refuse(
                Status::NotFound,
                io::Error::new(io::ErrorKind::NotFound, text),
            )
        };
        // Xray's order: the Host, then the path, then the upgrade.
        if let Some(wanted) = &self.host {
            // A Host that is no text names no host.
            let host = target_host.or(head.host).unwrap_or_default();
            let host = std::str::from_utf8(host).unwrap_or_default();
            if !host_matches(host, wanted) {
                return not_found(format!("websocket: no upgrade for Host {host:?}"));
            }
        }
        if path != self.path.as_bytes() {
            let shown = String::from_utf8_lossy(&path);
            return not_found(format!("websocket: no upgrade at {shown:?}"));
        }
        // gorilla's checks, in its order.
        let bad = |status, why: &str| {
            let error = io::Error::new(
                io::ErrorKind::InvalidData,
                format!("websocket: not an upgrade request: {why}"),
            );
            refuse(status, error)
        };
        if !head.has_token("connection", "upgrade") {
            return bad(Status::BadRequest, "no 'upgrade' token in Connection");
        }
        if !head.has_token("upgrade", "websocket") {
            return bad(Status::BadRequest, "no 'websocket' token in Upgrade");
        }
        if head.method != b"GET" {
            return bad(Status::MethodNotAllowed, "the method is not GET");
        }
        if !head.has_token("sec-websocket-version", "13") {
            return bad(Status::BadRequest, "no version 13 in Sec-WebSocket-Version");
        }
        let key = head.values("sec-websocket-key").next().unwrap_or_default();
        let Some(key) = std::str::from_utf8(key).ok().filter(|key| is_key(key)) else {
            return bad(
                Status::BadRequest,
                "Sec-WebSocket-Key is no base64 of 16 bytes",
            );
        };
        let offered = head.values("sec-websocket-protocol").next();
        let early = offered
            .and_then(|value| std::str::from_utf8(value).ok())
            .and_then(base64::decode)
            .unwrap_or_default();
        let mut response = Vec::with_capacity(160);
        let _ = write!(
            response,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n",
            accept_token(key)
        );
        if let (false, Some(offered)) = (early.is_empty(), offered) {
            response.extend_from_slice(b"Sec-WebSocket-Protocol: ");
            response.extend_from_slice(offered);
            response.extend_from_slice(b"\r\n");
        }
        response.extend_from_slice(b"\r\n");
        Answer::Upgrade { response, early }
    }
}

/// Whether `key` is what gorilla takes for a key: the standard base64,
/// padded, of 16 bytes.
fn is_key(key: &str) -> bool {
    key.len() == 24
        && key.ends_with("==")
        && key[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// `path` with its `%XX` escapes decoded, as Go's `URL.Path` has it, or
/// `None` for a malformed escape.
fn unescape(path: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(path.len());
    let mut bytes = path.iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = |b: Option<&u8>| char::from(*b?).to_digit(16);
        let (high, low) = (hex(bytes.next())?, hex(bytes.next())?);
        out.push((high * 16 + low) as u8);
    }
    Some(out)
}

/// Whether the Host `request` names `wanted`, as Xray's `IsValidHTTPHost`
/// has it.
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

/// Appends `now` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
/// form of HTTP's `Date`.
pub fn write_date(now: SystemTime, out: &mut Vec<u8>) {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days after 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let _ = write!(
        out,
        "{}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    );
}

#[cfg(test)]
mod tests;
