//! Top-level statements: `drain`, `inbound`, `outbound`, `balancer` and the
//! `dns`, `socket` and `limits` sections. `route` is in route.rs.
//!
//! Protocol settings sit directly in an inbound or outbound block; the
//! transport is chosen by the blocks present (`ws { }`, `grpc { }`, with
//! `tls { }` for TLS on top), and mapped onto the `stream` table the TOML
//! front end writes out by hand.

use pest::iterators::{Pair, Pairs};

use super::body::{duplicate, unknown_field, Body, Fields, Shape};
use super::value::Value;
use super::{span_of, Cx, Rule};
use crate::codes;
use crate::config::*;
use crate::diagnostic::{Diagnostic, Span};

use Shape::{Block, Blocks, Setting};

/// Every top-level key, in the order of [`Config`]'s fields.
const TOP: &[&str] = &[
    "drain", "inbound", "outbound", "balancer", "route", "dns", "socket", "limits",
];

/// Outbound protocols that dial their server through a stream transport:
/// for them `address_family` is the transport's, for the others
/// (freedom, hysteria2, wireguard) the outbound's own.
const STREAM_PROTOCOLS: &[&str] = &[
    "socks",
    "http",
    "trojan",
    "vless",
    "vmess",
    "shadowsocks",
    "shadowsocks-2022",
];

pub(super) fn file(cx: &mut Cx<'_>, statements: Pairs<'_, Rule>) -> Config {
    let mut config = Config::default();
    // The first occurrence of each single statement, for duplicates.
    let mut seen: Vec<(String, Span)> = Vec::new();
    let mut once = |cx: &mut Cx<'_>, key: &str, span: Span| -> bool {
        if let Some((_, first)) = seen.iter().find(|(k, _)| k == key) {
            cx.report(duplicate(key, span, first.clone()));
            return false;
        }
        seen.push((key.to_owned(), span));
        true
    };
    for statement in statements {
        match statement.as_rule() {
            Rule::inbound => config.inbounds.extend(inbound(cx, statement)),
            Rule::outbound => config.outbounds.extend(outbound(cx, statement)),
            Rule::balancer => config.balancers.extend(balancer(cx, statement)),
            Rule::route => {
                let head = keyword_span(&statement);
                let route = super::route::route(cx, statement);
                if once(cx, "route", head) {
                    config.route = Some(route);
                }
            }
            Rule::section => {
                let span = span_of(&statement);
                let mut parts = statement.into_inner();
                let name = parts.next().expect("a section has a name");
                let head = span_of(&name);
                let body = cx.body(
                    parts.next().expect("a section has a body"),
                    span.clone(),
                    head.clone(),
                );
                let first = once(cx, name.as_str(), head);
                match name.as_str() {
                    "dns" => {
                        let dns = dns(cx, &body);
                        if first {
                            config.dns = Some(Spanned::new(span, dns));
                        }
                    }
                    "socket" => {
                        let socket = socket(cx, &body);
                        if first {
                            config.socket = Some(Spanned::new(span, socket));
                        }
                    }
                    _ => {
                        let limits = limits(cx, &body);
                        if first {
                            config.limits = Some(Spanned::new(span, limits));
                        }
                    }
                }
            }
            Rule::top_setting => {
                let mut parts = statement.into_inner();
                let key = parts.next().expect("a setting has a key");
                let value = parts
                    .find(|p| p.as_rule() == Rule::value)
                    .expect("a setting has a value");
                let value = cx.value(value);
                if key.as_str() != "drain" {
                    cx.report(unknown_field(key.as_str(), span_of(&key), TOP));
                    continue;
                }
                let drain = cx.drain(&value);
                if once(cx, "drain", span_of(&key)) {
                    config.drain = drain;
                }
            }
            Rule::unknown_statement => {
                let key = statement
                    .into_inner()
                    .next()
                    .expect("a statement has a keyword");
                cx.report(unknown_field(key.as_str(), span_of(&key), TOP));
            }
            _ => {}
        }
    }
    config
}

fn keyword_span(statement: &Pair<'_, Rule>) -> Span {
    let first = statement
        .clone()
        .into_inner()
        .next()
        .expect("a statement starts with a keyword");
    span_of(&first)
}

/// A tag: a name, or a string for a tag that is not one.
pub(super) fn tag(cx: &mut Cx<'_>, pair: Pair<'_, Rule>) -> Spanned<String> {
    let inner = pair
        .into_inner()
        .next()
        .expect("a tag is a name or a string");
    let span = span_of(&inner);
    match inner.as_rule() {
        Rule::string => Spanned::new(span, cx.string_literal(inner)),
        _ => Spanned::new(span, inner.as_str().to_owned()),
    }
}

/// Reads `<keyword> <tag> <protocol> { ... }`: the tag, the protocol and
/// the body.
fn header(cx: &mut Cx<'_>, statement: Pair<'_, Rule>) -> (Spanned<String>, Spanned<String>, Body) {
    let span = span_of(&statement);
    let mut parts = statement.into_inner();
    let keyword = parts.next().expect("a statement starts with a keyword");
    let tag = tag(cx, parts.next().expect("a statement has a tag"));
    let protocol = parts.next().expect("a statement has a protocol");
    let protocol = Spanned::new(span_of(&protocol), protocol.as_str().to_owned());
    let head = keyword.as_span().start()..protocol.span().end;
    let body = cx.body(parts.next().expect("a statement has a body"), span, head);
    (tag, protocol, body)
}

fn take<T>(
    cx: &mut Cx<'_>,
    f: &Fields<'_>,
    key: &str,
    take: impl FnOnce(&mut Cx<'_>, &Value) -> Option<Spanned<T>>,
) -> Option<Spanned<T>> {
    f.setting(key).and_then(|v| take(cx, v))
}

fn take_list<T>(
    cx: &mut Cx<'_>,
    f: &Fields<'_>,
    key: &str,
    what: &str,
    item: impl Fn(&mut Cx<'_>, &Value) -> Option<Spanned<T>>,
) -> Option<List<T>> {
    f.setting(key).and_then(|v| cx.list(v, what, item))
}

fn take_secrets(cx: &mut Cx<'_>, f: &Fields<'_>, key: &str) -> Option<List<SecretValue>> {
    f.setting(key).and_then(|v| cx.secrets(v))
}

// ---------------------------------------------------------------- inbounds

const INBOUND: &[(&str, Shape)] = &[
    ("listen", Setting),
    ("port", Setting),
    ("sniff", Setting),
    ("udp", Setting),
    ("account", Blocks),
    ("password", Setting),
    ("passwords", Setting),
    ("id", Setting),
    ("ids", Setting),
    ("method", Setting),
    ("psk", Setting),
    ("users", Setting),
    ("obfs", Block),
    ("fallback", Setting),
    ("masquerade", Setting),
    ("up_mbps", Setting),
    ("down_mbps", Setting),
    ("tls", Block),
    ("ws", Block),
    ("grpc", Block),
];

fn inbound(cx: &mut Cx<'_>, statement: Pair<'_, Rule>) -> Option<Spanned<Inbound>> {
    let (tag, protocol, body) = header(cx, statement);
    let f = cx.fields(&body, INBOUND);

    let (listen, listen_port) = match f.setting("listen") {
        None => (None, None),
        Some(v) => match &v.kind {
            super::value::Kind::Ip => (cx.ip(v), None),
            super::value::Kind::SocketAddr { .. } => match cx.socket_addr(v) {
                Some((host, port)) => (Some(host), Some(port)),
                None => (None, None),
            },
            _ => {
                cx.server_addr(v);
                (None, None)
            }
        },
    };
    let port = take(cx, &f, "port", |cx, v| cx.uint::<u16>(v));
    let port = match (listen_port, port, f.key_span("port")) {
        (Some(from_listen), Some(_), Some(key)) => {
            cx.report(duplicate("port", key, from_listen.span()).with_help(
                "`listen = <address>:<port>` sets the port already; remove `port` or the port of `listen`",
            ));
            Some(from_listen)
        }
        (Some(p), _, _) | (None, Some(p), _) => Some(p),
        (None, None, port_key) => {
            // A `port` or `listen` that failed to read is reported already.
            let listen_failed = f.setting("listen").is_some() && listen.is_none();
            if port_key.is_none() && !listen_failed {
                cx.report(
                    Diagnostic::error(codes::MISSING_FIELD, f.head.clone(), "missing field `port`")
                        .with_help("write `listen = 127.0.0.1:1080`, or `port = 1080` to listen on 127.0.0.1"),
                );
            }
            None
        }
    };
    let sniff = take(cx, &f, "sniff", |cx, v| cx.boolean(v));

    let mut accounts: Vec<Spanned<Account>> = Vec::new();
    for b in f.blocks("account") {
        accounts.extend(account(cx, b));
    }
    let settings = InboundSettings {
        udp: take(cx, &f, "udp", |cx, v| cx.boolean(v)),
        accounts: (!accounts.is_empty()).then_some(accounts),
        password: take(cx, &f, "password", |cx, v| cx.secret(v)),
        passwords: take_secrets(cx, &f, "passwords"),
        id: take(cx, &f, "id", |cx, v| cx.secret(v)),
        ids: take_secrets(cx, &f, "ids"),
        method: take(cx, &f, "method", |cx, v| cx.name(v)),
        psk: take(cx, &f, "psk", |cx, v| cx.secret(v)),
        users: take_secrets(cx, &f, "users"),
        obfs: f.block("obfs").and_then(|b| obfs(cx, b)),
        fallback: take(cx, &f, "fallback", |cx, v| cx.socket_addr_text(v)),
        masquerade: take(cx, &f, "masquerade", |cx, v| cx.socket_addr_text(v)),
        up_mbps: take(cx, &f, "up_mbps", |cx, v| cx.uint::<u64>(v)),
        down_mbps: take(cx, &f, "down_mbps", |cx, v| cx.uint::<u64>(v)),
    };
    let has_settings = [
        "udp",
        "account",
        "password",
        "passwords",
        "id",
        "ids",
        "method",
        "psk",
        "users",
        "obfs",
        "fallback",
        "masquerade",
        "up_mbps",
        "down_mbps",
    ]
    .iter()
    .any(|k| f.key_span(k).is_some());

    let (network, security) = transport(cx, &f);
    let stream = (network.is_some() || security.is_some()).then(|| InboundStream {
        network,
        security,
        tls: f.block("tls").and_then(|b| server_tls(cx, b)),
        ws: f.block("ws").map(|b| ws(cx, b)),
        grpc: f.block("grpc").map(|b| grpc(cx, b)),
    });

    let port = port?;
    Some(Spanned::new(
        body.span.clone(),
        Inbound {
            tag,
            protocol,
            listen,
            port,
            sniff,
            stream,
            settings: has_settings.then_some(settings),
        },
    ))
}

/// The transport blocks: `ws { }` or `grpc { }` choose the network, and
/// `tls { }` adds TLS on top. Returns (network, security) as the TOML
/// front end writes them for an inbound; outbounds adjust it.
fn transport(
    cx: &mut Cx<'_>,
    f: &Fields<'_>,
) -> (Option<Spanned<String>>, Option<Spanned<String>>) {
    let ws = f.key_span("ws");
    let grpc = f.key_span("grpc");
    let network = match (ws, grpc) {
        (Some(ws), Some(grpc)) => {
            let (first, second) = if ws.start < grpc.start {
                (ws, grpc)
            } else {
                (grpc, ws)
            };
            cx.report(
                Diagnostic::error(
                    codes::TRANSPORT_MISMATCH,
                    second,
                    "a transport is either `ws` or `grpc`, not both",
                )
                .with_secondary(first, "transport chosen here"),
            );
            None
        }
        (Some(ws), None) => Some(Spanned::new(ws, "ws".to_owned())),
        (None, Some(grpc)) => Some(Spanned::new(grpc, "grpc".to_owned())),
        (None, None) => None,
    };
    let security = f
        .key_span("tls")
        .map(|tls| Spanned::new(tls, "tls".to_owned()));
    (network, security)
}

const ACCOUNT: &[(&str, Shape)] = &[("user", Setting), ("pass", Setting)];

fn account(cx: &mut Cx<'_>, body: &Body) -> Option<Spanned<Account>> {
    let f = cx.fields(body, ACCOUNT);
    let user = take(cx, &f, "user", |cx, v| cx.string(v));
    let pass = take(cx, &f, "pass", |cx, v| cx.secret(v));
    for (key, present) in [("user", f.key_span("user")), ("pass", f.key_span("pass"))] {
        if present.is_none() {
            cx.missing(f.head.clone(), key);
        }
    }
    Some(Spanned::new(
        body.span.clone(),
        Account {
            user: user?,
            pass: pass?,
        },
    ))
}

const OBFS: &[(&str, Shape)] = &[("type", Setting), ("password", Setting)];

fn obfs(cx: &mut Cx<'_>, body: &Body) -> Option<Spanned<ObfsConfig>> {
    let f = cx.fields(body, OBFS);
    let kind = take(cx, &f, "type", |cx, v| cx.name(v));
    let password = take(cx, &f, "password", |cx, v| cx.secret(v));
    for key in ["type", "password"] {
        if f.key_span(key).is_none() {
            cx.missing(f.head.clone(), key);
        }
    }
    Some(Spanned::new(
        body.span.clone(),
        ObfsConfig {
            kind: kind?,
            password: password?,
        },
    ))
}

const SERVER_TLS: &[(&str, Shape)] = &[
    ("cert_file", Setting),
    ("key_file", Setting),
    ("alpn", Setting),
];

fn server_tls(cx: &mut Cx<'_>, body: &Body) -> Option<Spanned<ServerTlsConfig>> {
    let f = cx.fields(body, SERVER_TLS);
    let cert_file = take(cx, &f, "cert_file", |cx, v| cx.string(v));
    let key_file = take(cx, &f, "key_file", |cx, v| cx.string(v));
    for key in ["cert_file", "key_file"] {
        if f.key_span(key).is_none() {
            cx.missing(f.head.clone(), key);
        }
    }
    let alpn = take_list(cx, &f, "alpn", "strings", |cx, v| cx.string(v));
    Some(Spanned::new(
        body.span.clone(),
        ServerTlsConfig {
            cert_file: cert_file?,
            key_file: key_file?,
            alpn,
        },
    ))
}

const WS: &[(&str, Shape)] = &[
    ("path", Setting),
    ("host", Setting),
    ("max_early_data", Setting),
    ("early_data_header_name", Setting),
];

fn ws(cx: &mut Cx<'_>, body: &Body) -> Spanned<WsConfig> {
    let f = cx.fields(body, WS);
    let config = WsConfig {
        path: take(cx, &f, "path", |cx, v| cx.string(v)),
        host: take(cx, &f, "host", |cx, v| cx.string(v)),
        max_early_data: take(cx, &f, "max_early_data", |cx, v| cx.uint::<u32>(v)),
        early_data_header_name: take(cx, &f, "early_data_header_name", |cx, v| cx.string(v)),
    };
    Spanned::new(body.span.clone(), config)
}

const GRPC: &[(&str, Shape)] = &[("service_name", Setting), ("authority", Setting)];

fn grpc(cx: &mut Cx<'_>, body: &Body) -> Spanned<GrpcConfig> {
    let f = cx.fields(body, GRPC);
    let config = GrpcConfig {
        service_name: take(cx, &f, "service_name", |cx, v| cx.string(v)),
        authority: take(cx, &f, "authority", |cx, v| cx.string(v)),
    };
    Spanned::new(body.span.clone(), config)
}

// ---------------------------------------------------------------- outbounds

const OUTBOUND: &[(&str, Shape)] = &[
    ("server", Setting),
    ("address_family", Setting),
    ("drain", Setting),
    ("user", Setting),
    ("pass", Setting),
    ("password", Setting),
    ("id", Setting),
    ("security", Setting),
    ("method", Setting),
    ("psk", Setting),
    ("identity_psks", Setting),
    ("obfs", Block),
    ("max_concurrent_streams", Setting),
    ("up_mbps", Setting),
    ("down_mbps", Setting),
    ("private_key", Setting),
    ("peer_public_key", Setting),
    ("preshared_key", Setting),
    ("endpoint", Setting),
    ("endpoint_address_family", Setting),
    ("addresses", Setting),
    ("mtu", Setting),
    ("keepalive", Setting),
    ("reserved", Setting),
    ("tls", Block),
    ("ws", Block),
    ("grpc", Block),
];

/// The outbound keys that belong in `settings`.
const OUTBOUND_SETTINGS: &[&str] = &[
    "user",
    "pass",
    "password",
    "id",
    "security",
    "method",
    "psk",
    "identity_psks",
    "obfs",
    "max_concurrent_streams",
    "up_mbps",
    "down_mbps",
    "private_key",
    "peer_public_key",
    "preshared_key",
    "endpoint",
    "endpoint_address_family",
    "addresses",
    "mtu",
    "keepalive",
    "reserved",
];

fn outbound(cx: &mut Cx<'_>, statement: Pair<'_, Rule>) -> Option<Spanned<Outbound>> {
    let (tag, protocol, body) = header(cx, statement);
    let f = cx.fields(&body, OUTBOUND);

    let (server, port) = match take(cx, &f, "server", |cx, v| {
        cx.socket_addr(v)
            .map(|(h, p)| Spanned::new(v.span.clone(), (h, p)))
    }) {
        Some(pair) => {
            let (host, port) = pair.into_inner();
            (Some(host), Some(port))
        }
        None => (None, None),
    };
    let family = take(cx, &f, "address_family", |cx, v| cx.name(v));
    let through_stream = STREAM_PROTOCOLS.contains(&protocol.get_ref().as_str());
    let (family, stream_family) = if through_stream {
        (None, family)
    } else {
        (family, None)
    };

    let settings = OutboundSettings {
        user: take(cx, &f, "user", |cx, v| cx.string(v)),
        pass: take(cx, &f, "pass", |cx, v| cx.secret(v)),
        password: take(cx, &f, "password", |cx, v| cx.secret(v)),
        id: take(cx, &f, "id", |cx, v| cx.secret(v)),
        security: take(cx, &f, "security", |cx, v| cx.name(v)),
        method: take(cx, &f, "method", |cx, v| cx.name(v)),
        psk: take(cx, &f, "psk", |cx, v| cx.secret(v)),
        identity_psks: take_secrets(cx, &f, "identity_psks"),
        obfs: f.block("obfs").and_then(|b| obfs(cx, b)),
        max_concurrent_streams: take(cx, &f, "max_concurrent_streams", |cx, v| cx.uint::<u32>(v)),
        up_mbps: take(cx, &f, "up_mbps", |cx, v| cx.uint::<u64>(v)),
        down_mbps: take(cx, &f, "down_mbps", |cx, v| cx.uint::<u64>(v)),
        private_key: take(cx, &f, "private_key", |cx, v| cx.secret(v)),
        peer_public_key: take(cx, &f, "peer_public_key", |cx, v| cx.string(v)),
        preshared_key: take(cx, &f, "preshared_key", |cx, v| cx.secret(v)),
        endpoint: take(cx, &f, "endpoint", |cx, v| cx.socket_addr_text(v)),
        endpoint_address_family: take(cx, &f, "endpoint_address_family", |cx, v| cx.name(v)),
        addresses: take_list(cx, &f, "addresses", "IP addresses", |cx, v| cx.ip(v)),
        mtu: take(cx, &f, "mtu", |cx, v| cx.uint::<u16>(v)),
        keepalive: take(cx, &f, "keepalive", |cx, v| cx.seconds_u16(v)),
        reserved: take_list(cx, &f, "reserved", "integers", |cx, v| cx.uint::<u8>(v)),
    };
    let has_settings = OUTBOUND_SETTINGS.iter().any(|k| f.key_span(k).is_some());

    let (network, security) = transport(cx, &f);
    let (network, security) = match (network, security) {
        // hysteria2 runs QUIC, whose TLS settings sit alone in the stream.
        (None, Some(_)) if protocol.get_ref() == "hysteria2" => (None, None),
        // Over plain TCP, TLS is the network "tls"; under ws and grpc it
        // is the security "tls".
        (None, Some(tls)) => (Some(tls), None),
        other => other,
    };
    let has_tls = f.key_span("tls").is_some();
    let stream =
        (network.is_some() || has_tls || stream_family.is_some()).then(|| OutboundStream {
            network,
            security,
            address_family: stream_family,
            tls: f.block("tls").map(|b| client_tls(cx, b)),
            ws: f.block("ws").map(|b| ws(cx, b)),
            grpc: f.block("grpc").map(|b| grpc(cx, b)),
        });

    Some(Spanned::new(
        body.span.clone(),
        Outbound {
            tag,
            protocol,
            server,
            port,
            address_family: family,
            drain: take(cx, &f, "drain", |cx, v| cx.drain(v)),
            stream,
            settings: has_settings.then_some(settings),
        },
    ))
}

const CLIENT_TLS: &[(&str, Shape)] = &[
    ("server_name", Setting),
    ("ca_file", Setting),
    ("insecure", Setting),
    ("alpn", Setting),
];

fn client_tls(cx: &mut Cx<'_>, body: &Body) -> Spanned<ClientTlsConfig> {
    let f = cx.fields(body, CLIENT_TLS);
    let config = ClientTlsConfig {
        server_name: take(cx, &f, "server_name", |cx, v| cx.string(v)),
        ca_file: take(cx, &f, "ca_file", |cx, v| cx.string(v)),
        insecure: take(cx, &f, "insecure", |cx, v| cx.boolean(v)),
        alpn: take_list(cx, &f, "alpn", "strings", |cx, v| cx.string(v)),
    };
    Spanned::new(body.span.clone(), config)
}

// ---------------------------------------------------------------- balancers

const BALANCER: &[(&str, Shape)] = &[("probe_interval", Setting), ("probe_timeout", Setting)];

fn balancer(cx: &mut Cx<'_>, statement: Pair<'_, Rule>) -> Option<Spanned<Balancer>> {
    let span = span_of(&statement);
    let mut parts = statement.into_inner().peekable();
    let keyword = parts.next().expect("a balancer starts with its keyword");
    let tag = tag(cx, parts.next().expect("a balancer has a tag"));
    let strategy = parts
        .next_if(|p| p.as_rule() == Rule::strategy)
        .map(|s| Spanned::new(span_of(&s), s.as_str().to_owned()));
    let members = cx.value(parts.next().expect("a balancer has a member list"));
    let outbounds = cx.list(&members, "tags", |cx, v| cx.name(v));
    let head = keyword.as_span().start()..members.span.end;
    let (probe_interval, probe_timeout) = match parts.next() {
        Some(body) => {
            let body = cx.body(body, span.clone(), head);
            let f = cx.fields(&body, BALANCER);
            (
                take(cx, &f, "probe_interval", |cx, v| cx.duration(v)),
                take(cx, &f, "probe_timeout", |cx, v| cx.duration(v)),
            )
        }
        None => (None, None),
    };
    Some(Spanned::new(
        span,
        Balancer {
            tag,
            outbounds: outbounds?,
            strategy,
            probe_interval,
            probe_timeout,
        },
    ))
}

// ---------------------------------------------------------------- sections

const DNS: &[(&str, Shape)] = &[
    ("servers", Setting),
    ("pre_proxy", Setting),
    ("through_proxy", Setting),
    ("ca_file", Setting),
];

fn dns(cx: &mut Cx<'_>, body: &Body) -> Dns {
    let f = cx.fields(body, DNS);
    let what = "IP addresses, socket addresses or URLs";
    Dns {
        servers: take_list(cx, &f, "servers", what, |cx, v| cx.server_addr(v)),
        pre_proxy: take_list(cx, &f, "pre_proxy", what, |cx, v| cx.server_addr(v)),
        through_proxy: take_list(cx, &f, "through_proxy", what, |cx, v| cx.server_addr(v)),
        ca_file: take(cx, &f, "ca_file", |cx, v| cx.string(v)),
    }
}

const SOCKET: &[(&str, Shape)] = &[
    ("mark", Setting),
    ("interface", Setting),
    ("bind_address", Setting),
    ("tcp_keepalive", Setting),
];

fn socket(cx: &mut Cx<'_>, body: &Body) -> Socket {
    let f = cx.fields(body, SOCKET);
    Socket {
        mark: take(cx, &f, "mark", |cx, v| cx.uint::<u32>(v)),
        interface: take(cx, &f, "interface", |cx, v| cx.name(v)),
        bind_address: take_list(cx, &f, "bind_address", "IP addresses", |cx, v| cx.ip(v)),
        tcp_keepalive: take(cx, &f, "tcp_keepalive", |cx, v| cx.duration(v)),
    }
}

const LIMITS: &[(&str, Shape)] = &[
    ("max_connections", Setting),
    ("max_handshakes", Setting),
    ("max_handshakes_per_source", Setting),
    ("handshake_timeout", Setting),
    ("relay_idle_timeout", Setting),
    ("connect_timeout", Setting),
];

fn limits(cx: &mut Cx<'_>, body: &Body) -> Limits {
    let f = cx.fields(body, LIMITS);
    Limits {
        max_connections: take(cx, &f, "max_connections", |cx, v| cx.uint::<u32>(v)),
        max_handshakes: take(cx, &f, "max_handshakes", |cx, v| cx.uint::<u32>(v)),
        max_handshakes_per_source: take(cx, &f, "max_handshakes_per_source", |cx, v| {
            cx.uint::<u32>(v)
        }),
        handshake_timeout: take(cx, &f, "handshake_timeout", |cx, v| cx.duration(v)),
        relay_idle_timeout: take(cx, &f, "relay_idle_timeout", |cx, v| cx.duration(v)),
        connect_timeout: take(cx, &f, "connect_timeout", |cx, v| cx.duration(v)),
    }
}
