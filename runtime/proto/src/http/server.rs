//! The HTTP proxy inbound's [`ServerCore`]: one request head, authenticated,
//! opens a CONNECT tunnel or forwards a plain request.

use std::io;
use std::net::SocketAddr;
use std::time::SystemTime;

use super::{
    authorized, parse_request_head, Kind, RequestHead, RESPONSE_AUTH_REQUIRED,
    RESPONSE_BAD_GATEWAY, RESPONSE_ESTABLISHED, RESPONSE_FORBIDDEN,
};
use crate::codec::{FlowKind, Refusal, ServerCore, ServerRequest, ServerStep};
use crate::Address;

/// The server side of one HTTP proxy request.
pub struct Core<'a> {
    /// (user, password) pairs; empty means no authentication.
    accounts: &'a [(String, String)],
}

impl<'a> Core<'a> {
    pub fn new(accounts: &'a [(String, String)]) -> Self {
        Core { accounts }
    }
}

impl ServerCore for Core<'_> {
    type Request = RequestHead;

    /// The core answers a head past MAX_HEAD with 431 before this bound.
    const MAX_HANDSHAKE: usize = crate::http::MAX_HEAD + 1;

    /// HTTP has no time window: `now` is not used.
    fn advance(
        &mut self,
        input: &[u8],
        _now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<RequestHead>, Refusal> {
        match parse_request_head(input) {
            Ok(None) => Ok(ServerStep::NeedMore { consumed: 0 }),
            Err(e) => Err(Refusal {
                reply: e.response().to_vec(),
                reason: e.reason(),
            }),
            Ok(Some(head)) if !authorized(&head, self.accounts) => Err(Refusal {
                reply: RESPONSE_AUTH_REQUIRED.to_vec(),
                reason: "http: proxy authentication required",
            }),
            Ok(Some(head)) => Ok(ServerStep::Open {
                consumed: head.len,
                request: head,
            }),
        }
    }
}

impl ServerRequest for RequestHead {
    fn destination(&self) -> &Address {
        &self.destination
    }

    fn kind(&self) -> FlowKind {
        FlowKind::Stream
    }

    fn first_bytes(&self) -> &[u8] {
        match &self.kind {
            Kind::Connect => &[],
            Kind::Forward { head } => head,
        }
    }

    fn on_connected(&self, _bound: SocketAddr, out: &mut Vec<u8>) {
        if self.kind == Kind::Connect {
            out.extend_from_slice(RESPONSE_ESTABLISHED);
        }
    }

    /// 403 for a destination this proxy refuses (one of its own inbounds),
    /// 502 for a dial that failed.
    fn on_connect_failed(&self, error: io::ErrorKind, out: &mut Vec<u8>) {
        out.extend_from_slice(match error {
            io::ErrorKind::PermissionDenied => RESPONSE_FORBIDDEN,
            _ => RESPONSE_BAD_GATEWAY,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::RESPONSE_BAD_REQUEST;

    fn advance(
        accounts: &[(String, String)],
        input: &[u8],
    ) -> Result<ServerStep<RequestHead>, Refusal> {
        Core::new(accounts).advance(input, SystemTime::UNIX_EPOCH, &mut Vec::new())
    }

    #[test]
    fn a_head_opens_only_once_whole_and_leaves_the_payload() {
        let input =
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01";
        let whole = input.len() - 3;
        for cut in 0..whole {
            assert_eq!(
                advance(&[], &input[..cut]),
                Ok(ServerStep::NeedMore { consumed: 0 })
            );
        }
        let Ok(ServerStep::Open { consumed, request }) = advance(&[], input) else {
            panic!("no request")
        };
        assert_eq!((consumed, request.first_bytes()), (whole, &[][..]));
        let mut out = Vec::new();
        request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut out);
        assert_eq!(out, RESPONSE_BAD_GATEWAY);
    }

    #[test]
    fn a_plain_request_forwards_its_rewritten_head_and_answers_nothing_itself() {
        let input = b"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n";
        let Ok(ServerStep::Open { request, .. }) = advance(&[], input) else {
            panic!("no request")
        };
        assert!(request.first_bytes().starts_with(b"GET /x HTTP/1.1\r\n"));
        let mut out = Vec::new();
        request.on_connected("127.0.0.1:1".parse().unwrap(), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_missing_account_and_a_malformed_head_are_refused_with_their_replies() {
        let accounts = [("u".to_owned(), "p".to_owned())];
        let refusal = advance(&accounts, b"CONNECT a:1 HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(refusal.reply, RESPONSE_AUTH_REQUIRED);
        let refusal = advance(&[], b"CONNECT\r\n\r\n").unwrap_err();
        assert_eq!(refusal.reply, RESPONSE_BAD_REQUEST);
    }

    #[test]
    fn a_refused_destination_is_answered_403_and_a_failed_dial_502() {
        let Ok(ServerStep::Open { request, .. }) =
            advance(&[], b"CONNECT 127.0.0.1:1080 HTTP/1.1\r\n\r\n")
        else {
            panic!("no request")
        };
        let mut out = Vec::new();
        request.on_connect_failed(io::ErrorKind::PermissionDenied, &mut out);
        assert_eq!(out, RESPONSE_FORBIDDEN);
        out.clear();
        request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut out);
        assert_eq!(out, RESPONSE_BAD_GATEWAY);
    }

    #[test]
    fn a_connect_to_a_host_with_a_nul_is_refused_with_400() {
        let refusal = advance(&[], b"CONNECT 127.0.0.1\0:80 HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(refusal.reply, RESPONSE_BAD_REQUEST);
    }
}
