//! Warnings: a configuration that is valid but almost certainly not what
//! was meant.

use std::collections::HashSet;

use etemenanki_ir::route::{shadowed, Network};
use etemenanki_ir::spec::InboundProtocol;

use super::Checked;
use crate::codes;
use crate::diagnostic::Diagnostic;

pub(super) fn check(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    unrouted(checked, diags);
    udp_to_tcp_only(checked, diags);
    shadowed_rules(checked, diags);
}

/// A rule that an earlier rule covers can never match. Rules are numbered
/// as written, those that failed to lower included.
fn shadowed_rules(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    let Some(route) = checked.config.route.as_ref() else {
        return;
    };
    let rules = checked.spec.route.rules();
    let origin = &checked.origins.rules;
    for (lowered_later, lowered_earlier) in shadowed(rules) {
        let (later, earlier) = (origin[lowered_later], origin[lowered_earlier]);
        let (Some(later_span), Some(earlier_span)) =
            (route.rules.get(later), route.rules.get(earlier))
        else {
            continue;
        };
        diags.push(
            Diagnostic::warning(
                codes::SHADOWED_RULE,
                later_span.span(),
                format!(
                    "rule {} can never match: rule {} (line {}) matches every flow it would",
                    later + 1,
                    earlier + 1,
                    rules[lowered_earlier].line
                ),
            )
            .with_secondary(earlier_span.span(), "this earlier rule covers it")
            .with_help(format!(
                "move it above rule {}, narrow rule {}, or remove it",
                earlier + 1,
                earlier + 1
            )),
        );
    }
}

/// An outbound that no rule, default or balancer names. Read from the
/// configuration: a rule or balancer that failed to lower still names it.
fn unrouted(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    let config = checked.config;
    let rules = config.route.iter().flat_map(|r| &r.rules);
    let named: HashSet<&str> = std::iter::once(checked.spec.route.default())
        .chain(rules.map(|r| r.get_ref().outbound.get_ref().as_str()))
        .chain(
            config
                .balancers
                .iter()
                .flat_map(|b| &b.get_ref().outbounds)
                .map(|m| m.get_ref().as_str()),
        )
        .collect();
    for outbound in &config.outbounds {
        let tag = &outbound.get_ref().tag;
        if !tag.get_ref().is_empty() && !named.contains(tag.get_ref().as_str()) {
            diags.push(
                Diagnostic::warning(
                    codes::UNROUTED_OUTBOUND,
                    tag.span(),
                    format!("nothing routes to outbound {}", tag.get_ref()),
                )
                .with_help("route to it, list it in a balancer, or remove it"),
            );
        }
    }
}

/// UDP that can reach an http outbound is dropped there.
fn udp_to_tcp_only(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    let Checked { config, spec, .. } = checked;
    let udp_in = spec.inbounds.iter().any(|i| match &i.protocol {
        InboundProtocol::Socks { udp, .. }
        | InboundProtocol::Shadowsocks { udp, .. }
        | InboundProtocol::Ss2022 { udp, .. } => *udp,
        InboundProtocol::Http { .. } => false,
        _ => true,
    });
    if !udp_in {
        return;
    }
    let tcp_only = |tag: &str| {
        checked
            .outbounds
            .get(tag)
            .filter(|o| !o.protocol.carries_udp())
    };
    let Some(route) = config.route.as_ref() else {
        return;
    };
    for (lowered, &origin) in spec.route.rules().iter().zip(&checked.origins.rules) {
        let rule = &route.rules[origin];
        if lowered.network == Some(Network::Tcp) {
            continue;
        }
        if let Some(o) = tcp_only(&lowered.target) {
            diags.push(
                Diagnostic::warning(
                    codes::UDP_TO_TCP_ONLY,
                    rule.get_ref().outbound.span(),
                    format!("this rule can send UDP to outbound {}, which carries only TCP ({})", o.tag, o.protocol.name()),
                )
                .with_help("add network = \"tcp\" to the rule, or route UDP elsewhere with an earlier network = \"udp\" rule"),
            );
        }
    }
    let default_span = route.default.as_ref().map(|d| d.span());
    if let (Some(o), Some(span)) = (tcp_only(spec.route.default()), default_span) {
        let udp_caught = spec.route.rules().iter().any(|r| {
            r.network == Some(Network::Udp)
                && r.domain.is_empty()
                && r.domain_suffix.is_empty()
                && r.domain_keyword.is_empty()
                && r.cidr.is_empty()
                && r.geoip.is_empty()
                && r.geosite.is_empty()
                && r.port.is_empty()
                && r.source_cidr.is_empty()
                && r.inbound_tag.is_empty()
        });
        if !udp_caught {
            diags.push(
                Diagnostic::warning(
                    codes::UDP_TO_TCP_ONLY,
                    span,
                    format!(
                        "UDP that matches no rule goes to outbound {}, which carries only TCP ({})",
                        o.tag,
                        o.protocol.name()
                    ),
                )
                .with_help("route UDP elsewhere with a network = \"udp\" rule"),
            );
        }
    }
}
