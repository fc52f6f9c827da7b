//! `[route]` -> the rules of the route table, in the order written.

use etemenanki_ir::route::{
    geoip_category, normalize_domain, normalize_keyword, Cidr, DomainStrategy, Network, RouteTable,
    Rule, GEOIP_CATEGORIES, GEOSITE_CATEGORIES,
};

use super::Cx;
use crate::codes;
use crate::config::{self, Config, Spanned};

/// The route table of the rules that lowered without an error, and the
/// index of each in the configuration.
pub fn lower(cx: &mut Cx, config: &Config) -> (RouteTable, Vec<usize>) {
    let route = config.route.as_ref();
    let default = match route.and_then(|r| r.default.as_ref()) {
        Some(tag) => tag.get_ref().clone(),
        // Without [route].default, the first [[outbound]]; a
        // balancer is never the implicit default.
        None => config
            .outbounds
            .first()
            .map(|o| o.get_ref().tag.get_ref().clone())
            .unwrap_or_default(),
    };
    let source_rules = route.map_or(&[][..], |r| &r.rules[..]);
    let (rules, origins) = cx.each_clean(source_rules, rule);
    let strategy = route
        .and_then(|r| r.domain_strategy.as_ref())
        .and_then(|s| domain_strategy(cx, s))
        .unwrap_or_default();
    // Every value the table refuses was reported above with its span, and
    // its rule left out; the table's own message is only a backstop, so a
    // rule is never dropped silently.
    let (table, origins) = match RouteTable::new(rules, default.clone()) {
        Ok(table) => (table, origins),
        Err(why) => {
            let first = source_rules.first().map_or(0..0, |r| r.span());
            cx.error(codes::INVALID_VALUE, first, why);
            let empty = RouteTable::new(vec![], default).expect("a table without rules compiles");
            (empty, Vec::new())
        }
    };
    (table.with_domain_strategy(strategy), origins)
}

/// `as_is`, `ip_if_non_match` or `ip_on_demand`; Xray's spelling of one
/// (`IPIfNonMatch`) is told which of ours it is.
fn domain_strategy(cx: &mut Cx, value: &Spanned<String>) -> Option<DomainStrategy> {
    let names = DomainStrategy::names();
    let parsed = cx.one_of(value, "domain_strategy", &names, DomainStrategy::parse);
    if parsed.is_none() {
        if let (Some(ours), Some(diag)) = (
            DomainStrategy::from_xray(value.get_ref()),
            cx.diags.last_mut(),
        ) {
            diag.help = Some(format!(
                "write \"{ours}\": Xray's `{}` is spelt that way here",
                value.get_ref()
            ));
        }
    }
    parsed
}

/// Reports a domain-like value the route table would refuse.
fn check_names(
    cx: &mut Cx,
    list: &Option<Vec<Spanned<String>>>,
    key: &str,
    normalize: fn(&str) -> Result<String, String>,
) {
    for value in list.iter().flatten() {
        if let Err(why) = normalize(value.get_ref()) {
            cx.error(
                codes::INVALID_VALUE,
                value.span(),
                format!("invalid `{key}`: {why}"),
            );
        }
    }
}

/// Reports a geoip or geosite category this build does not know.
fn check_categories(
    cx: &mut Cx,
    list: &Option<Vec<Spanned<String>>>,
    key: &str,
    known: &[&str],
    exists: fn(&str) -> bool,
) {
    for value in list.iter().flatten() {
        if !exists(value.get_ref()) {
            let known = if known.is_empty() {
                format!("this build carries no {key} data")
            } else {
                format!("known {key} categories: {}", known.join(", "))
            };
            cx.error(
                codes::UNKNOWN_CATEGORY,
                value.span(),
                format!("unknown {key} category `{}`", value.get_ref()),
            )
            .help = Some(known);
        }
    }
}

fn rule(cx: &mut Cx, rule: &Spanned<config::Rule>) -> Rule {
    let line = cx.line(rule.span().start);
    let r = rule.get_ref();
    let names = |cx: &mut Cx,
                 list: &Option<Vec<Spanned<String>>>,
                 key: &str,
                 lowercase: bool|
     -> Vec<String> {
        non_empty(cx, list, key, rule);
        list.iter()
            .flatten()
            .map(|d| {
                let d = d.get_ref().trim_end_matches('.');
                if lowercase {
                    d.to_ascii_lowercase()
                } else {
                    d.to_owned()
                }
            })
            .collect()
    };
    check_names(cx, &r.domain, "domain", normalize_domain);
    check_names(cx, &r.domain_suffix, "domain_suffix", normalize_domain);
    check_names(cx, &r.domain_keyword, "domain_keyword", normalize_keyword);
    check_categories(cx, &r.geoip, "geoip", GEOIP_CATEGORIES, |name| {
        geoip_category(name).is_some()
    });
    check_categories(cx, &r.geosite, "geosite", GEOSITE_CATEGORIES, |name| {
        GEOSITE_CATEGORIES.contains(&name)
    });
    let domain = names(cx, &r.domain, "domain", true);
    let domain_suffix = names(cx, &r.domain_suffix, "domain_suffix", true);
    let domain_keyword = names(cx, &r.domain_keyword, "domain_keyword", true);
    let geoip = names(cx, &r.geoip, "geoip", false);
    let geosite = names(cx, &r.geosite, "geosite", false);
    let inbound_tag = names(cx, &r.inbound_tag, "inbound_tag", false);
    let cidr = cidrs(cx, &r.cidr, "cidr", rule);
    let source_cidr = cidrs(cx, &r.source_cidr, "source_cidr", rule);
    non_empty(cx, &r.port, "port", rule);
    let port = r.port.iter().flatten().map(|p| p.get_ref().0).collect();
    let network = r
        .network
        .as_ref()
        .and_then(|n| cx.one_of(n, "network", &["tcp", "udp"], Network::parse));
    Rule {
        target: r.outbound.get_ref().clone(),
        line,
        domain,
        domain_suffix,
        domain_keyword,
        cidr,
        geoip,
        geosite,
        port,
        source_cidr,
        inbound_tag,
        network,
    }
}

fn non_empty<T>(
    cx: &mut Cx,
    list: &Option<Vec<Spanned<T>>>,
    key: &str,
    rule: &Spanned<config::Rule>,
) {
    if list.as_ref().is_some_and(Vec::is_empty) {
        cx.error(
            codes::EMPTY_RULE,
            rule.span(),
            format!("`{key}` is an empty list, so this rule can never match"),
        )
        .help = Some(format!("fill the list or remove `{key}`"));
    }
}

fn cidrs(
    cx: &mut Cx,
    list: &Option<Vec<Spanned<String>>>,
    key: &str,
    rule: &Spanned<config::Rule>,
) -> Vec<Cidr> {
    non_empty(cx, list, key, rule);
    list.iter()
        .flatten()
        .filter_map(|c| match Cidr::parse(c.get_ref()) {
            Ok(cidr) => Some(cidr),
            Err(why) => {
                cx.error(
                    codes::INVALID_CIDR,
                    c.span(),
                    format!("invalid CIDR `{}`: {why}", c.get_ref()),
                );
                None
            }
        })
        .collect()
}
