//! Validation: the rules that relate parts of a configuration to each other.
//! Every problem is reported, each with its spans; lowering has already
//! checked each value on its own.

mod balancer;
mod listen;
mod tags;
mod warnings;

use etemenanki_ir::spec::Spec;

use crate::config::Config;
use crate::diagnostic::Diagnostic;

/// Checks a lowered spec against the configuration it came from (for spans).
pub fn validate(config: &Config, spec: &Spec) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    tags::check(config, &mut diags);
    balancer::check(config, spec, &mut diags);
    listen::check(config, spec, &mut diags);
    warnings::check(config, spec, &mut diags);
    diags
}
