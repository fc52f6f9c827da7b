//! `[[balancer]]` -> `BalancerSpec`: strategy and probe defaults. The rules
//! that relate a balancer to the outbounds are checked in `validate`.

use etemenanki_ir::spec::{BalancerSpec, Strategy};

use super::Cx;
use crate::codes;
use crate::config::{Balancer, Spanned};

pub fn lower(cx: &mut Cx, balancer: &Spanned<Balancer>) -> BalancerSpec {
    let b = balancer.get_ref();
    let tag = b.tag.get_ref().clone();
    let strategy = match &b.strategy {
        None => Strategy::Failover,
        Some(s) => Strategy::parse(s.get_ref()).unwrap_or_else(|| {
            let diag = cx.error(
                codes::BALANCER_STRATEGY,
                s.span(),
                format!("balancer {tag}: unknown balancer strategy \"{}\" (expected \"failover\" or \"round_robin\")", s.get_ref()),
            );
            diag.label = Some("not a strategy".into());
            Strategy::Failover
        }),
    };
    BalancerSpec {
        tag,
        members: b.outbounds.iter().map(|m| m.get_ref().clone()).collect(),
        strategy,
        probe_interval: b
            .probe_interval
            .as_ref()
            .map_or(Strategy::DEFAULT_PROBE_INTERVAL, |d| d.get_ref().0),
        probe_timeout: b
            .probe_timeout
            .as_ref()
            .map_or(Strategy::DEFAULT_PROBE_TIMEOUT, |d| d.get_ref().0),
    }
}
