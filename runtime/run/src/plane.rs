//! The route plane: the route table with every target it names resolved to
//! a built outbound or balancer, the resolver its domain strategy resolves
//! names with, and the listening addresses of our own inbounds, which no
//! flow may be sent to. One immutable plane per apply, published with a
//! single `ArcSwap` store; every flow and every UDP packet loads the current
//! one, so a reload updates all three at once.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use etemenanki_ir::route::RouteTable;

use crate::balancer::Balancer;
use crate::id::OutboundId;
use crate::outbound::Outbound;
use crate::own_inbounds::OwnInbounds;
use crate::resolve::Resolver;

#[derive(Clone)]
pub enum Target {
    Outbound(Arc<Outbound>),
    Balancer(Arc<Balancer>),
}

impl Target {
    pub fn id(&self) -> &OutboundId {
        match self {
            Target::Outbound(o) => &o.id,
            Target::Balancer(b) => &b.id,
        }
    }

    /// The outbound a flow opens on: the outbound itself, or the member a
    /// balancer selects now (preferring `prefer` under round_robin).
    pub fn resolve(&self, prefer: Option<&OutboundId>) -> Arc<Outbound> {
        match self {
            Target::Outbound(o) => o.clone(),
            Target::Balancer(b) => b.select_preferring(prefer),
        }
    }
}

pub struct Plane {
    route: RouteTable,
    /// The target of each rule, in rule order.
    rule_targets: Vec<Target>,
    default: Target,
    /// The resolver of destinations (freedom's), for a domain strategy that
    /// routes names by their addresses; `None` before the first apply.
    resolver: Option<Resolver>,
    own_inbounds: OwnInbounds,
    /// The internal DNS service, which the DNS inbound asks.
    dns: Option<crate::dns::Service>,
}

/// What a route lookup chose.
pub struct Routed<'p> {
    pub target: &'p Target,
    /// The 1-based source line of the rule, `None` for the default.
    pub line: Option<u32>,
}

impl Plane {
    /// The plane before the first apply: no inbound accepts yet, so nothing
    /// routes on it; its default swallows.
    pub fn empty() -> Plane {
        Plane {
            route: RouteTable::new(Vec::new(), String::new()).expect("an empty table compiles"),
            rule_targets: Vec::new(),
            default: Target::Outbound(Arc::new(Outbound::blackhole(OutboundId::new("", 0)))),
            resolver: None,
            own_inbounds: OwnInbounds::default(),
            dns: None,
        }
    }

    /// Resolves every tag the route table names among `targets`.
    pub fn new(route: RouteTable, targets: &HashMap<String, Target>) -> io::Result<Plane> {
        let find = |tag: &str| {
            targets.get(tag).cloned().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the route names an unknown target {tag}"),
                )
            })
        };
        let rule_targets = route
            .rules()
            .iter()
            .map(|r| find(&r.target))
            .collect::<io::Result<_>>()?;
        let default = find(route.default())?;
        Ok(Plane {
            route,
            rule_targets,
            default,
            resolver: None,
            own_inbounds: OwnInbounds::default(),
            dns: None,
        })
    }

    /// This plane, resolving names for its domain strategy with `resolver`.
    pub fn with_resolver(mut self, resolver: Resolver) -> Plane {
        self.resolver = Some(resolver);
        self
    }

    /// This plane, refusing flows to the inbounds listening on `listen`.
    pub fn with_own_inbounds(mut self, listen: impl IntoIterator<Item = SocketAddr>) -> Plane {
        self.own_inbounds = OwnInbounds::new(listen);
        self
    }

    /// This plane, answering the DNS inbound with `service`.
    pub fn with_dns_service(mut self, service: crate::dns::Service) -> Plane {
        self.dns = Some(service);
        self
    }

    /// The DNS service; `None` before the first apply.
    pub fn dns_service(&self) -> Option<&crate::dns::Service> {
        self.dns.as_ref()
    }

    pub fn table(&self) -> &RouteTable {
        &self.route
    }

    pub fn resolver(&self) -> Option<&Resolver> {
        self.resolver.as_ref()
    }

    pub fn own_inbounds(&self) -> &OwnInbounds {
        &self.own_inbounds
    }

    /// The target of the rule at `rule` (0-based), or the default.
    pub fn routed(&self, rule: Option<usize>) -> Routed<'_> {
        match rule {
            Some(i) => Routed {
                target: &self.rule_targets[i],
                line: Some(self.route.rules()[i].line),
            },
            None => Routed {
                target: &self.default,
                line: None,
            },
        }
    }
}
