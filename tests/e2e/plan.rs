//! Specs written directly with etemenanki-ir's types, for plans the
//! compiler would refuse or need not see (a corrupt file, a limit of one
//! connection, a one-second handshake deadline). Every inbound listens on
//! port 0 unless a test says otherwise; the runtime logs what it bound.

use std::net::{Ipv4Addr, SocketAddr};

use etemenanki_ir::route::{RouteTable, Rule};
use etemenanki_ir::spec::*;

/// 127.0.0.1 on port 0: any free port, chosen by the kernel at bind.
pub fn any_port() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

pub fn socks_inbound(tag: &str, udp: bool) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: any_port(),
        sniff: false,
        protocol: InboundProtocol::Socks {
            accounts: vec![],
            udp,
            tls: None,
        },
    }
}

pub fn http_inbound(tag: &str) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: any_port(),
        sniff: false,
        protocol: InboundProtocol::Http {
            accounts: vec![],
            tls: None,
        },
    }
}

pub fn dns_inbound(tag: &str) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: any_port(),
        sniff: false,
        protocol: InboundProtocol::Dns,
    }
}

pub fn freedom(tag: &str) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Freedom {
            address_family: AddressFamily::Auto,
        },
        drain: DrainPolicy::Keep,
    }
}

pub fn blackhole(tag: &str) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Blackhole,
        drain: DrainPolicy::Keep,
    }
}

pub fn socks_outbound(tag: &str, server: SocketAddr) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol: OutboundProtocol::Socks {
            upstream: Upstream {
                server: HostPort {
                    host: Host::Ip(server.ip()),
                    port: server.port(),
                },
                transport: TransportSpec {
                    shape: StreamShape::Tcp,
                    tls: None,
                    address_family: AddressFamily::Auto,
                },
            },
            account: None,
        },
        drain: DrainPolicy::Keep,
    }
}

pub fn http_outbound(tag: &str, server: SocketAddr) -> OutboundSpec {
    let mut spec = socks_outbound(tag, server);
    let OutboundProtocol::Socks { upstream, account } = spec.protocol else {
        unreachable!()
    };
    spec.protocol = OutboundProtocol::Http { upstream, account };
    spec
}

pub fn rule(target: &str) -> Rule {
    Rule {
        target: target.into(),
        line: 1,
        ..Rule::default()
    }
}

pub fn spec(
    inbounds: Vec<InboundSpec>,
    outbounds: Vec<OutboundSpec>,
    rules: Vec<Rule>,
    default: &str,
) -> Spec {
    Spec {
        inbounds,
        outbounds,
        balancers: vec![],
        route: RouteTable::new(rules, default.into()).expect("a valid route table"),
        dns: DnsSpec::System,
        socket: SocketPolicy::default(),
        limits: Limits::default(),
    }
}

/// `spec` as a plan file's bytes.
pub fn encode(spec: &Spec) -> Vec<u8> {
    etemenanki_ir::encode::encode(spec, b"test", "test")
}
