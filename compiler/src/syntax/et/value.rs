//! Literals: read from the tree with their kind, then taken as the kind a
//! key expects. A literal of another kind is a `WRONG_TYPE` diagnostic in
//! serde's shape (`invalid type: string "30s", expected a duration`), so
//! both front ends speak alike.

use std::time::Duration;

use etemenanki_ir::route::PortRange;
use etemenanki_ir::spec::DrainPolicy;
use pest::iterators::Pair;
use pest::Parser;

use super::{span_of, Cx, EtParser, Rule};
use crate::codes;
use crate::config::{Drain, List, Port, Seconds, SecretValue, Spanned};
use crate::diagnostic::{Diagnostic, Span};

/// A literal and where it is.
pub(super) struct Value {
    pub span: Span,
    pub kind: Kind,
}

pub(super) enum Kind {
    Str(String),
    Bool(bool),
    /// `None` when the digits do not fit any integer type.
    Int(Option<i128>),
    /// `None` when the duration overflows.
    Duration(Option<Duration>),
    Cidr,
    /// `host:port`; the host without the brackets of an IPv6 address. The
    /// port is `None` above 65535.
    SocketAddr {
        host: Spanned<String>,
        port: Spanned<Option<u16>>,
    },
    Ip,
    /// `scheme://...`: a DNS server's URL.
    Url,
    PortRange(Option<PortRange>),
    Name(String),
    Secret(SecretValue),
    List(Vec<Value>),
    /// `close after <value>`.
    CloseAfter(Box<Value>),
}

impl Cx<'_> {
    /// Reads a `value` pair (or one of its alternatives).
    pub(super) fn value(&mut self, pair: Pair<'_, Rule>) -> Value {
        let pair = match pair.as_rule() {
            Rule::value | Rule::grace => pair
                .into_inner()
                .next()
                .expect("a value has one alternative"),
            _ => pair,
        };
        let span = span_of(&pair);
        let kind = match pair.as_rule() {
            Rule::string => Kind::Str(self.string_literal(pair)),
            Rule::boolean => Kind::Bool(pair.as_str() == "true"),
            Rule::integer => Kind::Int(pair.as_str().parse().ok()),
            Rule::duration => Kind::Duration(duration(pair)),
            Rule::cidr => Kind::Cidr,
            Rule::ip => Kind::Ip,
            Rule::url => Kind::Url,
            Rule::port_range => {
                let mut ends = pair.into_inner().map(|d| d.as_str().parse::<u16>().ok());
                let start = ends.next().flatten();
                let end = ends.next().flatten();
                Kind::PortRange(match (start, end) {
                    (Some(start), Some(end)) if start <= end => Some(PortRange { start, end }),
                    _ => None,
                })
            }
            Rule::socket_addr => {
                let mut parts = pair.into_inner();
                let host = parts.next().expect("a socket address has a host");
                let port = parts.next().expect("a socket address has a port");
                let inner = host
                    .into_inner()
                    .next()
                    .expect("a host has one alternative");
                let host = Spanned::new(span_of(&inner), inner.as_str().to_owned());
                Kind::SocketAddr {
                    host,
                    port: Spanned::new(span_of(&port), port.as_str().parse().ok()),
                }
            }
            Rule::name => Kind::Name(pair.as_str().to_owned()),
            Rule::secret => {
                let mut parts = pair.into_inner();
                let kind = parts.next().expect("a secret has a kind").as_str();
                let arg = self.string_literal(parts.next().expect("a secret has an argument"));
                Kind::Secret(if kind == "env" {
                    SecretValue::Env(arg)
                } else {
                    SecretValue::File(arg)
                })
            }
            Rule::list => Kind::List(
                pair.into_inner()
                    .filter(|p| p.as_rule() == Rule::value)
                    .map(|p| self.value(p))
                    .collect(),
            ),
            Rule::close_after => {
                let grace = pair.into_inner().find(|p| p.as_rule() == Rule::grace);
                Kind::CloseAfter(Box::new(
                    self.value(grace.expect("close after has a value")),
                ))
            }
            r => unreachable!("the value rule has no alternative {r:?}"),
        };
        Value { span, kind }
    }

    pub(super) fn string_literal(&mut self, pair: Pair<'_, Rule>) -> String {
        let inner = pair.into_inner().next().expect("a string has contents");
        let base = inner.as_span().start();
        let raw = inner.as_str();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next().map(|(_, c)| c) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('u') => {
                    let close = raw[i..].find('}').map_or(raw.len(), |j| i + j);
                    let digits = &raw[(i + 3).min(close)..close];
                    match u32::from_str_radix(digits, 16)
                        .ok()
                        .and_then(char::from_u32)
                    {
                        Some(c) => out.push(c),
                        None => self.report(Diagnostic::error(
                            codes::SYNTAX,
                            base + i..base + close + 1,
                            format!(
                                "invalid unicode escape `{}`",
                                &raw[i..(close + 1).min(raw.len())]
                            ),
                        )),
                    }
                    for (j, _) in chars.by_ref() {
                        if j >= close {
                            break;
                        }
                    }
                }
                Some(c) => out.push(c),
                None => {}
            }
        }
        out
    }

    fn text(&self, v: &Value) -> &str {
        &self.text[v.span.clone()]
    }

    /// `invalid type: <found>, expected <expected>`, with a hint when the
    /// value is a quoted string that is the right literal without quotes.
    fn wrong_type(&mut self, v: &Value, expected: &str, accepts: fn(&mut Cx<'_>, &Value) -> bool) {
        let found = self.found(v);
        let mut d = Diagnostic::error(
            codes::WRONG_TYPE,
            v.span.clone(),
            format!("invalid type: {found}, expected {expected}"),
        );
        if let Kind::Str(s) = &v.kind {
            if unquoted_fits(s, accepts) {
                d = d.with_help(format!("write it without quotes: `{s}`"));
            }
        }
        self.report(d);
    }

    fn invalid_value(&mut self, v: &Value, expected: &str) {
        let found = self.found(v);
        self.report(Diagnostic::error(
            codes::WRONG_TYPE,
            v.span.clone(),
            format!("invalid value: {found}, expected {expected}"),
        ));
    }

    fn found(&self, v: &Value) -> String {
        let text = self.text(v);
        match &v.kind {
            Kind::Str(s) => format!("string {s:?}"),
            Kind::List(_) => kind_name(&v.kind).to_owned(),
            kind => format!("{} `{text}`", kind_name(kind)),
        }
    }

    /// `invalid type: <kind>, expected <expected>` for the value of a secret
    /// slot, which is never quoted: it may be the secret itself, written
    /// without quotes.
    fn wrong_secret_type(&mut self, v: &Value, expected: &str) {
        self.report(Diagnostic::error(
            codes::WRONG_TYPE,
            v.span.clone(),
            format!("invalid type: {}, expected {expected}", kind_name(&v.kind)),
        ));
    }

    // ------------------------------------------------------------ typed takes

    /// A quoted string.
    pub(super) fn string(&mut self, v: &Value) -> Option<Spanned<String>> {
        match &v.kind {
            Kind::Str(s) => Some(Spanned::new(v.span.clone(), s.clone())),
            _ => {
                self.wrong_type(v, "a string", |cx, v| cx.quiet(|cx| cx.string(v)));
                None
            }
        }
    }

    /// A bare name or a quoted string: tags, enum values, domains.
    pub(super) fn name(&mut self, v: &Value) -> Option<Spanned<String>> {
        match &v.kind {
            Kind::Name(s) | Kind::Str(s) => Some(Spanned::new(v.span.clone(), s.clone())),
            _ => {
                self.wrong_type(v, "a name", |_, _| false);
                None
            }
        }
    }

    /// A string written inline, `env("NAME")` or `file("path")`.
    pub(super) fn secret(&mut self, v: &Value) -> Option<Spanned<SecretValue>> {
        match &v.kind {
            Kind::Str(s) => Some(Spanned::new(v.span.clone(), SecretValue::Plain(s.clone()))),
            Kind::Secret(s) => Some(Spanned::new(v.span.clone(), s.clone())),
            _ => {
                self.wrong_secret_type(v, "a string, `env(\"NAME\")` or `file(\"path\")`");
                None
            }
        }
    }

    /// A list of secrets.
    pub(super) fn secrets(&mut self, v: &Value) -> Option<List<SecretValue>> {
        if !matches!(v.kind, Kind::List(_)) {
            self.wrong_secret_type(v, "a list of secrets");
            return None;
        }
        self.list(v, "secrets", |cx, v| cx.secret(v))
    }

    pub(super) fn boolean(&mut self, v: &Value) -> Option<Spanned<bool>> {
        match v.kind {
            Kind::Bool(b) => Some(Spanned::new(v.span.clone(), b)),
            _ => {
                self.wrong_type(v, "a boolean", |cx, v| cx.quiet(|cx| cx.boolean(v)));
                None
            }
        }
    }

    /// An unsigned integer that fits `T`.
    pub(super) fn uint<T: TryFrom<i128> + Bounded>(&mut self, v: &Value) -> Option<Spanned<T>> {
        match v.kind {
            Kind::Int(n) => match n.and_then(|n| T::try_from(n).ok()) {
                Some(n) => Some(Spanned::new(v.span.clone(), n)),
                None => {
                    self.invalid_value(v, &format!("an integer from 0 to {}", T::MAX));
                    None
                }
            },
            _ => {
                self.wrong_type(v, "an integer", |cx, v| cx.quiet(|cx| cx.uint::<u64>(v)));
                None
            }
        }
    }

    pub(super) fn duration(&mut self, v: &Value) -> Option<Spanned<Seconds>> {
        match v.kind {
            Kind::Duration(Some(d)) => Some(Spanned::new(v.span.clone(), Seconds(d))),
            Kind::Duration(None) => {
                self.invalid_value(v, "a duration that fits in 64 bits of seconds");
                None
            }
            _ => {
                self.wrong_type(v, "a duration such as `30s`", |cx, v| {
                    cx.quiet(|cx| cx.duration(v))
                });
                None
            }
        }
    }

    /// A duration in whole seconds that fits a `u16`.
    pub(super) fn seconds_u16(&mut self, v: &Value) -> Option<Spanned<u16>> {
        let d = self.duration(v)?;
        let secs = d.get_ref().0;
        match u16::try_from(secs.as_secs()) {
            Ok(s) if secs.subsec_nanos() == 0 => Some(Spanned::new(v.span.clone(), s)),
            _ => {
                self.invalid_value(v, "whole seconds from 0s to 65535s");
                None
            }
        }
    }

    /// `host:port`: the host and the port, each with its span.
    pub(super) fn socket_addr(&mut self, v: &Value) -> Option<(Spanned<String>, Spanned<u16>)> {
        match &v.kind {
            Kind::SocketAddr { host, port } => match *port.get_ref() {
                Some(p) => Some((host.clone(), Spanned::new(port.span(), p))),
                None => {
                    let text = &self.text[port.span()];
                    self.report(Diagnostic::error(
                        codes::WRONG_TYPE,
                        port.span(),
                        format!(
                            "invalid value: port `{text}`, expected an integer from 0 to 65535"
                        ),
                    ));
                    None
                }
            },
            _ => {
                self.wrong_type(
                    v,
                    "a socket address such as `proxy.example.com:443`",
                    |cx, v| cx.quiet(|cx| cx.socket_addr(v)),
                );
                None
            }
        }
    }

    /// A socket address, kept as written.
    pub(super) fn socket_addr_text(&mut self, v: &Value) -> Option<Spanned<String>> {
        self.socket_addr(v)?;
        Some(Spanned::new(v.span.clone(), self.text(v).to_owned()))
    }

    pub(super) fn ip(&mut self, v: &Value) -> Option<Spanned<String>> {
        match v.kind {
            Kind::Ip => Some(Spanned::new(v.span.clone(), self.text(v).to_owned())),
            _ => {
                self.wrong_type(v, "an IP address", |cx, v| cx.quiet(|cx| cx.ip(v)));
                None
            }
        }
    }

    /// A DNS server: an IP address, or one with a port, or a `tls://` or
    /// `https://` URL (bare or quoted; the lowering checks its shape).
    pub(super) fn server_addr(&mut self, v: &Value) -> Option<Spanned<String>> {
        match &v.kind {
            Kind::Ip | Kind::Url => Some(Spanned::new(v.span.clone(), self.text(v).to_owned())),
            Kind::Str(s) if s.contains("://") => Some(Spanned::new(v.span.clone(), s.clone())),
            Kind::SocketAddr { .. } => self.socket_addr_text(v),
            _ => {
                self.wrong_type(v, "an IP address, a socket address or a URL", |cx, v| {
                    cx.quiet(|cx| cx.server_addr(v))
                });
                None
            }
        }
    }

    pub(super) fn cidr(&mut self, v: &Value) -> Option<Spanned<String>> {
        match v.kind {
            Kind::Cidr => Some(Spanned::new(v.span.clone(), self.text(v).to_owned())),
            _ => {
                self.wrong_type(v, "a CIDR such as `10.0.0.0/8`", |cx, v| {
                    cx.quiet(|cx| cx.cidr(v))
                });
                None
            }
        }
    }

    /// A port or an inclusive port range.
    pub(super) fn port(&mut self, v: &Value) -> Option<Spanned<Port>> {
        const EXPECTED: &str = "a port or a port range such as `1000-2000`";
        match v.kind {
            Kind::PortRange(Some(range)) => Some(Spanned::new(v.span.clone(), Port(range))),
            Kind::Int(n) => match n.and_then(|n| u16::try_from(n).ok()) {
                Some(p) => Some(Spanned::new(
                    v.span.clone(),
                    Port(PortRange { start: p, end: p }),
                )),
                None => {
                    self.invalid_value(v, EXPECTED);
                    None
                }
            },
            Kind::PortRange(None) => {
                self.invalid_value(v, EXPECTED);
                if let Some(last) = self.diagnostics.pop() {
                    self.report(
                        last.with_help(
                            "ports are 0 to 65535 and the first is not above the second",
                        ),
                    );
                }
                None
            }
            _ => {
                self.wrong_type(v, EXPECTED, |cx, v| cx.quiet(|cx| cx.port(v)));
                None
            }
        }
    }

    /// `keep`, `close` or `close after <duration>`.
    pub(super) fn drain(&mut self, v: &Value) -> Option<Spanned<Drain>> {
        const EXPECTED: &str = "`keep`, `close` or `close after <duration>`";
        let policy = match &v.kind {
            Kind::Name(n) if n == "keep" => DrainPolicy::Keep,
            Kind::Name(n) if n == "close" => DrainPolicy::Close,
            Kind::CloseAfter(grace) => {
                DrainPolicy::CloseAfter(self.duration(grace)?.into_inner().0)
            }
            Kind::Name(_) => {
                self.invalid_value(v, EXPECTED);
                return None;
            }
            _ => {
                self.wrong_type(v, EXPECTED, |cx, v| cx.quiet(|cx| cx.drain(v)));
                return None;
            }
        };
        Some(Spanned::new(v.span.clone(), Drain(policy)))
    }

    /// A list `[a, b]` whose every element `take` accepts. Every element
    /// is checked, so all bad ones are reported.
    pub(super) fn list<T>(
        &mut self,
        v: &Value,
        what: &str,
        take: impl Fn(&mut Self, &Value) -> Option<Spanned<T>>,
    ) -> Option<List<T>> {
        let Kind::List(items) = &v.kind else {
            self.wrong_type(v, &format!("a list of {what}"), |_, _| false);
            return None;
        };
        let taken: Vec<_> = items.iter().map(|item| take(self, item)).collect();
        taken.into_iter().collect()
    }

    /// Runs a take without keeping its diagnostics: whether it would accept.
    fn quiet<T>(&mut self, take: impl FnOnce(&mut Self) -> Option<T>) -> bool {
        let before = self.diagnostics.len();
        let ok = take(self).is_some();
        self.diagnostics.truncate(before);
        ok
    }
}

/// Whether the contents of a string, written without quotes, would be a
/// literal that `accepts` takes.
fn unquoted_fits(contents: &str, accepts: fn(&mut Cx<'_>, &Value) -> bool) -> bool {
    if super::nesting::too_deep(contents).is_some() {
        return false;
    }
    let Ok(mut pairs) = EtParser::parse(Rule::lone_value, contents) else {
        return false;
    };
    let Some(value) = pairs.next().and_then(|p| p.into_inner().next()) else {
        return false;
    };
    let mut cx = Cx {
        text: contents,
        diagnostics: Vec::new(),
    };
    let value = cx.value(value);
    !matches!(value.kind, Kind::Str(_)) && accepts(&mut cx, &value) && cx.diagnostics.is_empty()
}

/// What a literal is, in serde's words.
fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Str(_) => "string",
        Kind::Bool(_) => "boolean",
        Kind::Int(_) => "integer",
        Kind::Duration(_) => "duration",
        Kind::Cidr => "CIDR",
        Kind::SocketAddr { .. } => "socket address",
        Kind::Ip => "IP address",
        Kind::Url => "URL",
        Kind::PortRange(_) => "port range",
        Kind::Name(_) => "name",
        Kind::Secret(_) => "secret reference",
        Kind::List(_) => "a list",
        Kind::CloseAfter(_) => "drain policy",
    }
}

fn duration(pair: Pair<'_, Rule>) -> Option<Duration> {
    let mut parts = pair.into_inner();
    let n: u64 = parts.next()?.as_str().parse().ok()?;
    Some(match parts.next()?.as_str() {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        _ => Duration::from_secs(n.checked_mul(3600)?),
    })
}

/// The largest value of an integer type, for range messages.
pub(super) trait Bounded {
    const MAX: u128;
}

macro_rules! bounded {
    ($($t:ty),*) => { $(impl Bounded for $t { const MAX: u128 = <$t>::MAX as u128; })* };
}
bounded!(u8, u16, u32, u64);
