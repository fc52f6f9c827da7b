//! The planner: what an apply builds, reuses and drains.
//!
//! [`plan`] is a pure, deterministic function from the [`DeployedState`] (the
//! running spec, the version of every tag ever deployed and the epoch) and a
//! new [`Spec`] to a [`Plan`]. `etc plan` calls it to preview a reload and the
//! runtime calls the very same function when it applies one, so the preview
//! is what happens.
//!
//! The rules:
//!
//! - an unchanged spec is reused at its running version; a change of drain
//!   policy alone is not a change;
//! - a changed outbound is built at the next version and its running version
//!   drained, with the policy the new configuration gives that tag; a removed
//!   outbound is drained with the policy it was deployed with;
//! - a changed DNS spec (or socket policy) rebuilds every outbound that uses
//!   it, which is every outbound but blackhole;
//! - a balancer is rebuilt exactly when its own spec changed or one of its
//!   members was rebuilt, and is never drained: its flows are guarded by their
//!   member's version;
//! - a removed tag keeps its version, so a tag added back is built one past
//!   the last version it ever had and never reuses a version whose flows may
//!   still be draining;
//! - the internal DNS target is rebuilt only with the DNS spec (or the socket
//!   policy its resolvers dial under);
//! - the route plane is republished when the route table (rules, default
//!   and domain strategy, not the source lines the rules were written on)
//!   or the limits changed, or
//!   when any target it holds was built, drained or removed.

mod diff;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;

use crate::route::{RouteTable, Rule};
use crate::spec::{DrainPolicy, Spec};
use crate::state::DeployedState;

pub use diff::Change;
pub use summary::Summary;

/// What an apply does, step by step, and whether it republishes the plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The epoch the apply of this plan produces: the deployed epoch plus one.
    pub epoch: u64,
    /// In apply order: the DNS target, outbounds (each rebuilt one followed by
    /// the drain of its old version), removed outbounds, balancers, inbounds.
    pub steps: Vec<Step>,
    /// Why the route plane is republished; empty when it is not.
    pub publish: Vec<PublishReason>,
}

/// One resource at one version, and what the apply does with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub action: Action,
    pub kind: Kind,
    /// The tag; empty for the internal DNS target, which no spec tag can name.
    pub tag: String,
    /// The version built, reused, drained or removed.
    pub version: u32,
    pub reason: Reason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Built at `Step::version`; `from` is the running version it replaces.
    Build { from: Option<u32> },
    /// The running instance is kept, with everything it holds.
    Reuse,
    /// The old outbound version stops taking new flows; its open flows are
    /// treated by the policy.
    Drain(DrainPolicy),
    /// A balancer or inbound no longer in the spec: a balancer leaves the plane
    /// (its probes stop, its flows drain with their members), an inbound stops
    /// listening.
    Remove,
}

/// What kind of resource a step is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Outbound,
    Balancer,
    Inbound,
    /// The runtime's internal DNS target, which intercepted port-53 flows reach.
    Dns,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Outbound => "outbound",
            Kind::Balancer => "balancer",
            Kind::Inbound => "inbound",
            Kind::Dns => "dns",
        }
    }
}

/// Why a step is what it is. Names what changed, never a value: a secret's
/// value cannot leak through a reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A tag never deployed before.
    New,
    /// A removed tag deployed again, one past the last version it had.
    AddedBack {
        last: u32,
    },
    Unchanged,
    /// Reused: only the drain policy changed, which is not a rebuild.
    DrainPolicyChanged {
        from: DrainPolicy,
        to: DrainPolicy,
    },
    /// Reused: only the users of a proxy-protocol inbound changed (trojan
    /// passwords, vless and vmess ids, shadowsocks-2022 users). The running
    /// inbound keeps its socket and takes the new list; connections of the
    /// users who remain run on, those of removed users end.
    UsersChanged,
    /// Rebuilt, for these reasons (never empty).
    Changed(Vec<Change>),
    /// The drain of a version replaced by a new build.
    Replaced {
        by: u32,
    },
    /// The tag is no longer in the spec.
    Removed,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::New => f.write_str("new"),
            Reason::AddedBack { last } => write!(f, "added back (last deployed as v{last})"),
            Reason::Unchanged => f.write_str("unchanged"),
            Reason::DrainPolicyChanged { from, to } => {
                write!(f, "unchanged; drain policy {from} -> {to}")
            }
            Reason::UsersChanged => f.write_str("users changed; kept, with its connections"),
            Reason::Changed(changes) => {
                for (i, change) in changes.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{change}")?;
                }
                Ok(())
            }
            Reason::Replaced { by } => write!(f, "replaced by v{by}"),
            Reason::Removed => f.write_str("removed"),
        }
    }
}

/// Why the route plane is republished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PublishReason {
    /// The route table changed.
    Route,
    /// The limits and timeouts the plane carries changed.
    Limits,
    /// A target the plane holds (outbound, balancer, DNS target) was built,
    /// drained or removed.
    Targets,
}

impl fmt::Display for PublishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PublishReason::Route => "route changed",
            PublishReason::Limits => "limits changed",
            PublishReason::Targets => "targets changed",
        })
    }
}

impl Plan {
    /// Whether the route plane is republished.
    pub fn publishes(&self) -> bool {
        !self.publish.is_empty()
    }

    /// Whether applying this plan changes anything at all: a step other than
    /// the reuse of an unchanged resource, or a new plane.
    pub fn has_changes(&self) -> bool {
        self.publishes()
            || self
                .steps
                .iter()
                .any(|s| !(s.action == Action::Reuse && s.reason == Reason::Unchanged))
    }

    /// Counts computed from [`Plan::steps`] itself, so the summary can never
    /// disagree with the list it sums up.
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }
}

/// Plans the apply of `new` over the deployed `state`.
pub fn plan(state: &DeployedState, new: &Spec) -> Plan {
    let old = &state.spec;
    let versions = &state.versions;
    let mut shared = Vec::new();
    if old.dns != new.dns {
        shared.push(Change::Dns);
    }
    if old.socket != new.socket {
        shared.push(Change::Socket);
    }
    let mut steps = Vec::new();

    steps.push(match shared.is_empty() {
        true => reuse(Kind::Dns, String::new(), versions.dns, Reason::Unchanged),
        false => Step {
            action: Action::Build {
                from: Some(versions.dns),
            },
            kind: Kind::Dns,
            tag: String::new(),
            version: versions.dns + 1,
            reason: Reason::Changed(shared.clone()),
        },
    });

    let mut rebuilt: BTreeSet<&str> = BTreeSet::new();
    for outbound in &new.outbounds {
        let tag = outbound.tag.as_str();
        let last = versions.target(tag);
        let Some(prev) = old.outbound(tag) else {
            rebuilt.insert(tag);
            steps.push(fresh(Kind::Outbound, tag, last));
            continue;
        };
        let running = last.unwrap_or(1);
        let mut changes = diff::outbound(&prev.protocol, &outbound.protocol);
        if outbound.protocol.uses_dns() {
            changes.extend(shared.iter().cloned());
        }
        if changes.is_empty() {
            let reason = match prev.drain == outbound.drain {
                true => Reason::Unchanged,
                false => Reason::DrainPolicyChanged {
                    from: prev.drain,
                    to: outbound.drain,
                },
            };
            steps.push(reuse(Kind::Outbound, tag.to_owned(), running, reason));
            continue;
        }
        rebuilt.insert(tag);
        steps.push(Step {
            action: Action::Build {
                from: Some(running),
            },
            kind: Kind::Outbound,
            tag: tag.to_owned(),
            version: running + 1,
            reason: Reason::Changed(changes),
        });
        steps.push(Step {
            action: Action::Drain(outbound.drain),
            kind: Kind::Outbound,
            tag: tag.to_owned(),
            version: running,
            reason: Reason::Replaced { by: running + 1 },
        });
    }
    for prev in old
        .outbounds
        .iter()
        .filter(|o| new.outbound(&o.tag).is_none())
    {
        steps.push(Step {
            action: Action::Drain(prev.drain),
            kind: Kind::Outbound,
            tag: prev.tag.clone(),
            version: versions.target(&prev.tag).unwrap_or(1),
            reason: Reason::Removed,
        });
    }

    for balancer in &new.balancers {
        let tag = balancer.tag.as_str();
        let last = versions.target(tag);
        let Some(prev) = old.balancer(tag) else {
            steps.push(fresh(Kind::Balancer, tag, last));
            continue;
        };
        let mut changes = diff::balancer(prev, balancer);
        let mut seen = BTreeSet::new();
        for member in &balancer.members {
            if rebuilt.contains(member.as_str()) && seen.insert(member.as_str()) {
                changes.push(Change::Member(member.clone()));
            }
        }
        steps.push(rebuild_or_reuse(
            Kind::Balancer,
            tag,
            last.unwrap_or(1),
            changes,
        ));
    }
    for prev in old
        .balancers
        .iter()
        .filter(|b| new.balancer(&b.tag).is_none())
    {
        steps.push(removal(
            Kind::Balancer,
            &prev.tag,
            versions.target(&prev.tag),
        ));
    }

    for inbound in &new.inbounds {
        let tag = inbound.tag.as_str();
        let last = versions.inbound(tag);
        let Some(prev) = old.inbound(tag) else {
            steps.push(fresh(Kind::Inbound, tag, last));
            continue;
        };
        let changes = diff::inbound(prev, inbound);
        if !changes.is_empty() && changes.iter().all(Change::is_users) {
            steps.push(reuse(
                Kind::Inbound,
                tag.to_owned(),
                last.unwrap_or(1),
                Reason::UsersChanged,
            ));
            continue;
        }
        steps.push(rebuild_or_reuse(
            Kind::Inbound,
            tag,
            last.unwrap_or(1),
            changes,
        ));
    }
    for prev in old
        .inbounds
        .iter()
        .filter(|i| new.inbound(&i.tag).is_none())
    {
        steps.push(removal(
            Kind::Inbound,
            &prev.tag,
            versions.inbound(&prev.tag),
        ));
    }

    let mut publish = Vec::new();
    if !same_routes(&old.route, &new.route) {
        publish.push(PublishReason::Route);
    }
    if old.limits != new.limits {
        publish.push(PublishReason::Limits);
    }
    if steps
        .iter()
        .any(|s| s.kind != Kind::Inbound && s.action != Action::Reuse)
    {
        publish.push(PublishReason::Targets);
    }
    Plan {
        epoch: state.epoch + 1,
        steps,
        publish,
    }
}

/// Whether two route tables route every flow alike. The source line a rule
/// was written on is left out: an edit elsewhere in the file moves it without
/// changing what the rule does, and must not make a reload look like a change.
fn same_routes(a: &RouteTable, b: &RouteTable) -> bool {
    a.default() == b.default()
        && a.domain_strategy() == b.domain_strategy()
        && a.rules().len() == b.rules().len()
        && a.rules().iter().zip(b.rules()).all(|(x, y)| {
            Rule {
                line: y.line,
                ..x.clone()
            } == *y
        })
}

fn reuse(kind: Kind, tag: String, version: u32, reason: Reason) -> Step {
    Step {
        action: Action::Reuse,
        kind,
        tag,
        version,
        reason,
    }
}

/// A tag not in the running spec: v1, or one past the last version it had.
fn fresh(kind: Kind, tag: &str, last: Option<u32>) -> Step {
    let (version, reason) = match last {
        Some(last) => (last + 1, Reason::AddedBack { last }),
        None => (1, Reason::New),
    };
    Step {
        action: Action::Build { from: None },
        kind,
        tag: tag.to_owned(),
        version,
        reason,
    }
}

fn rebuild_or_reuse(kind: Kind, tag: &str, running: u32, changes: Vec<Change>) -> Step {
    if changes.is_empty() {
        return reuse(kind, tag.to_owned(), running, Reason::Unchanged);
    }
    Step {
        action: Action::Build {
            from: Some(running),
        },
        kind,
        tag: tag.to_owned(),
        version: running + 1,
        reason: Reason::Changed(changes),
    }
}

fn removal(kind: Kind, tag: &str, version: Option<u32>) -> Step {
    Step {
        action: Action::Remove,
        kind,
        tag: tag.to_owned(),
        version: version.unwrap_or(1),
        reason: Reason::Removed,
    }
}
