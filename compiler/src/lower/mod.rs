//! Lowering: a [`Config`] becomes an `ir::Spec` with every default filled in.
//!
//! Lowering never stops at the first problem: a bad value is reported with its
//! span and lowering carries on with a placeholder, so one run reports
//! everything. An inbound, outbound or rule that needed a placeholder is then
//! left out of the spec, so that no analysis after lowering takes it for what
//! was written. The result is used only when no error was reported.

mod balancer;
mod host;
mod inbound;
mod outbound;
mod route;
mod transport;
pub mod values;

use std::path::{Path, PathBuf};

use etemenanki_ir::file::read_regular;
use etemenanki_ir::spec::{DrainPolicy, Spec};

use crate::config::{Config, SecretValue, Spanned};
use crate::diagnostic::{Diagnostic, Source, Span};
use crate::{codes, diagnostic};

/// A lowered configuration.
pub struct Lowered {
    /// Meaningful only when no diagnostic is an error. An inbound, outbound
    /// or rule whose lowering reported an error is left out, so the
    /// analyses in `validate` never see a placeholder: a value already
    /// reported feeds no follow-on diagnostic.
    pub spec: Spec,
    pub origins: Origins,
    pub diags: Vec<Diagnostic>,
}

/// Where the inbounds and rules of a [`Lowered`] spec came from: the index
/// of each in the configuration.
#[derive(Debug)]
pub struct Origins {
    pub inbounds: Vec<usize>,
    pub rules: Vec<usize>,
}

/// Lowers a parsed configuration, reporting every problem on the way.
pub fn lower(config: &Config, source: &Source) -> Lowered {
    let base = Path::new(&source.path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut cx = Cx {
        diags: Vec::new(),
        base,
        source,
    };
    let drain = config
        .drain
        .as_ref()
        .map_or(DrainPolicy::Keep, |d| d.get_ref().0);
    let (outbounds, _) = cx.each_clean(&config.outbounds, |cx, o| outbound::lower(cx, o, drain));
    let (inbounds, inbound_origins) = cx.each_clean(&config.inbounds, inbound::lower);
    let balancers = config
        .balancers
        .iter()
        .map(|b| balancer::lower(&mut cx, b))
        .collect();
    let (route, rule_origins) = route::lower(&mut cx, config);
    let dns = host::dns(&mut cx, config.dns.as_ref());
    let socket = host::socket(&mut cx, config.socket.as_ref());
    let limits = host::limits(&mut cx, config.limits.as_ref());
    let spec = Spec {
        inbounds,
        outbounds,
        balancers,
        route,
        dns,
        socket,
        limits,
    };
    Lowered {
        spec,
        origins: Origins {
            inbounds: inbound_origins,
            rules: rule_origins,
        },
        diags: cx.diags,
    }
}

/// The lowering context: where diagnostics go and where relative paths start.
pub(crate) struct Cx<'a> {
    pub diags: Vec<Diagnostic>,
    /// The directory of the configuration file; `file("...")`, `ca_file` and
    /// certificate paths are relative to it.
    pub base: PathBuf,
    pub source: &'a Source,
}

impl Cx<'_> {
    pub fn error(
        &mut self,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(code, span, message));
        self.diags.last_mut().expect("just pushed")
    }

    /// Lowers each item, keeping those that reported no error, with their
    /// indices.
    pub fn each_clean<T, L>(
        &mut self,
        items: &[T],
        mut lower: impl FnMut(&mut Self, &T) -> L,
    ) -> (Vec<L>, Vec<usize>) {
        let mut kept = Vec::with_capacity(items.len());
        let mut origins = Vec::with_capacity(items.len());
        for (at, item) in items.iter().enumerate() {
            let before = self.diags.len();
            let lowered = lower(self, item);
            if !self.diags[before..].iter().any(Diagnostic::is_error) {
                kept.push(lowered);
                origins.push(at);
            }
        }
        (kept, origins)
    }

    pub fn path(&self, path: &str) -> PathBuf {
        self.base.join(path)
    }

    /// Reads a file the configuration names: a regular file of at most
    /// `limit` bytes (a FIFO would hang the compiler, `/dev/zero` exhaust
    /// its memory).
    pub fn read(&self, path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
        read_regular(&self.path(path), limit)
    }

    /// The 1-based line a byte offset is on.
    pub fn line(&self, offset: usize) -> u32 {
        (self.source.line_index(offset) + 1) as u32
    }

    /// Reads a secret: inline, from the environment, or from a file (one
    /// trailing newline removed).
    pub fn secret(&mut self, value: &Spanned<SecretValue>) -> String {
        match value.get_ref() {
            SecretValue::Plain(text) => text.clone(),
            SecretValue::Env(name) => match std::env::var(name) {
                Ok(text) => text,
                Err(_) => {
                    self.error(
                        codes::SECRET_UNREADABLE,
                        value.span(),
                        format!("environment variable `{name}` is not set"),
                    )
                    .help = Some(format!(
                        "export {name} before running etc, or write the value inline"
                    ));
                    String::new()
                }
            },
            SecretValue::File(path) => match self.read(path, SECRET_LIMIT).and_then(utf8) {
                Ok(text) => text.strip_suffix('\n').map(str::to_owned).unwrap_or(text),
                Err(err) => {
                    self.error(
                        codes::SECRET_UNREADABLE,
                        value.span(),
                        format!("cannot read secret file `{path}`: {}", io_text(&err)),
                    );
                    String::new()
                }
            },
        }
    }

    /// Reports a protocol no `kind` (inbound, outbound) speaks, with a
    /// suggestion or the list of known ones.
    pub fn unknown_protocol(&mut self, protocol: &Spanned<String>, kind: &str, known: &[&str]) {
        let name = protocol.get_ref();
        let help = match diagnostic::suggest(name, known.iter().copied()) {
            Some(near) => format!("did you mean \"{near}\"?"),
            None => format!("{kind} protocols are {}", known.join(", ")),
        };
        self.error(
            codes::UNKNOWN_PROTOCOL,
            protocol.span(),
            format!("unknown {kind} protocol \"{name}\""),
        )
        .help = Some(help);
    }

    /// Parses a name from a closed set, reporting an unknown one with the
    /// accepted names and a suggestion.
    pub fn one_of<T>(
        &mut self,
        value: &Spanned<String>,
        what: &str,
        names: &[&str],
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let text = value.get_ref();
        if let Some(parsed) = parse(text) {
            return Some(parsed);
        }
        let expected = names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let diag = self.error(
            codes::INVALID_VALUE,
            value.span(),
            format!("unknown {what} \"{text}\" (expected one of {expected})"),
        );
        if let Some(near) = diagnostic::suggest(text, names.iter().copied()) {
            diag.help = Some(format!("did you mean \"{near}\"?"));
        }
        None
    }
}

/// The largest secret file read: far more than any password or key.
const SECRET_LIMIT: u64 = 1 << 20;

/// The largest certificate, key or CA bundle read: ten times the size of a
/// system's whole CA bundle.
pub(crate) const PEM_LIMIT: u64 = 16 << 20;

fn utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The span of an optional value, for "set but not accepted" checks.
fn span<T>(v: &Option<Spanned<T>>) -> Option<Span> {
    v.as_ref().map(Spanned::span)
}

/// The span of an optional list: its first element's.
fn list_span<T>(v: &Option<Vec<Spanned<T>>>) -> Option<Span> {
    v.as_ref().map(|l| l.first().map_or(0..0, Spanned::span))
}

/// An I/O error's text without the OS error number.
pub fn io_text(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => err.to_string(),
    }
}
