//! `[[outbound]]` -> `OutboundSpec`, per protocol.

use etemenanki_ir::spec::{
    Account, DrainPolicy, Host, HostPort, Hysteria2Spec, Obfs, OutboundProtocol, OutboundSpec,
    Secret, Ss2022Method, SsMethod, Upstream, Uuid, VmessSecurity, WireguardSpec,
};

use super::transport::{self, address_family};
use super::{values, Cx};
use crate::codes;
use crate::config::{ObfsConfig, Outbound, OutboundSettings, SecretValue, Spanned};
use crate::diagnostic::{suggest, Span};

pub const PROTOCOLS: &[&str] = &[
    "freedom",
    "blackhole",
    "socks",
    "http",
    "trojan",
    "vless",
    "vmess",
    "shadowsocks",
    "shadowsocks-2022",
    "hysteria2",
    "wireguard",
];

/// The settings keys each protocol accepts.
fn accepted(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "socks" | "http" => &["user", "pass"],
        "trojan" => &["password"],
        "vless" => &["id"],
        "vmess" => &["id", "security"],
        "shadowsocks" => &["method", "password"],
        "shadowsocks-2022" => &["method", "psk", "identity_psks"],
        "hysteria2" => &[
            "password",
            "obfs",
            "max_concurrent_streams",
            "up_mbps",
            "down_mbps",
        ],
        "wireguard" => &[
            "private_key",
            "peer_public_key",
            "preshared_key",
            "endpoint",
            "endpoint_address_family",
            "addresses",
            "mtu",
            "keepalive",
            "reserved",
        ],
        _ => &[],
    }
}

/// Every settings key that is set, with its span.
fn present(s: &OutboundSettings) -> Vec<(&'static str, Span)> {
    use super::{list_span, span};
    [
        ("user", span(&s.user)),
        ("pass", span(&s.pass)),
        ("password", span(&s.password)),
        ("id", span(&s.id)),
        ("security", span(&s.security)),
        ("method", span(&s.method)),
        ("psk", span(&s.psk)),
        ("identity_psks", list_span(&s.identity_psks)),
        ("obfs", span(&s.obfs)),
        ("max_concurrent_streams", span(&s.max_concurrent_streams)),
        ("up_mbps", span(&s.up_mbps)),
        ("down_mbps", span(&s.down_mbps)),
        ("private_key", span(&s.private_key)),
        ("peer_public_key", span(&s.peer_public_key)),
        ("preshared_key", span(&s.preshared_key)),
        ("endpoint", span(&s.endpoint)),
        ("endpoint_address_family", span(&s.endpoint_address_family)),
        ("addresses", list_span(&s.addresses)),
        ("mtu", span(&s.mtu)),
        ("keepalive", span(&s.keepalive)),
        ("reserved", list_span(&s.reserved)),
    ]
    .into_iter()
    .filter_map(|(k, s)| s.map(|s| (k, s)))
    .collect()
}

pub fn lower(
    cx: &mut Cx,
    outbound: &Spanned<Outbound>,
    default_drain: DrainPolicy,
) -> OutboundSpec {
    let span = outbound.span();
    let o = outbound.get_ref();
    let tag = o.tag.get_ref().clone();
    let drain = o.drain.as_ref().map_or(default_drain, |d| d.get_ref().0);
    let protocol = o.protocol.get_ref().as_str();
    let default_settings = OutboundSettings::default();
    let settings = o.settings.as_ref().unwrap_or(&default_settings);

    if !PROTOCOLS.contains(&protocol) {
        cx.unknown_protocol(&o.protocol, "outbound", PROTOCOLS);
        return OutboundSpec {
            tag,
            protocol: OutboundProtocol::Blackhole,
            drain,
        };
    }
    for (key, key_span) in present(settings) {
        if !accepted(protocol).contains(&key) {
            not_applicable(cx, key_span, &format!("settings.{key}"), protocol);
        }
    }
    let uses_server = !matches!(protocol, "freedom" | "blackhole" | "wireguard");
    if !uses_server {
        for (key, s) in [
            ("server", o.server.as_ref().map(Spanned::span)),
            ("port", o.port.as_ref().map(Spanned::span)),
        ] {
            if let Some(s) = s {
                not_applicable(cx, s, key, protocol);
            }
        }
    }
    if let Some(stream) = &o.stream {
        let stream_ok = !matches!(
            protocol,
            "freedom" | "blackhole" | "wireguard" | "hysteria2"
        );
        let hy2_tls_only = protocol == "hysteria2" && {
            let s = stream;
            s.network.is_none()
                && s.security.is_none()
                && s.ws.is_none()
                && s.grpc.is_none()
                && s.address_family.is_none()
        };
        if !stream_ok && !hy2_tls_only {
            not_applicable(cx, o.protocol.span(), "stream", protocol);
        }
    }
    if let Some(af) = &o.address_family {
        if !matches!(protocol, "freedom" | "hysteria2" | "wireguard") {
            not_applicable(cx, af.span(), "address_family", protocol);
            cx.diags.last_mut().expect("just pushed").help = Some(
                "a proxy client dials its server under [outbound.stream] address_family".into(),
            );
        }
    }

    let lowered = match protocol {
        "freedom" => OutboundProtocol::Freedom {
            address_family: address_family(cx, o.address_family.as_ref()),
        },
        "blackhole" => OutboundProtocol::Blackhole,
        "wireguard" => OutboundProtocol::Wireguard(wireguard(cx, o, settings, span)),
        "hysteria2" => OutboundProtocol::Hysteria2(hysteria2(cx, o, settings, span)),
        client => {
            let server = server(cx, o, span.clone());
            let upstream = Upstream {
                transport: transport::client(cx, o.stream.as_ref(), &server),
                server,
            };
            proxy_client(cx, client, upstream, settings, span)
        }
    };
    OutboundSpec {
        tag,
        protocol: lowered,
        drain,
    }
}

fn not_applicable(cx: &mut Cx, span: Span, key: &str, protocol: &str) {
    cx.error(
        codes::NOT_APPLICABLE,
        span,
        format!("`{key}` does not apply to a {protocol} outbound"),
    );
}

fn missing(cx: &mut Cx, span: Span, key: &str, protocol: &str) {
    cx.error(
        codes::MISSING_SETTING,
        span,
        format!("a {protocol} outbound needs `{key}`"),
    );
}

/// The proxy server: `server` and `port`, both required.
fn server(cx: &mut Cx, o: &Outbound, span: Span) -> HostPort {
    let protocol = o.protocol.get_ref();
    let host = match &o.server {
        Some(s) => values::host(s.get_ref()).unwrap_or_else(|e| {
            cx.error(codes::INVALID_ADDRESS, s.span(), e);
            Host::Domain(String::new())
        }),
        None => {
            missing(cx, span.clone(), "server", protocol);
            if !cx.source.is_toml() {
                cx.diags.last_mut().expect("just pushed").help =
                    Some("write `server = <host>:<port>`".into());
            }
            Host::Domain(String::new())
        }
    };
    let port = match &o.port {
        Some(p) if *p.get_ref() == 0 => {
            cx.error(
                codes::INVALID_PORT,
                p.span(),
                "port 0 is not a valid server port (use 1-65535)",
            );
            0
        }
        Some(p) => *p.get_ref(),
        // In .et the port is written in `server = host:port`, whose absence
        // is reported above.
        None => {
            if cx.source.is_toml() {
                missing(cx, span, "port", protocol);
            }
            0
        }
    };
    HostPort { host, port }
}

fn required_secret(
    cx: &mut Cx,
    value: &Option<Spanned<SecretValue>>,
    key: &str,
    protocol: &str,
    span: &Span,
) -> String {
    match value {
        Some(v) => {
            let secret = cx.secret(v);
            if secret.is_empty() && matches!(v.get_ref(), SecretValue::Plain(_)) {
                cx.error(
                    codes::INVALID_VALUE,
                    v.span(),
                    format!("`{key}` must not be empty"),
                );
            }
            secret
        }
        None => {
            missing(cx, span.clone(), &format!("settings.{key}"), protocol);
            String::new()
        }
    }
}

fn uuid(
    cx: &mut Cx,
    value: &Option<Spanned<SecretValue>>,
    protocol: &str,
    span: &Span,
) -> Secret<Uuid> {
    let text = required_secret(cx, value, "id", protocol, span);
    match Uuid::parse(&text) {
        Some(id) => Secret(id),
        None => {
            if let Some(v) = value.as_ref().filter(|_| !text.is_empty()) {
                cx.error(codes::INVALID_UUID, v.span(), "`id` is not a UUID")
                    .help = Some("write it as 8-4-4-4-12 hexadecimal digits, such as 11111111-2222-3333-4444-555555555555".into());
            }
            Secret(Uuid([0; 16]))
        }
    }
}

fn proxy_client(
    cx: &mut Cx,
    protocol: &str,
    upstream: Upstream,
    s: &OutboundSettings,
    span: Span,
) -> OutboundProtocol {
    match protocol {
        "socks" | "http" => {
            let account = match (&s.user, &s.pass) {
                (Some(user), Some(pass)) => Some(Account {
                    user: user.get_ref().clone(),
                    pass: Secret(cx.secret(pass)),
                }),
                (None, None) => None,
                (Some(user), None) => {
                    cx.error(codes::MISSING_SETTING, user.span(), "`user` without `pass`");
                    None
                }
                (None, Some(pass)) => {
                    cx.error(codes::MISSING_SETTING, pass.span(), "`pass` without `user`");
                    None
                }
            };
            if protocol == "socks" {
                OutboundProtocol::Socks { upstream, account }
            } else {
                OutboundProtocol::Http { upstream, account }
            }
        }
        "trojan" => OutboundProtocol::Trojan {
            upstream,
            password: Secret(required_secret(
                cx,
                &s.password,
                "password",
                protocol,
                &span,
            )),
        },
        "vless" => OutboundProtocol::Vless {
            upstream,
            id: uuid(cx, &s.id, protocol, &span),
        },
        "vmess" => {
            let security = s
                .security
                .as_ref()
                .and_then(|v| {
                    cx.one_of(
                        v,
                        "vmess security",
                        VmessSecurity::NAMES,
                        VmessSecurity::parse,
                    )
                })
                .unwrap_or(VmessSecurity::Auto);
            OutboundProtocol::Vmess {
                upstream,
                id: uuid(cx, &s.id, protocol, &span),
                security,
            }
        }
        "shadowsocks" => {
            let method = method(
                cx,
                &s.method,
                protocol,
                &span,
                SsMethod::NAMES,
                SsMethod::parse,
            )
            .unwrap_or(SsMethod::Aes256Gcm);
            let password = Secret(required_secret(
                cx,
                &s.password,
                "password",
                protocol,
                &span,
            ));
            OutboundProtocol::Shadowsocks {
                upstream,
                method,
                password,
            }
        }
        _ => {
            let method = method(
                cx,
                &s.method,
                protocol,
                &span,
                Ss2022Method::NAMES,
                Ss2022Method::parse,
            );
            let len = method.map_or(32, Ss2022Method::key_len);
            let psk = psk(cx, &s.psk, "psk", len, protocol, &span);
            let identity_psks = s
                .identity_psks
                .iter()
                .flatten()
                .map(|p| Secret(key_value(cx, p, "identity_psks", len)))
                .collect();
            if method == Some(Ss2022Method::Blake3Chacha20Poly1305) {
                if let Some(first) = s.identity_psks.iter().flatten().next() {
                    cx.error(
                        codes::INVALID_VALUE,
                        first.span(),
                        "`identity_psks` need an aes method: 2022-blake3-chacha20-poly1305 has no identity headers".to_owned(),
                    );
                }
            }
            OutboundProtocol::Ss2022 {
                upstream,
                method: method.unwrap_or(Ss2022Method::Blake3Aes256Gcm),
                psk: Secret(psk),
                identity_psks,
            }
        }
    }
}

fn method<T>(
    cx: &mut Cx,
    value: &Option<Spanned<String>>,
    protocol: &str,
    span: &Span,
    names: &[&str],
    parse: impl FnOnce(&str) -> Option<T>,
) -> Option<T> {
    match value {
        Some(v) => {
            let parsed = parse(v.get_ref());
            if parsed.is_none() {
                let diag = cx.error(
                    codes::UNKNOWN_METHOD,
                    v.span(),
                    format!("unknown {protocol} method \"{}\"", v.get_ref()),
                );
                diag.help = Some(match suggest(v.get_ref(), names.iter().copied()) {
                    Some(near) => format!("did you mean \"{near}\"?"),
                    None => format!("{protocol} methods are {}", names.join(", ")),
                });
            }
            parsed
        }
        None => {
            missing(cx, span.clone(), "settings.method", protocol);
            None
        }
    }
}

fn psk(
    cx: &mut Cx,
    value: &Option<Spanned<SecretValue>>,
    key: &str,
    len: usize,
    protocol: &str,
    span: &Span,
) -> Vec<u8> {
    match value {
        Some(v) => key_value(cx, v, key, len),
        None => {
            missing(cx, span.clone(), &format!("settings.{key}"), protocol);
            Vec::new()
        }
    }
}

/// A base64 key of `len` bytes.
pub(super) fn key_value(
    cx: &mut Cx,
    value: &Spanned<SecretValue>,
    key: &str,
    len: usize,
) -> Vec<u8> {
    let text = cx.secret(value);
    match values::key(&text, len) {
        Ok(bytes) => bytes,
        Err(why) => {
            cx.error(codes::INVALID_KEY, value.span(), format!("`{key}` {why}"))
                .help = Some(format!("generate one with `openssl rand -base64 {len}`"));
            Vec::new()
        }
    }
}

/// A hysteria2 `up_mbps` or `down_mbps` in bits per second; unset is 0.
pub(super) fn bps(mbps: &Option<Spanned<u64>>) -> u64 {
    mbps.as_ref()
        .map_or(0, |m| m.get_ref().saturating_mul(1_000_000))
}

pub(super) fn obfs(cx: &mut Cx, obfs: &Option<Spanned<ObfsConfig>>) -> Option<Obfs> {
    let obfs = obfs.as_ref()?.get_ref();
    if obfs.kind.get_ref() != "salamander" {
        cx.error(
            codes::INVALID_VALUE,
            obfs.kind.span(),
            format!(
                "unknown obfs type \"{}\" (expected \"salamander\")",
                obfs.kind.get_ref()
            ),
        );
    }
    Some(Obfs::Salamander {
        psk: Secret(cx.secret(&obfs.password)),
    })
}

fn hysteria2(cx: &mut Cx, o: &Outbound, s: &OutboundSettings, span: Span) -> Hysteria2Spec {
    let server = server(cx, o, span.clone());
    let tls = transport::client_tls(
        cx,
        o.stream.as_ref().and_then(|s| s.tls.as_ref()),
        &server.host.name(),
    );
    let alpn = if tls.alpn.is_empty() {
        vec!["h3".to_owned()]
    } else {
        tls.alpn
    };
    Hysteria2Spec {
        server_name: tls.server_name,
        verify: tls.verify,
        alpn,
        password: Secret(required_secret(
            cx,
            &s.password,
            "password",
            "hysteria2",
            &span,
        )),
        obfs: obfs(cx, &s.obfs),
        max_concurrent_streams: s
            .max_concurrent_streams
            .as_ref()
            .map_or(100, |m| *m.get_ref()),
        up_bps: bps(&s.up_mbps),
        down_bps: bps(&s.down_mbps),
        address_family: address_family(cx, o.address_family.as_ref()),
        server,
    }
}

fn wireguard(cx: &mut Cx, o: &Outbound, s: &OutboundSettings, span: Span) -> WireguardSpec {
    let protocol = "wireguard";
    let key32 = |cx: &mut Cx, v: &Spanned<SecretValue>, key: &str| -> [u8; 32] {
        key_value(cx, v, key, 32).try_into().unwrap_or([0; 32])
    };
    let private_key = match &s.private_key {
        Some(v) => key32(cx, v, "private_key"),
        None => {
            missing(cx, span.clone(), "settings.private_key", protocol);
            [0; 32]
        }
    };
    let peer_public_key = match &s.peer_public_key {
        Some(v) => key32(
            cx,
            &Spanned::new(v.span(), SecretValue::Plain(v.get_ref().clone())),
            "peer_public_key",
        ),
        None => {
            missing(cx, span.clone(), "settings.peer_public_key", protocol);
            [0; 32]
        }
    };
    let preshared_key = s
        .preshared_key
        .as_ref()
        .map(|v| Secret(key32(cx, v, "preshared_key")));
    let endpoint = match &s.endpoint {
        Some(e) => values::host_port(e.get_ref()).unwrap_or_else(|why| {
            cx.error(codes::INVALID_ADDRESS, e.span(), why);
            HostPort {
                host: Host::Domain(String::new()),
                port: 0,
            }
        }),
        None => {
            missing(cx, span.clone(), "settings.endpoint", protocol);
            HostPort {
                host: Host::Domain(String::new()),
                port: 0,
            }
        }
    };
    let mut addresses = Vec::new();
    match &s.addresses {
        Some(list) if !list.is_empty() => {
            for a in list {
                let text = a.get_ref();
                let ip = text.split_once('/').map_or(text.as_str(), |(ip, _)| ip);
                match ip.parse() {
                    Ok(ip) => addresses.push(ip),
                    Err(_) => {
                        cx.error(
                            codes::INVALID_ADDRESS,
                            a.span(),
                            format!(
                                "`{text}` is not a tunnel address (an IP, optionally with /prefix)"
                            ),
                        );
                    }
                }
            }
        }
        Some(_) | None => missing(cx, span.clone(), "settings.addresses", protocol),
    }
    let reserved = s.reserved.as_ref().and_then(|r| {
        let bytes: Vec<u8> = r.iter().map(|b| *b.get_ref()).collect();
        let fixed: Option<[u8; 3]> = bytes.try_into().ok();
        if fixed.is_none() {
            let at = r.first().map_or(span.clone(), Spanned::span);
            cx.error(
                codes::INVALID_VALUE,
                at,
                "`reserved` must be exactly three bytes",
            );
        }
        fixed
    });
    let mtu = s.mtu.as_ref().map_or(1420, |m| *m.get_ref());
    if let Some(m) = s.mtu.as_ref().filter(|m| *m.get_ref() < 576) {
        cx.error(
            codes::INVALID_VALUE,
            m.span(),
            format!("mtu {} is below the minimum of 576", m.get_ref()),
        );
    }
    WireguardSpec {
        private_key: Secret(private_key),
        peer_public_key,
        preshared_key,
        endpoint,
        endpoint_address_family: address_family(cx, s.endpoint_address_family.as_ref()),
        addresses,
        mtu,
        keepalive: s
            .keepalive
            .as_ref()
            .map(|k| *k.get_ref())
            .filter(|k| *k > 0),
        reserved,
        address_family: address_family(cx, o.address_family.as_ref()),
    }
}
