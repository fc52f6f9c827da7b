//! Validation: the rules that relate parts of a configuration to each other.
//! Every problem is reported, each with its spans; lowering has already
//! checked each value on its own.
//!
//! The analyses read the lowered spec, which holds only what lowered
//! without an error: a value already reported feeds no follow-on
//! diagnostic. What only names things (tags, routes, members) is read from
//! the configuration. Every analysis is linear or n log n in the size of
//! the configuration.

mod balancer;
mod listen;
mod tags;
mod warnings;

use std::collections::HashMap;

use etemenanki_ir::spec::{OutboundSpec, Spec};

use crate::config::Config;
use crate::diagnostic::Diagnostic;
use crate::lower::Origins;

/// A configuration with its lowered spec, as the analyses read them.
struct Checked<'a> {
    config: &'a Config,
    spec: &'a Spec,
    origins: &'a Origins,
    /// The outbounds that lowered, by tag (the first of a tag given twice).
    outbounds: HashMap<&'a str, &'a OutboundSpec>,
}

/// Checks a lowered spec against the configuration it came from (for spans).
pub fn validate(config: &Config, spec: &Spec, origins: &Origins) -> Vec<Diagnostic> {
    let mut outbounds = HashMap::with_capacity(spec.outbounds.len());
    for o in &spec.outbounds {
        outbounds.entry(o.tag.as_str()).or_insert(o);
    }
    let checked = Checked {
        config,
        spec,
        origins,
        outbounds,
    };
    let mut diags = Vec::new();
    tags::check(config, &mut diags);
    balancer::check(&checked, &mut diags);
    listen::check(&checked, &mut diags);
    warnings::check(&checked, &mut diags);
    diags
}
