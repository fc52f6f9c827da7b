//! What changed between two versions of one spec, field by field.
//!
//! The planner decides rebuild or reuse with `==` on the whole protocol spec;
//! this module only explains a rebuild. Every change is named by the field
//! the configuration calls it by, never by its value, so a reason can never
//! carry a secret.

use std::fmt;

use crate::spec::{
    Account, BalancerSpec, Hysteria2Spec, InboundProtocol, InboundSpec, InboundTransport,
    OutboundProtocol, ServerShape, ServerTls, StreamShape, TransportSpec, Upstream, WireguardSpec,
};

/// One reason a resource is rebuilt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A field of the resource's own spec, as the configuration names it.
    Field(&'static str),
    /// A different protocol under the same tag.
    Protocol {
        from: &'static str,
        to: &'static str,
    },
    /// The DNS spec changed; the resource holds resolvers built from it.
    Dns,
    /// The socket policy changed; the resource opens sockets under it.
    Socket,
    /// A balancer member was rebuilt in the same apply.
    Member(String),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Field(name) => write!(f, "{name} changed"),
            Change::Protocol { from, to } => write!(f, "protocol changed ({from} -> {to})"),
            Change::Dns => f.write_str("DNS changed"),
            Change::Socket => f.write_str("socket policy changed"),
            Change::Member(tag) => write!(f, "member {tag} rebuilt"),
        }
    }
}

impl Change {
    /// A change of a proxy-protocol inbound's user list only, which the
    /// running inbound takes without a rebuild.
    pub fn is_users(&self) -> bool {
        matches!(self, Change::Field("passwords" | "ids" | "users"))
    }
}

/// Collects the names of the fields that differ, in the order they are checked.
#[derive(Default)]
struct Fields(Vec<Change>);

impl Fields {
    fn check<T: PartialEq + ?Sized>(&mut self, name: &'static str, old: &T, new: &T) {
        if old != new && !self.0.contains(&Change::Field(name)) {
            self.0.push(Change::Field(name));
        }
    }

    /// The changes found; `settings changed` if the specs differ in a way no
    /// field check named, so a rebuild always has a reason.
    fn finish(mut self, differ: bool) -> Vec<Change> {
        if differ && self.0.is_empty() {
            self.0.push(Change::Field("settings"));
        }
        self.0
    }
}

/// Why an outbound is rebuilt; empty when its protocol spec is unchanged.
pub(super) fn outbound(old: &OutboundProtocol, new: &OutboundProtocol) -> Vec<Change> {
    use OutboundProtocol as P;
    if old == new {
        return Vec::new();
    }
    if old.name() != new.name() {
        return vec![Change::Protocol {
            from: old.name(),
            to: new.name(),
        }];
    }
    let mut f = Fields::default();
    match (old, new) {
        (P::Freedom { address_family: a }, P::Freedom { address_family: b }) => {
            f.check("address family", a, b)
        }
        (
            P::Socks {
                upstream: ua,
                account: a,
            },
            P::Socks {
                upstream: ub,
                account: b,
            },
        )
        | (
            P::Http {
                upstream: ua,
                account: a,
            },
            P::Http {
                upstream: ub,
                account: b,
            },
        ) => {
            upstream(&mut f, ua, ub);
            account(&mut f, a.as_ref(), b.as_ref());
        }
        (
            P::Trojan {
                upstream: ua,
                password: a,
            },
            P::Trojan {
                upstream: ub,
                password: b,
            },
        ) => {
            upstream(&mut f, ua, ub);
            f.check("password", a, b);
        }
        (
            P::Vless {
                upstream: ua,
                id: a,
            },
            P::Vless {
                upstream: ub,
                id: b,
            },
        ) => {
            upstream(&mut f, ua, ub);
            f.check("id", a, b);
        }
        (
            P::Vmess {
                upstream: ua,
                id: a,
                security: sa,
            },
            P::Vmess {
                upstream: ub,
                id: b,
                security: sb,
            },
        ) => {
            upstream(&mut f, ua, ub);
            f.check("id", a, b);
            f.check("security", sa, sb);
        }
        (
            P::Shadowsocks {
                upstream: ua,
                method: ma,
                password: a,
            },
            P::Shadowsocks {
                upstream: ub,
                method: mb,
                password: b,
            },
        ) => {
            upstream(&mut f, ua, ub);
            f.check("method", ma, mb);
            f.check("password", a, b);
        }
        (
            P::Ss2022 {
                upstream: ua,
                method: ma,
                psk: a,
                identity_psks: ia,
            },
            P::Ss2022 {
                upstream: ub,
                method: mb,
                psk: b,
                identity_psks: ib,
            },
        ) => {
            upstream(&mut f, ua, ub);
            f.check("method", ma, mb);
            f.check("psk", a, b);
            f.check("identity psks", ia, ib);
        }
        (P::Hysteria2(a), P::Hysteria2(b)) => hysteria2(&mut f, a, b),
        (P::Wireguard(a), P::Wireguard(b)) => wireguard(&mut f, a, b),
        _ => {}
    }
    f.finish(true)
}

fn upstream(f: &mut Fields, a: &Upstream, b: &Upstream) {
    f.check("server", &a.server, &b.server);
    transport(f, &a.transport, &b.transport);
}

fn transport(f: &mut Fields, a: &TransportSpec, b: &TransportSpec) {
    match (&a.shape, &b.shape) {
        (
            StreamShape::Ws {
                path: pa,
                host: ha,
                early_data: ea,
            },
            StreamShape::Ws {
                path: pb,
                host: hb,
                early_data: eb,
            },
        ) => {
            f.check("ws path", pa, pb);
            f.check("ws host", ha, hb);
            f.check("ws early data", ea, eb);
        }
        (
            StreamShape::Grpc {
                service_name: sa,
                authority: aa,
            },
            StreamShape::Grpc {
                service_name: sb,
                authority: ab,
            },
        ) => {
            f.check("grpc service name", sa, sb);
            f.check("grpc authority", aa, ab);
        }
        (sa, sb) => f.check("transport", sa.name(), sb.name()),
    }
    match (&a.tls, &b.tls) {
        (Some(ta), Some(tb)) => {
            f.check("sni", &ta.server_name, &tb.server_name);
            f.check("tls verification", &ta.verify, &tb.verify);
            f.check("alpn", &ta.alpn, &tb.alpn);
        }
        (ta, tb) => f.check("tls", &ta.is_some(), &tb.is_some()),
    }
    f.check("address family", &a.address_family, &b.address_family);
}

fn account(f: &mut Fields, a: Option<&Account>, b: Option<&Account>) {
    match (a, b) {
        (Some(a), Some(b)) => {
            f.check("user", &a.user, &b.user);
            f.check("password", &a.pass, &b.pass);
        }
        (a, b) => f.check("account", &a.is_some(), &b.is_some()),
    }
}

fn hysteria2(f: &mut Fields, a: &Hysteria2Spec, b: &Hysteria2Spec) {
    f.check("server", &a.server, &b.server);
    f.check("sni", &a.server_name, &b.server_name);
    f.check("password", &a.password, &b.password);
    f.check("tls verification", &a.verify, &b.verify);
    f.check("alpn", &a.alpn, &b.alpn);
    f.check("obfs", &a.obfs, &b.obfs);
    f.check(
        "max concurrent streams",
        &a.max_concurrent_streams,
        &b.max_concurrent_streams,
    );
    f.check(
        "bandwidth",
        &(a.up_bps, a.down_bps),
        &(b.up_bps, b.down_bps),
    );
    f.check("address family", &a.address_family, &b.address_family);
}

fn wireguard(f: &mut Fields, a: &WireguardSpec, b: &WireguardSpec) {
    f.check("private key", &a.private_key, &b.private_key);
    f.check("peer public key", &a.peer_public_key, &b.peer_public_key);
    f.check("preshared key", &a.preshared_key, &b.preshared_key);
    f.check("endpoint", &a.endpoint, &b.endpoint);
    f.check(
        "endpoint address family",
        &a.endpoint_address_family,
        &b.endpoint_address_family,
    );
    f.check("addresses", &a.addresses, &b.addresses);
    f.check("mtu", &a.mtu, &b.mtu);
    f.check("keepalive", &a.keepalive, &b.keepalive);
    f.check("reserved", &a.reserved, &b.reserved);
    f.check("address family", &a.address_family, &b.address_family);
}

/// Why a balancer's own spec makes it rebuilt; members rebuilt are added by
/// the planner.
pub(super) fn balancer(a: &BalancerSpec, b: &BalancerSpec) -> Vec<Change> {
    let mut f = Fields::default();
    f.check("members", &a.members, &b.members);
    f.check("strategy", &a.strategy, &b.strategy);
    f.check("probe interval", &a.probe_interval, &b.probe_interval);
    f.check("probe timeout", &a.probe_timeout, &b.probe_timeout);
    f.finish(a != b)
}

/// Why an inbound is rebuilt; empty when its spec is unchanged.
pub(super) fn inbound(a: &InboundSpec, b: &InboundSpec) -> Vec<Change> {
    use InboundProtocol as P;
    if a == b {
        return Vec::new();
    }
    let mut f = Fields::default();
    f.check("listen", &a.listen, &b.listen);
    f.check("sniff", &a.sniff, &b.sniff);
    let (pa, pb) = (&a.protocol, &b.protocol);
    if pa.name() != pb.name() {
        f.0.push(Change::Protocol {
            from: pa.name(),
            to: pb.name(),
        });
        return f.0;
    }
    match (pa, pb) {
        (
            P::Socks {
                accounts: a,
                udp: ua,
                tls: ta,
            },
            P::Socks {
                accounts: b,
                udp: ub,
                tls: tb,
            },
        ) => {
            f.check("accounts", a, b);
            f.check("udp", ua, ub);
            server_tls(&mut f, ta.as_ref(), tb.as_ref());
        }
        (
            P::Http {
                accounts: a,
                tls: ta,
            },
            P::Http {
                accounts: b,
                tls: tb,
            },
        ) => {
            f.check("accounts", a, b);
            server_tls(&mut f, ta.as_ref(), tb.as_ref());
        }
        (
            P::Trojan {
                passwords: a,
                transport: ta,
                fallback: fa,
            },
            P::Trojan {
                passwords: b,
                transport: tb,
                fallback: fb,
            },
        ) => {
            f.check("passwords", a, b);
            server_transport(&mut f, ta, tb);
            f.check("fallback", fa, fb);
        }
        (
            P::Vless {
                ids: a,
                transport: ta,
                fallback: fa,
            },
            P::Vless {
                ids: b,
                transport: tb,
                fallback: fb,
            },
        ) => {
            f.check("ids", a, b);
            server_transport(&mut f, ta, tb);
            f.check("fallback", fa, fb);
        }
        (
            P::Vmess {
                ids: a,
                transport: ta,
            },
            P::Vmess {
                ids: b,
                transport: tb,
            },
        ) => {
            f.check("ids", a, b);
            server_transport(&mut f, ta, tb);
        }
        (
            P::Shadowsocks {
                method: ma,
                password: a,
                udp: ua,
            },
            P::Shadowsocks {
                method: mb,
                password: b,
                udp: ub,
            },
        ) => {
            f.check("method", ma, mb);
            f.check("password", a, b);
            f.check("udp", ua, ub);
        }
        (
            P::Ss2022 {
                method: ma,
                psk: a,
                users: sa,
                udp: ua,
            },
            P::Ss2022 {
                method: mb,
                psk: b,
                users: sb,
                udp: ub,
            },
        ) => {
            f.check("method", ma, mb);
            f.check("psk", a, b);
            f.check("users", sa, sb);
            f.check("udp", ua, ub);
        }
        (
            P::Hysteria2 {
                tls: ta,
                passwords: a,
                obfs: oa,
                masquerade: ma,
                up_bps: ua,
                down_bps: da,
            },
            P::Hysteria2 {
                tls: tb,
                passwords: b,
                obfs: ob,
                masquerade: mb,
                up_bps: ub,
                down_bps: db,
            },
        ) => {
            server_tls(&mut f, Some(ta), Some(tb));
            f.check("passwords", a, b);
            f.check("obfs", oa, ob);
            f.check("masquerade", ma, mb);
            f.check("up_mbps", ua, ub);
            f.check("down_mbps", da, db);
        }
        _ => {}
    }
    f.finish(true)
}

fn server_transport(f: &mut Fields, a: &InboundTransport, b: &InboundTransport) {
    match (&a.shape, &b.shape) {
        (ServerShape::Ws { path: pa, host: ha }, ServerShape::Ws { path: pb, host: hb }) => {
            f.check("ws path", pa, pb);
            f.check("ws host", ha, hb);
        }
        (ServerShape::Grpc { service_name: sa }, ServerShape::Grpc { service_name: sb }) => {
            f.check("grpc service name", sa, sb)
        }
        (sa, sb) => f.check("transport", sa, sb),
    }
    server_tls(f, a.tls.as_ref(), b.tls.as_ref());
}

/// A server's TLS: turned on or off, or which of its parts changed. The key
/// is a secret, so it is named and never shown.
fn server_tls(f: &mut Fields, a: Option<&ServerTls>, b: Option<&ServerTls>) {
    match (a, b) {
        (Some(a), Some(b)) => {
            f.check(
                "certificate",
                &(&a.cert_path, &a.cert_pem),
                &(&b.cert_path, &b.cert_pem),
            );
            f.check("private key", &a.key_pem, &b.key_pem);
            f.check("alpn", &a.alpn, &b.alpn);
        }
        (a, b) => f.check("tls", &a.is_some(), &b.is_some()),
    }
}
