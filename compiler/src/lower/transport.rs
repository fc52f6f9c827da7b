//! The stream transport under a proxy client and TLS settings, client and
//! server side.

use etemenanki_ir::spec::{
    AddressFamily, HostPort, InboundTransport, Secret, ServerShape, ServerTls, StreamShape,
    TlsSpec, TransportSpec, Verify, WsEarlyData,
};

use super::{io_text, Cx, PEM_LIMIT};
use crate::codes;
use crate::config::{ClientTlsConfig, InboundStream, OutboundStream, Spanned, WsConfig};

const NETWORKS: &[&str] = &["tcp", "tls", "ws", "grpc"];
const SERVER_NETWORKS: &[&str] = &["tcp", "ws", "grpc"];
const SECURITIES: &[&str] = &["none", "tls"];

/// Lowers `[outbound.stream]` for a client dialing `server`.
pub fn client(cx: &mut Cx, stream: Option<&OutboundStream>, server: &HostPort) -> TransportSpec {
    let default = OutboundStream::default();
    let stream = stream.unwrap_or(&default);
    let network = stream.network.as_ref().and_then(|n| {
        cx.one_of(n, "network", NETWORKS, |v| {
            NETWORKS.contains(&v).then(|| v.to_owned())
        })
    });
    let network = network.unwrap_or_else(|| "tcp".to_owned());
    let security = stream.security.as_ref().and_then(|s| {
        cx.one_of(s, "security", SECURITIES, |v| {
            SECURITIES.contains(&v).then(|| v.to_owned())
        })
    });
    let address_family = address_family(cx, stream.address_family.as_ref());

    let uses_tls = match (network.as_str(), security.as_deref()) {
        ("tls", Some("none")) => {
            let s = stream.security.as_ref().expect("security was given");
            cx.error(
                codes::TRANSPORT_MISMATCH,
                s.span(),
                "network \"tls\" cannot have security \"none\"",
            );
            true
        }
        ("tls", _) => true,
        (_, Some("tls")) => true,
        _ => false,
    };
    if !uses_tls {
        if let Some(tls) = &stream.tls {
            cx.error(
                codes::TRANSPORT_MISMATCH,
                tls.span(),
                "tls settings on a transport without TLS",
            )
            .help = Some(
                "set security = \"tls\" (or network = \"tls\"), or remove the tls settings".into(),
            );
        }
    }
    shape_tables_match(cx, stream.ws.as_ref(), stream.grpc.as_ref(), &network);

    let host = server.host.name();
    let shape = match network.as_str() {
        "tls" => StreamShape::Tls,
        "ws" => {
            let ws = stream.ws.as_ref().map(Spanned::get_ref);
            let path = ws
                .and_then(|w| w.path.as_ref())
                .map(|p| path(cx, p))
                .unwrap_or_else(|| "/".into());
            let ws_host = ws
                .and_then(|w| w.host.as_ref())
                .map_or_else(|| host.clone(), |h| h.get_ref().clone());
            StreamShape::Ws {
                path,
                host: ws_host,
                early_data: ws.and_then(|w| early_data(cx, w)),
            }
        }
        "grpc" => {
            let grpc = stream.grpc.as_ref().map(Spanned::get_ref);
            let service_name = grpc
                .and_then(|g| g.service_name.as_ref())
                .map_or_else(|| "GunService".to_owned(), |s| s.get_ref().clone());
            let authority = grpc
                .and_then(|g| g.authority.as_ref())
                .map_or_else(|| host.clone(), |a| a.get_ref().clone());
            StreamShape::Grpc {
                service_name,
                authority,
            }
        }
        _ => StreamShape::Tcp,
    };
    let tls = uses_tls.then(|| client_tls(cx, stream.tls.as_ref(), &host));
    TransportSpec {
        shape,
        tls,
        address_family,
    }
}

/// A ws or grpc table under a network of another name would be ignored,
/// so it is refused.
fn shape_tables_match<W, G>(
    cx: &mut Cx,
    ws: Option<&Spanned<W>>,
    grpc: Option<&Spanned<G>>,
    network: &str,
) {
    mismatch(cx, ws.map(Spanned::span), network != "ws", "ws");
    mismatch(cx, grpc.map(Spanned::span), network != "grpc", "grpc");
}

fn mismatch(cx: &mut Cx, span: Option<std::ops::Range<usize>>, wrong: bool, name: &str) {
    if let (Some(span), true) = (span, wrong) {
        cx.error(
            codes::TRANSPORT_MISMATCH,
            span,
            format!("{name} settings without network = \"{name}\""),
        )
        .help = Some(format!(
            "set network = \"{name}\", or remove the {name} settings"
        ));
    }
}

/// Xray's documented ceiling for early data: a request header much larger
/// is refused by common proxies and CDNs in between.
const MAX_EARLY_DATA: u32 = 8192;

const EARLY_DATA_HEADER: &str = "Sec-WebSocket-Protocol";

/// `max_early_data` and `early_data_header_name`, as sing-box spells them.
/// Early data in the path (sing-box's default without a header name) is
/// not offered: the header is what Xray and sing-box servers both read.
fn early_data(cx: &mut Cx, ws: &WsConfig) -> Option<WsEarlyData> {
    let header = ws.early_data_header_name.as_ref();
    let max = match &ws.max_early_data {
        Some(max) if *max.get_ref() > MAX_EARLY_DATA => {
            cx.error(
                codes::INVALID_VALUE,
                max.span(),
                format!("max_early_data {} is above {MAX_EARLY_DATA}", max.get_ref()),
            )
            .help = Some(format!(
                "early data travels in a request header; {MAX_EARLY_DATA} bytes is Xray's ceiling"
            ));
            return None;
        }
        Some(max) if *max.get_ref() > 0 => *max.get_ref(),
        _ => {
            if let Some(header) = header {
                cx.error(
                    codes::MISSING_SETTING,
                    header.span(),
                    "early_data_header_name without max_early_data",
                )
                .help = Some("set max_early_data, the most first bytes sent in the header".into());
            }
            return None;
        }
    };
    let header = match header {
        None => EARLY_DATA_HEADER.to_owned(),
        Some(name) if is_token(name.get_ref()) => name.get_ref().clone(),
        Some(name) => {
            cx.error(
                codes::INVALID_VALUE,
                name.span(),
                format!(
                    "early_data_header_name \"{}\" is not an HTTP header name",
                    name.get_ref()
                ),
            )
            .help = Some(format!(
                "Xray and sing-box servers read \"{EARLY_DATA_HEADER}\"; early data in the path is not supported"
            ));
            return None;
        }
    };
    Some(WsEarlyData { max, header })
}

/// An HTTP field name (RFC 9110 token).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The Host a ws inbound checks, compared as Xray compares it: case
/// ignored, the request's port stripped. So a port here could never match,
/// and a name in another script would not match the ASCII (punycode) one a
/// client sends.
fn server_host(cx: &mut Cx, host: &Spanned<String>) -> Option<String> {
    let name = host.get_ref();
    let unbracketed = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    if unbracketed.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some(unbracketed.to_owned());
    }
    let (message, help) = if name.is_empty() {
        (
            "a WebSocket host is empty".to_owned(),
            "remove `host` to accept any Host".to_owned(),
        )
    } else if let Some((bare, _)) = name.rsplit_once(':') {
        (
            format!("a WebSocket host takes no port, found \"{name}\""),
            format!("the port in a request's Host is not compared: set host = \"{bare}\""),
        )
    } else if name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        return Some(name.clone());
    } else {
        (
            format!("\"{name}\" is not a host name"),
            "a WebSocket host is a DNS name in its ASCII form (xn-- for other scripts) or an IP address"
                .to_owned(),
        )
    };
    cx.error(codes::INVALID_VALUE, host.span(), message).help = Some(help);
    None
}

/// Early data settings on a ws inbound, which takes early data whenever a
/// client sends it, are refused rather than ignored.
fn ws_client_only(cx: &mut Cx, ws: &WsConfig) {
    let keys = [
        (
            "max_early_data",
            ws.max_early_data.as_ref().map(Spanned::span),
        ),
        (
            "early_data_header_name",
            ws.early_data_header_name.as_ref().map(Spanned::span),
        ),
    ];
    for (key, span) in keys {
        if let Some(span) = span {
            client_only(
                cx,
                span,
                "ws",
                key,
                format!(
                    "the server takes early data in {EARLY_DATA_HEADER} whenever a client sends it; remove `{key}`"
                ),
            );
        }
    }
}

/// A key only a client uses, written on an inbound: refused, not ignored.
fn client_only(cx: &mut Cx, span: crate::diagnostic::Span, shape: &str, key: &str, help: String) {
    cx.error(
        codes::NOT_APPLICABLE,
        span,
        format!("`{key}` does not apply to a {shape} inbound"),
    )
    .help = Some(help);
}

fn path(cx: &mut Cx, path: &Spanned<String>) -> String {
    if !path.get_ref().starts_with('/') {
        cx.error(
            codes::INVALID_VALUE,
            path.span(),
            format!(
                "a WebSocket path must start with `/`, found \"{}\"",
                path.get_ref()
            ),
        );
    }
    path.get_ref().clone()
}

/// TLS client settings: SNI defaulting to the server's name, verification,
/// ALPN. A CA file is read now, so the plan does not depend on the host.
pub fn client_tls(cx: &mut Cx, tls: Option<&Spanned<ClientTlsConfig>>, host: &str) -> TlsSpec {
    let default = ClientTlsConfig::default();
    let tls = tls.map_or(&default, Spanned::get_ref);
    let server_name = tls
        .server_name
        .as_ref()
        .map_or_else(|| host.to_owned(), |s| s.get_ref().clone());
    let insecure = tls.insecure.as_ref().is_some_and(|i| *i.get_ref());
    let verify = match (&tls.ca_file, insecure) {
        (Some(ca), true) => {
            cx.error(
                codes::TRANSPORT_MISMATCH,
                ca.span(),
                "ca_file together with insecure = true",
            )
            .help = Some(
                "insecure skips verification, so the CA would never be used: remove one".into(),
            );
            Verify::Insecure
        }
        (None, true) => Verify::Insecure,
        (Some(ca), false) => ca_bundle(cx, ca),
        (None, false) => Verify::System,
    };
    TlsSpec {
        server_name,
        verify,
        alpn: strings(tls.alpn.as_deref()),
    }
}

pub(super) fn ca_bundle(cx: &mut Cx, ca: &Spanned<String>) -> Verify {
    let path = ca.get_ref();
    match cx.read(path, PEM_LIMIT) {
        Ok(pem) if has_pem(&pem, "CERTIFICATE") => Verify::CustomCa {
            path: path.clone(),
            pem,
        },
        Ok(_) => {
            cx.error(
                codes::CA_FILE,
                ca.span(),
                format!("no certificate in CA PEM bundle `{path}`"),
            );
            Verify::System
        }
        Err(err) => {
            cx.error(
                codes::CA_FILE,
                ca.span(),
                format!("cannot read CA file `{path}`: {}", io_text(&err)),
            );
            Verify::System
        }
    }
}

fn has_pem(bytes: &[u8], label: &str) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains(&format!("-----BEGIN {label}-----"))
}

pub fn strings(list: Option<&[Spanned<String>]>) -> Vec<String> {
    list.unwrap_or_default()
        .iter()
        .map(|s| s.get_ref().clone())
        .collect()
}

pub fn address_family(cx: &mut Cx, value: Option<&Spanned<String>>) -> AddressFamily {
    value
        .and_then(|v| {
            cx.one_of(
                v,
                "address family",
                AddressFamily::NAMES,
                AddressFamily::parse,
            )
        })
        .unwrap_or_default()
}

/// Lowers `[inbound.stream]` for trojan, vless and vmess servers.
pub fn server(cx: &mut Cx, stream: Option<&InboundStream>) -> InboundTransport {
    let default = InboundStream::default();
    let stream = stream.unwrap_or(&default);
    let network = stream
        .network
        .as_ref()
        .and_then(|n| {
            cx.one_of(n, "network", SERVER_NETWORKS, |v| {
                SERVER_NETWORKS.contains(&v).then(|| v.to_owned())
            })
        })
        .unwrap_or_else(|| "tcp".to_owned());
    shape_tables_match(cx, stream.ws.as_ref(), stream.grpc.as_ref(), &network);
    let shape = match network.as_str() {
        "ws" => {
            let ws = stream.ws.as_ref().map(Spanned::get_ref);
            if let Some(ws) = ws {
                ws_client_only(cx, ws);
            }
            ServerShape::Ws {
                path: ws
                    .and_then(|w| w.path.as_ref())
                    .map_or_else(|| "/".into(), |p| path(cx, p)),
                host: ws
                    .and_then(|w| w.host.as_ref())
                    .and_then(|h| server_host(cx, h)),
            }
        }
        "grpc" => {
            let grpc = stream.grpc.as_ref().map(Spanned::get_ref);
            if let Some(authority) = grpc.and_then(|g| g.authority.as_ref()) {
                client_only(
                    cx,
                    authority.span(),
                    "grpc",
                    "authority",
                    "the server answers calls for any authority; remove `authority`".into(),
                );
            }
            ServerShape::Grpc {
                service_name: grpc
                    .and_then(|g| g.service_name.as_ref())
                    .map_or_else(|| "GunService".into(), |s| s.get_ref().clone()),
            }
        }
        _ => ServerShape::Tcp,
    };
    let tls = server_security(cx, stream);
    InboundTransport { shape, tls }
}

/// Lowers `[inbound.stream]` for socks and http servers, which serve over
/// TCP, under TLS when `security = "tls"`.
pub fn tls_only(cx: &mut Cx, stream: Option<&InboundStream>, protocol: &str) -> Option<ServerTls> {
    let stream = stream?;
    let network = stream.network.as_ref().and_then(|n| {
        let name = cx.one_of(n, "network", SERVER_NETWORKS, |v| {
            SERVER_NETWORKS.contains(&v).then(|| v.to_owned())
        })?;
        (name != "tcp").then(|| (n.span(), name))
    });
    if let Some((span, name)) = &network {
        cx.error(
            codes::NOT_APPLICABLE,
            span.clone(),
            format!("a {protocol} inbound serves over tcp, not network \"{name}\""),
        )
        .help = Some(
            "for TLS, set security = \"tls\" with a tls table (`tls { }` in .et); \
             ws and grpc are for trojan, vless and vmess inbounds"
                .into(),
        );
    }
    // A ws or grpc table is refused once: with its network when that is
    // given, else on its own.
    let tables = [
        ("ws", stream.ws.as_ref().map(Spanned::span)),
        ("grpc", stream.grpc.as_ref().map(Spanned::span)),
    ];
    for (name, span) in tables {
        let reported = network.as_ref().is_some_and(|(_, n)| n == name);
        if let (Some(span), false) = (span, reported) {
            cx.error(
                codes::NOT_APPLICABLE,
                span,
                format!("`stream.{name}` does not apply to a {protocol} inbound"),
            );
        }
    }
    server_security(cx, stream)
}

/// A server's TLS: present exactly when `security = "tls"` and a tls table
/// say so together.
fn server_security(cx: &mut Cx, stream: &InboundStream) -> Option<ServerTls> {
    let security = stream.security.as_ref().and_then(|s| {
        cx.one_of(s, "security", SECURITIES, |v| {
            SECURITIES.contains(&v).then(|| v.to_owned())
        })
    });
    match (security.as_deref() == Some("tls"), &stream.tls) {
        (true, Some(tls)) => Some(server_tls(cx, tls)),
        (true, None) => {
            let span = stream.security.as_ref().map(Spanned::span).unwrap_or(0..0);
            cx.error(
                codes::TRANSPORT_MISMATCH,
                span,
                "security \"tls\" without a certificate",
            )
            .help = Some("add a tls table with cert_file and key_file".into());
            None
        }
        (false, Some(tls)) => {
            cx.error(
                codes::TRANSPORT_MISMATCH,
                tls.span(),
                "tls settings on a transport without TLS",
            )
            .help = Some("set security = \"tls\", or remove the tls settings".into());
            None
        }
        (false, None) => None,
    }
}

/// Reads a server certificate chain and key.
pub fn server_tls(cx: &mut Cx, tls: &Spanned<crate::config::ServerTlsConfig>) -> ServerTls {
    let tls = tls.get_ref();
    let cert_pem = pem_file(cx, &tls.cert_file, "CERTIFICATE", "certificate");
    let key_pem = pem_file(cx, &tls.key_file, "PRIVATE KEY", "private key");
    ServerTls {
        cert_path: tls.cert_file.get_ref().clone(),
        cert_pem,
        key_pem: Secret(key_pem),
        alpn: strings(tls.alpn.as_deref()),
    }
}

fn pem_file(cx: &mut Cx, path: &Spanned<String>, label: &str, what: &str) -> Vec<u8> {
    match cx.read(path.get_ref(), PEM_LIMIT) {
        // "PRIVATE KEY" also matches "RSA PRIVATE KEY" and "EC PRIVATE KEY".
        Ok(pem) if String::from_utf8_lossy(&pem).contains(label) && has_begin(&pem) => pem,
        Ok(_) => {
            cx.error(
                codes::TLS_FILE,
                path.span(),
                format!("no {what} in PEM file `{}`", path.get_ref()),
            );
            Vec::new()
        }
        Err(err) => {
            cx.error(
                codes::TLS_FILE,
                path.span(),
                format!(
                    "cannot read {what} file `{}`: {}",
                    path.get_ref(),
                    io_text(&err)
                ),
            );
            Vec::new()
        }
    }
}

fn has_begin(pem: &[u8]) -> bool {
    String::from_utf8_lossy(pem).contains("-----BEGIN ")
}
