//! The authentication exchange (PROTOCOL.md, "Authentication & HTTP/3
//! masquerading"): the client's POST /auth and the server's 233 answer,
//! as header maps, sans-IO. h3 carries them.

use std::io;

use http::{HeaderMap, HeaderValue, Request, StatusCode};
use rand::Rng;

pub const HOST: &str = "hysteria";
pub const PATH: &str = "/auth";
/// The status of a successful authentication: "233 HyOK".
pub const STATUS_OK: u16 = 233;
pub const HEADER_AUTH: &str = "hysteria-auth";
pub const HEADER_UDP: &str = "hysteria-udp";
pub const HEADER_CC_RX: &str = "hysteria-cc-rx";
pub const HEADER_PADDING: &str = "hysteria-padding";

/// A random padding of 64 to 512 characters, as hysteria draws.
pub fn padding() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let len = rng.random_range(64..=512);
    (0..len)
        .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
        .collect()
}

fn header(value: &str) -> io::Result<HeaderValue> {
    HeaderValue::from_str(value).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "hysteria2: the password is not a valid http header value",
        )
    })
}

/// The client's request: `password`, and the rate this side receives at in
/// bytes a second (0: unknown).
pub fn request(password: &str, rx: u64) -> io::Result<Request<()>> {
    Request::post(format!("https://{HOST}{PATH}"))
        .header(HEADER_AUTH, header(password)?)
        .header(HEADER_CC_RX, rx)
        .header(HEADER_PADDING, padding())
        .body(())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("hysteria2: {e}")))
}

/// What a successful answer said.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Reply {
    /// Whether the server relays UDP.
    pub udp: bool,
    /// The server's receive rate in bytes a second (0: unlimited), or
    /// `None` for "auto": the client runs congestion control.
    pub rx: Option<u64>,
}

/// Reads the server's answer; any status but 233 is a refusal.
pub fn parse_reply(status: StatusCode, headers: &HeaderMap) -> io::Result<Reply> {
    if status.as_u16() != STATUS_OK {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "hysteria2: authentication failed: the server answered {}",
                status.as_u16()
            ),
        ));
    }
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let udp = text(HEADER_UDP).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let rx = match text(HEADER_CC_RX) {
        Some(v) if v.eq_ignore_ascii_case("auto") => None,
        Some(v) => Some(v.parse().unwrap_or(0)),
        None => Some(0),
    };
    Ok(Reply { udp, rx })
}

/// A request the server recognised as an authentication: the credentials
/// and the client's receive rate.
#[derive(Debug, PartialEq, Eq)]
pub struct Attempt {
    pub auth: String,
    pub rx: u64,
}

/// Whether `request` is the authentication request (POST to
/// `hysteria/auth`); anything else is served as by an ordinary web server.
pub fn parse_request<B>(request: &Request<B>) -> Option<Attempt> {
    let host = request
        .uri()
        .host()
        .or_else(|| request.headers().get(http::header::HOST)?.to_str().ok())?;
    if request.method() != http::Method::POST || host != HOST || request.uri().path() != PATH {
        return None;
    }
    let text = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    Some(Attempt {
        auth: text(HEADER_AUTH).unwrap_or_default().to_owned(),
        rx: text(HEADER_CC_RX)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
    })
}

/// The server's answer headers: whether it relays UDP, and its receive
/// rate (`None`: "auto").
pub fn reply_headers(udp: bool, rx: Option<u64>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HEADER_UDP,
        HeaderValue::from_static(if udp { "true" } else { "false" }),
    );
    headers.insert(
        HEADER_CC_RX,
        match rx {
            Some(rx) => HeaderValue::from(rx),
            None => HeaderValue::from_static("auto"),
        },
    );
    if let Ok(padding) = HeaderValue::from_str(&padding()) {
        headers.insert(HEADER_PADDING, padding);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_post_to_hysteria_auth() {
        let req = request("secret", 125_000).unwrap();
        let attempt = parse_request(&req).unwrap();
        assert_eq!(
            attempt,
            Attempt {
                auth: "secret".into(),
                rx: 125_000
            }
        );
        let len = req.headers()[HEADER_PADDING].len();
        assert!((64..=512).contains(&len));
        let get = Request::get("https://hysteria/auth").body(()).unwrap();
        assert_eq!(parse_request(&get), None);
        let elsewhere = Request::post("https://example.com/auth").body(()).unwrap();
        assert_eq!(parse_request(&elsewhere), None);
    }

    #[test]
    fn a_reply_says_udp_and_the_rate_and_any_other_status_refuses() {
        let ok = StatusCode::from_u16(STATUS_OK).unwrap();
        let reply = parse_reply(ok, &reply_headers(true, Some(1000))).unwrap();
        assert_eq!(
            reply,
            Reply {
                udp: true,
                rx: Some(1000)
            }
        );
        let auto = parse_reply(ok, &reply_headers(false, None)).unwrap();
        assert_eq!(
            auto,
            Reply {
                udp: false,
                rx: None
            }
        );
        let refused = parse_reply(StatusCode::NOT_FOUND, &HeaderMap::new()).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            refused.to_string(),
            "hysteria2: authentication failed: the server answered 404"
        );
    }
}
