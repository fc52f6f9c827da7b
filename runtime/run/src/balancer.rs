//! Balancers: health per member
//! from TCP-connect probes, and a member chosen per flow or per packet.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etemenanki_ir::spec::{HostPort, Strategy};
use tokio::task::AbortHandle;

use crate::dial::Dialer;
use crate::id::OutboundId;
use crate::outbound::Outbound;
use crate::resolve::Resolver;

pub struct Member {
    pub target: Arc<Outbound>,
    probe: HostPort,
    healthy: AtomicBool,
}

impl Member {
    /// Members start healthy: an upstream never probed counts as up, or every
    /// start would drop all traffic for a whole probe interval.
    pub fn new(target: Arc<Outbound>) -> io::Result<Member> {
        let probe = target.probe_target().cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "outbound {} has no upstream a TCP health probe can reach",
                    target.id.tag
                ),
            )
        })?;
        Ok(Member {
            target,
            probe,
            healthy: AtomicBool::new(true),
        })
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Sets the health and returns the old value.
    pub fn set_healthy(&self, up: bool) -> bool {
        self.healthy.swap(up, Ordering::Relaxed)
    }
}

pub struct Balancer {
    pub id: OutboundId,
    members: Vec<Arc<Member>>,
    strategy: Strategy,
    next: AtomicUsize,
    probes: Mutex<Vec<AbortHandle>>,
}

impl Balancer {
    pub fn new(
        id: OutboundId,
        members: Vec<Arc<Member>>,
        strategy: Strategy,
    ) -> io::Result<Balancer> {
        if members.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a balancer needs at least one outbound",
            ));
        }
        Ok(Balancer {
            id,
            members,
            strategy,
            next: AtomicUsize::new(0),
            probes: Mutex::new(Vec::new()),
        })
    }

    /// failover: the first healthy member in order; round_robin: each healthy
    /// member in turn; every member down: the first member, because a flow
    /// sent to an upstream that may have recovered beats one dropped for sure.
    pub fn select(&self) -> Arc<Outbound> {
        let mut healthy = self.members.iter().filter(|m| m.is_healthy());
        let chosen = match self.strategy {
            Strategy::Failover => healthy.next(),
            Strategy::RoundRobin => match healthy.clone().count() {
                0 => None,
                n => healthy.nth(self.next.fetch_add(1, Ordering::Relaxed) % n),
            },
        };
        chosen.unwrap_or(&self.members[0]).target.clone()
    }

    /// For a UDP packet: under round_robin keep the member the association
    /// used last while it is healthy, so it does not hop packet by packet.
    /// failover ignores the preference, so traffic returns to a recovered
    /// higher member.
    pub fn select_preferring(&self, prefer: Option<&OutboundId>) -> Arc<Outbound> {
        if self.strategy == Strategy::RoundRobin {
            if let Some(prefer) = prefer {
                if let Some(m) = self
                    .members
                    .iter()
                    .find(|m| &m.target.id == prefer && m.is_healthy())
                {
                    return m.target.clone();
                }
            }
        }
        self.select()
    }

    /// One probe task per member: a TCP connect to its upstream every
    /// `interval`, bounded by `timeout`, logging each change of health.
    pub fn start_probes(
        &self,
        interval: Duration,
        timeout: Duration,
        resolver: &Resolver,
        dialer: &Dialer,
    ) {
        let mut probes = self.probes.lock().expect("probe list lock");
        for member in &self.members {
            let member = member.clone();
            let resolver = resolver.clone();
            let dialer = dialer.clone();
            let task = tokio::spawn(async move {
                loop {
                    let up =
                        tokio::time::timeout(timeout, probe(&member.probe, &resolver, &dialer))
                            .await
                            .unwrap_or(false);
                    if member.set_healthy(up) != up {
                        let state = if up { "up" } else { "down" };
                        tracing::info!("balancer member {} is now {state}", member.target.id.tag);
                    }
                    tokio::time::sleep(interval).await;
                }
            });
            probes.push(task.abort_handle());
        }
    }

    /// Cancels the probes, abandoning any in flight.
    pub fn stop_probes(&self) {
        for probe in self.probes.lock().expect("probe list lock").drain(..) {
            probe.abort();
        }
    }

    #[cfg(test)]
    fn member(&self, i: usize) -> &Member {
        &self.members[i]
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.stop_probes();
    }
}

/// Up if any resolved address accepts a TCP connection; dropped at once.
async fn probe(target: &HostPort, resolver: &Resolver, dialer: &Dialer) -> bool {
    let Ok(ips) = resolver.lookup(&target.host.name()).await else {
        return false;
    };
    for ip in ips {
        if dialer
            .connect(SocketAddr::new(ip, target.port))
            .await
            .is_ok()
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use etemenanki_ir::spec::{
        AddressFamily, DrainPolicy, Host, Limits, OutboundProtocol, OutboundSpec, SocketPolicy,
        StreamShape, TransportSpec, Upstream,
    };

    fn proxy(tag: &str, version: u32) -> Arc<Outbound> {
        let spec = OutboundSpec {
            tag: tag.into(),
            protocol: OutboundProtocol::Socks {
                upstream: Upstream {
                    server: HostPort {
                        host: Host::Ip("127.0.0.1".parse().unwrap()),
                        port: 9,
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
        };
        let dns = crate::dns::no_servers();
        let dialer = Dialer::new(
            SocketPolicy::default(),
            Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default())),
        );
        Arc::new(Outbound::build(&spec, version, &dns, &dialer).unwrap())
    }

    fn balancer(strategy: Strategy, tags: &[&str]) -> Balancer {
        let members = tags
            .iter()
            .map(|t| Arc::new(Member::new(proxy(t, 1)).unwrap()))
            .collect();
        Balancer::new(OutboundId::new("b", 1), members, strategy).unwrap()
    }

    fn tag(o: Arc<Outbound>) -> String {
        o.id.tag.to_string()
    }

    #[tokio::test]
    async fn failover_takes_the_first_healthy_member_in_order() {
        let b = balancer(Strategy::Failover, &["a", "b", "c"]);
        assert_eq!(tag(b.select()), "a");
        b.member(0).set_healthy(false);
        assert_eq!(tag(b.select()), "b");
        b.member(0).set_healthy(true);
        assert_eq!(tag(b.select()), "a");
    }

    #[tokio::test]
    async fn round_robin_cycles_only_through_healthy_members() {
        let b = balancer(Strategy::RoundRobin, &["a", "b", "c"]);
        b.member(1).set_healthy(false);
        let picks: Vec<String> = (0..4).map(|_| tag(b.select())).collect();
        assert_eq!(picks, ["a", "c", "a", "c"]);
    }

    #[tokio::test]
    async fn every_member_down_still_selects_rather_than_dropping() {
        let b = balancer(Strategy::RoundRobin, &["a", "b"]);
        b.member(0).set_healthy(false);
        b.member(1).set_healthy(false);
        assert_eq!(tag(b.select()), "a");
    }

    #[tokio::test]
    async fn round_robin_keeps_a_healthy_preferred_member_and_drops_it_once_down() {
        let b = balancer(Strategy::RoundRobin, &["a", "b"]);
        let prefer = OutboundId::new("b", 1);
        for _ in 0..3 {
            assert_eq!(tag(b.select_preferring(Some(&prefer))), "b");
        }
        b.member(1).set_healthy(false);
        assert_eq!(tag(b.select_preferring(Some(&prefer))), "a");
    }

    #[tokio::test]
    async fn failover_ignores_the_preference() {
        let b = balancer(Strategy::Failover, &["a", "b"]);
        assert_eq!(
            tag(b.select_preferring(Some(&OutboundId::new("b", 1)))),
            "a"
        );
    }

    #[tokio::test]
    async fn a_preference_for_another_version_is_no_preference() {
        let b = balancer(Strategy::RoundRobin, &["a", "b"]);
        let first = tag(b.select_preferring(Some(&OutboundId::new("b", 2))));
        let second = tag(b.select_preferring(Some(&OutboundId::new("b", 2))));
        assert_ne!(
            first, second,
            "a stale preference must not pin the rotation"
        );
    }

    #[tokio::test]
    async fn a_balancer_needs_at_least_one_member() {
        let err = Balancer::new(OutboundId::new("b", 1), vec![], Strategy::Failover)
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "a balancer needs at least one outbound");
    }
}
