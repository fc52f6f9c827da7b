//! `[[inbound]]` -> `InboundSpec`, per protocol.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use etemenanki_ir::spec::{
    Account, InboundProtocol, InboundSpec, Secret, ServerTls, Ss2022Method, SsMethod, Uuid,
};

use super::outbound::{bps, key_value};
use super::{transport, Cx};
use crate::codes;
use crate::config::{Inbound, InboundSettings, SecretValue, Spanned};
use crate::diagnostic::Span;

pub const PROTOCOLS: &[&str] = &[
    "socks",
    "http",
    "trojan",
    "vless",
    "vmess",
    "shadowsocks",
    "shadowsocks-2022",
    "hysteria2",
    "dns",
];

fn accepted(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "socks" => &["udp", "accounts"],
        "http" => &["accounts"],
        "trojan" => &["password", "passwords", "fallback"],
        "vless" => &["id", "ids", "fallback"],
        "vmess" => &["id", "ids"],
        "shadowsocks" => &["method", "password", "udp"],
        "shadowsocks-2022" => &["method", "psk", "users", "udp"],
        "hysteria2" => &[
            "password",
            "passwords",
            "obfs",
            "masquerade",
            "up_mbps",
            "down_mbps",
        ],
        // The DNS inbound has no settings: it answers from the DNS spec.
        _ => &[],
    }
}

fn present(s: &InboundSettings) -> Vec<(&'static str, Span)> {
    use super::{list_span, span};
    [
        ("udp", span(&s.udp)),
        ("accounts", list_span(&s.accounts)),
        ("password", span(&s.password)),
        ("passwords", list_span(&s.passwords)),
        ("id", span(&s.id)),
        ("ids", list_span(&s.ids)),
        ("method", span(&s.method)),
        ("psk", span(&s.psk)),
        ("users", list_span(&s.users)),
        ("obfs", span(&s.obfs)),
        ("fallback", span(&s.fallback)),
        ("masquerade", span(&s.masquerade)),
        ("up_mbps", span(&s.up_mbps)),
        ("down_mbps", span(&s.down_mbps)),
    ]
    .into_iter()
    .filter_map(|(k, s)| s.map(|s| (k, s)))
    .collect()
}

/// The fallback of a trojan or vless inbound, or the masquerade of a
/// hysteria2 one (`what`): an IP address and port, as the runtime dials it
/// without a lookup.
fn web_server(cx: &mut Cx, text: &Option<Spanned<String>>, what: &str) -> Option<SocketAddr> {
    let text = text.as_ref()?;
    match text.get_ref().parse::<SocketAddr>() {
        Ok(addr) if addr.port() != 0 => Some(addr),
        _ => {
            cx.error(
                codes::INVALID_ADDRESS,
                text.span(),
                format!(
                    "`{}` is not a {what} address: write an IP address and port such as `127.0.0.1:80`",
                    text.get_ref()
                ),
            );
            None
        }
    }
}

fn fallback(cx: &mut Cx, s: &InboundSettings) -> Option<SocketAddr> {
    web_server(cx, &s.fallback, "fallback")
}

pub fn lower(cx: &mut Cx, inbound: &Spanned<Inbound>) -> InboundSpec {
    let span = inbound.span();
    let i = inbound.get_ref();
    let tag = i.tag.get_ref().clone();
    let protocol = i.protocol.get_ref().as_str();
    let default_settings = InboundSettings::default();
    let s = i.settings.as_ref().unwrap_or(&default_settings);

    let ip = match &i.listen {
        Some(l) => l
            .get_ref()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .unwrap_or_else(|_| {
                cx.error(
                    codes::INVALID_ADDRESS,
                    l.span(),
                    format!("`{}` is not an IP address to listen on", l.get_ref()),
                );
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            }),
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let port = *i.port.get_ref();
    if port == 0 {
        cx.error(
            codes::INVALID_PORT,
            i.port.span(),
            "port 0 is not a valid listening port (use 1-65535)",
        );
    }
    let listen = SocketAddr::new(ip, port);
    let sniff = i.sniff.as_ref().is_some_and(|s| *s.get_ref());

    if !PROTOCOLS.contains(&protocol) {
        cx.unknown_protocol(&i.protocol, "inbound", PROTOCOLS);
        return InboundSpec {
            tag,
            listen,
            sniff,
            protocol: InboundProtocol::Http {
                accounts: vec![],
                tls: None,
            },
        };
    }
    for (key, key_span) in present(s) {
        if !accepted(protocol).contains(&key) {
            cx.error(
                codes::NOT_APPLICABLE,
                key_span,
                format!("`settings.{key}` does not apply to a {protocol} inbound"),
            );
        }
    }
    if let Some(stream) = &i.stream {
        // socks and http take TLS only, which transport::tls_only checks.
        let carries_stream = matches!(protocol, "trojan" | "vless" | "vmess" | "socks" | "http");
        let hy2_tls_only = protocol == "hysteria2" && {
            let st = stream;
            st.network.is_none() && st.ws.is_none() && st.grpc.is_none()
        };
        if !carries_stream && !hy2_tls_only {
            cx.error(
                codes::NOT_APPLICABLE,
                i.protocol.span(),
                format!("`stream` does not apply to a {protocol} inbound"),
            );
        }
    }

    let udp = s.udp.as_ref().is_none_or(|u| *u.get_ref());
    let protocol = match protocol {
        "socks" => InboundProtocol::Socks {
            accounts: accounts(cx, s),
            udp,
            tls: transport::tls_only(cx, i.stream.as_ref(), protocol),
        },
        "http" => InboundProtocol::Http {
            accounts: accounts(cx, s),
            tls: transport::tls_only(cx, i.stream.as_ref(), protocol),
        },
        "trojan" => InboundProtocol::Trojan {
            passwords: passwords(cx, s, protocol, &span),
            transport: transport::server(cx, i.stream.as_ref()),
            fallback: fallback(cx, s),
        },
        "vless" | "vmess" => {
            let ids = uuids(cx, s, protocol, &span);
            let transport = transport::server(cx, i.stream.as_ref());
            if protocol == "vless" {
                InboundProtocol::Vless {
                    ids,
                    transport,
                    fallback: fallback(cx, s),
                }
            } else {
                InboundProtocol::Vmess { ids, transport }
            }
        }
        "shadowsocks" => {
            let method = required(cx, &s.method, "method", protocol, &span)
                .and_then(|m| cx.one_of(m, "shadowsocks method", SsMethod::NAMES, SsMethod::parse));
            let password = match &s.password {
                Some(p) => cx.secret(p),
                None => {
                    missing(cx, &span, "password", protocol);
                    String::new()
                }
            };
            InboundProtocol::Shadowsocks {
                method: method.unwrap_or(SsMethod::Aes256Gcm),
                password: Secret(password),
                udp,
            }
        }
        "shadowsocks-2022" => {
            let method = required(cx, &s.method, "method", protocol, &span).and_then(|m| {
                cx.one_of(
                    m,
                    "shadowsocks-2022 method",
                    Ss2022Method::NAMES,
                    Ss2022Method::parse,
                )
            });
            let len = method.map_or(32, Ss2022Method::key_len);
            let psk = match &s.psk {
                Some(p) => key_value(cx, p, "psk", len),
                None => {
                    missing(cx, &span, "psk", protocol);
                    Vec::new()
                }
            };
            let users = s
                .users
                .iter()
                .flatten()
                .map(|u| Secret(key_value(cx, u, "users", len)))
                .collect();
            InboundProtocol::Ss2022 {
                method: method.unwrap_or(Ss2022Method::Blake3Aes256Gcm),
                psk: Secret(psk),
                users,
                udp,
            }
        }
        "dns" => InboundProtocol::Dns,
        _ => {
            let tls = i.stream.as_ref().and_then(|st| st.tls.as_ref());
            let tls = match tls {
                Some(tls) => transport::server_tls(cx, tls),
                None => {
                    cx.error(
                        codes::MISSING_SETTING,
                        span.clone(),
                        "a hysteria2 inbound needs `stream.tls` with cert_file and key_file",
                    );
                    ServerTls {
                        cert_path: String::new(),
                        cert_pem: vec![],
                        key_pem: Secret(vec![]),
                        alpn: vec![],
                    }
                }
            };
            InboundProtocol::Hysteria2 {
                tls,
                passwords: passwords(cx, s, "hysteria2", &span),
                obfs: super::outbound::obfs(cx, &s.obfs),
                masquerade: web_server(cx, &s.masquerade, "masquerade"),
                up_bps: bps(&s.up_mbps),
                down_bps: bps(&s.down_mbps),
            }
        }
    };
    InboundSpec {
        tag,
        listen,
        sniff,
        protocol,
    }
}

fn missing(cx: &mut Cx, span: &Span, key: &str, protocol: &str) {
    cx.error(
        codes::MISSING_SETTING,
        span.clone(),
        format!("a {protocol} inbound needs `settings.{key}`"),
    );
}

fn required<'a>(
    cx: &mut Cx,
    v: &'a Option<Spanned<String>>,
    key: &str,
    protocol: &str,
    span: &Span,
) -> Option<&'a Spanned<String>> {
    if v.is_none() {
        missing(cx, span, key, protocol);
    }
    v.as_ref()
}

fn accounts(cx: &mut Cx, s: &InboundSettings) -> Vec<Account> {
    s.accounts
        .iter()
        .flatten()
        .map(|a| {
            let a = a.get_ref();
            Account {
                user: a.user.get_ref().clone(),
                pass: Secret(cx.secret(&a.pass)),
            }
        })
        .collect()
}

/// The users of a trojan or hysteria2 inbound: `password`, `passwords`, or
/// both.
fn passwords(cx: &mut Cx, s: &InboundSettings, protocol: &str, span: &Span) -> Vec<Secret> {
    one_or_many(
        cx,
        &s.password,
        &s.passwords,
        "password",
        "passwords",
        protocol,
        span,
    )
    .into_iter()
    .map(Secret)
    .collect()
}

/// A single `key` or a list `keys`, at least one value in all.
fn one_or_many(
    cx: &mut Cx,
    one: &Option<Spanned<SecretValue>>,
    many: &Option<Vec<Spanned<SecretValue>>>,
    key: &str,
    keys: &str,
    protocol: &str,
    span: &Span,
) -> Vec<String> {
    let values: Vec<String> = one
        .iter()
        .chain(many.iter().flatten())
        .map(|v| cx.secret(v))
        .collect();
    if values.is_empty() {
        cx.error(
            codes::MISSING_SETTING,
            span.clone(),
            format!("a {protocol} inbound needs `settings.{key}` or `settings.{keys}`"),
        );
    }
    values
}

fn uuids(cx: &mut Cx, s: &InboundSettings, protocol: &str, span: &Span) -> Vec<Secret<Uuid>> {
    let given: Vec<&Spanned<SecretValue>> = s.id.iter().chain(s.ids.iter().flatten()).collect();
    if given.is_empty() {
        cx.error(
            codes::MISSING_SETTING,
            span.clone(),
            format!("a {protocol} inbound needs `settings.id` or `settings.ids`"),
        );
    }
    given
        .into_iter()
        .filter_map(|v| {
            let text = cx.secret(v);
            let id = Uuid::parse(&text);
            if id.is_none() {
                cx.error(codes::INVALID_UUID, v.span(), "`id` is not a UUID")
                    .help = Some("write it as 8-4-4-4-12 hexadecimal digits, such as 11111111-2222-3333-4444-555555555555".into());
            }
            id.map(Secret)
        })
        .collect()
}
