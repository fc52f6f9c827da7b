//! `route { ... }`: one rule a line, conditions joined by `and`, the
//! target after `->`, `default -> <target>`, and the table's settings
//! (`domain_strategy = ip_if_non_match`).
//!
//! ```text
//! route {
//!   domain_strategy = ip_if_non_match
//!   cidr 10.0.0.0/8, 172.16.0.0/12 -> direct
//!   port 53, 1000-2000 and network udp -> dns-out
//!   default -> proxy
//! }
//! ```

use pest::iterators::Pair;

use super::body::{duplicate, unknown_field};
use super::statements::tag;
use super::value::Value;
use super::{span_of, Cx, Rule};
use crate::codes;
use crate::config::{List, Route, Rule as SourceRule, Spanned};
use crate::diagnostic::{Diagnostic, Span};

/// Every setting of the route table besides `default`, as TOML's `[route]`
/// has them.
const SETTINGS: &[&str] = &["domain_strategy"];

/// Every condition a rule can hold, in the order of the TOML rule's keys.
const CONDITIONS: &[&str] = &[
    "domain",
    "domain_suffix",
    "domain_keyword",
    "cidr",
    "geoip",
    "geosite",
    "port",
    "source_cidr",
    "inbound_tag",
    "network",
];

pub(super) fn route(cx: &mut Cx<'_>, statement: Pair<'_, Rule>) -> Route {
    let mut route = Route::default();
    let mut default_key: Option<Span> = None;
    let mut strategy_key: Option<Span> = None;
    for item in statement.into_inner() {
        match item.as_rule() {
            Rule::route_setting => {
                let mut parts = item.into_inner();
                let key = parts.next().expect("a setting starts with a key");
                let key_span = span_of(&key);
                let value = parts
                    .find(|p| p.as_rule() == Rule::value)
                    .map(|v| cx.value(v))
                    .expect("a setting has a value");
                if !SETTINGS.contains(&key.as_str()) {
                    cx.report(unknown_field(key.as_str(), key_span, SETTINGS));
                    continue;
                }
                match &strategy_key {
                    Some(first) => cx.report(duplicate(key.as_str(), key_span, first.clone())),
                    None => {
                        strategy_key = Some(key_span);
                        route.domain_strategy = cx.name(&value);
                    }
                }
            }
            Rule::default_rule => {
                let mut parts = item.into_inner();
                let key = span_of(&parts.next().expect("a default rule starts with `default`"));
                let target = tag(
                    cx,
                    parts
                        .find(|p| p.as_rule() == Rule::tag)
                        .expect("a default has a target"),
                );
                match &default_key {
                    Some(first) => cx.report(duplicate("default", key, first.clone())),
                    None => {
                        default_key = Some(key);
                        route.default = Some(target);
                    }
                }
            }
            Rule::route_rule => route.rules.extend(rule(cx, item)),
            _ => {}
        }
    }
    route
}

fn rule(cx: &mut Cx<'_>, pair: Pair<'_, Rule>) -> Option<Spanned<SourceRule>> {
    let span = span_of(&pair);
    let mut conditions: Vec<(String, Span, Vec<Value>)> = Vec::new();
    let mut target = None;
    for part in pair.into_inner() {
        match part.as_rule() {
            Rule::condition => {
                let mut parts = part.into_inner();
                let key = parts.next().expect("a condition starts with a key");
                let values = parts
                    .filter(|p| p.as_rule() == Rule::value)
                    .map(|v| cx.value(v))
                    .collect();
                conditions.push((key.as_str().to_owned(), span_of(&key), values));
            }
            Rule::tag => target = Some(tag(cx, part)),
            _ => {}
        }
    }
    let outbound = target.expect("a rule has a target");
    let mut rule = SourceRule {
        outbound,
        domain: None,
        domain_suffix: None,
        domain_keyword: None,
        cidr: None,
        geoip: None,
        geosite: None,
        port: None,
        source_cidr: None,
        inbound_tag: None,
        network: None,
    };
    let mut ok = true;
    let mut seen: Vec<(&str, Span)> = Vec::new();
    for (key, key_span, values) in &conditions {
        let Some(&known) = CONDITIONS.iter().find(|c| **c == key.as_str()) else {
            cx.report(unknown_field(key, key_span.clone(), CONDITIONS));
            ok = false;
            continue;
        };
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == known) {
            cx.report(
                duplicate(known, key_span.clone(), first.clone()).with_help(format!(
                    "list every value of one condition after it: `{known} a, b`"
                )),
            );
            ok = false;
            continue;
        }
        seen.push((known, key_span.clone()));
        let read = match known {
            "domain" => names(cx, values).map(|l| rule.domain = Some(l)),
            "domain_suffix" => names(cx, values).map(|l| rule.domain_suffix = Some(l)),
            "domain_keyword" => names(cx, values).map(|l| rule.domain_keyword = Some(l)),
            "cidr" => each(cx, values, |cx, v| cx.cidr(v)).map(|l| rule.cidr = Some(l)),
            "geoip" => names(cx, values).map(|l| rule.geoip = Some(l)),
            "geosite" => names(cx, values).map(|l| rule.geosite = Some(l)),
            "port" => each(cx, values, |cx, v| cx.port(v)).map(|l| rule.port = Some(l)),
            "source_cidr" => {
                each(cx, values, |cx, v| cx.cidr(v)).map(|l| rule.source_cidr = Some(l))
            }
            "inbound_tag" => names(cx, values).map(|l| rule.inbound_tag = Some(l)),
            _ => network(cx, key_span, values).map(|n| rule.network = Some(n)),
        };
        ok &= read.is_some();
    }
    ok.then(|| Spanned::new(span, rule))
}

fn names(cx: &mut Cx<'_>, values: &[Value]) -> Option<List<String>> {
    each(cx, values, |cx, v| cx.name(v))
}

/// Takes every value, reporting each one that is of the wrong kind.
fn each<T>(
    cx: &mut Cx<'_>,
    values: &[Value],
    take: impl Fn(&mut Cx<'_>, &Value) -> Option<Spanned<T>>,
) -> Option<List<T>> {
    let taken: Vec<_> = values.iter().map(|v| take(cx, v)).collect();
    taken.into_iter().collect()
}

/// `network tcp` or `network udp`: one value, since a rule for both is a
/// rule without the condition.
fn network(cx: &mut Cx<'_>, key: &Span, values: &[Value]) -> Option<Spanned<String>> {
    match values {
        [one] => cx.name(one),
        _ => {
            let end = values.last().map_or(key.end, |v| v.span.end);
            cx.report(
                Diagnostic::error(
                    codes::WRONG_TYPE,
                    key.start..end,
                    "invalid length: `network` takes one value",
                )
                .with_help("a rule for both tcp and udp is a rule without `network`"),
            );
            None
        }
    }
}
