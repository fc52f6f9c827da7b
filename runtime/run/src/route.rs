//! Routing a flow or packet on the compiled route table
//! (`ir::route::RouteTable`, whose lookup cost does not grow with the number
//! of rules or domains): first match in the order written, no match means
//! the default; domain matchers also try the sniffed domain.
//!
//! Before any rule, a destination that is one of our own inbounds is
//! refused (see `own_inbounds.rs`). A TCP flow addressed by name is
//! resolved here when the table's domain strategy wants its addresses
//! ([`route_stream`]), with the plane's resolver, the one freedom dials
//! with, and a direct dial goes to those addresses. A UDP packet is routed
//! synchronously ([`route_datagram`]): when the strategy wants a name's
//! addresses, the fan-out looks them up beside its other work (waiting
//! would stall every packet behind it) and routes the packet once they are
//! known.

use std::borrow::Cow;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::route::{FlowKey, Host, Network};
use etemenanki_proto::Address;

use crate::connect::Flow;
use crate::outbound::Outbound;
use crate::own_inbounds::Refused;
use crate::plane::{Plane, Routed};

/// What a flow or packet is routed by.
pub struct RouteInput<'a> {
    pub destination: &'a Address,
    pub sniffed: Option<&'a str>,
    pub inbound_tag: &'a str,
    pub source: Option<IpAddr>,
    pub network: Network,
}

/// The table's key for `input`; `name` and `sniffed` are the destination
/// name and the sniffed domain in lower case, as the table holds names (a
/// client may send any case). A name that is an IP literal is an IP, even
/// in an address no decoder normalised.
fn flow_key<'k>(
    input: &'k RouteInput<'_>,
    name: Option<&'k str>,
    sniffed: Option<&'k str>,
) -> FlowKey<'k> {
    let destination = match input.destination {
        Address::Ip(addr) => Host::Ip(addr.ip()),
        Address::Domain(text, _) => match Host::parse(text) {
            Some(Host::Ip(ip)) => Host::Ip(ip),
            _ => Host::Domain(name.unwrap_or(text)),
        },
    };
    FlowKey {
        network: input.network,
        destination,
        port: input.destination.port(),
        source: input.source,
        inbound_tag: Some(input.inbound_tag),
        sniffed,
    }
}

/// Refuses a TCP flow addressed to one of our own inbounds, for an inbound
/// that answers the client before it routes (to sniff the first bytes), so
/// the refusal is still a refused request. [`route_stream`] checks again.
pub fn refuse_own_inbound(plane: &ArcSwap<Plane>, destination: &Address) -> io::Result<()> {
    match destination {
        Address::Ip(addr) => Ok(plane.load().own_inbounds().check_local(*addr)?),
        Address::Domain(..) => Ok(()),
    }
}

/// Why [`route_datagram`] did not route a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrouted {
    /// The destination is one of our own inbounds.
    Refused(Refused),
    /// The domain strategy wants the addresses of the packet's name, which
    /// the caller has not looked up yet.
    Resolve,
}

/// Routes one UDP packet for the fan-out, synchronously: a packet to one
/// of our own inbounds is refused, anything else is routed by the table. A
/// name the domain strategy wants the addresses of is routed by them when
/// the caller has them (`addresses`, looked up earlier), and is
/// [`Unrouted::Resolve`] otherwise; it is refused if one of them is our own
/// inbound. Allocates nothing but the lower-case copy of a name written in
/// upper case.
pub fn route_datagram<'p>(
    plane: &'p Plane,
    input: &RouteInput<'_>,
    addresses: Option<&[IpAddr]>,
) -> Result<Routed<'p>, Unrouted> {
    let name = input.destination.domain().map(lowercase);
    let key = flow_key(input, name.as_deref(), None);
    if let Host::Ip(ip) = key.destination {
        let own = plane.own_inbounds();
        own.check(SocketAddr::new(ip, key.port))
            .map_err(Unrouted::Refused)?;
    }
    let table = plane.table();
    let decision = table.route(&key);
    if !table.wants_addresses(&key, &decision) {
        return Ok(plane.routed(decision.rule));
    }
    let Some(addresses) = addresses else {
        return Err(Unrouted::Resolve);
    };
    for ip in addresses {
        plane
            .own_inbounds()
            .check(SocketAddr::new(*ip, key.port))
            .map_err(Unrouted::Refused)?;
    }
    let (decision, _) = table.route_resolved(&key, decision, addresses);
    Ok(plane.routed(decision.rule))
}

/// Routes a TCP flow on the current plane and picks the outbound it opens
/// on (a balancer picks its member here, so a member that went down is
/// skipped from the next flow). A flow to one of our own inbounds is
/// refused with `PermissionDenied`; a name the domain strategy wants the
/// addresses of is resolved, refused if one of them is our own inbound, and
/// routed again by them. A name that fails to resolve keeps the decision of
/// its name: the dial will fail on it the same way.
///
/// Returns the outbound and the addresses the name was routed by, when it
/// was resolved: a direct dial goes to exactly those, so a name whose
/// answer changes between two lookups (DNS rebinding) cannot reach an
/// address the rules refused.
pub async fn route_stream(
    plane: &Plane,
    inbound_tag: &str,
    flow: &Flow,
) -> io::Result<(Arc<Outbound>, Option<Vec<IpAddr>>)> {
    let own = plane.own_inbounds();
    let input = RouteInput {
        destination: &flow.destination,
        sniffed: flow.sniffed.as_deref(),
        inbound_tag,
        source: flow.source,
        network: Network::Tcp,
    };
    let name = input.destination.domain().map(lowercase);
    let sniffed = input.sniffed.map(lowercase);
    let key = flow_key(&input, name.as_deref(), sniffed.as_deref());
    if let Host::Ip(ip) = key.destination {
        own.check_local(SocketAddr::new(ip, key.port))?;
    }
    let table = plane.table();
    let mut decision = table.route(&key);
    let mut resolved = None;
    let mut routed_by = None;
    if let (true, Some(resolver), Host::Domain(host)) = (
        table.wants_addresses(&key, &decision),
        plane.resolver(),
        key.destination,
    ) {
        match resolver.lookup(host).await {
            Ok(addresses) => {
                for ip in &addresses {
                    own.check_local(SocketAddr::new(*ip, key.port))?;
                }
                (decision, resolved) = table.route_resolved(&key, decision, &addresses);
                routed_by = Some(addresses);
            }
            Err(e) => tracing::debug!(
                "route: resolving {host} for the domain strategy failed ({e}); routed by its name"
            ),
        }
    }
    let routed = plane.routed(decision.rule);
    let outbound = routed.target.resolve(None);
    tracing::debug!(
        "tcp {} -> {} (sniffed {:?}) via {} by {}{}",
        flow.source
            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
        flow.destination,
        flow.sniffed,
        outbound.id,
        routed.line.map_or_else(
            || "the default".to_owned(),
            |l| format!("the rule on line {l}")
        ),
        resolved.map_or_else(String::new, |ip| format!(" (resolved {ip})")),
    );
    Ok((outbound, routed_by))
}

fn lowercase(name: &str) -> Cow<'_, str> {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etemenanki_ir::route::{Cidr, DomainStrategy, PortRange, RouteTable, Rule};

    /// The chosen target tag and the index of the rule that chose it (`None`
    /// for the default), by the table alone: the tests' view of a lookup.
    fn pick<'t>(table: &'t RouteTable, input: &RouteInput<'_>) -> (&'t str, Option<usize>) {
        let name = input.destination.domain().map(lowercase);
        let sniffed = input.sniffed.map(lowercase);
        let decision = table.route(&flow_key(input, name.as_deref(), sniffed.as_deref()));
        (decision.target, decision.rule)
    }

    use crate::id::OutboundId;
    use crate::plane::Target;

    /// `geoip private -> block`, default `direct`, both blackholes (only
    /// the choice is looked at), resolving with a resolver that knows no
    /// server: `localhost` still resolves, to loopback (RFC 6761).
    fn guarded(strategy: DomainStrategy, own: &[&str]) -> ArcSwap<Plane> {
        let table = RouteTable::new(
            vec![Rule {
                target: "block".into(),
                line: 1,
                geoip: vec!["private".into()],
                ..Rule::default()
            }],
            "direct".into(),
        )
        .unwrap()
        .with_domain_strategy(strategy);
        let targets = ["block", "direct"]
            .into_iter()
            .map(|tag| {
                let outbound = Outbound::blackhole(OutboundId::new(tag, 1));
                (tag.to_owned(), Target::Outbound(Arc::new(outbound)))
            })
            .collect();
        let dns = crate::dns::no_servers();
        let plane = Plane::new(table, &targets)
            .unwrap()
            .with_resolver(dns.destinations)
            .with_own_inbounds(own.iter().map(|a| a.parse().unwrap()));
        ArcSwap::from_pointee(plane)
    }

    async fn stream_to(plane: &ArcSwap<Plane>, destination: Address) -> io::Result<String> {
        let flow = Flow {
            destination,
            sniffed: None,
            source: None,
        };
        route_stream(&plane.load_full(), "in", &flow)
            .await
            .map(|(o, _)| o.id.to_string())
    }

    fn domain(name: &str, port: u16) -> Address {
        Address::Domain(name.into(), port)
    }

    #[tokio::test]
    async fn a_tcp_flow_to_our_own_inbound_is_refused_before_routing() {
        let plane = guarded(DomainStrategy::AsIs, &["0.0.0.0:1080"]);
        for to in [
            Address::Ip("127.0.0.1:1080".parse().unwrap()),
            Address::Ip("[::ffff:127.0.0.1]:1080".parse().unwrap()),
            Address::Ip("0.0.0.0:1080".parse().unwrap()),
            domain("127.0.0.1", 1080),
        ] {
            let refused = stream_to(&plane, to.clone()).await.unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{to}");
            assert_eq!(
                refused.to_string(),
                "refusing a flow to this proxy's own inbound 0.0.0.0:1080"
            );
        }
        assert_eq!(
            stream_to(&plane, Address::Ip("127.0.0.1:1081".parse().unwrap()))
                .await
                .unwrap(),
            "block@v1"
        );
    }

    #[tokio::test]
    async fn a_domain_that_is_an_ip_literal_routes_as_an_ip_even_unnormalised() {
        let plane = guarded(DomainStrategy::AsIs, &[]);
        for name in ["127.0.0.1", "[::1]", "::ffff:10.0.0.1"] {
            assert_eq!(
                stream_to(&plane, domain(name, 80)).await.unwrap(),
                "block@v1",
                "{name}"
            );
        }
    }

    #[tokio::test]
    async fn ip_if_non_match_blocks_a_name_that_resolves_to_a_private_address() {
        let as_is = guarded(DomainStrategy::AsIs, &[]);
        assert_eq!(
            stream_to(&as_is, domain("localhost", 80)).await.unwrap(),
            "direct@v1"
        );
        for strategy in [DomainStrategy::IpIfNonMatch, DomainStrategy::IpOnDemand] {
            let plane = guarded(strategy, &[]);
            assert_eq!(
                stream_to(&plane, domain("LocalHost", 80)).await.unwrap(),
                "block@v1",
                "{strategy}"
            );
        }
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_our_own_inbound_is_refused() {
        let plane = guarded(DomainStrategy::IpIfNonMatch, &["127.0.0.1:1080"]);
        let refused = stream_to(&plane, domain("localhost", 1080))
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_udp_packet_to_our_own_inbound_is_refused_and_a_name_waits_for_its_addresses() {
        let plane = guarded(DomainStrategy::IpIfNonMatch, &["[::]:1080"]);
        let plane = plane.load();
        let input = |destination| RouteInput {
            destination,
            sniffed: None,
            inbound_tag: "in",
            source: None,
            network: Network::Udp,
        };
        let own = Address::Ip("[::1]:1080".parse().unwrap());
        assert_eq!(
            route_datagram(&plane, &input(&own), None).err(),
            Some(Unrouted::Refused(Refused {
                inbound: "[::]:1080".parse().unwrap()
            }))
        );
        let lan = Address::Ip("192.168.1.1:53".parse().unwrap());
        let routed = route_datagram(&plane, &input(&lan), None).unwrap();
        assert_eq!(routed.target.id().to_string(), "block@v1");
        // A name the strategy wants resolved waits for its addresses, and
        // is routed by them once the caller has them.
        let name = domain("localhost", 53);
        assert_eq!(
            route_datagram(&plane, &input(&name), None).err(),
            Some(Unrouted::Resolve)
        );
        let loopback = ["127.0.0.1".parse().unwrap()];
        let routed = route_datagram(&plane, &input(&name), Some(&loopback)).unwrap();
        assert_eq!(routed.target.id().to_string(), "block@v1");
        let global = ["1.1.1.1".parse().unwrap()];
        let routed = route_datagram(&plane, &input(&name), Some(&global)).unwrap();
        assert_eq!(routed.target.id().to_string(), "direct@v1");
        // Under as_is a name routes as a name, and nothing is looked up.
        let as_is = guarded(DomainStrategy::AsIs, &[]);
        let as_is = as_is.load();
        let routed = route_datagram(&as_is, &input(&name), None).unwrap();
        assert_eq!(routed.target.id().to_string(), "direct@v1");
    }

    fn table() -> RouteTable {
        RouteTable::new(
            vec![
                Rule {
                    target: "lan".into(),
                    cidr: vec![Cidr::parse("10.0.0.0/8").unwrap()],
                    ..Rule::default()
                },
                Rule {
                    target: "web".into(),
                    domain_suffix: vec!["example.com".into()],
                    port: vec![PortRange {
                        start: 443,
                        end: 443,
                    }],
                    ..Rule::default()
                },
                Rule {
                    target: "udp".into(),
                    network: Some(Network::Udp),
                    ..Rule::default()
                },
                Rule {
                    target: "tagged".into(),
                    inbound_tag: vec!["special".into()],
                    ..Rule::default()
                },
                Rule {
                    target: "office".into(),
                    source_cidr: vec![Cidr::parse("192.168.0.0/16").unwrap()],
                    ..Rule::default()
                },
            ],
            "direct".into(),
        )
        .unwrap()
    }

    fn pick_for(
        dest: &str,
        sniffed: Option<&str>,
        tag: &str,
        source: Option<&str>,
        network: Network,
    ) -> &'static str {
        let table = Box::leak(Box::new(table()));
        let destination = Address::parse_host_port(dest).unwrap();
        let input = RouteInput {
            destination: &destination,
            sniffed,
            inbound_tag: tag,
            source: source.map(|s| s.parse().unwrap()),
            network,
        };
        pick(table, &input).0
    }

    #[test]
    fn first_match_wins_and_no_match_is_the_default() {
        assert_eq!(
            pick_for("10.1.2.3:443", None, "in", None, Network::Udp),
            "lan"
        );
        assert_eq!(
            pick_for("1.1.1.1:80", None, "in", None, Network::Tcp),
            "direct"
        );
    }

    #[test]
    fn every_non_destination_condition_must_hold() {
        assert_eq!(
            pick_for("www.example.com:443", None, "in", None, Network::Tcp),
            "web"
        );
        assert_eq!(
            pick_for("www.example.com:80", None, "in", None, Network::Tcp),
            "direct"
        );
        assert_eq!(
            pick_for("badexample.com:443", None, "in", None, Network::Tcp),
            "direct"
        );
    }

    #[test]
    fn the_sniffed_domain_routes_an_ip_addressed_flow() {
        assert_eq!(
            pick_for("1.1.1.1:443", Some("EXAMPLE.com"), "in", None, Network::Tcp),
            "web"
        );
    }

    #[test]
    fn network_inbound_tag_and_source_are_conditions() {
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", None, Network::Udp),
            "udp"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "special", None, Network::Tcp),
            "tagged"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", Some("192.168.1.1"), Network::Tcp),
            "office"
        );
        assert_eq!(
            pick_for(
                "1.1.1.1:53",
                None,
                "in",
                Some("::ffff:192.168.1.1"),
                Network::Tcp
            ),
            "office"
        );
        assert_eq!(
            pick_for("1.1.1.1:53", None, "in", Some("172.16.0.1"), Network::Tcp),
            "direct"
        );
    }
}
