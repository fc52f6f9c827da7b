//! The masquerade (PROTOCOL.md: a server that fails a client's
//! authentication "MUST either act like a standard web server ... or, in
//! the case of being a reverse proxy, forward the request to the upstream
//! site and return the response"): an HTTP/3 request that does not
//! authenticate is relayed as HTTP/1.1 to a web server, and its answer
//! sent back over HTTP/3, as hysteria's `masquerade.type: proxy` does with
//! Go's reverse proxy: the Host stays the request's own, the hop-by-hop
//! headers and the client's `X-Forwarded-*` are dropped both ways, a web
//! server that cannot be reached is a 502. Without a web server, a 404.
//!
//! The request head and the response framing (length, chunked, or to the
//! end) are sans-IO; [`answer`] runs them.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest request body relayed; a longer one is answered 413.
pub const MAX_REQUEST_BODY: usize = 64 * 1024;
/// The longest response head read; a longer one is a 502.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// The most response body relayed; past it the stream is reset.
pub const MAX_RESPONSE_BODY: u64 = 16 * 1024 * 1024;
/// The most headers a response may have.
const MAX_HEADERS: usize = 64;
/// How long one request may take, the web server's answer included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// One read from the web server.
const CHUNK: usize = 16 * 1024;

/// Headers that describe one hop, not the message (RFC 9110 section 7.6.1,
/// and the list Go's reverse proxy drops), plus the forwarding headers the
/// client may not set.
const DROPPED: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
];

/// Whether header `name` of `headers` is carried across: not hop-by-hop,
/// and not named by a `Connection` header.
fn carried(headers: &HeaderMap, name: &HeaderName) -> bool {
    if DROPPED.contains(&name.as_str()) {
        return false;
    }
    !headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case(name.as_str()))
}

/// The HTTP/1.1 head of `request` with a body of `body_len` bytes: origin
/// form, the request's own authority as Host, `Connection: close`.
pub fn request_head<B>(request: &Request<B>, body_len: usize) -> Vec<u8> {
    let uri = request.uri();
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let host = uri
        .authority()
        .map(|a| a.as_str())
        .or_else(|| request.headers().get(http::header::HOST)?.to_str().ok())
        .unwrap_or_default();
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(request.method().as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    head.extend_from_slice(host.as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in request.headers() {
        if !carried(request.headers(), name) || name == http::header::CONTENT_LENGTH {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    let sends_body = body_len > 0
        || matches!(
            *request.method(),
            Method::POST | Method::PUT | Method::PATCH
        );
    if sends_body {
        head.extend_from_slice(format!("Content-Length: {body_len}\r\n").as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// How the response body is delimited.
#[derive(Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (a HEAD request, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
    /// Until the web server closes.
    ToEnd,
}

/// A parsed response head.
#[derive(Debug)]
pub struct Head {
    pub status: StatusCode,
    /// The headers relayed to the client.
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The length of the head in the input.
    pub len: usize,
}

fn bad_gateway(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("hysteria2: masquerade: {what}"),
    )
}

/// Parses the response head at the start of `buf`, skipping interim (1xx)
/// responses; `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8], method: &Method) -> io::Result<Option<Head>> {
    let mut skipped = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(&buf[skipped..]) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() > MAX_RESPONSE_HEAD => {
                return Err(bad_gateway("the web server's response head is too long"))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => {
                return Err(bad_gateway(&format!(
                    "the web server's response does not parse: {e}"
                )))
            }
        };
        let status = response
            .code
            .and_then(|c| StatusCode::from_u16(c).ok())
            .ok_or_else(|| bad_gateway("the web server answered no status"))?;
        if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
            skipped += len;
            continue;
        }
        let mut all = HeaderMap::new();
        for h in response.headers.iter() {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(h.name.as_bytes()),
                HeaderValue::from_bytes(h.value),
            ) {
                all.append(name, value);
            }
        }
        let chunked = all
            .get_all(http::header::TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = all
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let framing = if *method == Method::HEAD
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            Framing::Empty
        } else if chunked {
            Framing::Chunked(Chunked::default())
        } else if let Some(length) = length {
            Framing::Length(length)
        } else {
            Framing::ToEnd
        };
        let mut headers = HeaderMap::new();
        for (name, value) in all.iter() {
            if carried(&all, name) {
                headers.append(name.clone(), value.clone());
            }
        }
        return Ok(Some(Head {
            status,
            headers,
            framing,
            len: skipped + len,
        }));
    }
}

/// A decoder of `Transfer-Encoding: chunked`, fed whatever arrived.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunked {
    state: ChunkState,
    /// The digits of the size line being read.
    size: u64,
    /// Bytes of the current line (size line extension or trailer) seen.
    line: usize,
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum ChunkState {
    /// Reading the hexadecimal size.
    #[default]
    Size,
    /// Past the size, up to the line's end (an extension).
    SizeLine,
    /// Bytes of data left in the chunk.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk; `true` once the line has text.
    Trailer(bool),
    Done,
}

/// The longest size line or trailer line accepted.
const MAX_LINE: usize = 4096;

impl Chunked {
    /// Decodes from `input`: how many bytes were used and the range of
    /// them that is body data, if any. Call again with the rest until it
    /// uses nothing.
    pub fn decode(&mut self, input: &[u8]) -> io::Result<(usize, Option<(usize, usize)>)> {
        let mut at = 0;
        while at < input.len() {
            let byte = input[at];
            match self.state {
                ChunkState::Size => match (byte as char).to_digit(16) {
                    Some(d) if self.line < 16 => {
                        self.size = self.size * 16 + u64::from(d);
                        self.line += 1;
                    }
                    Some(_) => return Err(bad_gateway("a chunk size is too long")),
                    None if self.line == 0 => return Err(bad_gateway("a chunk has no size")),
                    None => {
                        self.state = ChunkState::SizeLine;
                        continue;
                    }
                },
                ChunkState::SizeLine => {
                    self.line += 1;
                    if self.line > MAX_LINE {
                        return Err(bad_gateway("a chunk size line is too long"));
                    }
                    if byte == b'\n' {
                        self.line = 0;
                        self.state = if self.size == 0 {
                            ChunkState::Trailer(false)
                        } else {
                            ChunkState::Data(self.size)
                        };
                        self.size = 0;
                    }
                }
                ChunkState::Data(left) => {
                    let n = left.min((input.len() - at) as u64) as usize;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                    return Ok((at + n, Some((at, at + n))));
                }
                ChunkState::DataEnd => match byte {
                    b'\r' if self.line == 0 => self.line = 1,
                    b'\n' => {
                        self.line = 0;
                        self.state = ChunkState::Size;
                    }
                    _ => return Err(bad_gateway("a chunk does not end where its size says")),
                },
                ChunkState::Trailer(text) => {
                    self.line += 1;
                    if self.line > MAX_LINE {
                        return Err(bad_gateway("a trailer line is too long"));
                    }
                    self.state = match byte {
                        b'\n' if !text => ChunkState::Done,
                        b'\n' => {
                            self.line = 0;
                            ChunkState::Trailer(false)
                        }
                        b'\r' => ChunkState::Trailer(text),
                        _ => ChunkState::Trailer(true),
                    };
                    if self.state == ChunkState::Done {
                        return Ok((at + 1, None));
                    }
                }
                ChunkState::Done => return Ok((at, None)),
            }
            at += 1;
        }
        Ok((at, None))
    }

    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

fn h3_error(e: &dyn std::fmt::Display) -> io::Error {
    io::Error::other(format!("hysteria2: masquerade: http/3: {e}"))
}

async fn respond_empty(stream: &mut Stream, status: StatusCode) -> io::Result<()> {
    let response = Response::builder()
        .status(status)
        .body(())
        .map_err(|e| h3_error(&e))?;
    stream
        .send_response(response)
        .await
        .map_err(|e| h3_error(&e))?;
    stream.finish().await.map_err(|e| h3_error(&e))
}

/// Answers `request`, which did not authenticate: a 404 without a web
/// server, else the web server's answer (a 502 when it cannot be had).
pub(crate) async fn answer(
    request: Request<()>,
    mut stream: Stream,
    web_server: Option<SocketAddr>,
) -> io::Result<()> {
    let Some(web_server) = web_server else {
        return respond_empty(&mut stream, StatusCode::NOT_FOUND).await;
    };
    let mut body = Vec::new();
    while let Some(mut data) = stream.recv_data().await.map_err(|e| h3_error(&e))? {
        if body.len() + data.remaining() > MAX_REQUEST_BODY {
            return respond_empty(&mut stream, StatusCode::PAYLOAD_TOO_LARGE).await;
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            body.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
    }
    let mut upstream = match tokio::net::TcpStream::connect(web_server).await {
        Ok(upstream) => upstream,
        Err(e) => {
            tracing::debug!("hysteria2: masquerade: cannot reach {web_server}: {e}");
            return respond_empty(&mut stream, StatusCode::BAD_GATEWAY).await;
        }
    };
    let mut head = request_head(&request, body.len());
    head.extend_from_slice(&body);
    let mut buf = Vec::with_capacity(CHUNK);
    let parsed = async {
        upstream.write_all(&head).await?;
        loop {
            if let Some(head) = parse_head(&buf, request.method())? {
                return Ok::<_, io::Error>(head);
            }
            if upstream.read_buf(&mut buf).await? == 0 {
                return Err(bad_gateway("the web server closed before answering"));
            }
        }
    }
    .await;
    let head = match parsed {
        Ok(head) => head,
        Err(e) => {
            tracing::debug!("hysteria2: masquerade: {web_server}: {e}");
            return respond_empty(&mut stream, StatusCode::BAD_GATEWAY).await;
        }
    };
    let mut response = Response::builder()
        .status(head.status)
        .body(())
        .map_err(|e| h3_error(&e))?;
    *response.headers_mut() = head.headers;
    stream
        .send_response(response)
        .await
        .map_err(|e| h3_error(&e))?;
    buf.drain(..head.len);
    relay_body(&mut upstream, &mut stream, head.framing, buf).await?;
    stream.finish().await.map_err(|e| h3_error(&e))
}

/// Relays the response body, `buf` holding what came with the head.
async fn relay_body(
    upstream: &mut tokio::net::TcpStream,
    stream: &mut Stream,
    mut framing: Framing,
    mut buf: Vec<u8>,
) -> io::Result<()> {
    let mut sent = 0u64;
    loop {
        let mut at = 0;
        while at < buf.len() {
            let (used, data) = match &mut framing {
                Framing::Empty => return Ok(()),
                Framing::Length(left) => {
                    let n = (*left).min((buf.len() - at) as u64) as usize;
                    *left -= n as u64;
                    (n, Some((at, at + n)))
                }
                Framing::ToEnd => (buf.len() - at, Some((at, buf.len()))),
                Framing::Chunked(chunked) => {
                    let (used, data) = chunked.decode(&buf[at..])?;
                    (used, data.map(|(a, b)| (at + a, at + b)))
                }
            };
            if let Some((from, to)) = data.filter(|(from, to)| to > from) {
                sent += (to - from) as u64;
                if sent > MAX_RESPONSE_BODY {
                    return Err(bad_gateway("the web server's response is too long"));
                }
                stream
                    .send_data(Bytes::copy_from_slice(&buf[from..to]))
                    .await
                    .map_err(|e| h3_error(&e))?;
            }
            if used == 0 {
                break;
            }
            at += used;
        }
        let finished = match &framing {
            Framing::Empty => true,
            Framing::Length(left) => *left == 0,
            Framing::Chunked(chunked) => chunked.is_done(),
            Framing::ToEnd => false,
        };
        if finished {
            return Ok(());
        }
        buf.clear();
        if upstream.read_buf(&mut buf).await? == 0 {
            return match framing {
                Framing::ToEnd => Ok(()),
                _ => Err(bad_gateway("the web server closed inside its response")),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_keeps_its_host_and_drops_hop_by_hop_and_forwarding_headers() {
        let request = Request::post("https://example.com/login?x=1")
            .header("cookie", "a=b")
            .header("connection", "x-secret")
            .header("x-secret", "1")
            .header("x-forwarded-for", "10.0.0.1")
            .header("te", "trailers")
            .header("content-length", "99")
            .body(())
            .unwrap();
        let head = String::from_utf8(request_head(&request, 3)).unwrap();
        assert_eq!(
            head,
            "POST /login?x=1 HTTP/1.1\r\nHost: example.com\r\ncookie: a=b\r\n\
             Content-Length: 3\r\nConnection: close\r\n\r\n"
        );
        let get = Request::get("https://example.com").body(()).unwrap();
        let head = String::from_utf8(request_head(&get, 0)).unwrap();
        assert_eq!(
            head,
            "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_response_head_says_its_framing_and_loses_its_hop_by_hop_headers() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nServer: nginx\r\n\
                    Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello";
        assert!(parse_head(&raw[..30], &Method::GET).unwrap().is_none());
        let head = parse_head(raw, &Method::GET).unwrap().unwrap();
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(head.framing, Framing::Length(5));
        assert_eq!(&raw[head.len..], b"hello");
        assert_eq!(head.headers.len(), 2, "{:?}", head.headers);
        assert_eq!(head.headers["server"], "nginx");
        let chunked = parse_head(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n",
            &Method::GET,
        )
        .unwrap()
        .unwrap();
        assert_eq!(chunked.framing, Framing::Chunked(Chunked::default()));
        assert!(!chunked.headers.contains_key("transfer-encoding"));
        let head_request = parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            &Method::HEAD,
        )
        .unwrap()
        .unwrap();
        assert_eq!(head_request.framing, Framing::Empty);
        let to_end = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", &Method::GET)
            .unwrap()
            .unwrap();
        assert_eq!(to_end.framing, Framing::ToEnd);
        let err = parse_head(b"SSH-2.0-OpenSSH\r\n\r\n", &Method::GET).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    fn decode_all(input: &[u8], step: usize) -> io::Result<(Vec<u8>, bool)> {
        let mut chunked = Chunked::default();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            let mut at = 0;
            loop {
                let (used, data) = chunked.decode(&piece[at..])?;
                if let Some((a, b)) = data {
                    out.extend_from_slice(&piece[at + a..at + b]);
                }
                at += used;
                if used == 0 || at == piece.len() {
                    break;
                }
            }
        }
        Ok((out, chunked.is_done()))
    }

    #[test]
    fn chunked_bodies_decode_whole_or_byte_by_byte() {
        let body = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for step in [1, 3, body.len()] {
            assert_eq!(
                decode_all(body, step).unwrap(),
                (b"hello, world".to_vec(), true)
            );
        }
        assert_eq!(
            decode_all(b"5\r\nhel", 2).unwrap(),
            (b"hel".to_vec(), false)
        );
        assert!(decode_all(b"zz\r\n", 4).is_err());
        assert!(decode_all(b"2\r\nabcd", 8).is_err(), "data past its size");
    }
}
