//! What a call the service does not serve is answered, as grpc-go (Xray's
//! server) answers it: a trailers-only response, one HEADERS frame that
//! ends the stream, carrying an HTTP status, `content-type:
//! application/grpc`, a `grpc-status` and a `grpc-message`; never a reset
//! that tells a prober no gRPC server is there. grpc-go's checks, in its
//! order: the content type (415, `INVALID_ARGUMENT`), the method (405,
//! `INTERNAL`), then the service and the method named by the path (200,
//! `UNIMPLEMENTED`).

use std::fmt::Write;

use etemenanki_proto::gun;
use http::StatusCode;

/// How a call is refused: its HTTP status, gRPC status and message (as
/// grpc-go words it, before its percent-encoding).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub http: StatusCode,
    pub grpc: u8,
    pub message: String,
}

const INVALID_ARGUMENT: u8 = 3;
const UNIMPLEMENTED: u8 = 12;
const INTERNAL: u8 = 13;

/// Whether `content_type` is gRPC's, as grpc-go takes it:
/// `application/grpc`, alone or followed by `+` or `;`.
pub(super) fn is_grpc(content_type: &[u8]) -> bool {
    content_type
        .strip_prefix(b"application/grpc")
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'+' | b';')))
}

/// What a call to `path` with `method` and `content_type` is on the
/// service `service`: a tunnel carrying `Tun`'s or `TunMulti`'s messages,
/// or refused.
pub(super) fn call(
    service: &str,
    method: &str,
    path: &str,
    content_type: Option<&[u8]>,
) -> Result<gun::Message, Refusal> {
    let content_type = content_type.unwrap_or_default();
    if !is_grpc(content_type) {
        let mut message = String::from("invalid gRPC request content-type ");
        go_quote(&String::from_utf8_lossy(content_type), &mut message);
        return Err(Refusal {
            http: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            grpc: INVALID_ARGUMENT,
            message,
        });
    }
    if method != "POST" {
        return Err(Refusal {
            http: StatusCode::METHOD_NOT_ALLOWED,
            grpc: INTERNAL,
            message: format!("Received a HTTP request with method {method}, expected POST"),
        });
    }
    // grpc-go splits at the last slash: the service's name may hold one.
    let Some((called, call)) = path
        .strip_prefix('/')
        .and_then(|name| name.rsplit_once('/'))
    else {
        let mut message = String::from("malformed method name: ");
        go_quote(path, &mut message);
        return Err(Refusal {
            http: StatusCode::OK,
            grpc: UNIMPLEMENTED,
            message,
        });
    };
    let message = match (called == service, call) {
        (true, "Tun") => return Ok(gun::Message::Hunk),
        (true, "TunMulti") => return Ok(gun::Message::MultiHunk),
        (true, _) => format!("unknown method {call} for service {called}"),
        (false, _) => format!("unknown service {called}"),
    };
    Err(Refusal {
        http: StatusCode::OK,
        grpc: UNIMPLEMENTED,
        message,
    })
}

/// `text` as Go's `%q` writes it: quoted, with `"`, `\` and what is not
/// printable escaped.
fn go_quote(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A `grpc-message` value as grpc-go encodes one: each byte outside
/// printable ASCII, and `%`, percent-encoded.
pub(super) fn encode_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (b' '..=b'~').contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(method: &str, path: &str, content_type: &str) -> Option<(u16, u8, String)> {
        call("svc", method, path, Some(content_type.as_bytes()))
            .err()
            .map(|r| (r.http.as_u16(), r.grpc, r.message))
    }

    #[test]
    fn the_service_s_two_calls_are_tunnels() {
        for content_type in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc;x",
        ] {
            for (path, message) in [
                ("/svc/Tun", gun::Message::Hunk),
                ("/svc/TunMulti", gun::Message::MultiHunk),
            ] {
                let called = call("svc", "POST", path, Some(content_type.as_bytes()));
                assert_eq!(called, Ok(message), "{path} {content_type}");
            }
        }
    }

    #[test]
    fn another_service_or_method_is_unimplemented_as_grpc_go_words_it() {
        for (path, message) in [
            ("/other/Tun", "unknown service other"),
            ("/a.b.Other/Tun", "unknown service a.b.Other"),
            ("/nested/svc/Tun", "unknown service nested/svc"),
            ("/svc/Tunnel", "unknown method Tunnel for service svc"),
            ("/svc/", "unknown method  for service svc"),
            ("/svc", "malformed method name: \"/svc\""),
            ("/", "malformed method name: \"/\""),
            ("*", "malformed method name: \"*\""),
        ] {
            assert_eq!(
                refused("POST", path, "application/grpc"),
                Some((200, 12, message.into())),
                "{path}"
            );
        }
    }

    #[test]
    fn no_grpc_content_type_is_a_415_and_no_post_a_405() {
        assert_eq!(
            refused("POST", "/svc/Tun", "text/plain"),
            Some((
                415,
                3,
                "invalid gRPC request content-type \"text/plain\"".into()
            ))
        );
        assert_eq!(
            refused("GET", "/other/Tun", "application/grpcx"),
            Some((
                415,
                3,
                "invalid gRPC request content-type \"application/grpcx\"".into()
            ))
        );
        assert_eq!(
            call("svc", "POST", "/svc/Tun", None).map_err(|r| r.message),
            Err("invalid gRPC request content-type \"\"".into())
        );
        assert_eq!(
            refused("GET", "/svc/Tun", "application/grpc"),
            Some((
                405,
                13,
                "Received a HTTP request with method GET, expected POST".into()
            ))
        );
    }

    #[test]
    fn a_message_is_percent_encoded_outside_printable_ascii() {
        assert_eq!(encode_message("unknown service a b"), "unknown service a b");
        assert_eq!(encode_message("100% \"é\"\n"), "100%25 \"%C3%A9\"%0A");
    }
}
