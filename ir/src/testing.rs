//! Small spec builders for the planner's and the state file's tests.

use std::net::SocketAddr;
use std::time::Duration;

use crate::route::RouteTable;
use crate::spec::*;

pub fn spec(outbounds: Vec<OutboundSpec>, balancers: Vec<BalancerSpec>) -> Spec {
    let default = outbounds
        .first()
        .map_or_else(|| "direct".to_owned(), |o| o.tag.clone());
    Spec {
        inbounds: vec![socks_in("socks-in", 1080)],
        outbounds,
        balancers,
        route: RouteTable::new(vec![], default).expect("a table without rules compiles"),
        dns: DnsSpec::System,
        socket: SocketPolicy::default(),
        limits: Limits::default(),
    }
}

pub fn outbound(tag: &str, protocol: OutboundProtocol) -> OutboundSpec {
    OutboundSpec {
        tag: tag.into(),
        protocol,
        drain: DrainPolicy::Keep,
    }
}

pub fn freedom(tag: &str) -> OutboundSpec {
    outbound(
        tag,
        OutboundProtocol::Freedom {
            address_family: AddressFamily::Auto,
        },
    )
}

pub fn blackhole(tag: &str) -> OutboundSpec {
    outbound(tag, OutboundProtocol::Blackhole)
}

pub fn upstream(server: &str) -> Upstream {
    Upstream {
        server: HostPort {
            host: Host::Domain(server.into()),
            port: 443,
        },
        transport: TransportSpec {
            shape: StreamShape::Tls,
            tls: Some(TlsSpec {
                server_name: server.into(),
                verify: Verify::System,
                alpn: vec![],
            }),
            address_family: AddressFamily::Auto,
        },
    }
}

pub fn trojan(tag: &str, server: &str, password: &str) -> OutboundSpec {
    outbound(
        tag,
        OutboundProtocol::Trojan {
            upstream: upstream(server),
            password: Secret(password.into()),
        },
    )
}

pub fn vless(tag: &str, server: &str, id: u8) -> OutboundSpec {
    outbound(
        tag,
        OutboundProtocol::Vless {
            upstream: upstream(server),
            id: Secret(Uuid([id; 16])),
        },
    )
}

pub fn balancer(tag: &str, members: &[&str]) -> BalancerSpec {
    BalancerSpec {
        tag: tag.into(),
        members: members.iter().map(|m| (*m).to_owned()).collect(),
        strategy: Strategy::Failover,
        probe_interval: Strategy::DEFAULT_PROBE_INTERVAL,
        probe_timeout: Strategy::DEFAULT_PROBE_TIMEOUT,
    }
}

pub fn socks_in(tag: &str, port: u16) -> InboundSpec {
    InboundSpec {
        tag: tag.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        sniff: false,
        protocol: InboundProtocol::Socks {
            accounts: vec![],
            udp: true,
            tls: None,
        },
    }
}

pub fn dns(server: [u8; 4]) -> DnsSpec {
    DnsSpec::Single {
        servers: vec![DnsServer::Plain(SocketAddr::from((server, 53)))],
    }
}

/// A deterministic xorshift generator: reproducible random specs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A random spec over a small alphabet of tags, so that consecutive specs
/// share, change, drop and re-add tags often. Members are always proxy
/// outbounds of the same spec, as validation requires.
pub fn random_spec(rng: &mut Rng) -> Spec {
    const TAGS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
    let mut outbounds = Vec::new();
    for tag in TAGS {
        if !rng.chance(60) {
            continue;
        }
        let server = ["one.example", "two.example"][rng.below(2) as usize];
        let mut o = match rng.below(5) {
            0 => freedom(tag),
            1 => blackhole(tag),
            2 => vless(tag, server, rng.below(2) as u8),
            _ => trojan(tag, server, ["pw1", "pw2"][rng.below(2) as usize]),
        };
        o.drain = [
            DrainPolicy::Keep,
            DrainPolicy::Close,
            DrainPolicy::CloseAfter(Duration::from_secs(30)),
        ][rng.below(3) as usize];
        outbounds.push(o);
    }
    let proxies: Vec<&str> = outbounds
        .iter()
        .filter(|o| o.protocol.probe_target().is_some())
        .map(|o| o.tag.as_str())
        .collect();
    let mut balancers = Vec::new();
    for tag in ["lb1", "lb2"] {
        if proxies.is_empty() || !rng.chance(60) {
            continue;
        }
        let members: Vec<&str> = proxies.iter().copied().filter(|_| rng.chance(60)).collect();
        let members = if members.is_empty() {
            vec![proxies[0]]
        } else {
            members
        };
        let mut b = balancer(tag, &members);
        if rng.chance(30) {
            b.strategy = Strategy::RoundRobin;
        }
        balancers.push(b);
    }
    let mut s = spec(outbounds, balancers);
    s.inbounds = (0..rng.below(3))
        .map(|i| {
            socks_in(
                ["in0", "in1", "in2"][i as usize],
                1080 + rng.below(2) as u16,
            )
        })
        .collect();
    if rng.chance(30) {
        s.dns = dns([10, 0, 0, 1 + rng.below(2) as u8]);
    }
    if rng.chance(20) {
        s.route = RouteTable::new(s.route.rules().to_vec(), "changed".into())
            .expect("the rules compiled before");
    }
    if rng.chance(10) {
        s.socket.mark = Some(1);
    }
    if rng.chance(10) {
        s.limits.max_connections = 1_024;
    }
    s
}
