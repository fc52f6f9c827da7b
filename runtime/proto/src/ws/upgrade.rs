//! The client side of a WebSocket upgrade (RFC 6455 section 4.1) as a
//! [`ClientCodec`]: the GET request with the path, Host, user agent and
//! key, optionally the first bytes of the stream as early data in a header
//! (Xray's and sing-box's `Sec-WebSocket-Protocol`, base64url unpadded),
//! and the check of the server's `101` answer and its accept token.
//!
//! Written here rather than left to tungstenite's handshake because an
//! early-data header named `Sec-WebSocket-Protocol` is no subprotocol
//! offer: sing-box does not echo it, and a strict client would refuse the
//! answer for that.

use std::io::{self, Write};

use etemenanki_ir::base64;
use ring::digest;

use crate::codec::{ClientCodec, ClientStep};
use crate::http::head_end;

/// The longest answer head accepted.
const MAX_RESPONSE_HEAD: usize = 8 * 1024;

/// RFC 6455's GUID, appended to the key before hashing.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// First bytes sent inside the upgrade request.
#[derive(Clone, Copy, Debug)]
pub struct EarlyData<'a> {
    pub header: &'a str,
    pub bytes: &'a [u8],
}

/// One upgrade request and the check of its answer.
pub struct Upgrade<'a> {
    host: &'a str,
    path: &'a str,
    user_agent: &'a str,
    early: Option<EarlyData<'a>>,
    /// The key as sent: base64 of 16 random bytes the caller drew.
    key: String,
}

impl<'a> Upgrade<'a> {
    /// `nonce` is 16 random bytes, fresh per upgrade.
    pub fn new(
        host: &'a str,
        path: &'a str,
        user_agent: &'a str,
        early: Option<EarlyData<'a>>,
        nonce: &[u8; 16],
    ) -> Self {
        Upgrade {
            host,
            path,
            user_agent,
            early,
            key: base64::encode(nonce),
        }
    }
}

/// The `Sec-WebSocket-Accept` token that answers `key`.
pub(super) fn accept_token(key: &str) -> String {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(ACCEPT_GUID);
    base64::encode(ctx.finish().as_ref())
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

impl ClientCodec for Upgrade<'_> {
    type Reply = ();

    /// The request is written whole by `start`; its size is the caller's
    /// (path, host and early data), so no fixed reserve bounds it.
    const STAGING_RESERVE: usize = 1024;

    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        // Writing to a Vec cannot fail.
        let _ = write!(
            out,
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {}\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {}\r\n",
            self.path, self.host, self.user_agent, self.key
        );
        if let Some(early) = self.early.filter(|e| !e.bytes.is_empty()) {
            let _ = write!(
                out,
                "{}: {}\r\n",
                early.header,
                base64::encode_url(early.bytes)
            );
        }
        out.extend_from_slice(b"\r\n");
        Ok(ClientStep::Read)
    }

    fn decode(
        &mut self,
        input: &[u8],
        _out: &mut Vec<u8>,
    ) -> io::Result<Option<(usize, ClientStep<()>)>> {
        let Some(len) = head_end(input) else {
            if input.len() > MAX_RESPONSE_HEAD {
                return Err(invalid("websocket: upgrade response head too long"));
            }
            return Ok(None);
        };
        let head = std::str::from_utf8(&input[..len])
            .map_err(|_| invalid("websocket: malformed upgrade response"))?;
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or_default();
        let mut parts = status.split(' ');
        let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
            return Err(invalid("websocket: malformed upgrade response"));
        };
        if !version.starts_with("HTTP/1.") {
            return Err(invalid("websocket: malformed upgrade response"));
        }
        if code != "101" {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("websocket: the server answered the upgrade with {code}"),
            ));
        }
        let accept = lines
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("sec-websocket-accept"))
            .map(|(_, value)| value.trim());
        if accept != Some(accept_token(&self.key).as_str()) {
            return Err(invalid(
                "websocket: the upgrade answer has no valid Sec-WebSocket-Accept",
            ));
        }
        Ok(Some((len, ClientStep::Open(()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6455 section 1.3's sample nonce and its accept token.
    const NONCE: &[u8; 16] = b"the sample nonce";
    const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

    #[test]
    fn the_request_names_path_host_agent_and_key_and_the_rfc_answer_opens() {
        let mut codec = Upgrade::new("cdn.example", "/ws?x=1", "UA/1", None, NONCE);
        let mut out = Vec::new();
        assert_eq!(codec.start(&mut out).unwrap(), ClientStep::Read);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("GET /ws?x=1 HTTP/1.1\r\nHost: cdn.example\r\nUser-Agent: UA/1\r\n")
        );
        assert!(text.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
        assert!(text.ends_with("\r\n\r\n") && !text.contains("Protocol"));
        let answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nsec-websocket-accept: {ACCEPT}\r\n\r\nframe"
        );
        let mut out = Vec::new();
        for cut in 0..answer.len() - 5 {
            assert_eq!(
                codec.decode(&answer.as_bytes()[..cut], &mut out).unwrap(),
                None
            );
        }
        let got = codec.decode(answer.as_bytes(), &mut out).unwrap();
        assert_eq!(got, Some((answer.len() - 5, ClientStep::Open(()))));
    }

    #[test]
    fn early_data_rides_in_its_header_as_unpadded_base64url() {
        let early = EarlyData {
            header: "Sec-WebSocket-Protocol",
            bytes: &[0xfb, 0xff, 0x00, 0x01],
        };
        let mut codec = Upgrade::new("h", "/", "UA", Some(early), NONCE);
        let mut out = Vec::new();
        codec.start(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\r\nSec-WebSocket-Protocol: -_8AAQ\r\n"),
            "{text}"
        );
    }

    #[test]
    fn a_refused_or_forged_answer_is_an_error() {
        let mut codec = Upgrade::new("h", "/", "UA", None, NONCE);
        let mut out = Vec::new();
        let e = codec
            .decode(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                &mut out,
            )
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::ConnectionRefused,
                "websocket: the server answered the upgrade with 404".into()
            )
        );
        let forged = b"HTTP/1.1 101 OK\r\nSec-WebSocket-Accept: nope\r\n\r\n";
        let e = codec.decode(forged, &mut out).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let e = codec.decode(b"SSH-2.0-x\r\n\r\n", &mut out).unwrap_err();
        assert_eq!(e.to_string(), "websocket: malformed upgrade response");
        let endless = vec![b'x'; MAX_RESPONSE_HEAD + 1];
        assert!(codec.decode(&endless, &mut out).is_err());
    }
}
