//! The one-line summary of a plan, counted from its steps.
//!
//! Terraform #3163 is what happens when a summary is computed apart from the
//! list it sums up ("0 to destroy" before destroying 8 instances); here the
//! counts are folded from `Plan::steps` and nothing else.

use std::fmt;

use super::{Action, Plan};
use crate::spec::DrainPolicy;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// New resources and rebuilt ones.
    pub build: usize,
    pub reuse: usize,
    pub drain: usize,
    pub remove: usize,
    /// How many drains use each policy, in order of first appearance.
    pub drain_policies: Vec<(DrainPolicy, usize)>,
    pub publish: bool,
    /// Whether the apply changes anything (see `Plan::has_changes`).
    pub changed: bool,
}

impl Summary {
    pub(super) fn of(plan: &Plan) -> Summary {
        let mut s = Summary {
            publish: plan.publishes(),
            changed: plan.has_changes(),
            ..Summary::default()
        };
        for step in &plan.steps {
            match step.action {
                Action::Build { .. } => s.build += 1,
                Action::Reuse => s.reuse += 1,
                Action::Remove => s.remove += 1,
                Action::Drain(policy) => {
                    s.drain += 1;
                    match s.drain_policies.iter_mut().find(|(p, _)| *p == policy) {
                        Some((_, n)) => *n += 1,
                        None => s.drain_policies.push((policy, 1)),
                    }
                }
            }
        }
        s
    }
}

/// `Plan: 2 to build, 5 reused, 1 to drain (close after 30s); route plane
/// republished`. Removals are named only when there are some; drains under
/// several policies are counted per policy: `3 to drain (2 keep, 1 close)`.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Plan: {} to build, {} reused, {} to drain",
            self.build, self.reuse, self.drain
        )?;
        match self.drain_policies.as_slice() {
            [] => {}
            [(policy, _)] => write!(f, " ({policy})")?,
            several => {
                f.write_str(" (")?;
                for (i, (policy, n)) in several.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{n} {policy}")?;
                }
                f.write_str(")")?;
            }
        }
        if self.remove > 0 {
            write!(f, ", {} to remove", self.remove)?;
        }
        match self.publish {
            true => f.write_str("; route plane republished"),
            false => f.write_str("; route plane unchanged"),
        }
    }
}
