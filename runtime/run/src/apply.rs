//! Applying a plan: prepare every build, then commit with one `ArcSwap`
//! store, so a flow sees either the old plan or the new one, never a mix.
//!
//! An apply takes a list of steps (build, reuse, drain or remove, per kind,
//! tag and version) and executes it in two phases. Prepare builds every
//! outbound of a build step, then every balancer over the new and reused
//! outbounds, binds every new inbound, and resolves the route plane; any
//! failure drops what was prepared and leaves the running state exactly as it
//! was. Commit publishes the plane, drains the old versions, moves the
//! probes, and starts and stops inbounds.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::plan::{Action, Kind, Plan, PublishReason, Reason, Step};
use etemenanki_ir::spec::{Limits, Spec};
use etemenanki_ir::state::DeployedState;

use crate::balancer::{Balancer, Member};
use crate::dial::Dialer;
use crate::id::OutboundId;
use crate::inbound::{Inbound, Users};
use crate::outbound::Outbound;
use crate::plane::{Plane, Target};
use crate::resolve::Dns;
use etemenanki_ir::spec::DNS_TARGET;

/// The plan of the first apply: every resource built at version 1, as
/// `DeployedState::initial` records it.
pub fn first_plan(spec: &Spec) -> Plan {
    let build = |kind, tag: &str| Step {
        action: Action::Build { from: None },
        kind,
        tag: tag.to_owned(),
        version: 1,
        reason: Reason::New,
    };
    let mut steps = vec![build(Kind::Dns, "")];
    steps.extend(spec.outbounds.iter().map(|o| build(Kind::Outbound, &o.tag)));
    steps.extend(spec.balancers.iter().map(|b| build(Kind::Balancer, &b.tag)));
    steps.extend(spec.inbounds.iter().map(|i| build(Kind::Inbound, &i.tag)));
    Plan {
        epoch: 0,
        steps,
        publish: vec![PublishReason::Targets],
    }
}

/// A step as `etc plan` shows it: symbol, name, versions and reason, so an
/// operator can hold the log of a reload against its preview.
pub fn describe(step: &Step) -> String {
    let symbol = match step.action {
        Action::Build { from: None } => '+',
        Action::Build { from: Some(_) } => '~',
        Action::Reuse => '=',
        Action::Drain(_) | Action::Remove => '-',
    };
    let name = match step.tag.is_empty() {
        true => step.kind.name().to_owned(),
        false => format!("{} {}", step.kind.name(), step.tag),
    };
    let versions = match step.action {
        Action::Build { from: Some(from) } => format!("v{from} -> v{}", step.version),
        _ => format!("v{}", step.version),
    };
    let reason = match step.action {
        Action::Drain(policy) => format!("{} (drain: {policy})", step.reason),
        _ => step.reason.to_string(),
    };
    format!("{symbol} {name}  {versions}  {reason}")
}

/// Everything the running configuration holds.
pub struct Deployed {
    /// What the planner plans the next apply against.
    pub state: DeployedState,
    dns: Dns,
    /// The internal DNS service as a route target, rebuilt with the DNS
    /// spec only.
    dns_service: Arc<Outbound>,
    dialer: Dialer,
    outbounds: HashMap<String, Arc<Outbound>>,
    balancers: HashMap<String, Arc<Balancer>>,
    inbounds: HashMap<String, Inbound>,
}

/// The runtime: the published plane and what it was built from.
pub struct Runtime {
    pub plane: Arc<ArcSwap<Plane>>,
    /// The limits and timeouts of the current apply, read by inbounds and
    /// dialers as connections start.
    limits: Arc<ArcSwap<Limits>>,
    pub deployed: Option<Deployed>,
}

struct Prepared {
    dns: Dns,
    dns_service: Arc<Outbound>,
    dialer: Dialer,
    outbounds: HashMap<String, Arc<Outbound>>,
    balancers: HashMap<String, Arc<Balancer>>,
    /// Newly bound inbounds, not yet accepting.
    new_inbounds: HashMap<String, Inbound>,
    /// The next users of reused inbounds whose users changed.
    users_of: HashMap<String, Users>,
    plane: Plane,
}

impl Runtime {
    /// Builds and publishes `spec` as the first apply.
    pub fn start(spec: Spec) -> Result<Runtime, String> {
        let plan = first_plan(&spec);
        let placeholder = Plane::empty();
        let mut runtime = Runtime {
            plane: Arc::new(ArcSwap::from_pointee(placeholder)),
            limits: Arc::new(ArcSwap::from_pointee(spec.limits.clone())),
            deployed: None,
        };
        let prepared = runtime.prepare(&spec, &plan.steps)?;
        runtime.commit(DeployedState::initial(spec), &plan.steps, prepared);
        Ok(runtime)
    }

    /// Plans `spec` against the deployed state with the planner `etc plan`
    /// uses, prepares every step, and commits only if all of them
    /// succeeded. Returns the plan it applied.
    pub fn reload(&mut self, spec: Spec) -> Result<Plan, String> {
        let state = &self
            .deployed
            .as_ref()
            .expect("a runtime is started before it reloads")
            .state;
        let plan = etemenanki_ir::plan::plan(state, &spec);
        let prepared = self.prepare(&spec, &plan.steps)?;
        let state = state.apply(&plan, spec);
        self.commit(state, &plan.steps, prepared);
        Ok(plan)
    }

    /// What the planner plans the next apply against.
    pub fn state(&self) -> &DeployedState {
        &self
            .deployed
            .as_ref()
            .expect("a started runtime has a state")
            .state
    }

    fn prepare(&self, spec: &Spec, steps: &[Step]) -> Result<Prepared, String> {
        let old = self.deployed.as_ref();
        let rebuild_dns = steps
            .iter()
            .find(|s| s.kind == Kind::Dns && matches!(s.action, Action::Build { .. }));
        let (dns, dns_service, dialer) = match (old, rebuild_dns) {
            (Some(old), None) => (old.dns.clone(), old.dns_service.clone(), old.dialer.clone()),
            (_, step) => {
                let dialer = Dialer::new(spec.socket.clone(), self.limits.clone());
                let dns = crate::dns::build(&spec.dns, &dialer, &self.plane)
                    .map_err(|e| format!("building dns failed: {e}"))?;
                let service = crate::dns::Service::new(dns.destinations.clone());
                let version = step.map_or(1, |s| s.version);
                let service = Arc::new(Outbound::dns_service(version, service));
                (dns, service, dialer)
            }
        };
        let mut outbounds = HashMap::new();
        let mut balancers = HashMap::new();
        let mut new_inbounds = HashMap::new();
        let mut users_of = HashMap::new();
        for step in steps {
            match (step.kind, step.action) {
                (Kind::Outbound, Action::Build { .. }) => {
                    let outbound_spec = spec.outbound(&step.tag).ok_or_else(|| missing(step))?;
                    let built = Outbound::build(outbound_spec, step.version, &dns, &dialer)
                        .map_err(|e| {
                            format!(
                                "building outbound {}@v{} failed: {e}",
                                step.tag, step.version
                            )
                        })?;
                    outbounds.insert(step.tag.clone(), Arc::new(built));
                }
                (Kind::Outbound, Action::Reuse) => {
                    let running = old
                        .and_then(|o| o.outbounds.get(&step.tag))
                        .ok_or_else(|| missing(step))?;
                    outbounds.insert(step.tag.clone(), running.clone());
                }
                (Kind::Inbound, Action::Build { .. }) => {
                    let inbound_spec = spec.inbound(&step.tag).ok_or_else(|| missing(step))?;
                    let fail = |e: std::io::Error| {
                        format!(
                            "building inbound {}@v{} failed: {e}",
                            step.tag, step.version
                        )
                    };
                    // A running inbound on the same address hands its socket
                    // over; on port 0 (any port) only the one it replaces,
                    // of the same tag, so it keeps the port it was given.
                    let handoff = old
                        .and_then(|o| {
                            o.inbounds.iter().find_map(|(tag, i)| {
                                let same_tag = *tag == step.tag;
                                i.handoff(inbound_spec.listen, same_tag)
                            })
                        })
                        .transpose()
                        .map_err(fail)?;
                    let bound = Inbound::bind(
                        inbound_spec,
                        self.limits.clone(),
                        self.plane.clone(),
                        dialer.clone(),
                        handoff,
                    )
                    .map_err(fail)?;
                    new_inbounds.insert(step.tag.clone(), bound);
                }
                (Kind::Inbound, Action::Reuse) => {
                    let running = old
                        .and_then(|o| o.inbounds.get(&step.tag))
                        .ok_or_else(|| missing(step))?;
                    if step.reason == Reason::UsersChanged {
                        let inbound_spec = spec.inbound(&step.tag).ok_or_else(|| missing(step))?;
                        let users = running.with_users(inbound_spec).map_err(|e| {
                            format!(
                                "building the users of inbound {}@v{} failed: {e}",
                                step.tag, step.version
                            )
                        })?;
                        users_of.insert(step.tag.clone(), users);
                    }
                }
                _ => {}
            }
        }
        // Balancers go over the outbounds of this apply, new and reused.
        for step in steps.iter().filter(|s| s.kind == Kind::Balancer) {
            match step.action {
                Action::Build { .. } => {
                    let balancer_spec = spec.balancer(&step.tag).ok_or_else(|| missing(step))?;
                    let built =
                        build_balancer(balancer_spec, step.version, &outbounds).map_err(|e| {
                            format!(
                                "building balancer {}@v{} failed: {e}",
                                step.tag, step.version
                            )
                        })?;
                    balancers.insert(step.tag.clone(), Arc::new(built));
                }
                Action::Reuse => {
                    let running = old
                        .and_then(|o| o.balancers.get(&step.tag))
                        .ok_or_else(|| missing(step))?;
                    balancers.insert(step.tag.clone(), running.clone());
                }
                _ => {}
            }
        }
        let mut targets: HashMap<String, Target> = outbounds
            .iter()
            .map(|(tag, o)| (tag.clone(), Target::Outbound(o.clone())))
            .collect();
        targets.insert(DNS_TARGET.to_owned(), Target::Outbound(dns_service.clone()));
        targets.extend(
            balancers
                .iter()
                .map(|(tag, b)| (tag.clone(), Target::Balancer(b.clone()))),
        );
        // The addresses every inbound of this apply is bound to, new or
        // reused (a spec's port 0 is the port the kernel chose).
        let listening = spec.inbounds.iter().map(|i| {
            new_inbounds
                .get(&i.tag)
                .or_else(|| old.and_then(|o| o.inbounds.get(&i.tag)))
                .and_then(Inbound::local_addr)
                .unwrap_or(i.listen)
        });
        let plane = Plane::new(spec.route.clone(), &targets)
            .map_err(|e| format!("building the route plane failed: {e}"))?
            .with_resolver(dns.destinations.clone())
            .with_dns_service(crate::dns::Service::new(dns.destinations.clone()))
            .with_own_inbounds(listening);
        Ok(Prepared {
            dns,
            dns_service,
            dialer,
            outbounds,
            balancers,
            new_inbounds,
            users_of,
            plane,
        })
    }

    /// Publishes the plane with one store, then drains the old versions,
    /// moves the probes and swaps the inbounds. Nothing here can fail.
    fn commit(&mut self, state: DeployedState, steps: &[Step], prepared: Prepared) {
        let Prepared {
            dns,
            dns_service,
            dialer,
            outbounds,
            balancers,
            mut new_inbounds,
            mut users_of,
            plane,
        } = prepared;
        self.plane.store(Arc::new(plane));
        self.limits.store(Arc::new(state.spec.limits.clone()));
        let mut old = self.deployed.take();
        let mut inbounds = HashMap::new();
        for step in steps {
            tracing::info!("apply: {}", describe(step));
            match (step.kind, step.action) {
                (Kind::Outbound, Action::Drain(policy)) => {
                    let replaced = old.as_ref().and_then(|o| o.outbounds.get(&step.tag));
                    if let Some(replaced) = replaced.filter(|r| r.id.version == step.version) {
                        replaced.drain.apply(policy);
                    }
                }
                (Kind::Balancer, Action::Build { .. }) => {
                    if let Some(running) = old.as_ref().and_then(|o| o.balancers.get(&step.tag)) {
                        running.stop_probes();
                    }
                    let spec = state
                        .spec
                        .balancer(&step.tag)
                        .expect("prepared from this spec");
                    balancers[&step.tag].start_probes(
                        spec.probe_interval,
                        spec.probe_timeout,
                        &dns.servers,
                        &dialer,
                    );
                }
                (Kind::Balancer, Action::Remove) => {
                    if let Some(running) = old.as_ref().and_then(|o| o.balancers.get(&step.tag)) {
                        running.stop_probes();
                    }
                }
                (Kind::Inbound, Action::Build { .. }) => {
                    let mut inbound = new_inbounds.remove(&step.tag).expect("prepared");
                    inbound.start();
                    inbounds.insert(step.tag.clone(), inbound);
                }
                (Kind::Inbound, Action::Reuse) => {
                    if let Some(running) = old.as_mut().and_then(|o| o.inbounds.remove(&step.tag)) {
                        if let Some(users) = users_of.remove(&step.tag) {
                            running.take_users(users);
                        }
                        inbounds.insert(step.tag.clone(), running);
                    }
                }
                _ => {}
            }
        }
        for inbound in inbounds.values() {
            inbound.resize(&state.spec.limits);
        }
        // Inbounds not carried over (rebuilt or removed) stop here, with
        // every connection they serve.
        drop(old);
        self.deployed = Some(Deployed {
            state,
            dns,
            dns_service,
            dialer,
            outbounds,
            balancers,
            inbounds,
        });
    }
}

fn missing(step: &Step) -> String {
    format!(
        "the plan names {} {}@v{}, which is not there",
        step.kind.name(),
        step.tag,
        step.version
    )
}

fn build_balancer(
    spec: &etemenanki_ir::spec::BalancerSpec,
    version: u32,
    outbounds: &HashMap<String, Arc<Outbound>>,
) -> std::io::Result<Balancer> {
    let members = spec
        .members
        .iter()
        .map(|tag| {
            let target = outbounds.get(tag).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("unknown member outbound {tag}"),
                )
            })?;
            Member::new(target.clone()).map(Arc::new)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    Balancer::new(OutboundId::new(&spec.tag, version), members, spec.strategy)
}
