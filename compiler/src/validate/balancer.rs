//! The balancer rules: members exist, are outbounds, and have an upstream a
//! TCP probe can reach.

use std::collections::HashMap;

use super::Checked;
use crate::codes;
use crate::config::{Balancer, Outbound, Spanned};
use crate::diagnostic::{suggest, Diagnostic};

pub(super) fn check(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    let config = checked.config;
    let mut by_tag: HashMap<&str, &Outbound> = HashMap::with_capacity(config.outbounds.len());
    for o in &config.outbounds {
        by_tag
            .entry(o.get_ref().tag.get_ref())
            .or_insert(o.get_ref());
    }
    for balancer in &config.balancers {
        let b = balancer.get_ref();
        let tag = b.tag.get_ref();
        if b.outbounds.is_empty() {
            diags.push(
                Diagnostic::error(
                    codes::BALANCER_EMPTY,
                    b.tag.span(),
                    "a balancer needs at least one outbound",
                )
                .with_label(format!("balancer {tag} lists no outbounds"))
                .with_help("list at least one member"),
            );
        }
        for member in &b.outbounds {
            let name = member.get_ref();
            let Some(outbound) = by_tag.get(name.as_str()) else {
                let mut diag = Diagnostic::error(
                    codes::BALANCER_UNKNOWN_MEMBER,
                    member.span(),
                    format!("balancer {tag} references unknown outbound tag: {name}"),
                );
                let is_balancer = config
                    .balancers
                    .iter()
                    .any(|b| b.get_ref().tag.get_ref() == name);
                diag.help = Some(if is_balancer {
                    format!(
                        "{name} is a balancer, and balancers do not nest: list only outbound tags"
                    )
                } else {
                    let tags = config
                        .outbounds
                        .iter()
                        .map(|o| o.get_ref().tag.get_ref().as_str());
                    match suggest(name, tags) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => "list only [[outbound]] tags".to_owned(),
                    }
                });
                diags.push(diag);
                continue;
            };
            // An outbound that failed to lower was reported already.
            let Some(lowered) = checked.outbounds.get(name.as_str()) else {
                continue;
            };
            if lowered.protocol.probe_target().is_none() {
                let protocol = &outbound.protocol;
                diags.push(
                    Diagnostic::error(
                        codes::BALANCER_UNPROBEABLE,
                        member.span(),
                        format!(
                            "balancer {tag}: outbound {name} has no upstream a TCP health probe can reach, so it cannot be balanced"
                        ),
                    )
                    .with_secondary(protocol.span(), format!("{name} is a {} outbound", protocol.get_ref()))
                    .with_help("remove it, and route to it directly instead"),
                );
            }
        }
        if let Some(timeout) = b.probe_timeout.as_ref().filter(|t| t.get_ref().0.is_zero()) {
            diags.push(
                Diagnostic::warning(codes::ZERO_PROBE_TIMEOUT, timeout.span(), "probe_timeout = 0 marks a member down unless its connect completes almost at once")
                    .with_help("use at least 1"),
            );
        }
        mixed_udp(checked, balancer, diags);
    }
}

/// A balancer whose members differ in carrying UDP drops the UDP flows it
/// hands to a TCP-only one.
fn mixed_udp(checked: &Checked, balancer: &Spanned<Balancer>, diags: &mut Vec<Diagnostic>) {
    let b = balancer.get_ref();
    let members: Vec<_> = b
        .outbounds
        .iter()
        .filter_map(|m| checked.outbounds.get(m.get_ref().as_str()).map(|o| (m, o)))
        .collect();
    let tcp_only = members.iter().find(|(_, o)| !o.protocol.carries_udp());
    let udp = members.iter().find(|(_, o)| o.protocol.carries_udp());
    if let (Some((tcp_span, tcp)), Some((udp_span, udp))) = (tcp_only, udp) {
        diags.push(
            Diagnostic::warning(
                codes::MIXED_BALANCER,
                b.tag.span(),
                format!("balancer {} mixes UDP-capable and TCP-only members", b.tag.get_ref()),
            )
            .with_secondary(tcp_span.span(), format!("{} ({}) carries only TCP", tcp.tag, tcp.protocol.name()))
            .with_secondary(udp_span.span(), format!("{} ({}) carries UDP", udp.tag, udp.protocol.name()))
            .with_help("a UDP flow handed to a TCP-only member is dropped: route UDP elsewhere with an earlier network = \"udp\" rule"),
        );
    }
}
