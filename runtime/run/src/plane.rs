//! The route plane: the route table with every target it names resolved to
//! a built outbound or balancer. One immutable plane per apply, published
//! with a single `ArcSwap` store; every flow and every UDP packet loads the
//! current one.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use etemenanki_ir::route::RouteTable;

use crate::balancer::Balancer;
use crate::id::OutboundId;
use crate::outbound::Outbound;
use crate::route::{pick, RouteInput};

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
        })
    }

    pub fn route(&self, input: &RouteInput<'_>) -> Routed<'_> {
        match pick(&self.route, input).1 {
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
