//! Tags: non-empty, unique, and every reference to one resolves.

use std::collections::{HashMap, HashSet};

use etemenanki_ir::spec::DNS_TARGET;

use crate::codes;
use crate::config::{Config, Spanned};
use crate::diagnostic::{suggest, Diagnostic};

pub fn check(config: &Config, diags: &mut Vec<Diagnostic>) {
    unique(
        config.outbounds.iter().map(|o| &o.get_ref().tag),
        "outbound",
        diags,
    );
    unique(
        config.inbounds.iter().map(|i| &i.get_ref().tag),
        "inbound",
        diags,
    );
    balancers(config, diags);
    reserved(config, diags);
    if config.outbounds.is_empty() {
        diags.push(
            Diagnostic::error(
                codes::NO_OUTBOUNDS,
                0..0,
                "a configuration needs at least one outbound",
            )
            .with_help("add an outbound, for example a freedom outbound named direct"),
        );
    }
    routes(config, diags);
}

fn unique<'a>(
    tags: impl Iterator<Item = &'a Spanned<String>>,
    kind: &str,
    diags: &mut Vec<Diagnostic>,
) {
    let mut seen: HashMap<&str, &Spanned<String>> = HashMap::new();
    for tag in tags {
        if tag.get_ref().is_empty() {
            diags.push(Diagnostic::error(
                codes::EMPTY_TAG,
                tag.span(),
                format!("{kind} tag must not be empty"),
            ));
            continue;
        }
        match seen.get(tag.get_ref().as_str()) {
            Some(first) => diags.push(
                Diagnostic::error(
                    codes::DUPLICATE_TAG,
                    tag.span(),
                    format!("duplicate {kind} tag {}", tag.get_ref()),
                )
                .with_label("defined again here")
                .with_secondary(first.span(), "first defined here")
                .with_help(format!("give each {kind} a unique tag")),
            ),
            None => {
                seen.insert(tag.get_ref(), tag);
            }
        }
    }
}

/// Balancer tags share the outbounds' namespace: a route may name either.
fn balancers(config: &Config, diags: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, &Spanned<String>> = config
        .outbounds
        .iter()
        .map(|o| (o.get_ref().tag.get_ref().as_str(), &o.get_ref().tag))
        .collect();
    for balancer in &config.balancers {
        let tag = &balancer.get_ref().tag;
        if tag.get_ref().is_empty() {
            diags.push(Diagnostic::error(
                codes::EMPTY_TAG,
                tag.span(),
                "balancer : a balancer tag must not be empty",
            ));
            continue;
        }
        match seen.get(tag.get_ref().as_str()) {
            Some(first) => diags.push(
                Diagnostic::error(
                    codes::BALANCER_COLLIDES,
                    tag.span(),
                    format!(
                        "balancer tag {} collides with an outbound tag",
                        tag.get_ref()
                    ),
                )
                .with_label("this balancer")
                .with_secondary(first.span(), "the tag is already used here")
                .with_help("give it a unique name"),
            ),
            None => {
                seen.insert(tag.get_ref(), tag);
            }
        }
    }
}

/// `dns` is the internal DNS service's route target: no outbound or
/// balancer may take it.
fn reserved(config: &Config, diags: &mut Vec<Diagnostic>) {
    let outbounds = config
        .outbounds
        .iter()
        .map(|o| ("outbound", &o.get_ref().tag));
    let balancers = config
        .balancers
        .iter()
        .map(|b| ("balancer", &b.get_ref().tag));
    for (kind, tag) in outbounds.chain(balancers) {
        if tag.get_ref() == DNS_TARGET {
            diags.push(
                Diagnostic::error(
                    codes::RESERVED_TAG,
                    tag.span(),
                    format!("the tag `{DNS_TARGET}` is reserved for the internal DNS service"),
                )
                .with_label(format!("this {kind}"))
                .with_help(format!(
                    "give the {kind} another tag; route to `{DNS_TARGET}` to reach the DNS service"
                )),
            );
        }
    }
}

/// Every tag the route names is an outbound, a balancer or the DNS
/// service (`dns`); every inbound_tag
/// an inbound.
fn routes(config: &Config, diags: &mut Vec<Diagnostic>) {
    let targets: Vec<&str> = config
        .outbounds
        .iter()
        .map(|o| o.get_ref().tag.get_ref().as_str())
        .chain(
            config
                .balancers
                .iter()
                .map(|b| b.get_ref().tag.get_ref().as_str()),
        )
        .collect();
    let inbounds: Vec<&str> = config
        .inbounds
        .iter()
        .map(|i| i.get_ref().tag.get_ref().as_str())
        .collect();
    let Some(route) = &config.route else { return };
    let named = route
        .default
        .iter()
        .chain(route.rules.iter().map(|r| &r.get_ref().outbound));
    let target_set: HashSet<&str> = targets
        .iter()
        .copied()
        .chain(std::iter::once(DNS_TARGET))
        .collect();
    let inbound_set: HashSet<&str> = inbounds.iter().copied().collect();
    for tag in named {
        if !target_set.contains(tag.get_ref().as_str()) {
            let mut diag = Diagnostic::error(
                codes::UNKNOWN_TARGET,
                tag.span(),
                format!("route references unknown outbound tag: {}", tag.get_ref()),
            )
            .with_label("no outbound or balancer has this tag");
            diag.help = Some(match suggest(tag.get_ref(), targets.iter().copied()) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("known tags: {}", listing(&targets)),
            });
            diags.push(diag);
        }
    }
    for rule in &route.rules {
        for tag in rule.get_ref().inbound_tag.iter().flatten() {
            if !inbound_set.contains(tag.get_ref().as_str()) {
                let mut diag = Diagnostic::error(
                    codes::UNKNOWN_TARGET,
                    tag.span(),
                    format!("route references unknown inbound tag: {}", tag.get_ref()),
                );
                diag.help = Some(match suggest(tag.get_ref(), inbounds.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => format!("known inbound tags: {}", listing(&inbounds)),
                });
                diags.push(diag);
            }
        }
    }
}

/// The tags a help lists: the first few, so that a configuration of
/// thousands of outbounds gets a help of one line for each unknown tag.
fn listing(tags: &[&str]) -> String {
    const SHOWN: usize = 10;
    match tags.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{}, and {more} more", tags[..SHOWN].join(", ")),
        _ => tags.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::listing;

    #[test]
    fn a_help_lists_at_most_ten_tags() {
        assert_eq!(listing(&["a", "b"]), "a, b");
        let many: Vec<String> = (0..16_000).map(|n| format!("o{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            listing(&many),
            "o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, and 15990 more"
        );
    }
}
