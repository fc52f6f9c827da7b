//! `[dns]`, `[socket]` and `[limits]`: what the whole host shares.

use std::net::IpAddr;

use etemenanki_ir::spec::{DnsServer, DnsSpec, Host, Limits, SocketPolicy, TlsSpec, Verify};

use super::values::DnsUrl;
use super::{transport, values, Cx};
use crate::codes;
use crate::config::{self, Spanned};

pub fn dns(cx: &mut Cx, dns: Option<&Spanned<config::Dns>>) -> DnsSpec {
    let Some(dns) = dns else {
        return DnsSpec::System;
    };
    let span = dns.span();
    let d = dns.get_ref();
    let verify = match &d.ca_file {
        Some(ca) => transport::ca_bundle(cx, ca),
        None => Verify::System,
    };
    let tls = |server: &etemenanki_ir::spec::HostPort, alpn: &[&str]| TlsSpec {
        server_name: match &server.host {
            Host::Ip(ip) => ip.to_string(),
            Host::Domain(name) => name.clone(),
        },
        verify: verify.clone(),
        alpn: alpn.iter().map(|a| (*a).to_owned()).collect(),
    };
    let servers = |cx: &mut Cx, list: &Option<Vec<Spanned<String>>>, key: &str| {
        let list = list.as_deref().unwrap_or_default();
        if list.is_empty() {
            cx.error(
                codes::INVALID_DNS,
                span.clone(),
                format!("`{key}` needs at least one server"),
            );
        }
        list.iter()
            .filter_map(|s| {
                let url = values::dns_url(s.get_ref())
                    .map_err(|why| cx.error(codes::INVALID_DNS, s.span(), why))
                    .ok()?;
                Some(match url {
                    DnsUrl::Plain(addr) => DnsServer::Plain(addr),
                    DnsUrl::Tls(server) => DnsServer::Tls {
                        tls: tls(&server, &[]),
                        server,
                    },
                    DnsUrl::Https(server, path) => DnsServer::Https {
                        tls: tls(&server, &["h2"]),
                        server,
                        path,
                    },
                })
            })
            .collect::<Vec<_>>()
    };
    match (&d.servers, &d.pre_proxy, &d.through_proxy) {
        (Some(_), None, None) => DnsSpec::Single {
            servers: servers(cx, &d.servers, "servers"),
        },
        (None, Some(_), Some(_)) => DnsSpec::Split {
            pre_proxy: servers(cx, &d.pre_proxy, "pre_proxy"),
            through_proxy: servers(cx, &d.through_proxy, "through_proxy"),
        },
        (None, None, None) => {
            cx.error(codes::INVALID_DNS, span, "[dns] sets no servers")
                .help = Some("set servers, or pre_proxy and through_proxy; remove [dns] to use the host's resolv.conf".into());
            DnsSpec::System
        }
        (Some(_), _, _) => {
            cx.error(
                codes::INVALID_DNS,
                span,
                "[dns] mixes servers with pre_proxy/through_proxy",
            )
            .help = Some(
                "use servers for one resolver, or pre_proxy and through_proxy for a split one"
                    .into(),
            );
            DnsSpec::System
        }
        _ => {
            cx.error(
                codes::INVALID_DNS,
                span,
                "a split resolver needs both pre_proxy and through_proxy",
            );
            DnsSpec::System
        }
    }
}

pub fn socket(cx: &mut Cx, socket: Option<&Spanned<config::Socket>>) -> SocketPolicy {
    let Some(socket) = socket else {
        return SocketPolicy::default();
    };
    let s = socket.get_ref();
    let mut policy = SocketPolicy {
        mark: s.mark.as_ref().map(|m| *m.get_ref()),
        interface: s.interface.as_ref().map(|i| i.get_ref().clone()),
        tcp_keepalive: s.tcp_keepalive.as_ref().map(|k| k.get_ref().0),
        ..SocketPolicy::default()
    };
    for addr in s.bind_address.iter().flatten() {
        match addr.get_ref().parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) if policy.bind_v4.is_none() => policy.bind_v4 = Some(v4),
            Ok(IpAddr::V6(v6)) if policy.bind_v6.is_none() => policy.bind_v6 = Some(v6),
            Ok(_) => {
                cx.error(
                    codes::INVALID_ADDRESS,
                    addr.span(),
                    "a second bind address of the same family",
                )
                .help = Some("give at most one IPv4 and one IPv6 address".into());
            }
            Err(_) => {
                cx.error(
                    codes::INVALID_ADDRESS,
                    addr.span(),
                    format!("`{}` is not an IP address", addr.get_ref()),
                );
            }
        }
    }
    policy
}

pub fn limits(cx: &mut Cx, limits: Option<&Spanned<config::Limits>>) -> Limits {
    let mut out = Limits::default();
    let Some(limits) = limits else { return out };
    let l = limits.get_ref();
    let count = |cx: &mut Cx, v: &Option<Spanned<u32>>, key: &str, into: &mut u32| {
        if let Some(v) = v {
            if *v.get_ref() == 0 {
                cx.error(
                    codes::INVALID_VALUE,
                    v.span(),
                    format!("`{key}` must be at least 1"),
                );
            }
            *into = *v.get_ref();
        }
    };
    count(
        cx,
        &l.max_connections,
        "max_connections",
        &mut out.max_connections,
    );
    count(
        cx,
        &l.max_handshakes,
        "max_handshakes",
        &mut out.max_handshakes,
    );
    count(
        cx,
        &l.max_handshakes_per_source,
        "max_handshakes_per_source",
        &mut out.max_handshakes_per_source,
    );
    let timeout = |cx: &mut Cx,
                   v: &Option<Spanned<config::Seconds>>,
                   key: &str,
                   into: &mut std::time::Duration| {
        if let Some(v) = v {
            if v.get_ref().0.is_zero() {
                cx.error(
                    codes::INVALID_VALUE,
                    v.span(),
                    format!("`{key}` must be longer than zero"),
                );
            }
            *into = v.get_ref().0;
        }
    };
    timeout(
        cx,
        &l.handshake_timeout,
        "handshake_timeout",
        &mut out.handshake_timeout,
    );
    timeout(
        cx,
        &l.relay_idle_timeout,
        "relay_idle_timeout",
        &mut out.relay_idle_timeout,
    );
    timeout(
        cx,
        &l.connect_timeout,
        "connect_timeout",
        &mut out.connect_timeout,
    );
    out
}
